package vigiltest_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/vigiltest"
)

const kitApps = "kit-apps"

// kitModule installs the module of testdata/kit, the README's example, and
// the namespace it admits in.
func kitModule(t *testing.T) *vigiltest.Module {
	t.Helper()
	if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kitApps}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return env.InstallModule(t, vigiltest.ModuleOptions{Dir: "./testdata/kit"})
}

// README's "Test your own module", whole: a gate, a mutation, a denial and a
// Reconcile, each role run from the module's manifests as its
// ServiceAccount.
func TestModuleKitAsTheREADMEShowsIt(t *testing.T) {
	m := kitModule(t)
	if m.Name != "kit" || m.Namespace != "kit-system" || m.Phases() != 1 {
		t.Fatalf("installed %s in %s with %d phases; want kit in kit-system with 1", m.Name, m.Namespace, m.Phases())
	}

	gate := m.StartPhase(0)
	gate.WaitOutput(t, "gate waiting", 30*time.Second)
	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name + "-config"}}
	if err := env.Client.Create(t.Context(), settings); err != nil {
		t.Fatal(err)
	}
	gate.WaitOK(t, 30*time.Second)

	m.StartAdmission(60 * time.Second)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: kitApps, Name: "ok-" + randSuffix(t), Labels: map[string]string{"app": "shop"}}}
	patch := vigiltest.Mutated(t, env.Client, cm)
	if !patch.HasLabel("checked", "true") || !patch.Has("add", "/metadata/labels/checked", "true") {
		t.Fatalf("patch %s: want the label checked=true added", patch)
	}
	if patch.HasLabel("app", "shop") {
		t.Fatalf("patch %s names the label the object was sent with", patch)
	}
	msg := vigiltest.Denied(t, env.Client, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: kitApps, Name: "bad"}}, "has no app label")
	if !strings.Contains(msg, "ConfigMap bad has no app label") {
		t.Fatalf("denial %q: want the module's message", msg)
	}

	m.StartWatcher(30 * time.Second)
	vigiltest.Eventually(t, 20*time.Second, vigiltest.Get(env.Client, cm, func(cm *corev1.ConfigMap) error {
		if cm.Annotations["reconciled"] != "true" {
			return fmt.Errorf("annotations %v: not reconciled yet", cm.Annotations)
		}
		return nil
	}))
}

// A module is installed before the namespaces it governs, as a platform's
// modules are: its roles start and are ready without them, and once a team
// creates one, the module admits and reconciles there, each role having
// bound its own rights in it, to itself alone.
func TestModuleInstalledBeforeItsNamespaces(t *testing.T) {
	apps := "kit-late-" + randSuffix(t)
	// The stale bound at its least, so that the wait for the namespace
	// outlasts it twice over.
	m := env.InstallModule(t, vigiltest.ModuleOptions{Dir: "./testdata/kit", Env: []string{"KIT_APPS=" + apps, "VIGIL_WATCH_STALE_AFTER=4s"}})
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: apps}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace %s: %v; want it absent while the module installs", apps, err)
	}
	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name + "-config"}}
	if err := env.Client.Create(t.Context(), settings); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	m.RunGates(60 * time.Second)
	m.StartAdmission(60 * time.Second)
	watcher := m.StartWatcher(60 * time.Second)
	// Waiting for a namespace is no stale informer: the watcher stays ready.
	vigiltest.Consistently(t, 10*time.Second, func() error {
		resp, err := http.Get("http://" + watcher.Ports["probes"] + "/readyz")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("the watcher's /readyz while %s does not exist yet: %d %s", apps, resp.StatusCode, body)
		}
		return nil
	})
	// The audit of the existing objects finds nothing there, and no error.
	vigiltest.Eventually(t, 30*time.Second, func() error {
		if out := m.Output("watcher"); !strings.Contains(out, "audit done") {
			return fmt.Errorf("no audit done yet:\n%s", out)
		}
		return nil
	})
	if out := m.Output("watcher"); strings.Contains(out, "audit of the existing objects") {
		t.Errorf("the audit failed while %s does not exist yet:\n%s", apps, out)
	}

	if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: apps}}); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "late", Labels: map[string]string{"app": "shop"}}}
	if patch := vigiltest.Mutated(t, env.Client, cm); !patch.HasLabel("checked", "true") {
		t.Fatalf("patch %s: want the label checked=true added in %s", patch, apps)
	}
	vigiltest.Denied(t, env.Client, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "bad"}}, "has no app label")
	vigiltest.Eventually(t, 30*time.Second, vigiltest.Get(env.Client, cm, func(cm *corev1.ConfigMap) error {
		if cm.Annotations["reconciled"] != "true" {
			return fmt.Errorf("annotations %v: not reconciled yet", cm.Annotations)
		}
		return nil
	}))
	t.Logf("namespace %s created: the watcher's Reconcile had acted there %s later", apps, time.Since(created).Round(time.Millisecond))
	var rb rbacv1.RoleBinding
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: apps, Name: "vigil:kit-watcher"}, &rb); err != nil {
		t.Fatalf("the watcher's RoleBinding in %s: %v", apps, err)
	}
	if rb.RoleRef.Name != "vigil:kit-watcher:"+apps || len(rb.Subjects) != 1 || rb.Subjects[0].Name != "kit-watcher" {
		t.Fatalf("RoleBinding %s/%s binds %s to %v; want vigil:kit-watcher:%s to kit-watcher alone", apps, rb.Name, rb.RoleRef.Name, rb.Subjects, apps)
	}

	// The roles may create that binding and no other: not one of their
	// ClusterRole in another namespace, nor to another subject.
	asWatcher, err := env.AsServiceAccount(m.Namespace, "kit-watcher")
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]*rbacv1.RoleBinding{
		"another namespace": {ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vigil:kit-watcher"},
			RoleRef: rb.RoleRef, Subjects: rb.Subjects},
		"another subject": {ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "tenant"},
			RoleRef: rb.RoleRef, Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: apps}}},
	} {
		if err := asWatcher.Create(t.Context(), bad); err == nil {
			t.Errorf("%s: the watcher created RoleBinding %s/%s binding %s to %v", name, bad.Namespace, bad.Name, bad.RoleRef.Name, bad.Subjects)
		}
	}
}

// A rule missing from what ships fails the author's test, the rule named:
// here the watcher's right to patch ConfigMaps in kit-apps is taken away,
// and the watcher reports the API server's refusal, naming its
// ServiceAccount, the verb and the resource.
func TestModuleKitRunsWithTheGeneratedRBACOnly(t *testing.T) {
	m := kitModule(t)
	var roles rbacv1.ClusterRoleList
	if err := env.Client.List(t.Context(), &roles); err != nil {
		t.Fatal(err)
	}
	removed := 0
	for i := range roles.Items {
		r := &roles.Items[i]
		if r.Labels["app.kubernetes.io/name"] != "kit" || r.Name != "vigil:kit-watcher:"+kitApps {
			continue
		}
		var kept []rbacv1.PolicyRule
		for _, rule := range r.Rules {
			if slices.Contains(rule.Resources, "configmaps") && slices.Contains(rule.Verbs, "patch") {
				rule.Verbs = slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == "patch" })
				removed++
			}
			if len(rule.Verbs) > 0 {
				kept = append(kept, rule)
			}
		}
		r.Rules = kept
		if err := env.Client.Update(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	if removed == 0 {
		t.Fatalf("no rule of the module's rights in %s lets it patch ConfigMaps: the manifests grant it elsewhere", kitApps)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: kitApps, Name: "unseen-" + randSuffix(t), Labels: map[string]string{"app": "shop"}}}
	if err := env.Client.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	m.StartWatcher(30 * time.Second)
	vigiltest.Eventually(t, 30*time.Second, func() error {
		for _, line := range strings.Split(m.Output("watcher"), "\n") {
			if strings.Contains(line, "system:serviceaccount:kit-system:kit-watcher") && strings.Contains(line, "cannot patch resource") &&
				strings.Contains(line, "configmaps") && strings.Contains(line, kitApps) {
				return nil
			}
		}
		return fmt.Errorf("the watcher's output names no refusal to patch configmaps in %s as kit-watcher", kitApps)
	})
}

func randSuffix(t *testing.T) string {
	return strings.ToLower(fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000))
}

package vigiltest_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	if os.Getenv(exitWithoutStopEnv) != "" {
		os.Exit(exitWithoutStop())
	}
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

func TestCRDEstablishedAndCustomResourceCreated(t *testing.T) {
	ctx := t.Context()
	data, err := os.ReadFile("testdata/widgets-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDYAML(data); err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "widgets.test.vigil.dev"}, crd); err != nil {
		t.Fatal(err)
	}
	established := false
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			established = true
		}
	}
	if !established {
		t.Fatalf("CRD conditions %+v: want Established=True", crd.Status.Conditions)
	}

	ns := env.Namespace(t)
	w := &unstructured.Unstructured{}
	w.SetAPIVersion("test.vigil.dev/v1")
	w.SetKind("Widget")
	w.SetNamespace(ns)
	w.SetName("first")
	if err := unstructured.SetNestedField(w.Object, int64(3), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, w); err != nil {
		t.Fatalf("create Widget: %v", err)
	}
	got := &unstructured.Unstructured{}
	got.SetAPIVersion("test.vigil.dev/v1")
	got.SetKind("Widget")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(w), got); err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); size != 3 {
		t.Fatalf("Widget spec.size = %d, want 3", size)
	}
}

func TestDecodeCRDsRejectsOtherKinds(t *testing.T) {
	_, err := vigiltest.DecodeCRDs([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"))
	if err == nil || !strings.Contains(err.Error(), `expected kind CustomResourceDefinition, got "ConfigMap"`) {
		t.Fatalf("err = %v, want it to name the expected and the seen kind", err)
	}
}

func TestWatchSeesCreatedObject(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	w, err := env.Clientset.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := env.Clientset.CoreV1().ConfigMaps(ns).Create(ctx, configMap("seen"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ev, err := watchtools.UntilWithoutRetry(waitCtx, w, func(ev watch.Event) (bool, error) {
		cm, ok := ev.Object.(*corev1.ConfigMap)
		return ok && ev.Type == watch.Added && cm.Name == "seen", nil
	})
	if err != nil {
		t.Fatalf("watch did not see the ConfigMap created: %v", err)
	}
	if ev.Object.(*corev1.ConfigMap).Namespace != ns {
		t.Fatalf("event for namespace %s, want %s", ev.Object.(*corev1.ConfigMap).Namespace, ns)
	}
}

// With the watch cache off, compacting etcd makes a watch resumed from an
// older resourceVersion receive 410 Gone; with it on (the default), the same
// watch is replayed from the cache. Both are asserted, so the option is shown
// to matter.
func TestCompactEtcdGivesResumedWatch410(t *testing.T) {
	gone, err := vigiltest.Start(vigiltest.Options{DisableWatchCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Stop()
	for _, tc := range []struct {
		name     string
		env      *vigiltest.Env
		wantGone bool
	}{
		{"watch cache off", gone, true},
		{"watch cache on", env, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			ns := tc.env.Namespace(t)
			cms := tc.env.Clientset.CoreV1().ConfigMaps(ns)
			first, err := cms.Create(ctx, configMap("history"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cur := first
			for i := range 5 {
				cur.Data = map[string]string{"n": fmt.Sprint(i)}
				if cur, err = cms.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := tc.env.CompactEtcd(ctx); err != nil {
				t.Fatal(err)
			}
			w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
			if err != nil {
				t.Fatalf("open watch: %v", err)
			}
			defer w.Stop()
			select {
			case ev := <-w.ResultChan():
				status, isStatus := ev.Object.(*metav1.Status)
				got410 := ev.Type == watch.Error && isStatus && status.Code == 410
				if got410 != tc.wantGone {
					t.Fatalf("first event %s %+v: got 410 = %v, want %v", ev.Type, ev.Object, got410, tc.wantGone)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no event from the resumed watch within 10s")
			}
		})
	}
}

// A ServiceAccount's client is refused until RBAC grants it access.
func TestAsServiceAccountIsAuthorizedByRBAC(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	sa, err := env.AsServiceAccount(ns, "reader")
	if err != nil {
		t.Fatal(err)
	}
	err = sa.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("list before any grant: err = %v, want Forbidden", err)
	}
	if !strings.Contains(err.Error(), "system:serviceaccount:"+ns+":reader") {
		t.Fatalf("denial %q does not name the ServiceAccount", err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-configmaps"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "reader"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The authorizer learns of new bindings through its informers.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err = sa.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))
		if err == nil {
			break
		}
		if !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			t.Fatalf("list after the grant: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The grant is exactly what the Role says: another namespace stays closed.
	if err := sa.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("default")); !apierrors.IsForbidden(err) {
		t.Fatalf("list in default: err = %v, want Forbidden", err)
	}
}

func TestNamespaceIsFreshPerTestAndDeletedAfter(t *testing.T) {
	var names []string
	for i := range 2 {
		t.Run(fmt.Sprint("sub", i), func(t *testing.T) {
			ns := env.Namespace(t)
			got := &corev1.Namespace{}
			if err := env.Client.Get(t.Context(), client.ObjectKey{Name: ns}, got); err != nil {
				t.Fatal(err)
			}
			if got.Labels[vigiltest.TestNamespaceLabel] != "true" {
				t.Fatalf("namespace labels %v: want %s=true", got.Labels, vigiltest.TestNamespaceLabel)
			}
			if !strings.HasPrefix(ns, "testnamespaceisfreshpertestanddeletedafter-sub") {
				t.Fatalf("namespace %q is not named after its test", ns)
			}
			names = append(names, ns)
		})
	}
	if len(names) != 2 || names[0] == names[1] {
		t.Fatalf("namespaces %v: want two distinct ones", names)
	}
	for _, n := range names {
		got := &corev1.Namespace{}
		err := env.Client.Get(t.Context(), client.ObjectKey{Name: n}, got)
		if err == nil && got.DeletionTimestamp == nil {
			t.Fatalf("namespace %s still exists without a deletion timestamp after its test", n)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
}

// A Process keeps its output, reports its exit code, and stops on SIGTERM.
func TestProcess(t *testing.T) {
	p := vigiltest.StartProcess(t, []string{"GREETING=hello"}, "sh", "-c", `echo "$GREETING"; exit 3`)
	if code := p.Wait(t, 10*time.Second); code != 3 {
		t.Fatalf("exit code %d, want 3", code)
	}
	p.WaitOutput(t, "hello", time.Second)
	long := vigiltest.StartProcess(t, nil, "sh", "-c", `trap 'echo stopping; exit 0' TERM; echo started; while :; do sleep 0.05; done`)
	long.WaitOutput(t, "started", 5*time.Second)
	long.Running(t, 100*time.Millisecond)
	if code := long.Stop(t, 5*time.Second); code != 0 {
		t.Fatalf("exit code after SIGTERM %d, want 0 (the trap's)\n%s", code, long.Output)
	}
	if !strings.Contains(long.Output.String(), "stopping") {
		t.Fatalf("output %q lacks the trap's line", long.Output)
	}
	if a := vigiltest.FreeAddr(t); !strings.HasPrefix(a, "127.0.0.1:") {
		t.Fatalf("free address %q: want one on loopback", a)
	}
}

// A namespace a test deletes is deleted for real, what it holds first, so
// that a later test can create it again by name; one that holds an object
// with a finalizer waits for the finalizer, as in a cluster.
func TestDeletedNamespacesCanBeReused(t *testing.T) {
	name := "reused-" + randSuffix(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	held := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "held", Finalizers: []string{"example.dev/hold"}}}
	for round := range 2 {
		if err := env.Client.Create(t.Context(), ns.DeepCopy()); err != nil {
			t.Fatalf("round %d: create namespace %s: %v", round, name, err)
		}
		for _, cm := range []*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "settings"}}, held.DeepCopy()} {
			if err := env.Client.Create(t.Context(), cm); err != nil {
				t.Fatal(err)
			}
		}
		if err := env.Client.Delete(t.Context(), ns.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		vigiltest.Eventually(t, 20*time.Second, func() error {
			err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: name, Name: "settings"}, &corev1.ConfigMap{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("ConfigMap settings in the namespace being deleted: %v", err)
			}
			return nil
		})
		vigiltest.Consistently(t, 2*time.Second, func() error {
			if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, &corev1.Namespace{}); err != nil {
				return fmt.Errorf("namespace %s gone while an object with a finalizer is in it: %v", name, err)
			}
			return nil
		})
		if err := env.Client.Patch(t.Context(), held.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
			t.Fatal(err)
		}
		vigiltest.Eventually(t, 20*time.Second, func() error {
			if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s: %v; want it gone", name, err)
			}
			return nil
		})
	}
}

package chart_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/vigiltest"
)

// The chart creates the module's trusted namespace whether or not it creates
// the module's own, keeps it at uninstall, and trusted.allowed adds the
// installer's identity — a username, or a group — to the users and groups
// its guard and the provenance guard allow, besides the module's own.
func TestChartTrustedNamespaceAndInstaller(t *testing.T) {
	_, ch := writeChartOf(t, example(t, "clusterconfig"))
	rel, err := render(t, ch, map[string]any{
		"namespace": map[string]any{"create": false},
		"trusted":   map[string]any{"allowed": []any{"system:serviceaccount:ci:deployer", "group:ci-admins"}},
	})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	got := objects(t, rel.Manifest)
	ns, ok := got["Namespace /uds-policy-exemptions"]
	if !ok {
		t.Fatalf("the chart does not create the exemptions namespace with namespace.create=false")
	}
	if _, own := got["Namespace /uds-system"]; own {
		t.Errorf("namespace.create=false, yet the chart creates the module's namespace")
	}
	u := unstructured.Unstructured{Object: ns}
	if u.GetAnnotations()["helm.sh/resource-policy"] != "keep" || u.GetLabels()["app.kubernetes.io/name"] != "uds-core" {
		t.Errorf("the exemptions namespace: labels %v, annotations %v; want the module's label, and kept at uninstall", u.GetLabels(), u.GetAnnotations())
	}
	for _, policy := range []string{"uds-core-trusted-uds-policy-exemptions", "uds-core-namespace-created-by-guard"} {
		p, ok := got["ValidatingAdmissionPolicy /"+policy]
		if !ok {
			t.Errorf("ValidatingAdmissionPolicy %s not rendered", policy)
			continue
		}
		vars, _, _ := unstructured.NestedSlice(p, "spec", "variables")
		have := map[string]string{}
		for _, v := range vars {
			v := v.(map[string]any)
			have[v["name"].(string)] = v["expression"].(string)
		}
		if have["allowedUsers"] != `["system:serviceaccount:ci:deployer"]` || have["allowedGroups"] != `["system:masters","ci-admins"]` {
			t.Errorf("%s allows %v; want users [system:serviceaccount:ci:deployer], groups [system:masters ci-admins]", policy, have)
		}
	}
}

// The chart installs, upgrades and uninstalls as a CI ServiceAccount
// (cluster-admin by RBAC, not in group system:masters) named in
// trusted.allowed: its own install is not refused — the trusted namespace is
// created before its guard — the guard then lets that installer, and only
// it among non-masters, relabel the namespace, and the namespace outlives
// the release.
func TestChartInstallsAsTheTrustedInstaller(t *testing.T) {
	ctx := context.Background()
	ci := env.Namespace(t)
	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ci, Name: "deployer"}}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "ci-deployer-" + ci},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ci, Name: "deployer"}},
	}
	if err := env.Client.Create(ctx, crb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), crb) })
	installer := "system:serviceaccount:" + ci + ":deployer"
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = ptr.To(tokenKubeconfig(t, ci, "deployer"))
	flags.Namespace = ptr.To("default")
	cfg := action.NewConfiguration()
	if err := cfg.Init(flags, "default", "secret"); err != nil {
		t.Fatal(err)
	}
	_, ch := writeChartOf(t, example(t, "clusterconfig"))
	vals := map[string]any{"trusted": map[string]any{"allowed": []any{installer}}}
	const release, trusted = "uds-core", "uds-policy-exemptions"
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trusted}})
	})

	i := action.NewInstall(cfg)
	i.ReleaseName, i.Namespace = release, "default"
	i.WaitStrategy = kube.HookOnlyStrategy
	i.Timeout = time.Minute
	if _, err := i.RunWithContext(ctx, ch, vals); err != nil {
		t.Fatalf("helm install as %s: %v", installer, err)
	}
	as, err := client.New(env.AsServiceAccountConfig(ci, "deployer"), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// Another ServiceAccount with the same RBAC is not the installer.
	other, err := client.New(env.AsServiceAccountConfig(ci, "someone-else"), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	crb2 := crb.DeepCopy()
	crb2.ResourceVersion, crb2.UID = "", ""
	crb2.Name, crb2.Subjects[0].Name = "ci-other-"+ci, "someone-else"
	if err := env.Client.Create(ctx, crb2); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), crb2) })
	relabel := func(c client.Client, value string, opts ...client.PatchOption) error {
		return c.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: trusted}},
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"reviewed":"`+value+`"}}}`)), opts...)
	}
	vigiltest.Eventually(t, 10*time.Second, func() error { // the guard holds within a moment: dry runs until then
		if err := relabel(other, "other", client.DryRunAll); !apierrors.IsForbidden(err) {
			return fmt.Errorf("another cluster-admin ServiceAccount relabels %s: %v, want it refused by the guard", trusted, err)
		}
		return nil
	})
	if err := relabel(other, "other"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "only "+installer+", group:system:masters may") {
		t.Errorf("another cluster-admin ServiceAccount relabels %s: %v, want it refused by the guard, naming the installer among the allowed", trusted, err)
	}
	if err := relabel(as, "ci"); err != nil {
		t.Errorf("the installer named in trusted.allowed relabels %s: %v", trusted, err)
	}

	up := action.NewUpgrade(cfg)
	up.Namespace = "default"
	up.WaitStrategy = kube.HookOnlyStrategy
	up.Timeout = time.Minute
	if _, err := up.RunWithContext(ctx, release, ch, vals); err != nil {
		t.Fatalf("helm upgrade as %s: %v", installer, err)
	}
	un := action.NewUninstall(cfg)
	un.DisableHooks = true
	un.WaitStrategy = kube.HookOnlyStrategy
	un.Timeout = time.Minute
	if _, err := un.Run(release); err != nil {
		t.Fatalf("helm uninstall as %s: %v", installer, err)
	}
	ns := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: trusted}, ns); err != nil || ns.DeletionTimestamp != nil {
		t.Errorf("after helm uninstall the trusted namespace %s: %v, deleting %v; want it kept", trusted, err, ns.DeletionTimestamp)
	}
}

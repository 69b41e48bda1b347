package status_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/operating/monitor"
	"github.com/vigilkit/vigil/internal/operating/status"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/internal/testsupport/meshtest"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

// What status reads of a module beside its pods, written as a module writes
// it: the registration records of its configurations (a drift repaired, an
// outage closed, a webhook failed open now), its PolicyReports, and a
// fail-closed webhook of another component on its pods whose own pods the
// module's fail-closed webhook intercepts: a deadlock.
func TestStatusReadsRecordsReportsAndOtherWebhooks(t *testing.T) {
	ctx := t.Context()
	crds, err := os.ReadFile("../../serving/audit/testdata/policyreport-crds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDYAML(crds); err != nil {
		t.Fatal(err)
	}
	home, mesh, apps := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	name := "st-" + home[len(home)-6:]
	cs := env.Clientset
	labels := func(component string) map[string]string {
		return map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": name, "app.kubernetes.io/managed-by": "Helm",
			"app.kubernetes.io/version": "2.1.0", "app.kubernetes.io/component": component}
	}
	deployment := func(ns, dname string, l map[string]string, annotations map[string]string) {
		t.Helper()
		sel := map[string]string{"app.kubernetes.io/name": l["app.kubernetes.io/name"], "app.kubernetes.io/component": l["app.kubernetes.io/component"]}
		if _, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: dname, Labels: l},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l, Annotations: annotations},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c:1"}}}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: dname, Labels: l},
			Spec: corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	spec1 := map[string]string{"vigil.dev/spec-hash": "sha256:0123456789abcdef"}
	deployment(home, name, labels("admission"), spec1)
	// Its pods cannot be created: the Deployment's condition, as the
	// controller sets it from its ReplicaSet's.
	refused := `Internal error occurred: failed calling webhook "sidecar-injector.istio.io": no endpoints available for service "istiod"`
	d, err := cs.AppsV1().Deployments(home).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue,
		Reason: "FailedCreate", Message: refused, LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute)), LastUpdateTime: metav1.Now()})
	if _, err := cs.AppsV1().Deployments(home).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Not a module's: no definition on its pods.
	deployment(apps, "lookalike", map[string]string{"app.kubernetes.io/name": "lookalike", "app.kubernetes.io/part-of": "lookalike", "app.kubernetes.io/component": "admission"}, nil)
	// The other component, and its fail-closed injector on the module's namespace.
	deployment(mesh, "istiod", map[string]string{"app.kubernetes.io/name": "istiod", "app.kubernetes.io/component": "pilot"}, nil)
	mustLabel := func(ns string) {
		n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels["istio-injection"] = "enabled"
		if _, err := cs.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mustLabel(home)
	podCreate := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}
	hook := func(hname, ns, svc string, nsSel *metav1.LabelSelector) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{Name: hname, Rules: podCreate, FailurePolicy: ptr.To(admissionregistrationv1.Fail), NamespaceSelector: nsSel,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: svc, Path: ptr.To("/x")}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}}
	}
	injector := "injector-" + mesh
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, meshtest.Injector(injector, mesh, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The module's registered configuration: enforced, a repair, an outage
	// closed and one open now; its webhook validates Pods in the mesh's
	// namespace, fail-closed.
	rec := registration.Record{Version: "2.1.0", State: registration.StateFailedOpen, Enforced: "2026-12-01T10:00:00Z",
		FailedOpen: []string{"quota.validate." + name + ".vigil.dev"}, FailedOpenSince: "2026-12-02T09:00:00Z",
		Outages: []registration.Outage{{From: "2026-12-01T11:00:00Z", To: "2026-12-01T11:05:00Z", Webhooks: []string{"quota.validate." + name + ".vigil.dev"}}},
		Repairs: []registration.Repair{{At: "2026-12-01T12:00:00Z", Drift: "validating webhook configuration: failurePolicy Ignore, want Fail"}}}
	ann, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: spec.ConfigurationName(name), Labels: labels(""), Annotations: map[string]string{registration.Annotation: string(ann)}},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			hook("policies.validate."+name+".vigil.dev", home, name, &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: mesh}}),
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// t.Context() is done by the time cleanups run.
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), injector, metav1.DeleteOptions{})
		_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	report := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport",
		"metadata": map[string]any{"name": "vigil-" + name, "namespace": apps, "labels": map[string]any{"vigil.dev/module": name}},
		"summary":  map[string]any{"pass": int64(0), "fail": int64(3), "warn": int64(1), "error": int64(0), "skip": int64(0)},
	}}
	if _, err := dyn.Resource(spec.PolicyReports).Namespace(apps).Create(ctx, report, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	r, err := status.Collect(ctx, status.Clients{Kube: cs, Dynamic: dyn}, status.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var m *status.Module
	for i := range r.Modules {
		if r.Modules[i].Name == "lookalike" {
			t.Errorf("a Deployment without a definition on its pods is reported as a module")
		}
		if r.Modules[i].Name == name {
			m = &r.Modules[i]
		}
	}
	if m == nil {
		t.Fatalf("module %s not in %+v", name, r.Modules)
	}
	if m.Version != "2.1.0" || m.Spec != "sha256:0123456789abcdef" || len(m.Roles) != 1 || m.Roles[0].Desired != 2 {
		t.Errorf("module %+v: want version 2.1.0, its definition, one role of 2", *m)
	}
	if m.Roles[0].CreateRefused != refused || m.Roles[0].RefusedSince == nil {
		t.Errorf("role %+v: want its pods' creates refused, as the Deployment's ReplicaFailure condition says", m.Roles[0])
	}
	if len(m.Registration) != 1 || m.Registration[0].State != registration.StateFailedOpen || len(m.Registration[0].Repairs) != 1 || m.Registration[0].FailedOpenSince == "" {
		t.Errorf("registration %+v: want failed-open with its repair", m.Registration)
	}
	if len(m.Outages) != 2 || m.Outages[1].To != "" {
		t.Errorf("outages %+v: want the closed one and the one open now", m.Outages)
	}
	if !m.Audit.Served || m.Audit.Fail != 3 || m.Audit.Warn != 1 || len(m.Audit.Reports) != 1 {
		t.Errorf("audit %+v: want the PolicyReport's 3 failing, 1 warning", m.Audit)
	}
	if len(m.Interceptors) != 1 || m.Interceptors[0].Configuration != injector || m.Interceptors[0].Service != mesh+"/istiod" {
		t.Errorf("interceptors %+v: want the injector", m.Interceptors)
	}
	if len(m.Deadlocks) != 1 || !strings.Contains(m.Deadlocks[0], injector) {
		t.Errorf("deadlocks %v: want the cycle with the injector", m.Deadlocks)
	}
	var text bytes.Buffer
	if err := status.Write(&text, r, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"failed-open by version 2.1.0", "drifted and repaired at 2026-12-01T12:00:00Z", "2026-12-02T09:00:00Z to now, still open",
		"audit: 3 failing, 1 warning in 1 PolicyReports", "mutating " + injector + "/sidecar-injector.istio.io", "DEADLOCKS",
		"admission pods cannot be created, for 1m", refused} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, text.String())
		}
	}
	t.Logf("status:\n%s", text.String())
}

// Changes signals what status --watch redraws for: a module's pod, an Event
// on it, a webhook configuration; an Event on another pod is not one.
func TestChangesSignalsTheModulesObjectsOnly(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	name := "ch-" + ns[len(ns)-6:]
	changes := status.Changes(ctx, status.Clients{Kube: env.Clientset}, status.Options{Module: name, Namespace: ns})
	expect := func(what string, want bool) {
		t.Helper()
		select {
		case <-changes:
			if !want {
				t.Errorf("%s: signalled, want no signal", what)
			}
		case <-time.After(2 * time.Second):
			if want {
				t.Errorf("%s: no signal in 2 s", what)
			}
		}
	}
	// The first lists signal the cluster's configurations, and the last
	// test's objects may still be going: wait for a quiet second.
	for quiet := false; !quiet; {
		select {
		case <-changes:
		case <-time.After(time.Second):
			quiet = true
		}
	}
	pod := func(pname string, l map[string]string) {
		t.Helper()
		if _, err := env.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pname, Labels: l},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c:1"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	event := func(pname, reason string) {
		t.Helper()
		if _, err := env.Clientset.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: pname + "-"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pname}, Reason: reason, Message: reason, Type: corev1.EventTypeNormal,
			FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod("other", map[string]string{"app": "other"})
	expect("another pod", false)
	event("other", "Scheduled")
	expect("an Event on another pod", false)
	pod(name+"-admission-0", map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": name, "app.kubernetes.io/component": "admission"})
	expect("the module's pod", true)
	event(name+"-admission-0", "GateWaiting")
	expect("an Event on the module's pod", true)
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := env.Clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	expect("a webhook configuration", true)
}

// A tenant who may create namespaces, and Deployments in hers, labels a
// Deployment in her namespace as a module's admission: status reports the
// module where its cluster-scoped objects say it is (its webhook
// configuration's Service; for a module without one, its
// ClusterRoleBinding's ServiceAccount), names hers as not taken for it, and
// monitor follows the module's namespace, not hers. A reader who may not
// read those objects is told that neither namespace is confirmed, each
// shown, rather than given the first.
func TestATenantsLabelledDeploymentIsNotTheModule(t *testing.T) {
	ctx := t.Context()
	cs := env.Clientset
	home := env.Namespace(t)
	suffix := home[len(home)-6:]
	hooked, bound := "dh-"+suffix, "db-"+suffix
	deploy := func(c kubernetes.Interface, ns, module, component string) {
		t.Helper()
		l := map[string]string{"app.kubernetes.io/name": module, "app.kubernetes.io/part-of": module, "app.kubernetes.io/managed-by": "vigil",
			"app.kubernetes.io/version": "1.0.0", "app.kubernetes.io/component": component}
		sel := map[string]string{"app.kubernetes.io/name": module, "app.kubernetes.io/component": component}
		if _, err := c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: module + "-" + component, Labels: l},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l, Annotations: map[string]string{"vigil.dev/spec-hash": "sha256:" + module}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: component, Image: "example.invalid/c:1"}}}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create Deployment %s/%s: %v", ns, module, err)
		}
	}
	// The modules, as their installs write them: one with a webhook
	// configuration calling its Service, one with only a ClusterRoleBinding.
	deploy(cs, home, hooked, "admission")
	deploy(cs, home, bound, "admission")
	moduleLabels := func(module string) map[string]string {
		return map[string]string{"app.kubernetes.io/name": module, "app.kubernetes.io/part-of": module, "app.kubernetes.io/managed-by": "vigil"}
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: hooked, Labels: moduleLabels(hooked)},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "policies.validate." + hooked + ".vigil.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: home, Name: hooked, Path: ptr.To("/x")}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}, FailurePolicy: ptr.To(admissionregistrationv1.Ignore),
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"never": suffix}}}}}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "vigil:" + bound + "-admission", Labels: moduleLabels(bound)},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "vigil:" + bound + "-admission"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: home, Name: bound + "-admission"}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The tenant: she may create namespaces; a provisioner lets her create
	// Deployments in hers. Hers sorts before the module's.
	tenant, mine := "tenant-"+suffix, "a-tenant-"+suffix
	grants := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create", "get"}}}
	work := []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "get", "list", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods", "configmaps"}, Verbs: []string{"create", "get", "list", "delete"}}}
	objs := []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: tenant}, Rules: grants},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: tenant}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: tenant},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: tenant}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: tenant + "-work"}, Rules: work},
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		bg := context.Background()
		_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(bg, vwc.Name, metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoleBindings().Delete(bg, crb.Name, metav1.DeleteOptions{})
		_ = cs.CoreV1().Namespaces().Delete(bg, mine, metav1.DeleteOptions{})
		for _, o := range objs {
			_ = env.Client.Delete(bg, o)
		}
	})
	as, err := kubernetes.NewForConfig(env.AsUserConfig(tenant))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := as.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mine}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the tenant creates her namespace: %v", err)
	}
	if _, err := cs.RbacV1().RoleBindings(mine).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: tenant},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: tenant + "-work"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: tenant}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vigiltest.Eventually(t, 10*time.Second, func() error {
		_, err := as.AppsV1().Deployments(mine).List(ctx, metav1.ListOptions{})
		return err
	})
	deploy(as, mine, hooked, "admission")
	deploy(as, mine, bound, "admission")

	// status, as an admin.
	r, err := status.Collect(ctx, status.Clients{Kube: cs}, status.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ module, by string }{{hooked, "validating webhook configuration " + hooked}, {bound, "ClusterRoleBinding " + crb.Name}} {
		var found []status.Module
		for _, m := range r.Modules {
			if m.Name == c.module {
				found = append(found, m)
			}
		}
		if len(found) != 1 || found[0].Namespace != home || !strings.Contains(found[0].Located, c.by) || found[0].Unconfirmed != "" {
			t.Errorf("module %s reported as %+v: want it once, in %s, located by %s", c.module, found, home, c.by)
		} else if !slices.Equal(found[0].Candidates, []string{mine, home}) {
			t.Errorf("module %s: candidates %v, want both namespaces named", c.module, found[0].Candidates)
		}
		var named bool
		for _, nb := range r.NotBelieved {
			named = named || nb.Module == c.module && nb.Namespace == mine && strings.Contains(nb.Why, home)
		}
		if !named {
			t.Errorf("module %s: not-believed %+v, want the tenant's namespace %s named, with the module's", c.module, r.NotBelieved, mine)
		}
	}
	var text bytes.Buffer
	if err := status.Write(&text, r, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"module " + hooked + " (namespace " + home + ")", "not taken for a module", "module " + hooked + " in namespace " + mine} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "module "+hooked+" (namespace "+mine+")") {
		t.Errorf("status reports the module in the tenant's namespace:\n%s", text.String())
	}
	// Asked to look in her namespace alone, status finds no module there.
	r, err = status.Collect(ctx, status.Clients{Kube: cs}, status.Options{Module: hooked, Namespace: mine})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Modules) != 0 || len(r.NotBelieved) != 1 {
		t.Errorf("status -n %s %s: modules %+v, not believed %+v: want none, and hers named", mine, hooked, r.Modules, r.NotBelieved)
	}

	// monitor follows the module's namespace, and says whose it did not.
	for _, module := range []string{hooked, bound} {
		ns, note, err := monitor.Locate(ctx, cs, module)
		if err != nil || ns != home || !strings.Contains(note, mine) {
			t.Errorf("monitor %s: namespace %q, note %q, %v: want %s, and %s named as not followed", module, ns, note, err, home, mine)
		}
	}

	// A reader who may list Deployments but neither webhook configurations
	// nor ClusterRoleBindings: no namespace is confirmed; status shows
	// each, saying so, and monitor asks for the namespace.
	viewer := "viewer-" + suffix
	vr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: viewer}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods", "events"}, Verbs: []string{"get", "list", "watch"}}}}
	vb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: viewer}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: viewer},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: viewer}}}
	for _, o := range []client.Object{vr, vb} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	vcs, err := kubernetes.NewForConfig(env.AsUserConfig(viewer))
	if err != nil {
		t.Fatal(err)
	}
	vigiltest.Eventually(t, 10*time.Second, func() error {
		_, err := vcs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
	r, err = status.Collect(ctx, status.Clients{Kube: vcs}, status.Options{Module: hooked})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Modules) != 2 || r.Modules[0].Unconfirmed == "" || r.Modules[1].Unconfirmed == "" || len(r.Modules[0].Candidates) != 2 {
		t.Errorf("as a viewer: modules %+v: want both namespaces shown, each unconfirmed, with the candidates named", r.Modules)
	}
	if _, _, err := monitor.Locate(ctx, vcs, hooked); err == nil || !strings.Contains(err.Error(), "--module-namespace") || !strings.Contains(err.Error(), mine) {
		t.Errorf("monitor as a viewer: %v; want an error naming the candidates and asking for --module-namespace", err)
	}
}

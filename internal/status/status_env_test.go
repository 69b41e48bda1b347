package status_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/meshtest"
	"github.com/vigilkit/vigil/internal/registration"
	"github.com/vigilkit/vigil/internal/spec"
	"github.com/vigilkit/vigil/internal/status"
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
	crds, err := os.ReadFile("../audit/testdata/policyreport-crds.yaml")
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

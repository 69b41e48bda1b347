package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/admit"
	"github.com/vigilkit/vigil/internal/serving/audit"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

// configurations creates the module's webhook configurations, without
// webhooks, carrying the given registration records.
func configurations(t *testing.T, name string, mut, val registration.Record) {
	t.Helper()
	ann := func(r registration.Record) map[string]string {
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return map[string]string{registration.Annotation: string(data)}
	}
	api := env.Clientset.AdmissionregistrationV1()
	if _, err := api.MutatingWebhookConfigurations().Create(t.Context(), &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann(mut)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ValidatingWebhookConfigurations().Create(t.Context(), &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann(val)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = api.MutatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = api.ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// The audit tells what got in while a capability was failed open from what
// got in while it enforced, names the outage window, reports the mutations
// that did not run, and keeps it all as a PolicyReport that the next run
// replaces (and deletes, once nothing is found).
func TestAuditReportsWhatPassedWhileFailedOpen(t *testing.T) {
	ctx := t.Context()
	crds, err := os.ReadFile("testdata/policyreport-crds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDYAML(crds); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	name := "audited-" + ns[len(ns)-6:]
	cm := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	deny := func(label string) func(context.Context, *admission.Request[*corev1.ConfigMap]) admission.Verdict {
		return func(_ context.Context, req *admission.Request[*corev1.ConfigMap]) admission.Verdict {
			if req.HasLabel(label) {
				return admission.Deny("label " + label + " is not allowed")
			}
			return admission.Allow()
		}
	}
	open := define.ValidateBinding(cm, &corev1.ConfigMap{}, deny("open-bad"))
	open.Capability, open.Name, open.Namespaces, open.FailOpenAfter = "lenient", "lenient-cms", []string{ns}, 5*time.Second
	strict := define.ValidateBinding(cm, &corev1.ConfigMap{}, deny("strict-bad"))
	strict.Capability, strict.Name, strict.Namespaces = "strict", "strict-cms", []string{ns}
	tag := define.MutateBinding(cm, &corev1.ConfigMap{}, func(_ context.Context, req *admission.Request[*corev1.ConfigMap]) error {
		if req.Object.Labels["team"] == "" {
			if req.Object.Labels == nil {
				req.Object.Labels = map[string]string{}
			}
			req.Object.Labels["team"] = "unassigned"
		}
		return nil
	})
	tag.Capability, tag.Name, tag.Namespaces, tag.FailOpenAfter = "tagging", "tag-cms", []string{ns}, 5*time.Second
	bindings := []spec.Binding{open, strict, tag}
	m := &spec.Module{Name: name, Namespace: ns, Version: "1.2.0", Bindings: bindings}

	now := time.Now().UTC()
	enforced := now.Add(-time.Hour).Format(time.RFC3339)
	lenientHook := spec.WebhookName(name, "lenient", spec.Validate)
	tagHook := spec.WebhookName(name, "tagging", spec.Mutate)
	window := registration.Outage{From: now.Add(-10 * time.Second).Format(time.RFC3339), To: now.Add(time.Hour).Format(time.RFC3339), Webhooks: []string{lenientHook}}
	configurations(t, name,
		registration.Record{Version: "1.2.0", State: registration.StateFailedOpen, Enforced: enforced, FailedOpenSince: window.From, FailedOpen: []string{tagHook}},
		registration.Record{Version: "1.2.0", State: registration.StateEnforced, Enforced: enforced, Outages: []registration.Outage{window}})

	for _, o := range []struct {
		name   string
		labels map[string]string
	}{
		{"sneaked", map[string]string{"open-bad": "1", "team": "a"}},
		{"kept-out", map[string]string{"strict-bad": "1", "team": "a"}},
		{"untagged", nil},
		{"fine", map[string]string{"team": "a"}},
	} {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: o.name, Labels: o.labels}}
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	h := admit.NewHandler(bindings, admit.Options{Module: name, Timeout: 5 * time.Second})
	var logged []string
	log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	a := &audit.Auditor{Module: m, Handler: h, Config: env.Config, Log: log}
	findings, err := a.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The run says when it is done, how many violations it found and how
	// long it took.
	var done string
	for _, l := range logged {
		if strings.Contains(l, `"msg"="audit done"`) {
			done = l
		}
	}
	took := regexp.MustCompile(`"took"="([^"]+)"`).FindStringSubmatch(done)
	if took == nil || !strings.Contains(done, `"violations"=3`) {
		t.Errorf("the audit's last line %q, want audit done with violations=3 and took", done)
	} else if d, err := time.ParseDuration(took[1]); err != nil || d <= 0 {
		t.Errorf("audit done: took=%q, want a positive duration", took[1])
	}
	// And how much it read: the four ConfigMaps judged, in one stream or
	// at least one page, the slowest of which took some time.
	figures := regexp.MustCompile(`"objects"=(\d+) "streams"=(\d+) "pages"=(\d+) "slowestPage"="([^"]+)"`).FindStringSubmatch(done)
	if figures == nil {
		t.Errorf("audit done %q: want objects, streams, pages and slowestPage", done)
	} else if objects, _ := strconv.Atoi(figures[1]); objects < 4 {
		t.Errorf("audit done: objects=%s, want the 4 ConfigMaps at least", figures[1])
	} else if streams, _ := strconv.Atoi(figures[2]); streams != 1 && !listsOnly(t) {
		t.Errorf("audit done: streams=%s, want the one kind streamed (its API server streams lists)", figures[2])
	} else if pages, _ := strconv.Atoi(figures[3]); streams+pages < 1 {
		t.Errorf("audit done: streams=%d pages=%d, want a stream or a page at least", streams, pages)
	} else if d, err := time.ParseDuration(figures[4]); err != nil || d < 0 {
		t.Errorf("audit done: slowestPage=%q, want a duration", figures[4])
	}
	got := map[string]audit.Finding{}
	for _, f := range findings {
		got[f.Name+"/"+f.Capability] = f
	}
	if len(findings) != 3 {
		t.Fatalf("findings %+v; want 3: sneaked (lenient), kept-out (strict), untagged (tagging)", findings)
	}
	if f := got["sneaked/lenient"]; f.Admitted != audit.WhileFailedOpen || f.Outage != window.From+"/"+window.To || f.Action != spec.Validate {
		t.Errorf("sneaked: %+v; want admitted while-failed-open in window %s/%s", f, window.From, window.To)
	} else if x := f.Explain(time.Time{}); !strings.Contains(x, "failed open") || !strings.Contains(x, window.From) {
		t.Errorf("sneaked explained as %q; want the outage window named", x)
	}
	if f := got["kept-out/strict"]; f.Admitted != audit.WhileEnforced || f.Outage != "" {
		t.Errorf("kept-out: %+v; want admitted while-enforced, no outage (its capability never failed open)", f)
	}
	if f := got["untagged/tagging"]; f.Admitted != audit.WhileFailedOpen || f.Action != spec.Mutate || f.Outage != window.From+"/" ||
		!strings.Contains(f.Violation, "add /metadata/labels") {
		t.Errorf("untagged: %+v; want a skipped mutation adding labels, in the open window from %s", f, window.From)
	}

	dyn := dynamic.NewForConfigOrDie(env.Config)
	report, err := dyn.Resource(spec.PolicyReports).Namespace(ns).Get(ctx, spec.PolicyReportName(name), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the audit's PolicyReport in %s: %v", ns, err)
	}
	if fail, _, _ := unstructuredInt(report.Object, "summary", "fail"); fail != 3 {
		t.Errorf("PolicyReport summary.fail = %d, want 3", fail)
	}
	results, _ := report.Object["results"].([]any)
	var seen []string
	for _, r := range results {
		res := r.(map[string]any)
		props := res["properties"].(map[string]any)
		resources := res["resources"].([]any)
		obj := resources[0].(map[string]any)
		seen = append(seen, fmt.Sprintf("%s %s %s %s %s %v", obj["name"], res["rule"], res["category"], res["result"], props["admitted"], props["outage"] != nil))
		if res["policy"] != name || res["source"] != "vigil" || obj["uid"] == "" || obj["kind"] != "ConfigMap" {
			t.Errorf("result %v: want policy %s, source vigil, the object's kind and uid", res, name)
		}
	}
	slices.Sort(seen)
	want := []string{
		"kept-out strict validation fail while-enforced false",
		"sneaked lenient validation fail while-failed-open true",
		"untagged tagging mutation-skipped fail while-failed-open true",
	}
	if !slices.Equal(seen, want) {
		t.Errorf("PolicyReport results:\n  %s\nwant\n  %s", strings.Join(seen, "\n  "), strings.Join(want, "\n  "))
	}

	// Mended: the next run finds nothing and the report goes.
	for _, n := range []string{"sneaked", "kept-out", "untagged"} {
		if err := env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	vigiltest.Eventually(t, 5*time.Second, func() error {
		findings, err := a.Run(ctx)
		if err != nil || len(findings) > 0 {
			return fmt.Errorf("after the objects were removed: findings %+v, err %v", findings, err)
		}
		_, err = dyn.Resource(spec.PolicyReports).Namespace(ns).Get(ctx, spec.PolicyReportName(name), metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the PolicyReport of a namespace without findings: %v; want it deleted", err)
		}
		return nil
	})
}

func unstructuredInt(obj map[string]any, path ...string) (int64, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		cur = m[p]
	}
	switch v := cur.(type) {
	case int64:
		return v, true, nil
	case float64:
		return int64(v), true, nil
	}
	return 0, false, nil
}

// What a capability's webhooks leave out is no violation of it: an object
// labelled with its opt-out label, one in a namespace opted out, and, for
// an opt-in capability, one in a namespace that did not opt in.
func TestAuditSkipsWhatTheCapabilityLeavesOut(t *testing.T) {
	ctx := t.Context()
	in, out := env.Namespace(t), env.Namespace(t)
	name := "labelled-" + in[len(in)-6:]
	const optOut, optIn = "audit.example.dev/skip", "audit.example.dev/enforce"
	for ns, labels := range map[string]map[string]string{in: {optIn: "true"}, out: {optOut: "true"}} {
		n := &corev1.Namespace{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
			t.Fatal(err)
		}
		n.Labels = labels
		if err := env.Client.Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	cm := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	deny := define.ValidateBinding(cm, &corev1.ConfigMap{}, func(_ context.Context, req *admission.Request[*corev1.ConfigMap]) admission.Verdict {
		if req.HasLabel("bad") {
			return admission.Deny("bad")
		}
		return admission.Allow()
	})
	outB, inB := deny, deny
	outB.Capability, outB.Name, outB.Namespaces, outB.OptOut = "skippable", "skippable-cms", []string{in, out}, optOut
	inB.Capability, inB.Name, inB.Namespaces, inB.OptIn = "enrolled", "enrolled-cms", []string{in, out}, optIn
	m := &spec.Module{Name: name, Namespace: "audit-home", Version: "1.0.0", Bindings: []spec.Binding{outB, inB}, Capabilities: []spec.Capability{
		{Name: "skippable", Namespaces: []string{in, out}, OptOut: &spec.OptOut{Label: optOut, Allowed: []string{"alice"}}},
		{Name: "enrolled", Namespaces: []string{in, out}, OptIn: &spec.OptOut{Label: optIn, Allowed: []string{"alice"}}},
	}}
	configurations(t, name, registration.Record{}, registration.Record{Version: "1.0.0", State: registration.StateEnforced, Enforced: time.Now().UTC().Format(time.RFC3339)})
	for _, o := range []struct {
		ns, name string
		labels   map[string]string
	}{
		{in, "bad", map[string]string{"bad": "1"}},
		{in, "bad-opted-out", map[string]string{"bad": "1", optOut: "true"}},
		{out, "bad", map[string]string{"bad": "1"}},
	} {
		if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: o.ns, Name: o.name, Labels: o.labels}}); err != nil {
			t.Fatal(err)
		}
	}
	h := admit.NewHandler(m.Bindings, admit.Options{Module: name, Timeout: 5 * time.Second})
	findings, err := (&audit.Auditor{Module: m, Handler: h, Config: env.Config, Log: logr.Discard()}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range findings {
		ns := "in"
		if f.Namespace == out {
			ns = "out"
		}
		got = append(got, ns+"/"+f.Name+"/"+f.Capability)
	}
	slices.Sort(got)
	// in: opted in, not out: both capabilities see "bad"; the object
	// labelled with the opt-out label only the opt-in one. out: opted out
	// of one, not opted in to the other: nothing.
	want := []string{"in/bad-opted-out/enrolled", "in/bad/enrolled", "in/bad/skippable"}
	if !slices.Equal(got, want) {
		t.Fatalf("findings %v, want %v", got, want)
	}
}

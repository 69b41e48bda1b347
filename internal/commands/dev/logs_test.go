package dev

import (
	"reflect"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vigilkit/vigil/internal/runtime/events"
)

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want map[string]string
	}{
		{`time=2026-01-01T00:00:00.000Z level=INFO msg="gate waiting" module=m phase=0 gate=crd-x waitsFor="CRD x: established" for=2s lastSeen="not found"`,
			map[string]string{"time": "2026-01-01T00:00:00.000Z", "level": "INFO", "msg": "gate waiting", "module": "m", "phase": "0", "gate": "crd-x", "waitsFor": "CRD x: established", "for": "2s", "lastSeen": "not found"}},
		{`level=ERROR msg="phase failed" err="gate g: \"quoted\" thing"`,
			map[string]string{"level": "ERROR", "msg": "phase failed", "err": `gate g: "quoted" thing`}},
		{`level=INFO msg=ready empty=`, map[string]string{"level": "INFO", "msg": "ready", "empty": ""}},
		{`panic: runtime error`, nil},
		{`level=INFO msg="unterminated`, nil},
		{`msg=no-level`, nil},
	} {
		got, ok := events.ParseLine(tc.line)
		if tc.want == nil {
			if ok {
				t.Errorf("events.ParseLine(%q) = %v, want not a log line", tc.line, got)
			}
			continue
		}
		if !ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("events.ParseLine(%q) = %v, %v; want %v", tc.line, got, ok, tc.want)
		}
	}
}

func TestGateEvents(t *testing.T) {
	f, _ := events.ParseLine(`level=INFO msg="gate fallback" event=gate-fallback module=m phase=1 gate=cc took=1.002s`)
	e, ok := gateEvent(1, f)
	if !ok || e.Kind != GateDone || e.State != "fallback" || e.Gate != "cc" || e.Role != "phase 1" {
		t.Errorf("gate fallback line: %+v, %v", e, ok)
	}
	f, _ = events.ParseLine(`level=INFO msg="gate callback running" event=gate-callback-running module=m phase=0 gate=cc waitsFor="ConfigMap cc: created" for=9s callbackFor=3.2s`)
	if e, ok := gateEvent(0, f); !ok || e.Kind != GateWaiting || !strings.Contains(e.Text, "its callback has run for 3.2s") || strings.Contains(e.Text, "last saw") {
		t.Errorf("gate callback running line: %+v, %v", e, ok)
	}
	f, _ = events.ParseLine(`level=INFO msg="phase done" event=phase-done module=m phase=1 took=1s`)
	if _, ok := gateEvent(1, f); ok {
		t.Errorf("phase done is reported by the session, not from the log")
	}
	// Events are read by name, not by message: a reworded message is the same
	// event, and a message without the event is none.
	f, _ = events.ParseLine(`level=INFO msg="the gate is through" event=gate-done module=m phase=0 gate=crd took=5ms`)
	if e, ok := gateEvent(0, f); !ok || e.Kind != GateDone || e.State != "done" || e.Gate != "crd" {
		t.Errorf("reworded gate-done line: %+v, %v", e, ok)
	}
	f, _ = events.ParseLine(`level=INFO msg="gate done" module=m phase=0 gate=crd took=5ms`)
	if e, ok := gateEvent(0, f); ok && e.Kind == GateDone {
		t.Errorf("a line without an event was taken for gate-done: %+v", e)
	}
	f, _ = events.ParseLine(`level=INFO msg="Starting workers" module=m controller=x`)
	if _, ok := watcherEvent(f); ok {
		t.Errorf("a library's line was shown")
	}
}

func TestReviewSummarizesPatchAndDenial(t *testing.T) {
	req := &admissionv1.AdmissionRequest{Operation: admissionv1.Create, Kind: metav1.GroupVersionKind{Kind: "Pod"}, Namespace: "demo",
		Object: runtime.RawExtension{Raw: []byte(`{"metadata":{"generateName":"web-"}}`)}}
	r := review("/mutate/m", req, &admissionv1.AdmissionResponse{Allowed: true, Patch: []byte(`[{"op":"add","path":"/metadata/labels/a~1b","value":"c"}]`)})
	if r.Webhook != "mutate" || r.Object() != "demo/web-*" || !reflect.DeepEqual(r.Patch, []string{`add /metadata/labels/a/b = "c"`}) {
		t.Errorf("mutate review: %+v", r)
	}
	r = review("/validate/m", req, &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: "no"}})
	if r.Webhook != "validate" || r.Allowed || r.describe() != "CREATE Pod demo/web-* (validate): denied: no" {
		t.Errorf("validate review: %+v: %s", r, r.describe())
	}
}

func TestKubeletBackoff(t *testing.T) {
	var got []string
	d := time.Duration(0)
	for range 7 {
		d = kubeletBackoff(d)
		got = append(got, d.String())
	}
	if want := "10s 20s 40s 1m20s 2m40s 5m0s 5m0s"; strings.Join(got, " ") != want {
		t.Fatalf("back-off %v, want %s", got, want)
	}
}

// A cluster-scoped object is printed by its name alone; a Namespace's request,
// which the API server gives its own name as namespace, too.
func TestReviewOfClusterScopedObject(t *testing.T) {
	for _, req := range []*admissionv1.AdmissionRequest{
		{Operation: admissionv1.Create, Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Namespace: "acme", Name: "acme"},
		{Operation: admissionv1.Create, Kind: metav1.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, Name: "acme"},
	} {
		r := review("/validate/m", req, &admissionv1.AdmissionResponse{Allowed: true})
		if want := "CREATE " + req.Kind.Kind + " acme (validate): admitted"; r.describe() != want {
			t.Errorf("review of %s: %q, want %q", req.Kind.Kind, r.describe(), want)
		}
	}
}

package admit

// Tests of the review's stages — mode, failure policy, metrics, recheck —
// calling each stage's functions directly, without HTTP.

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// stageLog collects a handler's log lines.
type stageLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *stageLog) add(args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, args)
}

// with returns the lines holding every one of substrs.
func (l *stageLog) with(substrs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range l.lines {
		for _, s := range substrs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

// stageHandler is a handler of module "mod" with no bindings, its metrics
// in a registry of their own and its log collected; opts adds to its options.
func stageHandler(t *testing.T, opts Options) (*Handler, *prometheus.Registry, *stageLog) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, "mod")
	if err != nil {
		t.Fatal(err)
	}
	logs := &stageLog{}
	opts.Module, opts.Metrics, opts.Log = "mod", m, funcr.NewJSON(logs.add, funcr.Options{})
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	return NewHandler(nil, opts), reg, logs
}

// stageBinding is a validation binding of capability and name for Pods,
// in mode.
func stageBinding(capability, name string, mode spec.Mode) *spec.Binding {
	return &spec.Binding{Capability: capability, Name: name, Mode: mode, Action: spec.Validate, GVK: corev1.SchemeGroupVersion.WithKind("Pod")}
}

// stageRequest is a CREATE of Pod apps/web by alice.
func stageRequest() *admissionv1.AdmissionRequest {
	return &admissionv1.AdmissionRequest{
		UID: "u-1", Operation: admissionv1.Create, Namespace: "apps", Name: "web",
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
	}
}

// sample is the value of the module's metric name with labels (besides
// module): a counter's value, or a histogram's sample count and sum. found
// is false when there is no such series.
func sample(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (value float64, count uint64, found bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			if have["module"] != "mod" || len(have) != len(labels)+1 {
				continue
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			if h := m.GetHistogram(); h != nil {
				return h.GetSampleSum(), h.GetSampleCount(), true
			}
			return m.GetCounter().GetValue(), 0, true
		}
	}
	return 0, 0, false
}

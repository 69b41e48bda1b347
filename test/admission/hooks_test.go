package admission

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
)

// Through the API server: the module's hooks see every request it answers,
// Before as it arrives and After with the answer the API server got; a
// handler's logger is at hand in both roles' handlers.
func TestAdmissionHooksThroughTheAPIServer(t *testing.T) {
	apps, home := env.Namespace(t), env.Namespace(t)
	var mu sync.Mutex
	var seen []string
	loggerOK := true
	m := vigil.NewModule("hooked", vigil.Options{Namespace: home, Hooks: vigil.AdmissionHooks{
		Before: func(ctx context.Context, req *admissionv1.AdmissionRequest) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, fmt.Sprintf("before %s %s/%s", req.Operation, req.Namespace, req.Name))
		},
		After: func(ctx context.Context, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse, took time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, fmt.Sprintf("after %s/%s allowed=%v", req.Namespace, req.Name, resp.Allowed))
			loggerOK = loggerOK && vigil.LoggerFrom(ctx).GetSink() != nil
		},
	}})
	policies := m.Capability("policies", vigil.InNamespaces(apps))
	vigil.When(policies, &corev1.ConfigMap{}).IsCreated().Named("need-team").
		Validate(func(ctx context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
			vigil.LoggerFrom(ctx).Info("judging", "team", r.Object.Labels["team"])
			if r.Object.Labels["team"] == "" {
				return admission.Deny("a ConfigMap needs a team label")
			}
			return admission.Allow()
		})
	srv := serveAdmission(t, m, "hooked", []string{apps})
	defer srv.Stop()
	c := newClient(t)
	if err := c.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "ok", Labels: map[string]string{"team": "shop"}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "bad"}}); err == nil || !strings.Contains(err.Error(), "needs a team label") {
		t.Fatalf("create without a team: %v, want the denial", err)
	}
	mu.Lock()
	defer mu.Unlock()
	got := strings.Join(seen, "; ")
	want := fmt.Sprintf("before CREATE %[1]s/ok; after %[1]s/ok allowed=true; before CREATE %[1]s/bad; after %[1]s/bad allowed=false", apps)
	if got != want {
		t.Errorf("hooks saw: %s\nwant: %s", got, want)
	}
	if !loggerOK {
		t.Error("LoggerFrom in the After hook has no sink: want the role's logger")
	}
}

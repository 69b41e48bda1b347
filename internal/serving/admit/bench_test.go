package admit_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/admit"
	"github.com/vigilkit/vigil/store"
)

// BenchmarkHandler measures the handler alone (no TLS, no network): the cost
// of decoding, running a binding and answering, per request.
func BenchmarkHandler(b *testing.B) {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "apps", Labels: map[string]string{"app": "bench"}},
		Data:       map[string]string{"config.yaml": strings.Repeat("key: value\n", 120)},
	}
	cmGVK := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	body := review(b, admissionv1.Create, cm, nil)
	body = bytes.Replace(body, []byte(`"kind":"Pod"`), []byte(`"kind":"ConfigMap"`), 1)
	h, _ := handler(admission.Fail, time.Second,
		admit.MutateBinding(cmGVK, &corev1.ConfigMap{}, func(_ context.Context, r *admission.Request[*corev1.ConfigMap]) error {
			r.SetLabel("vigil.dev/labeled", "true")
			return nil
		}),
		admit.ValidateBinding(cmGVK, &corev1.ConfigMap{}, func(_ context.Context, r *admission.Request[*corev1.ConfigMap]) admission.Verdict {
			if !r.HasLabel("app") {
				return admission.Deny("no app label")
			}
			return admission.Allow()
		}),
	)
	for _, path := range []string{admit.MutatePath("mod"), admit.ValidatePath("mod")} {
		b.Run(strings.TrimPrefix(strings.Split(path, "/")[1], "/"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				// The body already read, as the server's limits hand it over.
				r := httptest.NewRequest(http.MethodPost, path, readBody{bytes.NewBuffer(body)})
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != 200 {
					b.Fatal(w.Body.String())
				}
			}
		})
	}
}

// readBody is a request body already read: its Bytes are the whole body.
type readBody struct{ *bytes.Buffer }

func (readBody) Close() error { return nil }

// BenchmarkHandlerPod is BenchmarkHandler's mutation for a Pod of four
// containers, about 4 KB: a larger object to decode, copy and compare.
func BenchmarkHandlerPod(b *testing.B) {
	var containers []corev1.Container
	for i := range 4 {
		containers = append(containers, corev1.Container{
			Name: "c" + string(rune('0'+i)), Image: "registry.example/app@sha256:" + strings.Repeat("ab", 32),
			Args:         []string{"--listen=:8080", "--log-level=info", "--config=/etc/app/config.yaml"},
			Env:          []corev1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "REGION", Value: "eu-west"}},
			Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}},
		})
	}
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", Labels: map[string]string{"app": "bench", "tier": "web"},
			Annotations: map[string]string{"note": strings.Repeat("x", 600)}},
		Spec: corev1.PodSpec{Containers: containers},
	}
	body := review(b, admissionv1.Create, p, nil)
	h, _ := handler(admission.Fail, time.Second,
		admit.MutateBinding(corev1.SchemeGroupVersion.WithKind("Pod"), &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) error {
			r.SetLabel("vigil.dev/labeled", "true")
			return nil
		}),
	)
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, admit.MutatePath("mod"), readBody{bytes.NewBuffer(body)})
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 || !strings.Contains(w.Body.String(), `"patch"`) {
			b.Fatal(w.Body.String())
		}
	}
}

// BenchmarkHandlerPodValidations is a policy engine's validating path: 18
// validations of one capability over the Pod of BenchmarkHandlerPod, with
// the role's context and the recheck's record of lister reads, so that what
// vigil spends per binding shows beside what it spends per request.
func BenchmarkHandlerPodValidations(b *testing.B) {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", Labels: map[string]string{"app": "bench"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c0", Image: "registry.example/app:1"}, {Name: "c1", Image: "registry.example/app:1"}}},
	}
	body := review(b, admissionv1.Create, p, nil)
	var bindings []spec.Binding
	for i := range 18 {
		v := admit.ValidateBinding(gvk, &corev1.Pod{}, func(_ context.Context, r *admission.Request[*corev1.Pod]) admission.Verdict {
			if len(r.Object.Spec.Containers) == 0 {
				return admission.Deny("no containers")
			}
			return admission.Allow()
		})
		v.Capability, v.Name = "policies", fmt.Sprint("policy-", i)
		v.Operations = []admissionv1.Operation{admissionv1.Create, admissionv1.Update}
		bindings = append(bindings, v)
	}
	reg := prometheus.NewRegistry()
	m, err := admit.NewMetrics(reg, "mod")
	if err != nil {
		b.Fatal(err)
	}
	type key struct{}
	h := admit.NewHandler(bindings, admit.Options{Module: "mod", Timeout: time.Second, Metrics: m, Log: logr.Discard(), Recheck: true,
		Context: func(ctx context.Context, s store.Store) context.Context {
			return logr.NewContext(context.WithValue(ctx, key{}, s), logr.Discard())
		}})
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, admit.ValidatePath("mod"), readBody{bytes.NewBuffer(body)})
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 || !strings.Contains(w.Body.String(), `"allowed":true`) {
			b.Fatal(w.Body.String())
		}
	}
}

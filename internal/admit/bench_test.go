package admit_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/admit"
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

package testkit_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/testsupport/testenv"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

// TestMain starts a control plane when one is to be had (internal/testsupport/testenv):
// the proxy and webhook tests need it and say so, each with
// testenv.ControlPlane; the statistics tests do not.
func TestMain(m *testing.M) {
	flag.Parse()
	if _, skip, _ := testenv.Lookup(testing.Short()); skip == "" {
		e, err := vigiltest.Start(vigiltest.Options{})
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			os.Exit(1)
		}
		env = e
		code := m.Run()
		_ = e.Stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
}

// The real API server calls a handler that vigiltest serves over TLS on
// loopback, and the client that creates an object receives the denial.
func TestValidatingWebhookFailClosedDenies(t *testing.T) {
	testenv.ControlPlane(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	other := env.Namespace(t)

	var calls atomic.Int32
	srv, err := testkit.ServeWebhook(testkit.AdmissionFunc(func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		calls.Add(1)
		if strings.HasPrefix(req.Name, "canary-") {
			return &admissionv1.AdmissionResponse{Allowed: true}
		}
		return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
			Code: 403, Message: fmt.Sprintf("vigiltest denies %s/%s", req.Namespace, req.Name),
		}}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })

	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "vigiltest-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "deny.vigiltest.vigil.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(srv.URL("/validate")), CABundle: srv.CABundle},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
		}},
	}
	if err := env.Client.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cfg) })

	// The API server picks a new configuration up from its informer: wait until
	// the webhook is called (the canary is allowed), then expect the denial.
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; calls.Load() == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatal("the API server never called the webhook within 10s")
		}
		if _, err := env.Clientset.CoreV1().ConfigMaps(ns).Create(ctx, configMap(fmt.Sprint("canary-", i)), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create canary: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err = env.Clientset.CoreV1().ConfigMaps(ns).Create(ctx, configMap("blocked"), metav1.CreateOptions{})
	if err == nil {
		t.Fatal("create in the webhook's namespace succeeded, want a denial")
	}
	want := fmt.Sprintf("vigiltest denies %s/blocked", ns)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("create err = %v, want Forbidden containing %q", err, want)
	}
	// The namespace selector keeps the webhook away from every other namespace.
	before := calls.Load()
	if _, err := env.Clientset.CoreV1().ConfigMaps(other).Create(ctx, configMap("free"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create outside the webhook's namespace: %v", err)
	}
	if calls.Load() != before {
		t.Fatal("the webhook was called for a namespace its selector excludes")
	}
}

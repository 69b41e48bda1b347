package dev

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestLoopback(t *testing.T) {
	for u, want := range map[string]bool{
		"https://127.0.0.1:8443/mutate": true,
		"https://localhost:1/x":         true,
		"https://[::1]:9443/x":          true,
		"https://10.0.0.1:443/x":        false,
		"https://webhook.example.com/x": false,
	} {
		if got := loopback(&u); got != want {
			t.Errorf("loopback(%s) = %v, want %v", u, got, want)
		}
	}
	if loopback(nil) {
		t.Error("a Service reference (no URL) counted as loopback")
	}
}

func webhookConfigs(labels map[string]string, cc admissionregistrationv1.WebhookClientConfig) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	meta := metav1.ObjectMeta{Name: "m", Labels: labels}
	return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: meta, Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "a.m", ClientConfig: cc}}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: *meta.DeepCopy(), Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "b.m", ClientConfig: cc}}}
}

// What lacks vigil dev's label is a real install's: vigil dev refuses it,
// pointing at the command that removes it only when its webhooks call a
// loopback URL (a vigil dev from before the label), and never deletes it.
func TestRealInstallKept(t *testing.T) {
	ctx := context.Background()
	svc := admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "m-system", Name: "m"}}
	local := admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:40000/mutate")}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		cc     admissionregistrationv1.WebhookClientConfig
		real   bool
		hint   bool
	}{
		{"installed", map[string]string{"app.kubernetes.io/name": "m"}, svc, true, false},
		{"unlabelled on loopback", nil, local, true, true},
		{"vigil dev's", map[string]string{SessionLabel: "m"}, local, false, false},
		{"another module's session", map[string]string{SessionLabel: "other"}, local, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mut, val := webhookConfigs(tc.labels, tc.cc)
			cs := fake.NewClientset(mut, val)
			err := checkNotInstalled(ctx, cs, "m")
			if errors.Is(err, ErrRealInstall) != tc.real {
				t.Fatalf("checkNotInstalled: %v; want a real install %v", err, tc.real)
			}
			if err != nil && strings.Contains(err.Error(), "kubectl delete") != tc.hint {
				t.Errorf("checkNotInstalled: %v; want the kubectl hint %v", err, tc.hint)
			}
			removed, err := removeSessionObjects(ctx, cs, "m")
			if err != nil {
				t.Fatal(err)
			}
			var want []object
			if !tc.real {
				want = []object{{"MutatingWebhookConfiguration", "m"}, {"ValidatingWebhookConfiguration", "m"}}
			}
			if !slices.Equal(removed, want) {
				t.Errorf("removed %v, want %v", removed, want)
			}
			l, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if kept := len(l.Items) == 1; kept != tc.real {
				t.Errorf("MutatingWebhookConfiguration kept %v, want %v", kept, tc.real)
			}
		})
	}
}

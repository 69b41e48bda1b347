package admission

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/commands/modcli"
	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/shipping/manifests"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

// FailurePolicyIn a namespace outside a capability's InNamespaces, as
// Pepr's additionalWebhooks: the registered configurations hold a webhook of
// its own for it, with that failure policy, and through the API server the
// capability's bindings judge its requests there; a namespace named by
// neither is never sent.
func TestFailurePolicyInOutsideTheCapability(t *testing.T) {
	apps, extra, other, home := env.Namespace(t), env.Namespace(t), env.Namespace(t), env.Namespace(t)
	m := vigil.NewModule("additional", vigil.Options{Namespace: home})
	c := m.Capability("policies", vigil.InNamespaces(apps), vigil.FailurePolicyIn(admission.Ignore, extra))
	vigil.When(c, &corev1.ConfigMap{}).IsCreated().Named("need-team").
		Validate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
			if r.Object.Labels["team"] == "" {
				return admission.Deny("a ConfigMap needs a team label")
			}
			return admission.Allow()
		})
	validating := enforcedValidating(t, m)
	found := false
	for _, w := range validating.Webhooks {
		for _, r := range w.NamespaceSelector.MatchExpressions {
			if r.Operator == metav1.LabelSelectorOpIn && len(r.Values) == 1 && r.Values[0] == extra {
				found = true
				if ptr.Deref(w.FailurePolicy, admissionregistrationv1.Fail) != admissionregistrationv1.Ignore {
					t.Errorf("webhook %s for %s: failurePolicy %v, want Ignore", w.Name, extra, w.FailurePolicy)
				}
			}
		}
	}
	if !found {
		t.Fatalf("no webhook of its own selects %s: %+v", extra, validating.Webhooks)
	}

	// Serve the module, and register the configuration registration makes,
	// pointed at it.
	ca, certDir := testkit.ServingDir(t)
	addr := vigiltest.FreeAddr(t)
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())
	stop := testkit.RunAdmission(t, m, addr, "--cert-dir", certDir, "--kubeconfig", kubeconfig(t), "--shutdown-delay", "0s", "--register=false")
	defer stop()
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	testkit.Eventually(t, 30*time.Second, "admission ready", func() bool {
		resp, err := hc.Get("https://" + addr + "/readyz")
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	for i := range validating.Webhooks {
		w := &validating.Webhooks[i]
		path := ""
		if w.ClientConfig.Service != nil {
			path = ptr.Deref(w.ClientConfig.Service.Path, "")
		}
		w.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + addr + path), CABundle: ca.CertPEM}
		w.FailurePolicy = ptr.To(ptr.Deref(w.FailurePolicy, admissionregistrationv1.Fail))
	}
	validating.ResourceVersion = ""
	if err := env.Client.Create(t.Context(), validating); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), validating) })

	for _, ns := range []string{apps, extra} {
		testkit.Eventually(t, 15*time.Second, "the capability's binding judges "+ns, func() bool {
			err := env.Client.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "no-team-"}})
			return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "needs a team label")
		})
	}
	if err := env.Client.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "no-team"}}); err != nil {
		t.Errorf("a namespace neither InNamespaces nor FailurePolicyIn names: %v, want it never sent", err)
	}
}

// enforcedValidating is the validating webhook configuration registration
// makes for m once it enforces, with ConfigMaps its only kind.
func enforcedValidating(t *testing.T, m *vigil.Module) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	s, mistakes, _ := define.Resolved(m)
	if mistakes != nil {
		t.Fatal(mistakes)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	_, validating, err := manifests.Enforced(s, mapper)
	if err != nil {
		t.Fatal(err)
	}
	return validating
}

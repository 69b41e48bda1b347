package admission

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/admit"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

// The labeler's configmaps-need-app check (a ValidatingAdmissionPolicy
// refusing every ConfigMap without an app label) refuses another module's
// registration canary, which has none: that module must still reach
// "enforced", because its canary webhook is mutating, called before any
// validation, and the refused answer keeps the token it echoed.
func TestAnotherModuleEnforcesBesideTheLabelersChecks(t *testing.T) {
	ctx := t.Context()
	env.InstallModule(t, vigiltest.ModuleOptions{Dir: "../../examples/labeler"}) // its checks are in force; its webhooks are not registered
	home, apps := env.Namespace(t), env.Namespace(t)
	name := "beside-" + home[len(home)-6:]

	// The check does refuse the canary ConfigMap in the other module's
	// namespace.
	canary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: name + "-canary", Labels: map[string]string{registration.CanaryLabel: name}}}
	vigiltest.Eventually(t, 10*time.Second, func() error {
		err := env.Client.Create(ctx, canary.DeepCopy(), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "has no app label") {
			return &unexpected{err}
		}
		return nil
	})

	// The other module: a stand-in replica that echoes canaries and denies
	// every Pod of apps.
	srv, err := testkit.ServeWebhook(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		testkit.AdmissionFunc(func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			if r.URL.Path == admit.CanaryPath(name) {
				var cm corev1.ConfigMap
				_ = json.Unmarshal(req.Object.Raw, &cm)
				return &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{admit.CanaryWarning(cm.Data["token"])}}
			}
			return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Code: 403, Message: "denied by " + name}}
		}).ServeHTTP(w, r)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	mut, val := registration.Bootstrap(name)
	for _, o := range []client.Object{mut, val} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(env.Config, hc)
	if err != nil {
		t.Fatal(err)
	}
	b := define.ValidateBinding(corev1.SchemeGroupVersion.WithKind("Pod"), &corev1.Pod{}, func(context.Context, *admission.Request[*corev1.Pod]) admission.Verdict { return admission.Allow() })
	b.Capability, b.Name, b.Operations, b.Namespaces = "policies", "deny", []admissionv1.Operation{admissionv1.Create}, []string{apps}
	base := strings.TrimSuffix(srv.URL(""), "/")
	r := registration.New(env.Clientset, registration.Options{
		Module: name, Namespace: home, Version: "1.0.0", Bindings: []spec.Binding{b},
		ClientConfig: func(path string) admissionregistrationv1.WebhookClientConfig {
			u := base + path
			return admissionregistrationv1.WebhookClientConfig{URL: &u}
		},
		CABundle: func() []byte { return srv.CABundle }, Mapper: mapper, Log: logr.Discard(),
	})
	var stuck error
	r.OnStuck(func(problem error) { stuck = problem })
	regCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := r.Register(regCtx); err != nil {
		t.Fatalf("the other module's registration beside the labeler's checks: %v (stuck: %v)", err, stuck)
	}
	rec, err := registration.ReadRecord(ctx, env.Clientset, name)
	if err != nil || rec.State != registration.StateEnforced {
		t.Fatalf("record %+v, %v: want enforced", rec, err)
	}
}

type unexpected struct{ err error }

func (u *unexpected) Error() string {
	if u.err == nil {
		return "the dry-run canary ConfigMap was admitted: want refused by the labeler's configmaps-need-app check"
	}
	return "the dry-run canary ConfigMap: " + u.err.Error() + ": want refused by the labeler's configmaps-need-app check"
}

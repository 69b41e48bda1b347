package registration_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/serving/certs"
	"github.com/vigilkit/vigil/internal/serving/registration"
)

// registered registers a module and returns its registrar and its enforced
// mutating configuration.
func registered(t *testing.T, prefix string) (*registration.Registrar, registration.Options, string, string) {
	t.Helper()
	home, apps := env.Namespace(t), env.Namespace(t)
	name := prefix + "-" + home[len(home)-6:]
	bootstrap(t, name)
	m := newModule(t, name)
	opts := options(t, name, home, apps, m, strings.TrimSuffix(m.srv.URL(""), "/"))
	r := registration.New(env.Clientset, opts)
	if err := r.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r, opts, name, apps
}

// sync runs Sync and checks what it says drifted.
func syncWants(t *testing.T, r *registration.Registrar, want ...string) {
	t.Helper()
	var told []string
	r.OnDrift(func(d []string) { told = d })
	drift, err := r.Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(drift, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("drift %q lacks %q", drift, w)
		}
	}
	if strings.Join(told, "\n") != all {
		t.Errorf("OnDrift was told %q, Sync returned %q", told, drift)
	}
}

// inSync checks the configuration is back as registered, and that a second
// Sync finds nothing and writes nothing.
func inSync(t *testing.T, r *registration.Registrar, name string, want admissionregistrationv1.MutatingWebhook) {
	t.Helper()
	cfg, rec := mutating(t, name)
	if rec.State != "enforced" || len(cfg.Webhooks) != 2 { // the capability's and the canary
		t.Fatalf("after the repair: record %+v, webhooks %+v", rec, cfg.Webhooks)
	}
	got := cfg.Webhooks[0]
	if *got.FailurePolicy != admissionregistrationv1.Fail || got.Rules[0].Resources[0] != "pods" ||
		!strings.Contains(got.NamespaceSelector.String(), "NotIn") || string(got.ClientConfig.CABundle) != string(want.ClientConfig.CABundle) {
		t.Fatalf("after the repair the webhook is %+v, want as registered %+v", got, want)
	}
	drift, err := r.Sync(t.Context())
	if err != nil || len(drift) != 0 {
		t.Fatalf("a second Sync: drift %q, err %v; want none", drift, err)
	}
	if after, _ := mutating(t, name); after.ResourceVersion != cfg.ResourceVersion {
		t.Fatal("a Sync of configurations in sync wrote them")
	}
}

// Edited to failurePolicy Ignore with a selector that matches nothing and
// other rules: Sync says so and writes the spec back, enforced at once.
func TestSyncRepairsAnEditedWebhook(t *testing.T) {
	r, _, name, _ := registered(t, "edit")
	cfg, rec := mutating(t, name)
	want := *cfg.Webhooks[0].DeepCopy()
	cfg.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	cfg.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"matches": "nothing"}}
	cfg.Webhooks[0].Rules[0].Resources = []string{"secrets"}
	cfg.Webhooks[0].TimeoutSeconds = ptr.To[int32](30)
	if err := env.Client.Update(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	syncWants(t, r, "failurePolicy Ignore (want Fail)", "namespaceSelector", "rules", "timeoutSeconds 30 (want 10)")
	inSync(t, r, name, want)
	_, after := mutating(t, name)
	if after.Generation != rec.Generation+1 {
		t.Fatalf("generation %d → %d: an edit that leaves reachability alone is enforced in one write", rec.Generation, after.Generation)
	}
	// The record keeps the repair, with what drifted, for vigil status.
	if len(rec.Repairs) != 0 || len(after.Repairs) != 1 || !strings.Contains(after.Repairs[0].Drift, "failurePolicy Ignore (want Fail)") || after.Repairs[0].At == "" {
		t.Fatalf("repairs %+v → %+v: want the one repair recorded with its drift", rec.Repairs, after.Repairs)
	}
}

// Emptied in place (a replace with the manifests' empty configuration), or
// deleted and re-applied empty: Sync registers again through the canary.
func TestSyncRepairsAnEmptiedConfiguration(t *testing.T) {
	r, _, name, _ := registered(t, "empty")
	cfg, _ := mutating(t, name)
	want := *cfg.Webhooks[0].DeepCopy()
	cfg.Webhooks = nil
	delete(cfg.Annotations, registration.Annotation)
	if err := env.Client.Update(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	syncWants(t, r, registration.Emptied)
	inSync(t, r, name, want)

	mut, _ := registration.Bootstrap(name)
	if err := env.Client.Delete(t.Context(), mut); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Sync(t.Context()); !errors.Is(err, registration.ErrMissing) {
		t.Fatalf("Sync after the configuration was deleted: err = %v, want ErrMissing", err)
	}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, &admissionregistrationv1.MutatingWebhookConfiguration{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Sync re-created the deleted configuration: %v", err)
	}
	mut, _ = registration.Bootstrap(name)
	if err := env.Client.Create(t.Context(), mut); err != nil {
		t.Fatal(err)
	}
	syncWants(t, r, registration.Emptied)
	inSync(t, r, name, want)
}

// A wrong caBundle puts reachability in question: Sync writes the right one
// and proves reachability again before enforcing.
func TestSyncRepairsAWrongCABundle(t *testing.T) {
	r, _, name, _ := registered(t, "ca")
	other, err := certs.NewCA("someone-else", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg, rec := mutating(t, name)
	want := *cfg.Webhooks[0].DeepCopy()
	cfg.Webhooks[0].ClientConfig.CABundle = other.CertPEM
	if err := env.Client.Update(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	syncWants(t, r, "caBundle")
	inSync(t, r, name, want)
	if _, after := mutating(t, name); after.Generation != rec.Generation+2 {
		t.Fatalf("generation %d → %d: want probing, then enforced", rec.Generation, after.Generation)
	}
}

// During a rollout an older replica never "repairs" the newer version's
// registration, even when it drifted: the Record's version decides.
func TestSyncLeavesANewerVersionsRegistration(t *testing.T) {
	_, opts, name, _ := registered(t, "newer")
	newOpts := opts
	newOpts.Version = "1.1.0"
	if err := registration.New(env.Clientset, newOpts).Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	cfg, rec := mutating(t, name)
	cfg.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	if err := env.Client.Update(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := registration.New(env.Clientset, opts).Sync(t.Context()); !errors.Is(err, registration.ErrNewer) {
		t.Fatalf("the older version's Sync: err = %v, want ErrNewer", err)
	}
	after, afterRec := mutating(t, name)
	if !reflect.DeepEqual(afterRec, rec) || *after.Webhooks[0].FailurePolicy != admissionregistrationv1.Ignore {
		t.Fatalf("the older version wrote the newer one's configuration: record %+v → %+v", rec, afterRec)
	}
	// The newer version repairs it.
	drift, err := registration.New(env.Clientset, newOpts).Sync(t.Context())
	if err != nil || !strings.Contains(strings.Join(drift, " "), "failurePolicy Ignore") {
		t.Fatalf("the newer version's Sync: drift %q, err %v", drift, err)
	}
}

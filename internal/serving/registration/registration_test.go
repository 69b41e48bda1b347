package registration_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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

var env *vigiltest.Env

func TestMain(m *testing.M) {
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

// module is a stand-in admission server: it denies every Pod (so a test sees
// at once whether the webhook applies) and echoes canaries as a replica does.
type module struct {
	srv *testkit.WebhookServer
}

func newModule(t *testing.T, name string) *module {
	t.Helper()
	m := &module{}
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
	m.srv = srv
	return m
}

// bootstrap creates the module's empty configurations, as its manifests do.
func bootstrap(t *testing.T, name string) {
	t.Helper()
	mut, val := registration.Bootstrap(name)
	for _, o := range []client.Object{mut, val} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
}

func options(t *testing.T, name, home, apps string, m *module, base string) registration.Options {
	t.Helper()
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(env.Config, hc)
	if err != nil {
		t.Fatal(err)
	}
	b := define.MutateBinding(corev1.SchemeGroupVersion.WithKind("Pod"), &corev1.Pod{}, func(context.Context, *admission.Request[*corev1.Pod]) error { return nil })
	b.Capability, b.Name, b.Operations, b.Namespaces = "policies", "label", []admissionv1.Operation{admissionv1.Create}, []string{apps}
	return registration.Options{
		Module: name, Namespace: home, Version: "1.0.0", Bindings: []spec.Binding{b},
		Gated: []spec.Exclusion{{Version: "v1", Kind: "Pod", Namespace: apps, Name: "gated", Scope: spec.Namespaced}},
		ClientConfig: func(path string) admissionregistrationv1.WebhookClientConfig {
			u := base + path
			return admissionregistrationv1.WebhookClientConfig{URL: &u}
		},
		CABundle: func() []byte { return m.srv.CABundle },
		Mapper:   mapper,
		Log:      logr.Discard(),
	}
}

func pod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
}

func mutating(t *testing.T, name string) (*admissionregistrationv1.MutatingWebhookConfiguration, registration.Record) {
	t.Helper()
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, cfg); err != nil {
		t.Fatal(err)
	}
	var rec registration.Record
	_ = json.Unmarshal([]byte(cfg.Annotations[registration.Annotation]), &rec)
	return cfg, rec
}

// grant gives a ServiceAccount exactly what registration needs: Rule (get and
// patch on the module's two configurations) and CanaryRule in its namespace.
func grant(t *testing.T, name, home, sa string) kubernetes.Interface {
	t.Helper()
	ctx := t.Context()
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name + "-registration"}, Rules: []rbacv1.PolicyRule{registration.Rule(name)}}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-registration"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: home, Name: sa}},
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "canary"}, Rules: []rbacv1.PolicyRule{registration.CanaryRule()}}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "canary"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "canary"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: home, Name: sa}},
	}
	for _, o := range []client.Object{cr, crb, role, rb} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), cr)
		_ = env.Client.Delete(context.Background(), crb)
	})
	cs, err := kubernetes.NewForConfig(env.AsServiceAccountConfig(home, sa))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// A module holding only the registration rule fills its configurations,
// proves reachability, enforces Fail — and can register nothing else. Its
// webhooks apply where its capability does, never to the objects its gates
// wait for.
func TestRegisterWithOnlyTheRegistrationRule(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	name := "reg-" + home[len(home)-6:]
	bootstrap(t, name)
	m := newModule(t, name)
	cs := grant(t, name, home, "module")
	r := registration.New(cs, options(t, name, home, apps, m, strings.TrimSuffix(m.srv.URL(""), "/")))

	// RBAC reaches the authorizer through informers: retry while forbidden.
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := r.Register(ctx)
		if err == nil {
			break
		}
		if !apierrors.IsForbidden(errors.Unwrap(err)) && !strings.Contains(err.Error(), "forbidden") || time.Now().After(deadline) {
			t.Fatalf("register: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cfg, rec := mutating(t, name)
	if rec.State != "enforced" || rec.Version != "1.0.0" || rec.Hash == "" {
		t.Fatalf("registration record %+v", rec)
	}
	if len(cfg.Webhooks) != 2 || *cfg.Webhooks[0].FailurePolicy != admissionregistrationv1.Fail || !spec.IsCanary(cfg.Webhooks[1].Name) {
		t.Fatalf("webhooks %+v: want the capability's, enforcing Fail, and the canary", cfg.Webhooks)
	}
	w := cfg.Webhooks[0]
	if w.Name != "policies.mutate."+name+".vigil.dev" || w.Rules[0].Resources[0] != "pods" || w.Rules[0].Operations[0] != admissionregistrationv1.Create {
		t.Fatalf("webhook %+v", w)
	}

	// Enforced where the capability applies; the gated Pod is let through.
	deadline = time.Now().Add(10 * time.Second)
	for {
		err := env.Client.Create(ctx, pod(apps, "blocked"))
		if err != nil && strings.Contains(err.Error(), "denied by "+name) {
			break
		}
		if err == nil {
			_ = env.Client.Delete(ctx, pod(apps, "blocked"))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the module's webhook never applied: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := env.Client.Create(ctx, pod(apps, "gated")); err != nil {
		t.Fatalf("the object a gate waits for was not let through: %v", err)
	}
	if err := env.Client.Create(ctx, pod(home, "own-namespace")); err != nil {
		t.Fatalf("a Pod in the module's own namespace was not let through: %v", err)
	}

	// The rule allows nothing else: no other configuration can be made.
	other := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "something-else"}}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, other, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("create another configuration with the registration rule: err = %v, want Forbidden", err)
	}

	// A second replica of the same version leaves the enforced configuration
	// as it is: no flip back to Ignore.
	before := rec.Generation
	if err := registration.New(cs, options(t, name, home, apps, m, strings.TrimSuffix(m.srv.URL(""), "/"))).Register(ctx); err != nil {
		t.Fatal(err)
	}
	if _, rec := mutating(t, name); rec.Generation != before {
		t.Fatalf("generation %d → %d: a replica of the same version rewrote the configuration", before, rec.Generation)
	}

	// Unregister empties them.
	if err := r.Unregister(ctx); err != nil {
		t.Fatal(err)
	}
	if cfg, _ := mutating(t, name); len(cfg.Webhooks) != 0 {
		t.Fatalf("%d webhooks left after unregister", len(cfg.Webhooks))
	}
}

// While the API server cannot reach the module, its configuration stays
// Ignore and nothing is rejected; enforcement follows the canary.
func TestStaysIgnoreUntilReachable(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	name := "reach-" + home[len(home)-6:]
	bootstrap(t, name)
	m := newModule(t, name)
	front := newFront(t, strings.TrimPrefix(strings.TrimSuffix(m.srv.URL(""), "/"), "https://"))
	front.Outage(5 * time.Second)
	r := registration.New(env.Clientset, options(t, name, home, apps, m, "https://"+front.Addr()))
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- r.Register(ctx) }()

	probing := func() error {
		cfg, rec := mutating(t, name)
		if rec.State != "probing" || len(cfg.Webhooks) != 2 || *cfg.Webhooks[0].FailurePolicy != admissionregistrationv1.Ignore {
			return fmt.Errorf("while unreachable: record %+v, webhooks %+v: want probing with Ignore", rec, cfg.Webhooks)
		}
		return nil
	}
	// Well inside the 5s outage: probing within 2s, and still probing a
	// second later.
	vigiltest.Eventually(t, 2*time.Second, probing)
	vigiltest.Consistently(t, time.Second, probing)
	for i := range 5 {
		if err := env.Client.Create(ctx, pod(apps, "during-"+string(rune('a'+i)))); err != nil {
			t.Fatalf("a request was rejected while the module was unreachable: %v", err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < 4*time.Second {
		t.Fatalf("enforced after %s, before the front let connections through", took)
	}
	if _, rec := mutating(t, name); rec.State != "enforced" {
		t.Fatalf("record %+v after the canary passed", rec)
	}
}

// During a rollout the newer version's configuration is never overwritten by
// the older; a configuration an admin deleted is not recreated.
func TestNewerVersionWinsAndDeletedStaysDeleted(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	name := "roll-" + home[len(home)-6:]
	bootstrap(t, name)
	m := newModule(t, name)
	base := strings.TrimSuffix(m.srv.URL(""), "/")
	newOpts := options(t, name, home, apps, m, base)
	newOpts.Version = "1.1.0"
	if err := registration.New(env.Clientset, newOpts).Register(ctx); err != nil {
		t.Fatal(err)
	}
	_, rec := mutating(t, name)
	err := registration.New(env.Clientset, options(t, name, home, apps, m, base)).Register(ctx)
	if !errors.Is(err, registration.ErrNewer) {
		t.Fatalf("the older version's register: err = %v, want ErrNewer", err)
	}
	if _, after := mutating(t, name); !reflect.DeepEqual(after, rec) {
		t.Fatalf("record %+v → %+v: the older version overwrote the newer", rec, after)
	}
	// The older version's admission learns that a newer one is registered;
	// the newer one sees none newer than itself.
	if v, err := registration.New(env.Clientset, options(t, name, home, apps, m, base)).Newer(ctx); err != nil || v != "1.1.0" {
		t.Fatalf("the older version's Newer = %q, %v; want 1.1.0", v, err)
	}
	if v, err := registration.New(env.Clientset, newOpts).Newer(ctx); err != nil || v != "" {
		t.Fatalf("the newer version's Newer = %q, %v; want none", v, err)
	}

	mut, _ := registration.Bootstrap(name)
	if err := env.Client.Delete(ctx, mut); err != nil {
		t.Fatal(err)
	}
	err = registration.New(env.Clientset, newOpts).Register(ctx)
	if !errors.Is(err, registration.ErrMissing) {
		t.Fatalf("register after an admin deleted the configuration: err = %v, want ErrMissing", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.MutatingWebhookConfiguration{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the deleted configuration came back: %v", err)
	}
	if _, err := registration.New(env.Clientset, options(t, name, home, apps, m, base)).Newer(ctx); !errors.Is(err, registration.ErrMissing) {
		t.Fatalf("Newer after an admin deleted the configuration: err = %v, want ErrMissing", err)
	}

}

func TestRuleIsGetAndPatchOnTheTwoNames(t *testing.T) {
	r := registration.Rule("uds-core")
	if strings.Join(r.Verbs, ",") != "get,patch" || len(r.ResourceNames) != 1 || r.ResourceNames[0] != "uds-core" {
		t.Fatalf("rule %+v", r)
	}
	mut, val := registration.Bootstrap("uds-core")
	if mut.Name != "uds-core" || val.Name != "uds-core" || len(mut.Webhooks)+len(val.Webhooks) != 0 {
		t.Fatalf("bootstrap %v %v: want two empty configurations named after the module", mut, val)
	}
}

// A fail-closed capability's static webhooks reject while the module is down
// — and never the objects its gates wait for.
func TestFailClosedStaticWebhooks(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	name := "closed-" + home[len(home)-6:]
	m := newModule(t, name)
	opts := options(t, name, home, apps, m, "https://127.0.0.1:1") // nothing listens there
	opts.Bindings[0].FailClosed = true
	mut, val, err := registration.New(env.Clientset, opts).Static()
	if err != nil {
		t.Fatal(err)
	}
	if mut.Name != name+"-fail-closed" || len(mut.Webhooks) != 1 || len(val.Webhooks) != 0 || *mut.Webhooks[0].FailurePolicy != admissionregistrationv1.Fail {
		t.Fatalf("static configurations %+v / %+v", mut, val)
	}
	if err := env.Client.Create(ctx, mut); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), mut) })
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := env.Client.Create(ctx, pod(apps, "blocked"))
		if err != nil && strings.Contains(err.Error(), "failed calling webhook") {
			break
		}
		if err == nil {
			_ = env.Client.Delete(ctx, pod(apps, "blocked"))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fail-closed webhook never rejected while the module was down: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := env.Client.Create(ctx, pod(apps, "gated")); err != nil {
		t.Fatalf("the fail-closed webhook rejected the object a gate waits for: %v", err)
	}
	// The dynamic registration leaves fail-closed bindings out.
	bootstrap(t, name)
	if err := registration.New(env.Clientset, options(t, name, home, apps, m, strings.TrimSuffix(m.srv.URL(""), "/"))).Register(ctx); err != nil {
		t.Fatal(err)
	}
	opts.ClientConfig = func(path string) admissionregistrationv1.WebhookClientConfig {
		u := strings.TrimSuffix(m.srv.URL(""), "/") + path
		return admissionregistrationv1.WebhookClientConfig{URL: &u}
	}
	r := registration.New(env.Clientset, opts)
	if err := r.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if cfg, _ := mutating(t, name); len(cfg.Webhooks) != 1 || !spec.IsCanary(cfg.Webhooks[0].Name) {
		t.Fatalf("the dynamic configuration holds %d webhooks, want only the canary: none of a fail-closed capability", len(cfg.Webhooks))
	}
}

// Fail-closed configurations shipped without a CA get the module's serving
// CA once it serves; a second pass changes nothing.
func TestInjectCABundleIntoFailClosedConfigurations(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	name := "inject-" + home[len(home)-6:]
	m := newModule(t, name)
	opts := options(t, name, home, apps, m, "https://127.0.0.1:1")
	opts.Bindings[0].FailClosed = true
	withCA := opts.CABundle
	opts.CABundle = func() []byte { return nil }
	mut, _, err := registration.New(env.Clientset, opts).Static()
	if err != nil {
		t.Fatal(err)
	}
	if len(mut.Webhooks) == 0 || len(mut.Webhooks[0].ClientConfig.CABundle) != 0 {
		t.Fatalf("static configuration without a CA: %+v", mut.Webhooks)
	}
	if err := env.Client.Create(ctx, mut); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), mut) })
	opts.CABundle = withCA
	r := registration.New(env.Clientset, opts)
	if err := r.InjectCABundle(ctx); err != nil {
		t.Fatal(err)
	}
	got := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: spec.StaticName(name)}, got); err != nil {
		t.Fatal(err)
	}
	for _, w := range got.Webhooks {
		if string(w.ClientConfig.CABundle) != string(withCA()) {
			t.Fatalf("webhook %s has caBundle %q after the injection", w.Name, w.ClientConfig.CABundle)
		}
	}
	rv := got.ResourceVersion
	if err := r.InjectCABundle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: spec.StaticName(name)}, got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != rv {
		t.Fatal("a second injection with the same CA wrote the configuration again")
	}
}

// The canary proves reachability whichever replica answers it: during a
// rollout the new version's canary may reach an old replica, which echoes it.
func TestCanaryAnsweredByAnotherReplica(t *testing.T) {
	ctx := t.Context()
	home, apps := env.Namespace(t), env.Namespace(t)
	name := "other-" + home[len(home)-6:]
	bootstrap(t, name)
	m := newModule(t, name)
	opts := options(t, name, home, apps, m, strings.TrimSuffix(m.srv.URL(""), "/"))
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := registration.New(env.Clientset, opts).Register(ctx); err != nil {
		t.Fatal(err)
	}
	if _, rec := mutating(t, name); rec.State != "enforced" {
		t.Fatalf("record %+v: want enforced on another replica's echo", rec)
	}
}

package testkit_test

import (
	"context"
	"errors"
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
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
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

// Cutting every connection breaks an open watch; a retrying watch resumes
// once the proxy lets connections through again and sees what was created
// while it was cut off.
func TestOutageProxyBreaksAndResumesWatches(t *testing.T) {
	testenv.ControlPlane(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	proxy, err := vigiltest.NewOutageProxy(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	cs := kubernetes.NewForConfigOrDie(proxy.Config())

	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list through the proxy: %v", err)
	}
	plain, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return cs.CoreV1().ConfigMaps(ns).Watch(ctx, o)
	}}
	retry, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, lw)
	if err != nil {
		t.Fatal(err)
	}
	defer retry.Stop()
	// Both watches are open before the cut: each sees a ConfigMap created now.
	if _, err := env.Clientset.CoreV1().ConfigMaps(ns).Create(ctx, configMap("before-outage"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name string
		w    watch.Interface
	}{{"plain", plain}, {"retrying", retry}} {
		select {
		case ev := <-w.w.ResultChan():
			if cm, ok := ev.Object.(*corev1.ConfigMap); !ok || ev.Type != watch.Added || cm.Name != "before-outage" {
				t.Fatalf("the %s watch's first event is %s %T, want ADDED before-outage", w.name, ev.Type, ev.Object)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the %s watch did not see a ConfigMap created before the cut within 10s", w.name)
		}
	}

	const outage = 2 * time.Second
	if cut := proxy.Outage(outage); cut == 0 {
		t.Fatal("Outage cut no connections, want the open watches' connections cut")
	}
	began := time.Now()
	select {
	case _, open := <-plain.ResultChan():
		if open {
			t.Fatal("the plain watch delivered an event, want it closed by the cut")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the plain watch stayed open after its connection was reset")
	}
	// client-go retries a GET whose connection was reset; bound it well inside
	// the outage so the answer is the outage's.
	listCtx, cancelList := context.WithTimeout(ctx, outage/2)
	_, err = cs.CoreV1().ConfigMaps(ns).List(listCtx, metav1.ListOptions{})
	cancelList()
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("a list through the proxy during the outage: err = %v, want connection refused", err)
	}
	if _, err := env.Clientset.CoreV1().ConfigMaps(ns).Create(ctx, configMap("during-outage"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = watchtools.UntilWithoutRetry(waitCtx, retry, func(ev watch.Event) (bool, error) {
		cm, ok := ev.Object.(*corev1.ConfigMap)
		return ok && ev.Type == watch.Added && cm.Name == "during-outage", nil
	})
	if err != nil {
		t.Fatalf("the retrying watch did not resume: %v", err)
	}
	if waited := time.Since(began); waited < outage-100*time.Millisecond {
		t.Fatalf("the watch resumed after %s, before the %s outage ended", waited, outage)
	}
	st := proxy.Stats()
	if st.Reset == 0 || st.Outages != 1 {
		t.Fatalf("proxy stats %+v: want connections reset by one outage", st)
	}
}

func TestOutageProxyRejectsBadHost(t *testing.T) {
	testenv.ControlPlane(t)
	cfg := *env.Config
	cfg.Host = "::not a url"
	_, err := vigiltest.NewOutageProxy(&cfg)
	if err == nil || !strings.Contains(err.Error(), "expected the config's host to be a URL") {
		t.Fatalf("err = %v, want it to say what host was expected", err)
	}
	if errors.Unwrap(err) != nil {
		t.Fatalf("err %v wraps %v; the message should stand alone", err, errors.Unwrap(err))
	}
}

// With WatchDelay, watch events arrive that much after the API server sent
// them, while other requests pass at once; Outage still cuts everything.
func TestOutageProxyHoldsBackWatchEvents(t *testing.T) {
	testenv.ControlPlane(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	const delay = 600 * time.Millisecond
	proxy, err := vigiltest.NewOutageProxyWith(env.Config, vigiltest.ProxyOptions{WatchDelay: delay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	cs := kubernetes.NewForConfigOrDie(proxy.Config())
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list through the proxy: %v", err)
	}
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	created := time.Now()
	if _, err := env.Clientset.CoreV1().ConfigMaps(ns).Create(ctx, configMap("held"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A list through the proxy is not held: it sees the ConfigMap at once.
	got, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(got.Items) != 1 {
		t.Fatalf("a list through the proxy right after the create: %v items, err %v; want 1", len(got.Items), err)
	}
	if d := time.Since(created); d >= delay {
		t.Fatalf("the create and a list took %s, want less than the watch delay %s for this test to mean anything", d, delay)
	}
	select {
	case ev := <-w.ResultChan():
		if cm, ok := ev.Object.(*corev1.ConfigMap); !ok || ev.Type != watch.Added || cm.Name != "held" {
			t.Fatalf("the watch's first event is %s %T, want ADDED held", ev.Type, ev.Object)
		}
		if d := time.Since(created); d < delay {
			t.Fatalf("the watch event arrived %s after the create, want at least the delay %s", d, delay)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch saw nothing within 10s")
	}
	if s := proxy.Stats(); s.Watches < 1 {
		t.Fatalf("stats %+v: want the watch counted as held", s)
	}
	if cut := proxy.Outage(time.Second); cut == 0 {
		t.Fatal("Outage cut no connections, want the watch's cut")
	}
	select {
	case _, open := <-w.ResultChan():
		if open {
			t.Fatal("the watch delivered an event, want it closed by the cut")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch stayed open after the cut")
	}
}

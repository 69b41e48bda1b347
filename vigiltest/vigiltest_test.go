package vigiltest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

func TestCRDEstablishedAndCustomResourceCreated(t *testing.T) {
	ctx := t.Context()
	data, err := os.ReadFile("testdata/widgets-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDYAML(data); err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "widgets.test.vigil.dev"}, crd); err != nil {
		t.Fatal(err)
	}
	established := false
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			established = true
		}
	}
	if !established {
		t.Fatalf("CRD conditions %+v: want Established=True", crd.Status.Conditions)
	}

	ns := env.Namespace(t)
	w := &unstructured.Unstructured{}
	w.SetAPIVersion("test.vigil.dev/v1")
	w.SetKind("Widget")
	w.SetNamespace(ns)
	w.SetName("first")
	if err := unstructured.SetNestedField(w.Object, int64(3), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, w); err != nil {
		t.Fatalf("create Widget: %v", err)
	}
	got := &unstructured.Unstructured{}
	got.SetAPIVersion("test.vigil.dev/v1")
	got.SetKind("Widget")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(w), got); err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); size != 3 {
		t.Fatalf("Widget spec.size = %d, want 3", size)
	}
}

func TestDecodeCRDsRejectsOtherKinds(t *testing.T) {
	_, err := vigiltest.DecodeCRDs([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"))
	if err == nil || !strings.Contains(err.Error(), `expected kind CustomResourceDefinition, got "ConfigMap"`) {
		t.Fatalf("err = %v, want it to name the expected and the seen kind", err)
	}
}

func TestWatchSeesCreatedObject(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	w, err := env.Clientset.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := env.Clientset.CoreV1().ConfigMaps(ns).Create(ctx, configMap("seen"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ev, err := watchtools.UntilWithoutRetry(waitCtx, w, func(ev watch.Event) (bool, error) {
		cm, ok := ev.Object.(*corev1.ConfigMap)
		return ok && ev.Type == watch.Added && cm.Name == "seen", nil
	})
	if err != nil {
		t.Fatalf("watch did not see the ConfigMap created: %v", err)
	}
	if ev.Object.(*corev1.ConfigMap).Namespace != ns {
		t.Fatalf("event for namespace %s, want %s", ev.Object.(*corev1.ConfigMap).Namespace, ns)
	}
}

// The real API server calls a handler that vigiltest serves over TLS on
// loopback, and the client that creates an object receives the denial.
func TestValidatingWebhookFailClosedDenies(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	other := env.Namespace(t)

	var calls atomic.Int32
	srv, err := vigiltest.ServeWebhook(vigiltest.AdmissionFunc(func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
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

// With the watch cache off, compacting etcd makes a watch resumed from an
// older resourceVersion receive 410 Gone; with it on (the default), the same
// watch is replayed from the cache. Both are asserted, so the option is shown
// to matter.
func TestCompactEtcdGivesResumedWatch410(t *testing.T) {
	gone, err := vigiltest.Start(vigiltest.Options{DisableWatchCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Stop()
	for _, tc := range []struct {
		name     string
		env      *vigiltest.Env
		wantGone bool
	}{
		{"watch cache off", gone, true},
		{"watch cache on", env, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			ns := tc.env.Namespace(t)
			cms := tc.env.Clientset.CoreV1().ConfigMaps(ns)
			first, err := cms.Create(ctx, configMap("history"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cur := first
			for i := range 5 {
				cur.Data = map[string]string{"n": fmt.Sprint(i)}
				if cur, err = cms.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := tc.env.CompactEtcd(ctx); err != nil {
				t.Fatal(err)
			}
			w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
			if err != nil {
				t.Fatalf("open watch: %v", err)
			}
			defer w.Stop()
			select {
			case ev := <-w.ResultChan():
				status, isStatus := ev.Object.(*metav1.Status)
				got410 := ev.Type == watch.Error && isStatus && status.Code == 410
				if got410 != tc.wantGone {
					t.Fatalf("first event %s %+v: got 410 = %v, want %v", ev.Type, ev.Object, got410, tc.wantGone)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no event from the resumed watch within 10s")
			}
		})
	}
}

// A ServiceAccount's client is refused until RBAC grants it access.
func TestAsServiceAccountIsAuthorizedByRBAC(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	sa, err := env.AsServiceAccount(ns, "reader")
	if err != nil {
		t.Fatal(err)
	}
	err = sa.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("list before any grant: err = %v, want Forbidden", err)
	}
	if !strings.Contains(err.Error(), "system:serviceaccount:"+ns+":reader") {
		t.Fatalf("denial %q does not name the ServiceAccount", err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-configmaps"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "reader"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The authorizer learns of new bindings through its informers.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err = sa.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))
		if err == nil {
			break
		}
		if !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			t.Fatalf("list after the grant: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The grant is exactly what the Role says: another namespace stays closed.
	if err := sa.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("default")); !apierrors.IsForbidden(err) {
		t.Fatalf("list in default: err = %v, want Forbidden", err)
	}
}

func TestNamespaceIsFreshPerTestAndDeletedAfter(t *testing.T) {
	var names []string
	for i := range 2 {
		t.Run(fmt.Sprint("sub", i), func(t *testing.T) {
			ns := env.Namespace(t)
			got := &corev1.Namespace{}
			if err := env.Client.Get(t.Context(), client.ObjectKey{Name: ns}, got); err != nil {
				t.Fatal(err)
			}
			if got.Labels[vigiltest.TestNamespaceLabel] != "true" {
				t.Fatalf("namespace labels %v: want %s=true", got.Labels, vigiltest.TestNamespaceLabel)
			}
			if !strings.HasPrefix(ns, "testnamespaceisfreshpertestanddeletedafter-sub") {
				t.Fatalf("namespace %q is not named after its test", ns)
			}
			names = append(names, ns)
		})
	}
	if len(names) != 2 || names[0] == names[1] {
		t.Fatalf("namespaces %v: want two distinct ones", names)
	}
	for _, n := range names {
		got := &corev1.Namespace{}
		err := env.Client.Get(t.Context(), client.ObjectKey{Name: n}, got)
		if err == nil && got.DeletionTimestamp == nil {
			t.Fatalf("namespace %s still exists without a deletion timestamp after its test", n)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
}

func TestOutageProxyRejectsBadHost(t *testing.T) {
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

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
}

// A Process keeps its output, reports its exit code, and stops on SIGTERM.
func TestProcess(t *testing.T) {
	p := vigiltest.StartProcess(t, []string{"GREETING=hello"}, "sh", "-c", `echo "$GREETING"; exit 3`)
	if code := p.Wait(t, 10*time.Second); code != 3 {
		t.Fatalf("exit code %d, want 3", code)
	}
	p.WaitOutput(t, "hello", time.Second)
	long := vigiltest.StartProcess(t, nil, "sh", "-c", `trap 'echo stopping; exit 0' TERM; echo started; while :; do sleep 0.05; done`)
	long.WaitOutput(t, "started", 5*time.Second)
	long.Running(t, 100*time.Millisecond)
	if code := long.Stop(t, 5*time.Second); code != 0 {
		t.Fatalf("exit code after SIGTERM %d, want 0 (the trap's)\n%s", code, long.Output)
	}
	if !strings.Contains(long.Output.String(), "stopping") {
		t.Fatalf("output %q lacks the trap's line", long.Output)
	}
	if a := vigiltest.FreeAddr(t); !strings.HasPrefix(a, "127.0.0.1:") {
		t.Fatalf("free address %q: want one on loopback", a)
	}
}

// With WatchDelay, watch events arrive that much after the API server sent
// them, while other requests pass at once; Outage still cuts everything.
func TestOutageProxyHoldsBackWatchEvents(t *testing.T) {
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

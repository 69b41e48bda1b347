package store_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/store"
	"github.com/vigilkit/vigil/vigiltest"
	"github.com/vigilkit/vigil/vigiltest/fault"
)

// A replica cut off from the API server (its connections reset, new ones
// refused) while another keeps writing, with etcd compacted meanwhile so that
// its resumed watch meets 410 Gone: once it is back, its local copy and its
// subscriber hold exactly the other replica's final state, and the writes it
// made itself during the outage have landed.
//
// Two runs: in one the cut-off replica only watches, and its watch must meet
// 410 (asserted); in the other it also writes during the outage. Its failed
// writes make client-go close the shared connection, after which the
// reflector relists at once instead of resuming: both roads must lose nothing.
func TestOutageAndGoneLoseNothing(t *testing.T) {
	// The watch cache would replay history instead of answering 410.
	gone, err := vigiltest.Start(vigiltest.Options{DisableWatchCache: true, Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gone.Stop() })
	for _, tc := range []struct {
		name       string
		cutWrites  bool
		assertGone bool
	}{
		{"cut replica watches", false, true},
		{"cut replica also writes", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outageScenario(t, gone, tc.cutWrites, tc.assertGone)
		})
	}
}

func outageScenario(t *testing.T, gone *vigiltest.Env, cutWrites, assertGone bool) {
	ctx := t.Context()
	ns := gone.Namespace(t)
	proxy, err := fault.NewProxy(gone.Config, fault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })

	cut := start(t, proxy.Config(), ns)
	other := start(t, gone.Config, ns)
	seen := newRecorder()
	defer subscribe(t, cut, seen.record)()

	want := map[string]string{}
	for i := range 10 {
		k := fmt.Sprint("before-", i)
		if err := other.SetAndWait(ctx, k, "1"); err != nil {
			t.Fatal(err)
		}
		want[k] = "1"
	}
	seen.waitFor(t, want)
	// client-go relists at once after a watch that lasted under a second; an
	// older one it resumes from its resourceVersion. This sleep is part of
	// the scenario: it ages the watch past that second.
	time.Sleep(1100 * time.Millisecond)

	const outage = 3 * time.Second
	if n := proxy.Outage(outage); n == 0 {
		t.Fatal("the outage cut no connections")
	}
	var wg sync.WaitGroup
	cutErrs := make([]error, 5)
	if cutWrites {
		for i := range cutErrs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cutErrs[i] = cut.SetAndWait(ctx, fmt.Sprint("from-cut-", i), "x")
			}()
		}
	}
	for i := range 10 {
		k := fmt.Sprint("during-", i)
		if err := other.SetAndWait(ctx, k, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
		want[k] = fmt.Sprint(i)
	}
	if err := other.RemoveAndWait(ctx, "before-3"); err != nil {
		t.Fatal(err)
	}
	delete(want, "before-3")
	if _, err := gone.CompactEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if cutWrites {
		for i, err := range cutErrs {
			if err != nil {
				t.Fatalf("write %d of the cut-off replica: %v", i, err)
			}
			want[fmt.Sprint("from-cut-", i)] = "x"
		}
	}
	// Writes after the outage, from both sides.
	if err := other.SetAndWait(ctx, "after", "other"); err != nil {
		t.Fatal(err)
	}
	want["after"] = "other"
	if err := cut.SetAndWait(ctx, "after-cut", "cut"); err != nil {
		t.Fatal(err)
	}
	want["after-cut"] = "cut"

	seen.waitFor(t, want)
	for k, v := range want {
		if got, ok := get(t, cut, k); !ok || got != v {
			t.Errorf("get(t, cut, %q) = %q, %v; want %q", k, got, ok, v)
		}
	}
	if st := cut.Stats(); assertGone && st.Gone == 0 {
		t.Fatalf("stats %+v: the cut-off replica's watch never got 410 Gone, so the relist after it was not exercised", st)
	}
	if st := proxy.Stats(); st.Reset == 0 {
		t.Fatalf("proxy stats %+v: the outage reset no connection", st)
	}
}

// A module without the right to create CRDs gets an error that says what to
// apply; one with the right installs the CRD itself.
func TestMissingCRD(t *testing.T) {
	bare, err := vigiltest.Start(vigiltest.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bare.Stop() })
	ctx := t.Context()
	ns := bare.Namespace(t)

	// Enough RBAC for Stores, none for CRDs.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"vigil.dev"}, Resources: []string{"stores"}, Verbs: []string{"get", "list", "watch", "create", "update"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "store"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "module"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := bare.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	limited, err := store.New(bare.AsServiceAccountConfig(ns, "module"), store.Options{Namespace: ns, Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	err = limited.Start(ctx)
	if !errors.Is(err, store.ErrCRDMissing) {
		t.Fatalf("Start without the CRD or the right to create it: err = %v, want ErrCRDMissing", err)
	}
	for _, w := range []string{"stores.vigil.dev is missing", store.ApplyHint} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("err = %q, want it to contain %q", err, w)
		}
	}

	admin := start(t, bare.Config, ns)
	if err := admin.SetAndWait(ctx, "installed", "yes"); err != nil {
		t.Fatalf("write after installing the CRD: %v", err)
	}
	// Now the limited replica starts and reads what the admin wrote.
	limited2 := start(t, bare.AsServiceAccountConfig(ns, "module"), ns)
	if v, ok := get(t, limited2, "installed"); !ok || v != "yes" {
		t.Fatalf("limited replica reads installed = %q, %v", v, ok)
	}
}

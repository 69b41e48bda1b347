package watch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
)

// orderLog records what an Ordered binding's handler saw, per object, and
// how many handler calls ran at once: per queue and in all.
type orderLog struct {
	mu                 sync.Mutex
	seen               map[string][]string // object → "EVENT:value", in order
	active             map[string]int      // queue → handlers running
	overlap, most, now int
}

func newOrderLog() *orderLog { return &orderLog{seen: map[string][]string{}, active: map[string]int{}} }

func (l *orderLog) handler(queue func(*corev1.ConfigMap) string) func(context.Context, *corev1.ConfigMap, vigil.WatchEvent) error {
	return func(_ context.Context, cm *corev1.ConfigMap, ev vigil.WatchEvent) error {
		q := queue(cm)
		l.mu.Lock()
		l.active[q]++
		l.now++
		l.most = max(l.most, l.now)
		if l.active[q] > 1 {
			l.overlap++
		}
		l.mu.Unlock()
		time.Sleep(50 * time.Millisecond) // long enough for the queues to overlap, if they could
		l.mu.Lock()
		l.seen[cm.Name] = append(l.seen[cm.Name], string(ev)+":"+cm.Data["v"])
		l.active[q]--
		l.now--
		l.mu.Unlock()
		return nil
	}
}

// Pepr's reconcile scenario: three objects each updated A→B→C at once. An
// Ordered binding queued per object handles every event of each object in
// order, none collapsed, one at a time per object and the objects in
// parallel; one queued per kind handles them all one at a time.
func TestOrderedHandlesEveryEventInOrderPerQueue(t *testing.T) {
	ns := env.Namespace(t)
	c := newClient(t)
	m := vigil.NewModule("ordered", vigil.Options{Namespace: ns})
	perObject, perKind := newOrderLog(), newOrderLog()
	apps := m.Capability("apps")
	vigil.Watch(apps, &corev1.ConfigMap{}).InNamespace(ns).WithLabelValue("queue", "object").Named("per-object").
		Ordered(vigil.QueuePerObject, perObject.handler(func(cm *corev1.ConfigMap) string { return cm.Name }))
	vigil.Watch(apps, &corev1.ConfigMap{}).InNamespace(ns).WithLabelValue("queue", "kind").Named("per-kind").
		Ordered(vigil.QueuePerKind, perKind.handler(func(*corev1.ConfigMap) string { return "kind" }))
	testkit.RunWatcher(t, m, kubeconfig(t), "--leader-elect=false")

	values := []string{"A", "B", "C"}
	for _, queue := range []string{"object", "kind"} {
		for i := range 3 {
			name := fmt.Sprintf("%s-%d", queue, i)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"queue": queue}}, Data: map[string]string{"v": "0"}}
			if err := c.Create(t.Context(), cm); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, v := range values {
		for _, queue := range []string{"object", "kind"} {
			for i := range 3 {
				patch := client.RawPatch(types.MergePatchType, []byte(`{"data":{"v":"`+v+`"}}`))
				if err := c.Patch(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", queue, i)}}, patch); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	want := []string{"ADDED:0", "MODIFIED:A", "MODIFIED:B", "MODIFIED:C"}
	for _, tc := range []struct {
		queue string
		log   *orderLog
	}{{"object", perObject}, {"kind", perKind}} {
		testkit.Eventually(t, 20*time.Second, tc.queue+": every event of every object", func() bool {
			tc.log.mu.Lock()
			defer tc.log.mu.Unlock()
			for i := range 3 {
				if len(tc.log.seen[fmt.Sprintf("%s-%d", tc.queue, i)]) < len(want) {
					return false
				}
			}
			return true
		})
		tc.log.mu.Lock()
		for i := range 3 {
			name := fmt.Sprintf("%s-%d", tc.queue, i)
			if got := tc.log.seen[name]; !slices.Equal(got, want) {
				t.Errorf("queue per %s: %s saw %s, want %s", tc.queue, name, strings.Join(got, " "), strings.Join(want, " "))
			}
		}
		if tc.log.overlap > 0 {
			t.Errorf("queue per %s: %d handler calls overlapped another of the same queue", tc.queue, tc.log.overlap)
		}
		tc.log.mu.Unlock()
	}
	if perObject.most < 2 {
		t.Errorf("queues per object ran at most %d handler at once; want the objects in parallel", perObject.most)
	}
	if perKind.most != 1 {
		t.Errorf("one queue per kind ran %d handlers at once; want 1", perKind.most)
	}
}

// A queue that is not one of the four is refused at its call site.
func TestOrderedNeedsAQueue(t *testing.T) {
	m := vigil.NewModule("ordered", vigil.Options{})
	vigil.Watch(m.Capability("apps"), &corev1.ConfigMap{}).Ordered("per-team", func(context.Context, *corev1.ConfigMap, vigil.WatchEvent) error { return nil })
	if err := m.Verify(); err == nil || !strings.Contains(err.Error(), "ordered_test.go:") || !strings.Contains(err.Error(), `Ordered("per-team", ...): expected vigil.QueuePerObject`) {
		t.Fatalf("Verify() = %v, want the queue refused at its call site", err)
	}
}

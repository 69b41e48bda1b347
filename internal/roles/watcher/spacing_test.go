package watcher

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Changes to an object reconciled a moment ago wait out the spacing; others
// are queued at once.
func TestSpacingDelaysOnlyRecentlyReconciledObjects(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	s := newSpacing(300 * time.Millisecond)
	fresh := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "fresh"}}
	hot := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "hot"}}
	s.started(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(hot)}.NamespacedName)
	s.enqueue(fresh, q, false)
	s.enqueue(hot, q, false)
	if q.Len() != 1 {
		t.Fatalf("queue holds %d; want only the fresh object at once", q.Len())
	}
	item, _ := q.Get()
	q.Done(item)
	if item.Name != "fresh" {
		t.Fatalf("got %s first", item.Name)
	}
	start := time.Now()
	item, _ = q.Get()
	if item.Name != "hot" || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("the hot object came after %s; want about 300ms", time.Since(start))
	}
}

package soak_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/runtime/informers"
	"github.com/vigilkit/vigil/vigiltest/fault"
)

// A relist after the API server compacted (every open watch ended, and one
// resuming from a resourceVersion answered 410 Gone) holds again only what
// changed: the
// store keeps, for each object the relist brings back at the
// resourceVersion it held, the very object it held, and a new one only for
// an object that changed. A relist that decoded every object anew would
// hold two copies of the cache until the old one is collected.
func TestARelistHoldsAgainOnlyWhatChanged(t *testing.T) {
	ns := env.Namespace(t)
	proxy, err := fault.NewProxy(env.Config, fault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	const pods = 30
	for i := range pods {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprint("p-", i), Labels: map[string]string{"app": "web", "relist": ns}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
		}
		if err := env.Client.Create(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Every object the informer decodes goes through the transform: a
	// relist, through it again.
	var transformed atomic.Int64
	transform := informers.Transform()
	c, err := cache.New(proxy.Config(), cache.Options{
		Scheme: env.Client.Scheme(),
		DefaultTransform: func(obj any) (any, error) {
			transformed.Add(1)
			return transform(obj)
		},
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{"relist": ns}),
	})
	if err != nil {
		t.Fatal(err)
	}
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	store := inf.(toolscache.SharedIndexInformer).GetIndexer()
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync through the proxy")
	}
	held := map[string]any{}
	for _, k := range store.ListKeys() {
		obj, _, _ := store.GetByKey(k)
		held[k] = obj
	}
	if len(held) != pods {
		t.Fatalf("the cache holds %d Pods, want %d", len(held), pods)
	}
	synced := transformed.Load()

	// One Pod changes while the watches are cut off, so the relist brings
	// it back at a new resourceVersion; a Pod created then marks the
	// relist's end.
	proxy.ExpireWatches(3 * time.Second)
	changed := &corev1.Pod{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "p-0"}, changed); err != nil {
		t.Fatal(err)
	}
	changed.Labels["changed"] = "yes"
	if err := env.Client.Update(t.Context(), changed); err != nil {
		t.Fatal(err)
	}
	marker := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "after-expiry", Labels: map[string]string{"relist": ns}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
	}
	if err := env.Client.Create(t.Context(), marker); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, ok, _ := store.GetByKey(ns + "/after-expiry"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache did not see a Pod created while its watches expired within 60s (proxy: %+v)", proxy.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := transformed.Load() - synced; n < pods {
		t.Fatalf("the informer decoded %d objects after its watches were ended, fewer than the %d Pods: it did not list again, so the test proves nothing (proxy: %+v)", n, pods, proxy.Stats())
	}

	same := 0
	for k, before := range held {
		now, ok, _ := store.GetByKey(k)
		if !ok {
			t.Fatalf("%s is gone from the cache after the relist", k)
		}
		switch {
		case k == ns+"/p-0":
			if now == before {
				t.Errorf("%s changed during the relist, yet the cache holds the object it held before", k)
			}
			if now.(*corev1.Pod).Labels["changed"] != "yes" {
				t.Errorf("%s: the cache holds labels %v, want the change", k, now.(*corev1.Pod).Labels)
			}
		case now == before:
			same++
		}
	}
	if same != pods-1 {
		t.Errorf("after the relist the cache holds %d of the %d unchanged Pods as the objects it held before; want every one (proxy: %+v)", same, pods-1, proxy.Stats())
	}
}

package soak_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
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
	"github.com/vigilkit/vigil/internal/runtime/watchhealth"
	"github.com/vigilkit/vigil/vigiltest/fault"
)

// A relist after the API server compacted (every open watch ended, and one
// resuming from a resourceVersion answered 410 Gone) holds again only what
// changed, of any type: through the roles' informers (informers.NewInformer
// and Transform), the store keeps, for each object the relist brings back
// at the resourceVersion it held, the very object it held, and a new one
// only for an object that changed. A relist that decoded every object anew
// would hold two copies of the cache until the old one is collected.
func TestARelistHoldsAgainOnlyWhatChanged(t *testing.T) {
	ns := env.Namespace(t)
	proxy, err := fault.NewProxy(env.Config, fault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	const each = 30
	labelled := map[string]string{"app": "web", "relist": ns}
	kinds := []struct {
		name string
		new  func(name string) client.Object
	}{
		{"Pod", func(name string) client.Object {
			return &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: maps.Clone(labelled)},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
			}
		}},
		{"ConfigMap", func(name string) client.Object {
			return &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: maps.Clone(labelled)},
				Data:       map[string]string{"mode": "strict"},
			}
		}},
	}
	for _, k := range kinds {
		for i := range each {
			if err := env.Client.Create(t.Context(), k.new(fmt.Sprint("o-", i))); err != nil {
				t.Fatal(err)
			}
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Every object the informers decode and do not hold already goes
	// through the transform, once or twice: a streamed list transforms
	// into its own store, then into the informer's. Each object is counted
	// once.
	var transformed atomic.Int64
	var seen sync.Map
	transform := informers.Transform()
	health, err := watchhealth.New("relist", "test", watchhealth.Options{StaleAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer health.Close()
	c, err := cache.New(proxy.Config(), cache.Options{
		Scheme: env.Client.Scheme(),
		DefaultTransform: func(obj any) (any, error) {
			if _, again := seen.LoadOrStore(obj, true); !again {
				transformed.Add(1)
			}
			return transform(obj)
		},
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{"relist": ns}),
		NewInformer:          informers.NewInformer("relist", health, env.Client.Scheme(), nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	stores := make([]toolscache.Indexer, len(kinds))
	for i, k := range kinds {
		inf, err := c.GetInformer(ctx, k.new(""))
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = inf.(toolscache.SharedIndexInformer).GetIndexer()
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync through the proxy")
	}
	held := make([]map[string]any, len(kinds))
	for i, store := range stores {
		held[i] = map[string]any{}
		for _, key := range store.ListKeys() {
			obj, _, _ := store.GetByKey(key)
			held[i][key] = obj
		}
		if len(held[i]) != each {
			t.Fatalf("the cache holds %d %ss, want %d", len(held[i]), kinds[i].name, each)
		}
	}
	if n := transformed.Load(); n != int64(len(kinds)*each) {
		t.Fatalf("the informers transformed %d objects as they synced, want the %d they hold", n, len(kinds)*each)
	}

	// One object of each kind changes while the watches are cut off, so
	// the relist brings it back at a new resourceVersion; an object
	// created then marks the relist's end.
	proxy.ExpireWatches(3 * time.Second)
	for _, k := range kinds {
		changed := k.new("o-0")
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(changed), changed); err != nil {
			t.Fatal(err)
		}
		changed.SetLabels(map[string]string{"app": "web", "relist": ns, "changed": "yes"})
		if err := env.Client.Update(t.Context(), changed); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Create(t.Context(), k.new("after-expiry")); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for i, store := range stores {
		for {
			if _, ok, _ := store.GetByKey(ns + "/after-expiry"); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the cache did not see a %s created while its watches expired within 60s (proxy: %+v)", kinds[i].name, proxy.Stats())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, inf := range health.Informers() {
		if c := inf.Counts(); c.Relists == 0 {
			t.Fatalf("the %s informer did not list again after its watches were ended, so the test proves nothing (proxy: %+v)", inf.Name(), proxy.Stats())
		}
	}
	if n := len(health.Informers()); n != len(kinds) {
		t.Fatalf("the health tracker follows %d informers, want %d", n, len(kinds))
	}

	for i, store := range stores {
		same := 0
		for key, before := range held[i] {
			now, ok, _ := store.GetByKey(key)
			if !ok {
				t.Fatalf("%s %s is gone from the cache after the relist", kinds[i].name, key)
			}
			switch {
			case key == ns+"/o-0":
				if now == before {
					t.Errorf("%s %s changed during the relist, yet the cache holds the object it held before", kinds[i].name, key)
				}
				if now.(client.Object).GetLabels()["changed"] != "yes" {
					t.Errorf("%s %s: the cache holds labels %v, want the change", kinds[i].name, key, now.(client.Object).GetLabels())
				}
			case now == before:
				same++
			}
		}
		if same != each-1 {
			t.Errorf("after the relist the cache holds %d of the %d unchanged %ss as the objects it held before; want every one (proxy: %+v)", same, each-1, kinds[i].name, proxy.Stats())
		}
	}
	// Each changed object and each marker came through the transform; the
	// objects held already did not.
	if n := transformed.Load() - int64(len(kinds)*each); n != int64(2*len(kinds)) {
		t.Errorf("after the relist the transform ran on %d objects; want %d: each changed object and each new one, none held already", n, 2*len(kinds))
	}
}

package sizing

import (
	"context"
	"encoding/json"
	"runtime"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

const (
	// Base is a role's memory before its informers hold anything: its
	// idle RSS, 42 to 45 MiB measured (make bench-admission, rss_idle),
	// rounded up.
	Base = 48 << 20
	// RelistWhole and RelistMetadata are a relist's peak over the steady
	// heap of an informer of whole objects and of metadata alone, as
	// measured at 10,000 Pods (make bench-scale: 1.52× and 1.35×).
	RelistWhole    = 1.52
	RelistMetadata = 1.35
	// Sample is how many of its objects each informer's cost per object is
	// measured on.
	Sample = 100
)

// Informer is one informer a role starts, at the size of a cluster.
type Informer struct {
	// Role is the role that starts it: admission or watcher.
	Role     string
	GVK      schema.GroupVersionKind
	Metadata bool
	// Selection says what the informer selects, in words.
	Selection string
	// Objects is how many objects of the cluster it selects.
	Objects int
	// Bytes is the heap one object takes as the informer holds it,
	// measured on up to Sample of them; 0 when the cluster has none.
	Bytes int64
	// Unread, when set, is why the cluster's objects could not be read
	// (the kind not served, or no right to list it): not counted.
	Unread error
}

// Total is the heap the informer's objects take.
func (i Informer) Total() int64 { return int64(i.Objects) * i.Bytes }

// Peak is the heap during a relist, which holds the new list beside the
// old objects until it replaces them.
func (i Informer) Peak() int64 {
	f := RelistWhole
	if i.Metadata {
		f = RelistMetadata
	}
	return int64(float64(i.Total()) * f)
}

// Roles are the informers each role of m starts: the admission role's
// listers'; the watcher's listers' and watches'.
func Roles(m *spec.Module) map[string][]spec.Agreed {
	out := map[string][]spec.Agreed{}
	if m.HasAdmission() && len(m.Listers) > 0 {
		out[spec.PodAdmission] = spec.Agree(m.Listers)
	}
	if m.HasWatcher() {
		users := append([]spec.Lister(nil), m.Listers...)
		for _, w := range m.Watches {
			users = append(users, w.Lister())
		}
		if len(users) > 0 {
			out[spec.PodWatcher] = spec.Agree(users)
		}
	}
	return out
}

// Measure counts, on the cluster cfg reaches, the objects each informer of
// each role of m selects, and measures what one takes as it holds it.
func Measure(ctx context.Context, cfg *rest.Config, m *spec.Module) ([]Informer, error) {
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var out []Informer
	for _, role := range []string{spec.PodAdmission, spec.PodWatcher} {
		for _, a := range Roles(m)[role] {
			inf, err := measure(ctx, meta, dyn, m, a)
			if err != nil {
				if ctx.Err() != nil {
					return nil, err
				}
				inf = Informer{GVK: a.GVK, Metadata: a.Metadata, Selection: a.Selects(), Unread: err}
			}
			inf.Role = role
			out = append(out, inf)
		}
	}
	return out, nil
}

func measure(ctx context.Context, meta metadata.Interface, dyn dynamic.Interface, m *spec.Module, a spec.Agreed) (Informer, error) {
	inf := Informer{GVK: a.GVK, Metadata: a.Metadata, Selection: a.Selects()}
	gvr := a.GVK.GroupVersion().WithResource(m.ResourceOf(a.GVK))
	opts := metav1.ListOptions{LabelSelector: a.Labels, Limit: 500}
	if a.Name != "" {
		opts.FieldSelector = "metadata.name=" + a.Name
	}
	namespaces := a.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	var raw [][]byte
	for _, ns := range namespaces {
		// Counted by pages of metadata: what a count costs the API server
		// and this process stays small however large the cluster.
		page := opts
		for {
			list, err := meta.Resource(gvr).Namespace(ns).List(ctx, page)
			if err != nil {
				return inf, err
			}
			inf.Objects += len(list.Items)
			// A metadata informer is sent each object's metadata alone:
			// what it holds is measured on that.
			for i := 0; a.Metadata && i < len(list.Items) && len(raw) < Sample; i++ {
				data, err := json.Marshal(&list.Items[i])
				if err != nil {
					return inf, err
				}
				raw = append(raw, data)
			}
			if list.Continue == "" {
				break
			}
			page.Continue = list.Continue
		}
		if !a.Metadata && len(raw) < Sample {
			sample := opts
			sample.Limit = int64(Sample - len(raw))
			list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, sample)
			if err != nil {
				return inf, err
			}
			for i := range list.Items {
				data, err := json.Marshal(list.Items[i].Object)
				if err != nil {
					return inf, err
				}
				raw = append(raw, data)
			}
		}
	}
	if len(raw) > 0 {
		var err error
		if inf.Bytes, err = heapPer(raw, a.New); err != nil {
			return inf, err
		}
	}
	return inf, nil
}

// heapPer decodes raw into objects of newObj's type, as an informer holds
// them (managed fields dropped), and returns the heap each takes, read
// from the Go runtime's count of live bytes around the decode. Small
// objects are decoded many times over, up to 20,000 in all, so that the
// measure is made on megabytes, where what else the process allocates
// meanwhile is noise.
func heapPer(raw [][]byte, newObj func() client.Object) (int64, error) {
	var size int
	for _, data := range raw {
		size += len(data)
	}
	reps := min(max(1, (8<<20)/max(size, 1)), max(1, 20000/len(raw)))
	objs := make([]client.Object, 0, reps*len(raw))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range reps * len(raw) {
		data := raw[i%len(raw)]
		obj := newObj()
		var err error
		if u, ok := obj.(*unstructured.Unstructured); ok {
			err = u.UnmarshalJSON(data)
		} else {
			err = json.Unmarshal(data, obj)
		}
		if err != nil {
			return 0, err
		}
		obj.SetManagedFields(nil)
		objs = append(objs, obj)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	// Both stay live to the second reading: raw freed in between would
	// be counted against the objects.
	runtime.KeepAlive(objs)
	runtime.KeepAlive(raw)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / int64(len(objs))
	return max(per, 0), nil
}

// Limit is the memory limit whose GOMEMLIMIT (90% of it) holds peak,
// rounded up to 64 MiB.
func Limit(peak int64) int64 { return (peak*10/9 + (64 << 20) - 1) / (64 << 20) * (64 << 20) }

// Need is what a role needs at the cluster's size: its base, and its
// informers' peak during a relist of them all (after an API server
// restart, say).
func Need(role string, infs []Informer) (steady, peak int64) {
	steady, peak = Base, Base
	for _, i := range infs {
		if i.Role == role {
			steady += i.Total()
			peak += i.Peak()
		}
	}
	return steady, peak
}

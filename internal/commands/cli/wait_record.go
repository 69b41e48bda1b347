package cli

import (
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vigilkit/vigil/gate"
)

// waitRecorder passes checks on to the condition and remembers every object it
// saw and whether it satisfied the condition: what a delete wait prints, and
// what a timeout names.
type waitRecorder struct {
	mu    sync.Mutex
	inner gate.Cond
	seen  map[string]waitRecorded
}

type waitRecorded struct {
	obj *unstructured.Unstructured
	ok  bool
}

var (
	_ gate.Cond     = (*waitRecorder)(nil)
	_ gate.Stateful = (*waitRecorder)(nil)
)

func (r *waitRecorder) Check(obj *unstructured.Unstructured) (bool, string) {
	r.mu.Lock()
	inner := r.inner
	r.mu.Unlock()
	ok, why := inner.Check(obj)
	if obj != nil {
		r.mu.Lock()
		if r.seen == nil {
			r.seen = map[string]waitRecorded{}
		}
		r.seen[waitObjectKey(obj)] = waitRecorded{obj: obj, ok: ok}
		r.mu.Unlock()
	}
	return ok, why
}

func (r *waitRecorder) String() string { return r.inner.String() }

// Fresh gives the inner condition a fresh state; one recorder serves one wait.
func (r *waitRecorder) Fresh() gate.Cond {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, ok := r.inner.(gate.Stateful); ok {
		r.inner = st.Fresh()
	}
	return r
}

func waitObjectKey(o *unstructured.Unstructured) string {
	return o.GetNamespace() + "/" + o.GetName()
}

func (r *waitRecorder) sortedKeys() []string {
	keys := make([]string, 0, len(r.seen))
	for k := range r.seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (r *waitRecorder) seenObjects() []*unstructured.Unstructured {
	r.mu.Lock()
	defer r.mu.Unlock()
	var objs []*unstructured.Unstructured
	for _, k := range r.sortedKeys() {
		objs = append(objs, r.seen[k].obj)
	}
	return objs
}

// firstUnmet names the first object seen that did not satisfy the condition.
func (r *waitRecorder) firstUnmet() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.sortedKeys() {
		if !r.seen[k].ok {
			return r.seen[k].obj.GetName()
		}
	}
	return ""
}

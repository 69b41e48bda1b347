package waitfor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/rolebind"
	"github.com/vigilkit/vigil/internal/runtime/watchhealth"
)

// Spec is what to wait for: the gate's wait as the resolved definition
// holds it (spec.Wait), which the engine runs.
type Spec = spec.Wait

// Mode says how many of the selected objects must satisfy the condition.
type Mode = spec.WaitMode

// The modes of spec.WaitMode.
const (
	Any     = spec.WaitAny
	All     = spec.WaitAll
	AtLeast = spec.WaitAtLeast
)

// States of a wait, as Progress reports them.
const (
	StateWaitingForType = "waiting for type"
	StateNotFound       = "not found"
	StateNotMatching    = "not matching"
	StateDone           = "done"
)

// Progress is what a wait has seen so far.
type Progress struct {
	// State is one of the State constants.
	State string
	// Seen says what was last seen, for example "status.phase=Pending, want Ready".
	Seen string
}

// Waiter waits on one API server.
type Waiter struct {
	dyn    dynamic.Interface
	mapper *lazyMapper
	log    logr.Logger
	// disco expands short names for Resolve; made on first use.
	discoOnce sync.Once
	disco     discovery.CachedDiscoveryInterface
	// crdPoll is how often discovery is asked again while a type is missing
	// and CRDs cannot be watched.
	crdPoll time.Duration
	// gone counts watches that ended in 410 Gone: the informer recovers by
	// relisting, quietly.
	gone atomic.Int64
	// binder, when set, binds the role's rights in a wait's namespace
	// once it exists: until then the wait sees it empty.
	binder *rolebind.Binder
	// health, when set, follows each wait's informer.
	health *watchhealth.Tracker
}

// Track has health follow the informer of each wait while it runs: a watch
// silent past its stale bound is ended and watched again.
func (w *Waiter) Track(health *watchhealth.Tracker) { w.health = health }

// Bind has the waits of a namespace that does not exist yet, in which the
// role's rights are bound by binder (see rolebind), see it empty and wait
// for it, instead of failing as forbidden.
func (w *Waiter) Bind(binder *rolebind.Binder) { w.binder = binder }

// Gone is the number of watches that ended in 410 Gone and were relisted.
func (w *Waiter) Gone() int64 { return w.gone.Load() }

// New returns a Waiter for the API server cfg talks to.
func New(cfg *rest.Config, log logr.Logger) (*Waiter, error) {
	mapper, err := newLazyMapper(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, mapper.hc)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	return &Waiter{
		dyn:     dyn,
		mapper:  mapper,
		log:     log,
		crdPoll: 2 * time.Second,
	}, nil
}

// Errors that no waiting can fix.
var (
	// ErrForbidden: RBAC does not allow the wait.
	ErrForbidden = errors.New("forbidden")
	// ErrNotServable: the kind is not served and no CRD can add it.
	ErrNotServable = errors.New("kind not servable")
)

// Wait blocks until spec holds or ctx ends, and returns the objects that
// satisfy the condition. report, when not nil, is called whenever what the
// wait sees changes.
func (w *Waiter) Wait(ctx context.Context, spec Spec, report func(Progress)) ([]*unstructured.Unstructured, error) {
	if spec.Cond == nil {
		return nil, errors.New("waitfor: expected a condition, got none")
	}
	if st, ok := spec.Cond.(gate.Stateful); ok {
		spec.Cond = st.Fresh()
	}
	rep := newReporter(report)
	mapping, err := w.mapping(ctx, spec.GVK, rep)
	if err != nil {
		return nil, err
	}
	return w.watch(ctx, spec, mapping, rep)
}

// reporter passes progress on when it changes.
type reporter struct {
	mu   sync.Mutex
	last Progress
	fn   func(Progress)
}

func newReporter(fn func(Progress)) *reporter { return &reporter{fn: fn} }

func (r *reporter) report(p Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p == r.last || r.fn == nil {
		r.last = p
		return
	}
	r.last = p
	r.fn(p)
}

// watch runs an informer over the selected objects and evaluates the
// condition after every change until it holds.
func (w *Waiter) watch(ctx context.Context, spec Spec, mapping *meta.RESTMapping, rep *reporter) ([]*unstructured.Unstructured, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ri, ns := w.scoped(mapping, spec.Namespace)
	tracked := w.health.Informer(spec.GVK.Kind, ns)
	defer w.health.Remove(tracked)
	lw := tracked.Wrap(rolebind.ListWatch(w.listWatch(ri, listOptions(spec)), w.binder, &unstructured.Unstructured{}, spec.GVK, nil))
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
	failed := make(chan error, 1)
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			select {
			case failed <- forbidden(mapping, ns, spec.Name, err):
			default:
			}
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return nil, err
	}
	kick := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(_, o any) { poke(o) },
		DeleteFunc: poke,
	})
	if err != nil {
		return nil, err
	}
	go inf.RunWithContext(ctx)
	go func() {
		// An empty first list delivers no event: evaluate once synced.
		if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			poke(nil)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case err := <-failed:
			return nil, err
		case <-kick:
		}
		if !reg.HasSynced() {
			continue
		}
		matched, done, progress := evaluate(spec, inf.GetStore().List())
		rep.report(progress)
		if done {
			return matched, nil
		}
	}
}

// scoped is the resource interface the objects are listed and watched
// through, in namespace ns when the kind is namespaced and ns is set, and
// the namespace it looks in ("" for all, and for a cluster-scoped kind).
func (w *Waiter) scoped(mapping *meta.RESTMapping, ns string) (dynamic.ResourceInterface, string) {
	res := w.dyn.Resource(mapping.Resource)
	var ri dynamic.ResourceInterface = res
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace && ns != "" {
		ri = res.Namespace(ns)
	} else if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		ns = ""
	}
	return ri, ns
}

// listOptions sets the selectors of spec on a list or watch: its fields,
// its name as a field, and its labels.
func listOptions(spec Spec) func(o *metav1.ListOptions) {
	fieldSel := spec.Fields
	if spec.Name != "" {
		byName := fields.OneTermEqualSelector("metadata.name", spec.Name)
		if fieldSel == nil || fieldSel.Empty() {
			fieldSel = byName
		} else {
			fieldSel = fields.AndSelectors(fieldSel, byName)
		}
	}
	return func(o *metav1.ListOptions) {
		if fieldSel != nil && !fieldSel.Empty() {
			o.FieldSelector = fieldSel.String()
		}
		if spec.Labels != nil && !spec.Labels.Empty() {
			o.LabelSelector = spec.Labels.String()
		}
	}
}

// listWatch lists and watches through ri with options, counting the watches
// the API server ends as expired (410 Gone).
//
// A wait sees every write made before it began. Where the API server
// streams the first list (WatchList), that read is consistent already; where
// it does not (1.33, or WatchList off), the reflector's first list asks for
// resourceVersion "0", which the API server may answer from a watch cache a
// write or two behind. A gate begun just after an object left its ready
// state would then pass on the state it left. The first list is therefore
// read at the latest resourceVersion instead: one consistent read a wait.
func (w *Waiter) listWatch(ri dynamic.ResourceInterface, options func(o *metav1.ListOptions)) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			options(&o)
			if o.ResourceVersion == "0" {
				o.ResourceVersion = ""
			}
			return ri.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			options(&o)
			wi, err := ri.Watch(ctx, o)
			if err != nil {
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					w.gone.Add(1)
				}
				return nil, err
			}
			return watch.Filter(wi, func(ev watch.Event) (watch.Event, bool) {
				if st, ok := ev.Object.(*metav1.Status); ok && ev.Type == watch.Error && st.Code == http.StatusGone {
					w.gone.Add(1)
				}
				return ev, true
			}), nil
		},
	}
}

// evaluate decides whether the objects the informer holds satisfy spec.
func evaluate(spec Spec, items []any) ([]*unstructured.Unstructured, bool, Progress) {
	objs := make([]*unstructured.Unstructured, 0, len(items))
	for _, it := range items {
		if u, ok := it.(*unstructured.Unstructured); ok {
			objs = append(objs, u)
		}
	}
	sort.Slice(objs, func(i, j int) bool {
		if objs[i].GetNamespace() != objs[j].GetNamespace() {
			return objs[i].GetNamespace() < objs[j].GetNamespace()
		}
		return objs[i].GetName() < objs[j].GetName()
	})
	if len(objs) == 0 {
		// The condition decides what no object means: not yet for Created,
		// done for Deleted.
		ok, why := spec.Cond.Check(nil)
		if spec.Mode == AtLeast && spec.N <= 0 {
			ok = true
		}
		if ok {
			return nil, true, Progress{State: StateDone, Seen: "no object"}
		}
		if why == "" {
			why = "not found"
		}
		return nil, false, Progress{State: StateNotFound, Seen: why}
	}
	var matched []*unstructured.Unstructured
	var firstWhy string
	for _, o := range objs {
		ok, why := spec.Cond.Check(o)
		if ok {
			matched = append(matched, o.DeepCopy())
		} else if firstWhy == "" {
			firstWhy = name(o) + ": " + why
		}
	}
	var done bool
	switch spec.Mode {
	case All:
		done = len(matched) == len(objs)
	case AtLeast:
		done = len(matched) >= spec.N
	default:
		done = len(matched) > 0
	}
	if done {
		return matched, true, Progress{State: StateDone, Seen: fmt.Sprintf("%d of %d match", len(matched), len(objs))}
	}
	seen := firstWhy
	if spec.Name == "" {
		seen = fmt.Sprintf("%d of %d match; %s", len(matched), len(objs), firstWhy)
	} else if i := strings.Index(firstWhy, ": "); i >= 0 {
		seen = firstWhy[i+2:]
	}
	return nil, false, Progress{State: StateNotMatching, Seen: seen}
}

func name(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetName()
}

// forbidden explains an RBAC refusal and the rule that would lift it.
func forbidden(m *meta.RESTMapping, ns, name string, err error) error {
	where, role := "cluster-wide", "ClusterRole"
	if ns != "" {
		where, role = fmt.Sprintf("in namespace %q", ns), "Role in "+ns
	}
	rule := fmt.Sprintf("{apiGroups: [%q], resources: [%q], verbs: [get, list, watch]}", m.Resource.Group, m.Resource.Resource)
	if name != "" {
		rule += fmt.Sprintf(" (narrow it with resourceNames: [%q])", name)
	}
	return fmt.Errorf("%w: list and watch %s %s: add to a %s bound to this identity the rule %s: %v", ErrForbidden, m.Resource.GroupResource(), where, role, rule, err)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

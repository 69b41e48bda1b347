package waitfor

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// Type is a resolved type: what a wait needs to know of it.
type Type struct {
	GVK schema.GroupVersionKind
	// Resource is the plural, as kubectl names the type in its errors.
	Resource string
	// Namespaced is false for cluster-scoped types.
	Namespaced bool
}

func typeOf(m *meta.RESTMapping) Type {
	return Type{GVK: m.GroupVersionKind, Resource: m.Resource.Resource, Namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}
}

// ErrNotServed: the type is not served yet, but a CustomResourceDefinition
// could come to serve it. The error is a *NotServedError.
var ErrNotServed = errors.New("type not served")

// NotServedError is a type not served yet; AwaitServed waits for it.
type NotServedError struct {
	// Arg is the TYPE argument as given.
	Arg string
	// Name, Group and Version are the reading of Arg waited for: for
	// TYPE.VERSION.GROUP with a version like v1 or v1beta1, that version of
	// GROUP, else TYPE.GROUP in any version (Version empty).
	Name, Group, Version string

	readings []typeQuery
}

func (e *NotServedError) Error() string {
	return fmt.Sprintf("%v: the server doesn't serve %s: no CustomResourceDefinition that serves it is established", ErrNotServed, e.Arg)
}

func (e *NotServedError) Unwrap() error { return ErrNotServed }

// Resolve finds the type a TYPE argument names as kubectl does: through
// discovery, as a plural, singular, kind or short name, optionally qualified
// as TYPE.GROUP or TYPE.VERSION.GROUP. warn, when set, receives discovery's
// warnings (an ambiguous short name).
//
// A type that discovery does not know but a CustomResourceDefinition could
// add (its group has a dot) is a *NotServedError, which AwaitServed waits on;
// any other type not known is an error that says why it cannot be waited for.
func (w *Waiter) Resolve(arg string, warn func(string)) (Type, error) {
	m, err := w.mappingFor(arg, warn)
	if err == nil {
		return typeOf(m), nil
	}
	if !meta.IsNoMatchError(err) {
		return Type{}, fmt.Errorf("resolve type %q through discovery: %w", arg, err)
	}
	ns, err := parseTypeArg(arg)
	if err != nil {
		return Type{}, err
	}
	return Type{}, ns
}

// AwaitServed waits until a CustomResourceDefinition that serves the type ns
// names is Established, and returns that type; without the right to list
// CRDs it asks discovery again every few seconds. report, when set, receives
// what is seen of CRDs that name the type but do not serve it yet.
//
// Discovery lags behind the CRD's conditions: Wait waits for it to catch up.
func (w *Waiter) AwaitServed(ctx context.Context, ns *NotServedError, report func(Progress)) (Type, error) {
	rep := newReporter(report)
	for {
		t, found, err := w.awaitCRD(ctx, ns.readings, rep)
		if err != nil {
			return Type{}, err
		}
		w.resetDiscovery()
		if found {
			return t, nil
		}
		if m, err := w.mappingFor(ns.Arg, nil); err == nil {
			return typeOf(m), nil
		}
	}
}

// versionLike is a version as CRDs name them: v1, v1beta1, v2alpha3.
var versionLike = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)

// parseTypeArg reads a TYPE argument that discovery does not know as
// kubectl's schema.ParseResourceArg does: NAME.VERSION.GROUP (with two dots
// or more) and NAME.GROUP, both CRD readings waited for. It fails when no
// CustomResourceDefinition could serve either: without a group, or in a
// group without a dot (only built-in groups lack one).
func parseTypeArg(arg string) (*NotServedError, error) {
	name, group, _ := strings.Cut(arg, ".")
	if name == "" {
		return nil, fmt.Errorf("type %q: expected a resource name before the group, e.g. clusterconfigs.uds.dev", arg)
	}
	if group == "" {
		return nil, fmt.Errorf("the server doesn't have a resource type %q: check its spelling (kubectl api-resources lists the types); to wait for a CustomResourceDefinition that is not installed yet, qualify the type with its group, e.g. %s.example.com", arg, arg)
	}
	if !strings.Contains(group, ".") {
		return nil, fmt.Errorf("the server doesn't have a resource type %q in group %q, and no CustomResourceDefinition can add one to a group without a dot: check the type and group", name, group)
	}
	name = strings.ToLower(name)
	byGroup := typeQuery{name: name, group: group}
	ns := &NotServedError{Arg: arg, Name: name, Group: group}
	ver, verGroup, _ := strings.Cut(group, ".")
	if !strings.Contains(verGroup, ".") {
		ns.readings = []typeQuery{byGroup}
		return ns, nil
	}
	byVersion := typeQuery{name: name, group: verGroup, version: ver}
	if versionLike.MatchString(ver) {
		// widgets.v1.example.com: version v1 of example.com first, as
		// kubectl tries the full form first.
		ns.Group, ns.Version = verGroup, ver
		ns.readings = []typeQuery{byVersion, byGroup}
	} else {
		ns.readings = []typeQuery{byGroup, byVersion}
	}
	return ns, nil
}

// mappingFor is kubectl's resource builder's lookup: resource forms first,
// then kinds, with short names expanded.
func (w *Waiter) mappingFor(arg string, warn func(string)) (*meta.RESTMapping, error) {
	if warn == nil {
		warn = func(string) {}
	}
	m := restmapper.NewShortcutExpander(w.mapper, w.discovery(), warn)
	fullGVR, gr := schema.ParseResourceArg(arg)
	var gvk schema.GroupVersionKind
	if fullGVR != nil {
		gvk, _ = m.KindFor(*fullGVR)
	}
	if gvk.Empty() {
		gvk, _ = m.KindFor(gr.WithVersion(""))
	}
	if !gvk.Empty() {
		return m.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	fullGVK, gk := schema.ParseKindArg(arg)
	if fullGVK != nil {
		if mapping, err := m.RESTMapping(fullGVK.GroupKind(), fullGVK.Version); err == nil {
			return mapping, nil
		}
	}
	return m.RESTMapping(gk)
}

// discovery is the cached discovery that short names are expanded with,
// made on first use: a gate, which names its kind, never needs it.
func (w *Waiter) discovery() discovery.CachedDiscoveryInterface {
	w.discoOnce.Do(func() { w.disco = memory.NewMemCacheClient(w.mapper.disco) })
	return w.disco
}

// resetDiscovery forgets what discovery said, so that types added since are
// found.
func (w *Waiter) resetDiscovery() {
	w.mapper.Reset()
	w.discovery().Invalidate()
}

// AwaitKind waits until the API server serves gvk: a CustomResourceDefinition
// that serves it Established, watched as a gate watches it, and discovery
// caught up with it. report, when set, receives what is seen meanwhile. A
// kind no CRD can add (one of a built-in group) is an ErrNotServable error
// at once.
func (w *Waiter) AwaitKind(ctx context.Context, gvk schema.GroupVersionKind, report func(Progress)) error {
	_, err := w.mapping(ctx, gvk, newReporter(report))
	return err
}

// mapping finds the resource of a kind, waiting for a CRD to serve it when
// it is not served yet, and then for discovery to catch up.
func (w *Waiter) mapping(ctx context.Context, gvk schema.GroupVersionKind, rep *reporter) (*meta.RESTMapping, error) {
	backoff := wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 1 << 30, Cap: 2 * time.Second}
	q := []typeQuery{{kind: gvk.Kind, group: gvk.Group, version: gvk.Version}}
	crdSeen := false
	for {
		m, err := w.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err == nil {
			return m, nil
		}
		if !meta.IsNoMatchError(err) {
			rep.report(Progress{State: StateWaitingForType, Seen: "discovery failed: " + err.Error()})
			if err := sleep(ctx, backoff.Step()); err != nil {
				return nil, err
			}
			w.mapper.Reset()
			continue
		}
		if !strings.Contains(gvk.Group, ".") {
			// Only CRDs add kinds, and their groups always contain a dot.
			return nil, fmt.Errorf("%w: kind %s is not served by this API server, and no CustomResourceDefinition can add it to the built-in group %q: check the kind and version", ErrNotServable, gvk, gvk.Group)
		}
		if crdSeen {
			// The CRD is Established but discovery has not caught up yet.
			rep.report(Progress{State: StateWaitingForType, Seen: fmt.Sprintf("CRD for %s established; waiting for discovery", gvk.GroupKind())})
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return nil, err
			}
			w.mapper.Reset()
			continue
		}
		rep.report(Progress{State: StateWaitingForType, Seen: fmt.Sprintf("%s is not served yet: no CustomResourceDefinition for it is established", gvk)})
		_, found, err := w.awaitCRD(ctx, q, rep)
		if err != nil {
			return nil, err
		}
		crdSeen = found
		w.mapper.Reset()
	}
}

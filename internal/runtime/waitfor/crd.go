package waitfor

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/vigilkit/vigil/gate"
)

// crdGVR is the resource of CustomResourceDefinitions, which add the types
// not served yet.
var crdGVR = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")

// typeQuery is one reading of a type that a CRD could come to serve: a kind,
// or a name (plural, singular, lower-case kind or short name), in a group,
// in a version or, when version is empty, in any version it serves.
type typeQuery struct {
	kind    string // exact kind; when empty, name is matched instead
	name    string // lower case
	group   string
	version string
}

// crdServes says whether crd serves one of qs, and the type it serves; why
// says what was seen of a CRD that names one but does not serve it yet.
func crdServes(crd *unstructured.Unstructured, qs []typeQuery) (Type, bool, string) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	singular, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "singular")
	shorts, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "shortNames")
	scope, _, _ := unstructured.NestedString(crd.Object, "spec", "scope")
	names := append([]string{plural, singular, strings.ToLower(kind)}, shorts...)
	var served []string
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		if vm, ok := v.(map[string]any); ok && vm["served"] == true {
			if n, ok := vm["name"].(string); ok {
				served = append(served, n)
			}
		}
	}
	sort.Slice(served, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(served[i], served[j]) > 0 })
	for _, q := range qs {
		if group != q.group {
			continue
		}
		if q.kind != "" && kind != q.kind || q.kind == "" && !slices.Contains(names, q.name) {
			continue
		}
		ver := ""
		switch {
		case q.version != "" && slices.Contains(served, q.version):
			ver = q.version
		case q.version != "":
			return Type{}, false, fmt.Sprintf("CustomResourceDefinition %s does not serve version %s", crd.GetName(), q.version)
		case len(served) > 0:
			ver = served[0]
		default:
			return Type{}, false, fmt.Sprintf("CustomResourceDefinition %s serves no version", crd.GetName())
		}
		if ok, why := gate.Established().Check(crd); !ok {
			return Type{}, false, fmt.Sprintf("CustomResourceDefinition %s is not established yet: %s", crd.GetName(), why)
		}
		return Type{
			GVK:        schema.GroupVersionKind{Group: group, Version: ver, Kind: kind},
			Resource:   plural,
			Namespaced: scope == "Namespaced",
		}, true, ""
	}
	return Type{}, false, ""
}

// awaitCRD lists and then watches CRDs until one that serves one of qs is
// Established, and returns the type it serves. found is false when the CRDs
// could not be listed or the watch ended: the caller asks discovery again
// (without the right to list CRDs, after crdPoll).
func (w *Waiter) awaitCRD(ctx context.Context, qs []typeQuery, rep *reporter) (t Type, found bool, err error) {
	check := func(u *unstructured.Unstructured) bool {
		var why string
		t, found, why = crdServes(u, qs)
		if why != "" {
			rep.report(Progress{State: StateWaitingForType, Seen: why})
		}
		return found
	}
	crds := w.dyn.Resource(crdGVR)
	list, err := crds.List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		w.log.V(1).Info("cannot watch CRDs; asking discovery again periodically", "kind", qs[0].String())
		rep.report(Progress{State: StateWaitingForType, Seen: fmt.Sprintf("cannot list CustomResourceDefinitions (forbidden); asking discovery every %s", w.crdPoll)})
		return Type{}, false, sleep(ctx, w.crdPoll)
	}
	if err != nil {
		return Type{}, false, sleep(ctx, time.Second)
	}
	for i := range list.Items {
		if check(&list.Items[i]) {
			return t, true, nil
		}
	}
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return crds.Watch(ctx, o)
	}}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), lw)
	if err != nil {
		return Type{}, false, err
	}
	defer rw.Stop()
	for {
		select {
		case <-ctx.Done():
			return Type{}, false, context.Cause(ctx)
		case ev, ok := <-rw.ResultChan():
			if !ok {
				return Type{}, false, nil // relist
			}
			if u, isU := ev.Object.(*unstructured.Unstructured); isU && ev.Type != watch.Deleted && check(u) {
				return t, true, nil
			}
		}
	}
}

// String says what q waits for, as progress and messages show it.
func (q typeQuery) String() string {
	what := q.name
	if q.kind != "" {
		what = q.kind
	}
	s := fmt.Sprintf("%s in group %s", what, q.group)
	if q.version != "" {
		s += " version " + q.version
	}
	return s
}

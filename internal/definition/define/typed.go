package define

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/store"
)

// Convert turns an unstructured object into a fresh T, by way of JSON: the
// result the API machinery's reflective converter is specified to give (its
// mismatch detector compares against this very round trip), without its
// field cache, which copies a whole map for each struct field it meets for
// the first time: for a CRD's nested schema types, about a megabyte of
// garbage in a short-lived gate process.
func Convert[T client.Object](proto T, u *unstructured.Unstructured) (T, error) {
	var zero T
	if _, ok := any(proto).(*unstructured.Unstructured); ok {
		return any(u.DeepCopy()).(T), nil
	}
	obj := reflect.New(reflect.TypeOf(proto).Elem()).Interface().(T)
	data, err := utiljson.Marshal(u.Object)
	if err == nil {
		err = utiljson.Unmarshal(data, obj)
	}
	if err != nil {
		return zero, fmt.Errorf("convert %s %s to %T: %w", u.GetKind(), u.GetName(), obj, err)
	}
	return obj, nil
}

// ConvertAll converts each object, failing the gate for good on the first
// that does not convert.
func ConvertAll[T client.Object](proto T, objs []*unstructured.Unstructured) ([]T, error) {
	list := make([]T, 0, len(objs))
	for _, o := range objs {
		t, err := Convert(proto, o)
		if err != nil {
			return nil, gate.Permanent(err)
		}
		list = append(list, t)
	}
	return list, nil
}

// Predicate wraps a typed predicate, declared at site, as a condition.
func Predicate[T client.Object](proto T, pred func(T) bool, site string) gate.Cond {
	return predCond[T]{proto: proto, pred: pred, site: site}
}

type predCond[T client.Object] struct {
	proto T
	pred  func(T) bool
	site  string
}

func (p predCond[T]) Check(u *unstructured.Unstructured) (bool, string) {
	if u == nil {
		return false, "not found"
	}
	obj, err := Convert(p.proto, u)
	if err != nil {
		return false, err.Error()
	}
	if p.pred(obj) {
		return true, ""
	}
	return false, "found, predicate not satisfied"
}

func (p predCond[T]) String() string { return "match the predicate at " + p.site }

// RunSample calls fn until its sample matches (any sample, when match is
// nil): the first at once, later ones every s.Every with jitter, each bounded
// by s.SampleTimeout, errors backed off. seen is told each sample that does
// not match and each error.
func RunSample[S any](ctx context.Context, fn func(context.Context) (S, error), match func(S) bool, s *Sample, seen func(found bool, what string)) (S, error) {
	var zero S
	failures := 0
	for {
		sctx, cancel := context.WithTimeout(ctx, s.SampleTimeout)
		v, err := fn(sctx)
		cancel()
		wait := s.Every
		switch {
		case gate.IsPermanent(err):
			return zero, err
		case err != nil:
			failures++
			seen(false, "sample failed: "+err.Error())
			// Back off: twice the interval per failure in a row, at most ten intervals.
			wait = s.Every * time.Duration(min(1<<min(failures, 4), 10))
		case match == nil || match(v):
			return v, nil
		default:
			failures = 0
			seen(true, fmt.Sprintf("sample %s, not matching", truncate(fmt.Sprintf("%+v", v), 120)))
		}
		// Jitter of up to a tenth keeps replicas from sampling in lockstep.
		wait += time.Duration(rand.Int64N(int64(wait)/10 + 1))
		select {
		case <-ctx.Done():
			return zero, context.Cause(ctx)
		case <-time.After(wait):
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ListOf returns fresh lists of gvk's kind: unstructured for an unstructured
// proto, else the list type s registers beside the kind.
func ListOf(s *runtime.Scheme, proto client.Object, gvk schema.GroupVersionKind) (func() client.ObjectList, error) {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	if _, ok := proto.(*unstructured.Unstructured); ok {
		return func() client.ObjectList {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(listGVK)
			return l
		}, nil
	}
	if _, ok := proto.(*metav1.PartialObjectMetadata); ok {
		return func() client.ObjectList {
			l := &metav1.PartialObjectMetadataList{}
			l.SetGroupVersionKind(listGVK)
			return l
		}, nil
	}
	if _, err := s.New(listGVK); err != nil {
		return nil, fmt.Errorf("%s is registered in the module's scheme without its list type %s: register both", gvk.Kind, listGVK.Kind)
	}
	return func() client.ObjectList {
		o, _ := s.New(listGVK)
		return o.(client.ObjectList)
	}, nil
}

// FinishOne is the Finish of a gate on one object: the object converted to T,
// then the callback *then holds when the gate is done (nil for none), and the
// object handed off.
func FinishOne[T client.Object](proto T, then *func(context.Context, T, store.Store) error) func(context.Context, []*unstructured.Unstructured, store.Store) (any, error) {
	return func(ctx context.Context, objs []*unstructured.Unstructured, s store.Store) (any, error) {
		var obj T
		if len(objs) > 0 {
			var err error
			if obj, err = Convert(proto, objs[0]); err != nil {
				return nil, gate.Permanent(err)
			}
		}
		if err := call(ctx, *then, obj, s); err != nil {
			return nil, err
		}
		if len(objs) == 0 {
			return nil, nil
		}
		return obj, nil
	}
}

// FinishAll is the Finish of a gate over a set: the objects converted to T,
// the callback, and the set handed off.
func FinishAll[T client.Object](proto T, then *func(context.Context, []T, store.Store) error) func(context.Context, []*unstructured.Unstructured, store.Store) (any, error) {
	return func(ctx context.Context, objs []*unstructured.Unstructured, s store.Store) (any, error) {
		list, err := ConvertAll(proto, objs)
		if err != nil {
			return nil, err
		}
		if err := call(ctx, *then, list, s); err != nil {
			return nil, err
		}
		return list, nil
	}
}

// Fallback is a gate's OnTimeout: fn's value, run through the callback *then
// holds when the timeout expires, handed off like a found one.
func Fallback[V any](fn func(context.Context) (V, error), then *func(context.Context, V, store.Store) error) func(context.Context, store.Store) (any, error) {
	return func(ctx context.Context, s store.Store) (any, error) {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		if err := call(ctx, *then, v, s); err != nil {
			return nil, err
		}
		return v, nil
	}
}

func call[V any](ctx context.Context, fn func(context.Context, V, store.Store) error, v V, s store.Store) error {
	if fn == nil {
		return nil
	}
	return fn(ctx, v, s)
}

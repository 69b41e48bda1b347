package audit

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/pager"
)

// DefaultPageSize is how many objects one page of the audit's lists holds
// when Auditor.PageSize is zero, where it pages (see eachStreamed). The audit holds at most two pages at once
// (the one it evaluates and the next, fetched meanwhile), so its memory is
// bounded by the page size times the size of the largest object, not by the
// size of the cluster: with 50 and the API server's 1.5 MiB limit on one
// object, two decoded pages stay near 150 MiB at worst, inside the watcher's
// 512Mi; with objects of 256 KiB, about 25 MiB.
const DefaultPageSize = 50

// eachItem calls fn with each object that list returns, page by page, at
// most pageSize objects a page and two pages in memory at once. fn must not
// keep the object: it is dropped once fn returns.
//
// A continue token that expires (410 Gone, after etcd compacts, typically
// when one run takes more than five minutes) would end the run, and a full
// list (the pager's other fallback, off here) would hold the whole cluster
// at once: the list goes on instead with the token the API server sends
// with the 410, which resumes after the last object seen. That part is no
// longer one consistent snapshot, which an audit does not need: each object
// is judged as it is when read.
func eachItem(ctx context.Context, pageSize int64, opts metav1.ListOptions, list func(context.Context, metav1.ListOptions) (runtime.Object, error), fn func(runtime.Object) error) error {
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	p := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		page, err := list(ctx, o)
		if o.Continue == "" || !apierrors.IsResourceExpired(err) {
			return page, err
		}
		var status apierrors.APIStatus
		if !errors.As(err, &status) || status.Status().Continue == "" {
			return page, err
		}
		o.Continue = status.Status().Continue
		return list(ctx, o)
	})
	p.PageSize = pageSize
	p.FullListIfExpired = false
	p.PageBufferSize = 0
	return p.EachListItem(ctx, opts, fn)
}

// unstructuredList is a dynamic client's List, as eachItem takes it.
func unstructuredList(c dynamic.ResourceInterface) func(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }
}

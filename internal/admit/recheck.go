package admit

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/callctx"
	"github.com/vigilkit/vigil/internal/fresh"
	"github.com/vigilkit/vigil/internal/spec"
)

// validateOne runs a validation, and once more on fresh data when its
// verdict rests on what the listers it read hold: see Options.Recheck.
func (rv *reviewRun) validateOne(ctx context.Context, b *spec.Binding, obj, old client.Object) (admission.Verdict, error) {
	once := func() (admission.Verdict, *fresh.Reads, error) {
		reads := rv.reads()
		v, err := call(func() (admission.Verdict, error) {
			ctx, in := rv.input(ctx, b)
			return b.Validate(callctx.WithReads(ctx, reads), obj, old, in)
		})
		return v, reads, err
	}
	v, reads, err := once()
	if err != nil || !rechecked(reads, !v.Allowed()) {
		return v, err
	}
	waited, err := rv.refresh(ctx, reads)
	if err != nil {
		rv.h.recheck(b, "failed", waited)
		return v, err
	}
	again, _, err := once()
	outcome := "same"
	if err != nil || again.Allowed() != v.Allowed() {
		outcome = "changed"
	}
	rv.h.recheck(b, outcome, waited)
	return again, err
}

// reads is a fresh record of lister reads, or nil when the handler does not
// recheck.
func (rv *reviewRun) reads() *fresh.Reads {
	if !rv.h.opts.Recheck {
		return nil
	}
	return &fresh.Reads{}
}

// rechecked reports whether a decision must be made again on fresh data: it
// read a lister, and it refused (refused) or a read found an object.
func rechecked(reads *fresh.Reads, refused bool) bool {
	if reads == nil || len(reads.Barriers()) == 0 {
		return false
	}
	return refused || reads.Found()
}

// refresh waits until the listers read have caught up with the API server.
func (rv *reviewRun) refresh(ctx context.Context, reads *fresh.Reads) (time.Duration, error) {
	began := time.Now()
	if err := fresh.WaitAll(ctx, reads.Barriers()); err != nil {
		return time.Since(began), fmt.Errorf("the decision rests on cached data that could not be confirmed fresh: %w", err)
	}
	return time.Since(began), nil
}

// mutateOne runs a mutation, and once more on fresh data, from the object as
// it was before, when its outcome rests on what the listers it read hold.
func (rv *reviewRun) mutateOne(ctx context.Context, b *spec.Binding, objs *objects, obj, old client.Object) error {
	var before client.Object
	if rv.h.opts.Recheck {
		before = obj.DeepCopyObject().(client.Object)
	}
	once := func(obj client.Object) (*fresh.Reads, error) {
		reads := rv.reads()
		_, err := call(func() (admission.Verdict, error) {
			ctx, in := rv.input(ctx, b)
			return admission.Verdict{}, b.Mutate(callctx.WithReads(ctx, reads), obj, old, in)
		})
		return reads, err
	}
	reads, err := once(obj)
	if !rechecked(reads, err != nil) {
		return err
	}
	waited, ferr := rv.refresh(ctx, reads)
	if ferr != nil {
		rv.h.recheck(b, "failed", waited)
		return ferr
	}
	objs.cur = before
	_, again := once(before)
	outcome := "same"
	if (again == nil) != (err == nil) {
		outcome = "changed"
	}
	rv.h.recheck(b, outcome, waited)
	return again
}

package admit

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/fresh"
)

// validateOne runs a validation, and once more on fresh data when its
// verdict rests on what the listers it read hold: see Options.Recheck.
func (rv *reviewRun) validateOne(ctx context.Context, b *spec.Binding, obj, old client.Object) (admission.Verdict, error) {
	v, reads, err := rv.validateOnce(ctx, b, obj, old)
	if err != nil || !rechecked(reads, !v.Allowed()) {
		return v, err
	}
	waited, err := rv.refresh(ctx, reads)
	if err != nil {
		rv.h.recheck(b, "failed", waited)
		return v, err
	}
	again, _, err := rv.validateOnce(ctx, b, obj, old)
	outcome := "same"
	if err != nil || again.Allowed() != v.Allowed() {
		outcome = "changed"
	}
	rv.h.recheck(b, outcome, waited)
	return again, err
}

// validateOnce runs a validation once; reads is the record of its lister
// reads (nil when the handler does not recheck), good until the next run.
func (rv *reviewRun) validateOnce(ctx context.Context, b *spec.Binding, obj, old client.Object) (v admission.Verdict, reads *fresh.Reads, err error) {
	in := rv.input(ctx, b)
	defer recovered(&err)
	v, err = b.Validate(in.ctx, obj, old, in.call)
	return v, in.reads, err
}

// mutateOnce runs a mutation once, as validateOnce runs a validation.
func (rv *reviewRun) mutateOnce(ctx context.Context, b *spec.Binding, obj, old client.Object) (reads *fresh.Reads, err error) {
	in := rv.input(ctx, b)
	defer recovered(&err)
	return in.reads, b.Mutate(in.ctx, obj, old, in.call)
}

// rechecked reports whether a decision must be made again on fresh data: it
// read a lister, and it refused (refused) or a read found an object.
func rechecked(reads *fresh.Reads, refused bool) bool {
	if reads == nil || len(reads.All()) == 0 {
		return false
	}
	return refused || reads.Found()
}

// refresh waits until the listers read have caught up with the API server.
func (rv *reviewRun) refresh(ctx context.Context, reads *fresh.Reads) (time.Duration, error) {
	began := time.Now()
	if err := fresh.WaitAll(ctx, reads.All()); err != nil {
		return time.Since(began), fmt.Errorf("the decision rests on cached data that could not be confirmed fresh: %w", err)
	}
	return time.Since(began), nil
}

// mutateOne runs a mutation, and once more on fresh data, from the object as
// it was before, when its outcome rests on what the listers it read hold.
func (rv *reviewRun) mutateOne(ctx context.Context, b *spec.Binding, objs *objects, obj, old client.Object) error {
	// The object as this binding found it, to run it again from: decoded
	// again from the request when no mutation edited it before (most
	// requests, which are never made again, copy nothing), else a copy.
	var before client.Object
	if rv.h.opts.Recheck && !objs.pristine {
		before = obj.DeepCopyObject().(client.Object)
	}
	objs.pristine = false
	reads, err := rv.mutateOnce(ctx, b, obj, old)
	if !rechecked(reads, err != nil) {
		return err
	}
	waited, ferr := rv.refresh(ctx, reads)
	if ferr != nil {
		rv.h.recheck(b, "failed", waited)
		return ferr
	}
	if before == nil {
		if before, ferr = objs.asSent(b); ferr != nil {
			rv.h.recheck(b, "failed", waited)
			return ferr
		}
	}
	objs.cur = before
	_, again := rv.mutateOnce(ctx, b, before, old)
	outcome := "same"
	if (again == nil) != (err == nil) {
		outcome = "changed"
	}
	rv.h.recheck(b, outcome, waited)
	return again
}

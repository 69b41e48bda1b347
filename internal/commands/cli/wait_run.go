package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/internal/runtime/progress"
	"github.com/vigilkit/vigil/internal/runtime/waitfor"
)

// waitJob is one wait: one named object, or one type with a selector.
type waitJob struct {
	typ   waitfor.Type
	spec  waitfor.Spec
	rec   *waitRecorder
	label string // resource/name, or resource alone for a selector
	item  *progress.Item

	objs []*unstructured.Unstructured
	err  error
	done bool
}

var (
	errWaitCheckedOnce = errors.New("checked once")
	errWaitEnough      = errors.New("enough waits are done")
)

// waitTimeoutError is a timeout with vigil's own message; exitCode maps it to
// 124 through context.DeadlineExceeded.
type waitTimeoutError struct{ msg string }

func (e *waitTimeoutError) Error() string { return e.msg }
func (e *waitTimeoutError) Unwrap() error { return context.DeadlineExceeded }

// waitCheckOnceLimit bounds a --timeout=0 check, whose list must complete.
const waitCheckOnceLimit = 30 * time.Second

// crdGroupKind is the only type --for=established applies to.
var crdGroupKind = apiextensionsv1.Kind("CustomResourceDefinition")

// Run waits and prints the objects that satisfy the condition.
func (o *WaitOptions) Run(ctx context.Context, out io.Writer) error {
	waiter, err := waitfor.New(o.config, logr.FromContextOrDiscard(ctx))
	if err != nil {
		return err
	}

	checkOnce := o.timeout == 0
	wctx, cancel := ctx, context.CancelFunc(func() {})
	switch {
	case o.timeout > 0:
		wctx, cancel = context.WithTimeout(ctx, o.timeout)
	case checkOnce:
		wctx, cancel = context.WithTimeout(ctx, waitCheckOnceLimit)
	}
	defer cancel()

	prog := newWaitProgress(o.errOut)
	stopProgress := prog.Start(o.progressInterval)
	defer stopProgress()

	jobs, err := o.jobs(wctx, waiter, prog)
	if err != nil {
		return err
	}
	need := len(jobs)
	if o.named && o.anyOne {
		need = 1
	} else if o.named && o.atLeast > 0 {
		need = o.atLeast
	}
	ok := runWaitJobs(wctx, waiter, jobs, need, checkOnce)
	stopProgress()
	if ok {
		return o.print(out, jobs)
	}
	return o.failure(ctx, wctx, jobs)
}

// newWaitProgress says on errOut, every --progress-interval, what is still
// waited for, for how long and what was last seen.
func newWaitProgress(errOut io.Writer) *progress.Reporter {
	return progress.New(func(l progress.Line) {
		waited := l.Waited
		if waited >= 10*time.Second {
			waited = waited.Round(time.Second)
		} else {
			waited = waited.Round(100 * time.Millisecond)
		}
		fmt.Fprintf(errOut, "vigil: waiting %s so far for %s; last seen: %s\n", waited, l.What, l.Seen)
	})
}

// jobs resolves every type, waiting here for a type not served yet, and
// returns one job per named object or per type with a selector.
func (o *WaitOptions) jobs(ctx context.Context, waiter *waitfor.Waiter, prog *progress.Reporter) ([]*waitJob, error) {
	var jobs []*waitJob
	for _, t := range o.targets {
		for _, arg := range strings.Split(t.typ, ",") {
			typ, err := o.resolve(ctx, waiter, arg, prog)
			if err != nil {
				return nil, o.typeError(ctx, arg, t.names, err)
			}
			if o.established && typ.GVK.GroupKind() != crdGroupKind {
				return nil, fmt.Errorf("--for=established: expected a CustomResourceDefinition (crd/NAME), got %s: established applies only to CRDs; for other kinds use --for=ready or --for=condition=Available", typ.GVK.GroupKind())
			}
			if v, ok := o.cond.(gate.Validator); ok {
				if err := v.Validate(typ.GVK); err != nil {
					return nil, fmt.Errorf("--for: %w", err)
				}
			}
			base := waitfor.Spec{GVK: typ.GVK, Namespace: o.namespace, Cond: o.cond, Mode: waitfor.All}
			if !typ.Namespaced {
				base.Namespace = ""
			}
			for _, name := range t.names {
				s := base
				s.Name = name
				jobs = append(jobs, &waitJob{typ: typ, spec: s, label: typ.Resource + "/" + name})
			}
			if o.named {
				continue
			}
			s := base
			s.Labels, s.Fields = o.labels, o.fields
			if o.anyOne {
				s.Mode, s.N = waitfor.AtLeast, 1
			} else if o.atLeast > 0 {
				s.Mode, s.N = waitfor.AtLeast, o.atLeast
			}
			jobs = append(jobs, &waitJob{typ: typ, spec: s, label: typ.Resource})
		}
	}
	for _, j := range jobs {
		j.rec = &waitRecorder{inner: j.spec.Cond}
		j.spec.Cond = j.rec
		j.item = prog.Add(j.spec.Describe(), "starting")
	}
	return jobs, nil
}

// resolve finds the type arg names. A type not served yet is waited for,
// saying so on errOut; with --timeout=0 it is an error wrapping
// waitfor.ErrNotServed instead.
func (o *WaitOptions) resolve(ctx context.Context, waiter *waitfor.Waiter, arg string, prog *progress.Reporter) (waitfor.Type, error) {
	warn := func(msg string) { fmt.Fprintf(o.errOut, "Warning: %s\n", msg) }
	typ, err := waiter.Resolve(arg, warn)
	var notServed *waitfor.NotServedError
	if !errors.As(err, &notServed) || o.timeout == 0 {
		return typ, err
	}
	where, seen := "in group "+notServed.Group+" that serves it", fmt.Sprintf("no CustomResourceDefinition in group %s names %s", notServed.Group, notServed.Name)
	if notServed.Version != "" {
		where += " in version " + notServed.Version
		seen += " in version " + notServed.Version
	}
	fmt.Fprintf(o.errOut, "vigil: the server doesn't serve %s yet; waiting for a CustomResourceDefinition %s to be established (kubectl wait would fail here)\n", arg, where)
	item := prog.Add("type "+arg, seen)
	defer item.Done()
	typ, err = waiter.AwaitServed(ctx, notServed, func(p waitfor.Progress) { item.See(p.Seen) })
	if err != nil {
		return waitfor.Type{}, err
	}
	fmt.Fprintf(o.errOut, "vigil: %s is served now as %s\n", arg, typ.GVK.GroupKind())
	return typ, nil
}

// runWaitJobs runs the jobs at once until need of them are done, one fails
// for good, or ctx ends; it reports whether need of them are done. With
// checkOnce a job stops after its first evaluation.
func runWaitJobs(ctx context.Context, waiter *waitfor.Waiter, jobs []*waitJob, need int, checkOnce bool) bool {
	gctx, gcancel := context.WithCancelCause(ctx)
	defer gcancel(nil)
	var (
		mu       sync.Mutex
		finished int
		wg       sync.WaitGroup
	)
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jctx, jcancel := context.WithCancelCause(gctx)
			defer jcancel(nil)
			report := func(p waitfor.Progress) {
				seen := p.Seen
				if seen == "" {
					seen = p.State
				}
				j.item.See(seen)
				if checkOnce && p.State != waitfor.StateDone && p.State != waitfor.StateWaitingForType {
					jcancel(errWaitCheckedOnce)
				}
			}
			objs, err := waiter.Wait(jctx, j.spec, report)
			j.item.Done()
			mu.Lock()
			defer mu.Unlock()
			j.objs, j.err, j.done = objs, err, err == nil
			if err == nil {
				finished++
				if finished >= need {
					gcancel(errWaitEnough)
				}
			} else if waitHardError(err) {
				gcancel(err)
			}
		}()
	}
	wg.Wait()
	return finished >= need
}

// waitHardError says whether err ends the whole wait: not a deadline, a check
// done, or a wait stopped because enough others are done.
func waitHardError(err error) bool {
	return !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) &&
		!errors.Is(err, errWaitCheckedOnce) && !errors.Is(err, errWaitEnough)
}

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/runtime/waitfor"
)

// What `vigil wait` says at the end: the objects on stdout as kubectl wait
// prints them, or kubectl's error line per object not done on stderr and an
// error with what was last seen.

// print prints the objects of the jobs that are done, in argument order.
func (o *WaitOptions) print(out io.Writer, jobs []*waitJob) error {
	p := &waitPrinter{format: o.output}
	for _, j := range jobs {
		if !j.done {
			continue
		}
		objs := j.objs
		if len(objs) == 0 {
			// Satisfied by absence (delete): print what was seen, as kubectl
			// does; nothing when the object was gone from the start.
			objs = j.rec.seenObjects()
		}
		for _, obj := range objs {
			if err := p.print(out, j.typ, obj); err != nil {
				return err
			}
		}
	}
	return nil
}

// failure explains why the jobs did not finish: kubectl's line per job on
// errOut, and an error with what was last seen.
func (o *WaitOptions) failure(ctx, wctx context.Context, jobs []*waitJob) error {
	errOut := o.errOut
	for _, j := range jobs {
		if j.err != nil && waitHardError(j.err) {
			return j.err
		}
	}
	checkOnce := o.timeout == 0
	timedOut := errors.Is(context.Cause(wctx), context.DeadlineExceeded)
	interrupted := ctx.Err() != nil
	// A timeout is one line per object, kubectl's, with what vigil last saw
	// of it: the error returned says no more, and is not said again
	// (cmdutil.Reported).
	var unmet []string
	for _, j := range jobs {
		if j.done {
			continue
		}
		on := j.label
		if j.spec.Name == "" {
			if n := j.rec.firstUnmet(); n != "" {
				on = j.typ.Resource + "/" + n
			}
		}
		seen := j.item.Seen()
		switch {
		case interrupted:
		case checkOnce && !timedOut:
			fmt.Fprintf(errOut, "error: condition not met for %s\n", on)
		case checkOnce:
			fmt.Fprintf(errOut, "error: timed out waiting for the condition on %s (--timeout=0: the check did not complete within %s; last seen: %s)\n", on, waitCheckOnceLimit, seen)
		default:
			fmt.Fprintf(errOut, "error: timed out waiting for the condition on %s (after %s; last seen: %s)\n", on, o.timeout, seen)
		}
		unmet = append(unmet, fmt.Sprintf("%s; last seen: %s", j.spec.Describe(), seen))
	}
	what := strings.Join(unmet, "; ")
	switch {
	case interrupted:
		return fmt.Errorf("interrupted: %w: %s", context.Cause(ctx), what)
	case checkOnce && timedOut:
		return cmdutil.Reported(&waitTimeoutError{fmt.Sprintf("--timeout=0: the check did not complete within %s: %s", waitCheckOnceLimit, what)})
	case checkOnce:
		return fmt.Errorf("--timeout=0: checked once, not met: %s", what)
	case timedOut:
		return cmdutil.Reported(&waitTimeoutError{fmt.Sprintf("after %s: %s", o.timeout, what)})
	}
	return fmt.Errorf("the wait ended without the condition: %s", what)
}

// typeError reports a type that could not be resolved.
func (o *WaitOptions) typeError(ctx context.Context, typ string, names []string, err error) error {
	errOut := o.errOut
	on := []string{typ}
	if len(names) > 0 {
		on = on[:0]
		for _, n := range names {
			on = append(on, typ+"/"+n)
		}
	}
	switch {
	case errors.Is(err, waitfor.ErrNotServed):
		for _, x := range on {
			fmt.Fprintf(errOut, "error: condition not met for %s\n", x)
		}
		return fmt.Errorf("--timeout=0: checked once, not met: %w", err)
	case errors.Is(err, context.DeadlineExceeded) && errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		for _, x := range on {
			fmt.Fprintf(errOut, "error: timed out waiting for the condition on %s (after %s: type %s is still not served: no CustomResourceDefinition that serves it is established)\n", x, o.timeout, typ)
		}
		return cmdutil.Reported(&waitTimeoutError{fmt.Sprintf("after %s: type %s is still not served: no CustomResourceDefinition that serves it is established", o.timeout, typ)})
	}
	return err
}

// waitObjectName prints an object's type and name as kubectl's -o name does.
func waitObjectName(t waitfor.Type, name string) string {
	kind := strings.ToLower(t.GVK.Kind)
	if t.GVK.Group != "" {
		kind += "." + t.GVK.Group
	}
	return kind + "/" + name
}

// waitPrinter prints objects as kubectl wait does.
type waitPrinter struct {
	format string
	yamls  int
}

func (p *waitPrinter) print(out io.Writer, ti waitfor.Type, obj *unstructured.Unstructured) error {
	switch p.format {
	case "":
		_, err := fmt.Fprintf(out, "%s condition met\n", waitObjectName(ti, obj.GetName()))
		return err
	case "name":
		_, err := fmt.Fprintln(out, waitObjectName(ti, obj.GetName()))
		return err
	}
	// kubectl leaves managedFields out of json and yaml by default.
	obj = obj.DeepCopy()
	obj.SetManagedFields(nil)
	if p.format == "json" {
		data, err := json.MarshalIndent(obj, "", "    ")
		if err != nil {
			return err
		}
		_, err = out.Write(append(data, '\n'))
		return err
	}
	data, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	if p.yamls++; p.yamls > 1 {
		if _, err := io.WriteString(out, "---\n"); err != nil {
			return err
		}
	}
	_, err = out.Write(data)
	return err
}

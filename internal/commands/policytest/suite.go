package policytest

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Runner answers one case: Run's in process, a Cluster's through an API
// server.
type Runner func(ctx context.Context, c Case) (Result, error)

// InProcess is the Runner of Run for module m.
func InProcess(m *spec.Module) Runner {
	return func(ctx context.Context, c Case) (Result, error) { return Run(ctx, m, c) }
}

// RunAll runs every case, one after the other, and compares each answer
// with what it expects.
func RunAll(ctx context.Context, cases []Case, run Runner) []Outcome {
	out := make([]Outcome, 0, len(cases))
	for _, c := range cases {
		began := time.Now()
		r, err := run(ctx, c)
		o := Outcome{Case: c, Result: r, Err: err, Elapsed: time.Since(began)}
		if err == nil {
			o.Diff = Diff(c, r)
		}
		out = append(out, o)
	}
	return out
}

// Report prints one line per case — ok or FAIL, its name and time — with
// the differences of each failing one beneath it, then a summary line; it
// returns the number of cases that failed.
func Report(w io.Writer, outcomes []Outcome) int {
	failed := 0
	var total time.Duration
	for _, o := range outcomes {
		total += o.Elapsed
		if o.Passed() {
			fmt.Fprintf(w, "ok    %s (%s)\n", o.Case.Name, round(o.Elapsed))
			continue
		}
		failed++
		fmt.Fprintf(w, "FAIL  %s (%s)  %s\n", o.Case.Name, round(o.Elapsed), o.Case.File)
		if o.Err != nil {
			fmt.Fprintf(w, "      did not run: %v\n", o.Err)
			continue
		}
		for _, d := range o.Diff {
			fmt.Fprintf(w, "      %s\n", d)
		}
	}
	if failed == 0 {
		fmt.Fprintf(w, "PASS  %d cases in %s\n", len(outcomes), round(total))
	} else {
		fmt.Fprintf(w, "FAIL  %d of %d cases in %s\n", failed, len(outcomes), round(total))
	}
	return failed
}

func round(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(100 * time.Microsecond)
}

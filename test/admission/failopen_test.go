package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
)

// FailOpenAfter is a definition mistake on a fail-closed capability, in
// either order, and with a bound that is not positive; named at its call.
func TestFailOpenAfterMistakes(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []vigil.CapabilityOption
		want string
	}{
		{"fail-closed", []vigil.CapabilityOption{vigil.FailClosed(), vigil.FailOpenAfter(time.Minute)}, "a fail-closed capability never has an unguarded window: it cannot fail open"},
		{"fail-closed given after", []vigil.CapabilityOption{vigil.FailOpenAfter(time.Minute), vigil.FailClosed()}, "a fail-closed capability never has an unguarded window: it cannot fail open"},
		{"zero", []vigil.CapabilityOption{vigil.FailOpenAfter(0)}, "the bound must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vigil.NewModule("mod", vigil.Options{})
			c := m.Capability("strict", tc.opts...)
			vigil.When(c, &corev1.Pod{}).IsCreated().Validate(func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict { return admission.Allow() })
			err := m.Verify()
			if err == nil {
				t.Fatal("Verify() = nil, want the mistake")
			}
			for _, w := range []string{"failopen_test.go:", "capability strict: FailOpenAfter(", tc.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Verify() = %q, want it to contain %q", err, w)
				}
			}
			if code := vigil.Execute(t.Context(), m, []string{"plan"}); code != cmdutil.ExitFailed {
				t.Errorf("plan with the mistake: exit %d, want %d", code, cmdutil.ExitFailed)
			}
		})
	}
}

// plan lists a capability's outage bound under what can pass unchecked, and
// only that capability's; its opt-out label's guard never fails open.
func TestPlanShowsFailOpenAfter(t *testing.T) {
	m := vigil.NewModule("planned", vigil.Options{})
	lenient := m.Capability("lenient", vigil.FailOpenAfter(90*time.Second), vigil.OptOutLabel("vigil.dev/ignore", "alice"))
	vigil.When(lenient, &corev1.ConfigMap{}).IsCreated().Named("label").Mutate(func(context.Context, *vigil.Request[*corev1.ConfigMap]) error { return nil })
	firm := m.Capability("firm")
	vigil.When(firm, &corev1.Pod{}).IsCreated().Named("no-root").Validate(func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict { return admission.Allow() })
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
	out := testkit.CaptureStdout(t, func() {
		if code := vigil.Execute(t.Context(), m, []string{"plan"}); code != 0 {
			t.Errorf("plan exit %d", code)
		}
	})
	want := "fails open after 1m30s of outage (FailOpenAfter, failopen_test.go:"
	if !strings.Contains(out, want) || !strings.Contains(out, "the label's guard never fails open") {
		t.Errorf("plan lacks %q and the guard:\n%s", want, out)
	}
	if n := strings.Count(out, "fails open after"); n != 1 {
		t.Errorf("the outage bound is listed %d times, want once (lenient's):\n%s", n, out)
	}
}

package cmdutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestExitCodeMapsOutcomes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("boom"), ExitFailed},
		{fmt.Errorf("wait for crd: %w", context.DeadlineExceeded), ExitTimedOut},
		{context.Canceled, ExitFailed},
	} {
		var b bytes.Buffer
		if got := ExitCode(&b, tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
		if tc.err != nil && b.Len() == 0 {
			t.Errorf("ExitCode(%v) printed nothing", tc.err)
		}
	}
}

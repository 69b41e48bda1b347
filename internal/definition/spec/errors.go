package spec

import "errors"

// ErrTimedOut ends a gate phase whose required gate ran out of its Timeout.
// Every command that returns an error wrapping it exits 124 (see
// cmdutil.ExitCode), as timeout(1) does.
var ErrTimedOut = errors.New("timed out")

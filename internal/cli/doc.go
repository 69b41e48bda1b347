// Package cli holds vigil's command line: one cobra command per verb, each
// turning flags into an options struct whose Run(ctx, out) does the work, so
// that the logic is testable without cobra. Execute maps the outcome to the
// exit codes every vigil binary uses: 0 done, 1 failed, 124 timed out.
package cli

// Package cli holds the vigil CLI, the developer's tool: `wait`, `dev`,
// `init`, `image` (whose machinery is internal/shipping/image), `controlplane` and
// `store`, one cobra command per verb, each turning
// flags into an options struct whose Run(ctx, out) does the work, so that the
// logic is testable without cobra. Execute maps the outcome to the exit codes
// every vigil binary uses (internal/commands/cmdutil): 0 done, 1 failed, 124 timed out.
// A module binary's own command line is internal/commands/modcli: module images do not
// link this package.
//
// `vigil wait` goes as kubectl wait does, flags → options → run, one concern
// per file: wait_flags.go (cobra, WaitFlags, ToOptions), wait_options.go
// (WaitOptions, the arguments and --for), wait_run.go (resolving the types
// through internal/runtime/waitfor and running one wait per object or selector),
// wait_record.go (what each wait saw) and wait_print.go (what it prints).
// Its progress lines come from internal/runtime/progress, as the gate runner's do.
package cli

// Package cli holds the vigil CLI, the developer's tool: `wait`, `dev`,
// `init`, `controlplane` and `store`, one cobra command per verb, each turning
// flags into an options struct whose Run(ctx, out) does the work, so that the
// logic is testable without cobra. Execute maps the outcome to the exit codes
// every vigil binary uses (internal/cmdutil): 0 done, 1 failed, 124 timed out.
//
// A module binary's own command line is internal/modcli: module images do not
// link this package.
package cli

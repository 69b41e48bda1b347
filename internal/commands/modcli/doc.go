// Package modcli is a module binary's command line, what vigil.Run gives
// every module: `gate --phase N`, `admission`, `watcher`, `unregister`,
// `chart`, `manifests` and `plan`, one file each. Every command has the shape
// of kubectl's: its flags fill a Flags value (AddFlags), ToOptions checks
// them and turns them into Options, and Options.Run runs the module's role
// (gaterun.Run, admissionrole.Run, watcher.Run — each Run(ctx, cfg, module,
// Options)) or tool (internal/shipping/manifests, internal/shipping/chart, internal/operating/deadlock).
// The kubeconfig flags are declared once, by cmdutil.KubeFlags.
//
// It shares nothing with the vigil CLI (internal/commands/cli) but internal/commands/cmdutil,
// so that a module's image carries no control-plane builder, no `vigil dev`
// and no scaffold.
package modcli

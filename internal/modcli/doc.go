// Package modcli is a module binary's command line, what vigil.Run gives
// every module: `gate --phase N`, `admission`, `watcher`, `unregister`,
// `manifests` and `plan`. Each command reads the module's resolved definition
// (internal/spec) and hands it to its role (internal/gaterun,
// internal/admissionrole, internal/watcher) or tool (internal/manifests,
// internal/deadlock).
//
// It shares nothing with the vigil CLI (internal/cli) but internal/cmdutil,
// so that a module's image carries no control-plane builder, no `vigil dev`
// and no scaffold.
package modcli

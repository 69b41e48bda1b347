// Package arch holds vigil's layer table and the test that keeps the
// imports to it. It has no code: see arch_test.go.
//
// The layers, from the top (an arrow may only point down, or within roles
// and within tools):
//
//   - the public API: package vigil (the facade, where a module author
//     declares a module), vigiltest (the testing kit), and the vocabulary
//     the handlers speak: admission, gate, store, provenance;
//   - internal/definition/define: every declaration check, and the resolution of a
//     declared module into its spec;
//   - internal/definition/spec: the resolved definition, data only, and every name
//     derived from it (Leases, finalizers, webhooks, policies, reports); it
//     imports nothing that runs;
//   - the roles, which run a spec: gate phases (gaterun, waitfor), admission
//     (admissionrole, admit, webhook, registration), the watcher (watcher,
//     audit), and their helpers;
//   - the tools, which read a spec: plan and manifests (manifests, chart,
//     deadlock), the module command line (modcli, cmdutil), vigil dev and
//     the vigil command (dev, cli);
//   - leaves, which import nothing of vigil's layers above them: callctx,
//     fresh, handoff, scheme, events, progress, warming, certs, controlplane,
//     image, gcpace, gobuild.
//
// The one arrow from the facade into the tools is its entry point: Run
// hands the resolved spec to modcli, which runs the role the command line
// names. No role or tool calls back into the facade or into define; a role
// hands a handler what it needs at run time through the handler's context
// (internal/runtime/callctx).
package arch

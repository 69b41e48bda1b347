// Package spec is a module's definition resolved once into data: its name and
// namespace, its gates by phase, its capabilities and admission bindings, its
// watches, schedules and listers, the RBAC its author declared, and the
// environment variables and Secret/ConfigMap volumes its author gave to named
// containers (Env, Mount), with the startup dependencies they make
// (Requirements).
//
// The facade (package vigil) records what a module author declares and
// resolves it into one *Module; every role (gate phases, admission, watcher)
// and every tool (plan, manifests, the deadlock analysis, vigil dev) reads that
// value and nothing else. Its data fields are also the schema of `plan -o
// json` (SchemaVersion), so tools that read another module's plan read the
// same type; the functions a role runs (callbacks, handlers, the scheme) are
// not serialized. Fields added to the schema are optional (omitted when
// empty), so a plan written before them reads the same.
//
// It is data: it imports nothing that runs (internal/arch's test holds it to
// that), only Kubernetes' API types and the vocabulary of admission, gate and
// store. It owns every name derived from a definition — init containers,
// finalizers, the watcher's Lease, label selectors, webhook, policy and
// report names (names.go, webhooknames.go) — so the role that makes an object
// and the tool that renders its RBAC read the same name. Roles read a Module;
// they hand nothing back to it.
package spec

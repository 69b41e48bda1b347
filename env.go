package vigil

import (
	"path/filepath"

	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Container names a container of the module's pods, for every For (Env,
// MountSecret, MountConfigMap, RBAC): Admission, Watcher, Phase(n) or Gates.
type Container struct{ c define.Container }

var (
	// Admission is the admission pod's main container, which serves the
	// module's webhooks.
	Admission = Container{define.Container{Role: spec.AdmissionContainer}}
	// Watcher is the watcher pod's container, which runs watches, schedules
	// and the audit.
	Watcher = Container{define.Container{Role: spec.WatcherContainer}}
	// Gates is the init container of every gate phase, which run the gates
	// and their callbacks.
	Gates = Container{define.Container{Role: define.GatesRole}}
)

// Phase is the init container of gate phase n (gate-phase-n); a phase no gate
// runs in is a definition mistake.
func Phase(n int) Container { return Container{define.Container{Phase: n}} }

// String names the container as it is declared: Admission, Watcher,
// Phase(n), Gates.
func (c Container) String() string { return c.c.String() }

func containers(cs []Container) []define.Container {
	out := make([]define.Container, len(cs))
	for i, c := range cs {
		out[i] = c.c
	}
	return out
}

// EnvBuilder declares an environment variable: give it one value (Value,
// FromSecret or FromConfigMap) and the containers that get it (For).
type EnvBuilder struct {
	m *Module
	e *define.Env
}

// Env declares the environment variable name of the containers For names,
// with a literal value or a key of a Secret or ConfigMap of the module's
// namespace (a required key holds the containers until it exists; `vigil dev`
// reads it from its cluster):
//
//	vigil.Env(m, "API_TOKEN").FromSecret("api", "token").For(vigil.Phase(1))
func Env(m *Module, name string) *EnvBuilder {
	return &EnvBuilder{m: m, e: m.d.DeclareEnv(name, define.Caller())}
}

// Value gives the variable a literal value.
func (b *EnvBuilder) Value(v string) *EnvBuilder {
	site := define.Caller()
	b.m.d.Check(site, b.e.SetValue(v, site))
	return b
}

// FromSecret takes the variable's value from the key of the Secret name in
// the module's namespace.
func (b *EnvBuilder) FromSecret(name, key string) *EnvBuilder {
	site := define.Caller()
	b.m.d.Check(site, b.e.SetFrom(spec.SecretKind, name, key, site))
	return b
}

// FromConfigMap takes the variable's value from the key of the ConfigMap
// name in the module's namespace.
func (b *EnvBuilder) FromConfigMap(name, key string) *EnvBuilder {
	site := define.Caller()
	b.m.d.Check(site, b.e.SetFrom(spec.ConfigMapKind, name, key, site))
	return b
}

// Optional leaves the variable unset when its Secret or ConfigMap, or the
// key, is missing; without it the containers do not start until it exists.
func (b *EnvBuilder) Optional() *EnvBuilder { b.e.SetOptional(); return b }

// For gives the variable to these containers, and only to them.
func (b *EnvBuilder) For(cs ...Container) *EnvBuilder {
	site := define.Caller()
	b.m.d.Check(site, b.e.For(site, containers(cs)))
	return b
}

// MountBuilder declares a Secret or ConfigMap volume; For names the
// containers that mount it, Path and File where the process finds it.
type MountBuilder struct {
	m  *Module
	mt *define.Mount
}

// MountSecret mounts the Secret name of the module's namespace, read-only, at
// path in the containers For names, one file per key. Unless Optional, the
// whole pod waits until it exists, and `plan` lists it as a dependency;
// `vigil dev` writes its keys under a folder of the run, which Path and File
// find.
//
//	defaults := vigil.MountSecret(m, "uds-defaults", "/etc/uds").For(vigil.Admission)
//	data, err := os.ReadFile(defaults.File("defaults.yaml"))
func MountSecret(m *Module, name, path string) *MountBuilder {
	return &MountBuilder{m: m, mt: m.d.DeclareMount(spec.SecretKind, name, path, define.Caller())}
}

// MountConfigMap mounts the ConfigMap name of the module's namespace as
// MountSecret mounts a Secret.
func MountConfigMap(m *Module, name, path string) *MountBuilder {
	return &MountBuilder{m: m, mt: m.d.DeclareMount(spec.ConfigMapKind, name, path, define.Caller())}
}

// Keys mounts only these keys, one file each; every key is mounted without
// it. A required volume whose object lacks one of them does not mount.
func (b *MountBuilder) Keys(keys ...string) *MountBuilder {
	b.m.d.Check(define.Caller(), b.mt.SetKeys(keys))
	return b
}

// Optional mounts an empty folder when the object is missing, rather than
// holding the pod until it exists.
func (b *MountBuilder) Optional() *MountBuilder { b.mt.Optional = true; return b }

// For mounts the volume in these containers, and only in them.
func (b *MountBuilder) For(cs ...Container) *MountBuilder {
	site := define.Caller()
	b.m.d.Check(site, b.mt.For(site, containers(cs)))
	return b
}

// Path is the folder the process finds the volume's files in: the mount path,
// or under `vigil dev` the same path under VIGIL_MOUNT_ROOT.
func (b *MountBuilder) Path() string { return b.mt.LocalPath() }

// File is the path of the file that holds key, in Path.
func (b *MountBuilder) File(key string) string { return filepath.Join(b.Path(), key) }

// Setting is a value the module's definition takes from the environment —
// the variable name's, else def — declared rather than read with
// os.Getenv, so that what runs is what was rendered: every container the
// manifests and the chart render gets name set to the value it had there
// (`QUOTA_MAX_REPLICAS=5 quota manifests` gives the pods 5), the value is
// part of the definition's fingerprint, and the chart's values show it
// under settings, where its schema refuses another value (render the chart
// again with the new one). plan lists the settings.
//
//	limit, _ := strconv.Atoi(vigil.Setting(m, "QUOTA_MAX_REPLICAS", "3"))
func Setting(m *Module, name, def string) string {
	return m.d.Setting(define.Caller(), name, def)
}

// SettingAs is Setting with its value parsed by parse, such as
// time.ParseDuration or strconv.Atoi. A value parse refuses — the default or
// the environment's — is a mistake in the definition, reported at start with
// this call's site, the value seen and the default that stands without it.
//
//	timeout := vigil.SettingAs(m, "SHOP_TIMEOUT", "2m", time.ParseDuration)
func SettingAs[T any](m *Module, name, def string, parse func(string) (T, error)) T {
	return define.SettingAs(m.d, define.Caller(), name, def, parse)
}

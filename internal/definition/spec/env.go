package spec

import (
	"path"
	"slices"
	"strings"
)

// The containers of a module's pods, as its manifests name them: the
// admission pod's main container, the watcher pod's, and each gate phase's
// init container (InitContainerName).
const (
	AdmissionContainer = "admission"
	WatcherContainer   = "watcher"
)

// Kinds of object an Env or a Mount reads.
const (
	SecretKind    = "Secret"
	ConfigMapKind = "ConfigMap"
)

// EnvMountRoot names the environment variable that, when set, is prefixed to
// every Mount's path: vigil dev (and other local runners) materialise a
// container's Secret and ConfigMap volumes under a folder of their own and
// set it; in a pod it is unset, and a Mount is at its path.
const EnvMountRoot = "VIGIL_MOUNT_ROOT"

// Env is an environment variable the author declared, for the containers it
// names: a literal Value, or a key of a Secret or ConfigMap.
type Env struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
	// From is the key the value comes from; nil for a literal.
	From *KeyRef `json:"from,omitempty"`
	// Containers get the variable (AdmissionContainer, WatcherContainer,
	// InitContainerName(n)).
	Containers []string `json:"containers"`
	Site       string   `json:"site"`
}

// KeyRef is one key of a Secret or ConfigMap in the module's namespace.
type KeyRef struct {
	Kind string `json:"kind"` // SecretKind or ConfigMapKind
	Name string `json:"name"`
	Key  string `json:"key"`
	// Optional leaves the variable unset when the object or key is missing;
	// otherwise the container does not start until it exists.
	Optional bool `json:"optional,omitempty"`
}

// Mount is a Secret or ConfigMap of the module's namespace the author
// declared as a read-only volume of the containers it names.
type Mount struct {
	// Volume is the pod's volume name.
	Volume string `json:"volume"`
	Kind   string `json:"kind"` // SecretKind or ConfigMapKind
	// Name is the Secret's or ConfigMap's.
	Name string `json:"name"`
	// Path is where the containers see it: one file per key.
	Path string `json:"path"`
	// Keys, when given, are the only keys mounted; every key otherwise.
	Keys []string `json:"keys,omitempty"`
	// Optional mounts an empty folder when the object is missing; otherwise
	// the whole pod does not start until it exists (the kubelet mounts every
	// volume of a pod before its first init container runs).
	Optional   bool     `json:"optional,omitempty"`
	Containers []string `json:"containers"`
	Site       string   `json:"site"`
}

// LocalPath is where the mount is for a process given root as EnvMountRoot:
// its Path under root, or Path itself when root is empty.
func (mt Mount) LocalPath(root string) string {
	if root == "" {
		return mt.Path
	}
	return path.Join(root, mt.Path)
}

// EnvOf are the author's variables of the container, in declaration order.
func (m *Module) EnvOf(container string) []Env {
	var out []Env
	for _, e := range m.Env {
		if slices.Contains(e.Containers, container) {
			out = append(out, e)
		}
	}
	return out
}

// MountsOf are the author's volumes the container mounts.
func (m *Module) MountsOf(container string) []Mount {
	var out []Mount
	for _, mt := range m.Mounts {
		if slices.Contains(mt.Containers, container) {
			out = append(out, mt)
		}
	}
	return out
}

// PodContainers are the containers of the pod a container runs in: the
// admission pod's init containers and main container, or the watcher's.
func (m *Module) PodContainers(container string) []string {
	if container == WatcherContainer {
		return []string{WatcherContainer}
	}
	var out []string
	for _, p := range m.Phases {
		out = append(out, p.InitContainer)
	}
	return append(out, AdmissionContainer)
}

// PodMounts are the author's volumes of the pod a container runs in: every
// volume any of its containers mounts.
func (m *Module) PodMounts(container string) []Mount {
	pod := m.PodContainers(container)
	var out []Mount
	for _, mt := range m.Mounts {
		if slices.ContainsFunc(mt.Containers, func(c string) bool { return slices.Contains(pod, c) }) {
			out = append(out, mt)
		}
	}
	return out
}

// Requirement is an object a container cannot start without: a required
// Secret or ConfigMap, mounted or read as a variable.
type Requirement struct {
	Kind, Name string
	// Container cannot start before the object exists.
	Container string
	// Why says what needs it: "volume secret-x at /etc/x (main.go:12)" or
	// "variable TOKEN (main.go:14)".
	Why string
}

// Requirements are the objects that must exist before a container starts
// and that no container before it in its pod needs already: the required
// objects of the pod's volumes for its first container (the kubelet mounts
// every volume of a pod before its first init container runs), and the
// required keys of the container's own variables.
func (m *Module) Requirements(container string) []Requirement {
	var out []Requirement
	if pod := m.PodContainers(container); pod[0] == container {
		for _, mt := range m.PodMounts(container) {
			if !mt.Optional {
				out = append(out, Requirement{Kind: mt.Kind, Name: mt.Name, Container: container,
					Why: "volume " + mt.Volume + " at " + mt.Path + " of " + strings.Join(mt.Containers, ", ") + ", mounted before the pod's first container starts (" + mt.Site + ")"})
			}
		}
	}
	for _, e := range m.EnvOf(container) {
		if e.From != nil && !e.From.Optional {
			out = append(out, Requirement{Kind: e.From.Kind, Name: e.From.Name, Container: container,
				Why: "variable " + e.Name + " (" + e.Site + ")"})
		}
	}
	return out
}

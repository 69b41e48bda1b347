package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// EnvSpecHash names the variable that carries, into every container a
// module's manifests render, the fingerprint of the definition they were
// rendered from (Fingerprint.Sum); EnvSpecParts carries its parts
// (Fingerprint.PartsString), so that a role whose own definition differs
// can say where.
const (
	EnvSpecHash  = "VIGIL_SPEC_HASH"
	EnvSpecParts = "VIGIL_SPEC_PARTS"
)

// EnvNamespace names the variable that says which namespace the module runs
// in: every container gets it from its pod's namespace (the downward API),
// and set when the manifests or the chart are rendered it renders them for
// that namespace. It wins over Options.Namespace, so the definition a role
// resolves is the one rendered for where it runs.
const EnvNamespace = "VIGIL_NAMESPACE"

// Fingerprint identifies a resolved definition: Parts has a short hash of
// each of its parts (its top-level fields: phases, capabilities, bindings,
// rules and so on) and Sum one of them all.
type Fingerprint struct {
	Sum   string
	Parts map[string]string
}

// Fingerprint is the fingerprint of the resolved definition: the same for
// the same definition in any process, different when any part of it
// differs — as it does when the definition reads the environment and a
// container's differs from the one the manifests were rendered in.
func (m *Module) Fingerprint() (Fingerprint, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return Fingerprint{}, fmt.Errorf("encode module %s's definition: %w", m.Name, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return Fingerprint{}, err
	}
	f := Fingerprint{Parts: map[string]string{}}
	for k, v := range top {
		sum := sha256.Sum256(v)
		f.Parts[k] = hex.EncodeToString(sum[:4])
	}
	sum := sha256.Sum256([]byte(f.PartsString()))
	f.Sum = "sha256:" + hex.EncodeToString(sum[:8])
	return f, nil
}

// PartsString is the parts as EnvSpecParts carries them: part=hash, sorted
// by part, comma-separated.
func (f Fingerprint) PartsString() string {
	keys := make([]string, 0, len(f.Parts))
	for k := range f.Parts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		keys[i] = k + "=" + f.Parts[k]
	}
	return strings.Join(keys, ",")
}

// Differing names the parts in which the definition parts (as PartsString
// wrote them) differ from f's, sorted; a part that only one has differs.
func (f Fingerprint) Differing(parts string) []string {
	other := map[string]string{}
	for _, kv := range strings.Split(parts, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			other[k] = v
		}
	}
	var out []string
	for k, v := range f.Parts {
		if other[k] != v {
			out = append(out, k)
		}
	}
	for k := range other {
		if _, ok := f.Parts[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

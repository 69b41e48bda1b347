package spec

// TrustedNamespace is a namespace whose contents the module trusts (its
// Exemptions, say): the module's install creates it, labelled as the
// module's, and a ValidatingAdmissionPolicy it ships refuses creating,
// deleting and relabelling it (labels or annotations) to everyone but
// Allowed, whether the module runs or not.
type TrustedNamespace struct {
	Name string `json:"name"`
	// Allowed are usernames and, prefixed with "group:", groups; group
	// system:masters when the author named none.
	Allowed []string `json:"allowed"`
	Site    string   `json:"site"`
}

// Provenance is the module's record of who created each Namespace: a
// MutatingAdmissionPolicy stamps the creator's username and groups on every
// Namespace created (over whatever the creator wrote), and a
// ValidatingAdmissionPolicy refuses changing or removing the stamp to
// everyone but Allowed.
type Provenance struct {
	// Allowed are usernames and, prefixed with "group:", groups; group
	// system:masters when the author named none.
	Allowed []string `json:"allowed"`
	Site    string   `json:"site"`
}

// DefaultTrusted is who may manage a trusted namespace, or correct a
// namespace's provenance, when the author named nobody.
var DefaultTrusted = []string{GroupPrefix + "system:masters"}

// Guard names of what the module ships for its trusted namespaces and its
// namespace provenance: PolicyName(module, TrustGuard, namespace) and
// PolicyName(module, "namespace", ProvenanceStamp|ProvenanceGuard).
const (
	TrustGuard      = "trusted"
	ProvenanceStamp = "created-by"
	ProvenanceGuard = "created-by-guard"
)

// ProvenanceStampName names the MutatingAdmissionPolicy that stamps each
// Namespace with its creator, and its binding.
func ProvenanceStampName(module string) string {
	return PolicyName(module, "namespace", ProvenanceStamp)
}

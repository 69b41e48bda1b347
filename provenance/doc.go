// Package provenance says who created a Namespace, as a vigil module's
// install records it (vigil.NamespaceProvenance): a MutatingAdmissionPolicy
// stamps CreatedBy and CreatedByGroups on every Namespace at its CREATE,
// over whatever the creator wrote, and a ValidatingAdmissionPolicy refuses
// changing or removing them afterwards to everyone but the identities the
// module allowed. Both are evaluated by the API server itself, so the record
// holds while the module is down.
//
// A stamp is believed only where the stamp's policy was in force when the
// Namespace was created: the policy's own creationTimestamp, which no tenant
// can write, marks since when (Stamp, Settle). A Namespace created before —
// before the install, or between an uninstall and a reinstall — has an
// unknown creator whatever its annotations say, until an allowed identity
// vouches for it with VouchedUnder.
//
// A decision such as "an Exemption written for namespace monitoring
// applies" asks Origin.Trusted: was the namespace created by one of the
// trusted identities, or vouched for. Its age is no evidence: a tenant may
// create a namespace today that an Exemption names tomorrow, and an
// Exemption deleted and created again (kubectl replace --force) is younger
// than the namespace a tenant squatted meanwhile.
package provenance

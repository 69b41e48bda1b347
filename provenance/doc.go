// Package provenance says who created a Namespace, as a vigil module's
// install records it (vigil.NamespaceProvenance): a MutatingAdmissionPolicy
// stamps CreatedBy and CreatedByGroups on every Namespace at its CREATE,
// over whatever the creator wrote, and a ValidatingAdmissionPolicy refuses
// changing or removing them afterwards to everyone but the identities the
// module allowed. Both are evaluated by the API server itself, so the record
// holds while the module is down.
//
// A Namespace that existed before the policies were installed carries no
// stamp: its creator is unknown, and only its creationTimestamp can vouch for
// it. So a decision such as "an Exemption written for namespace monitoring
// applies" asks Trusted: was the namespace created by one of the trusted
// identities, or did it exist before the Exemption was written — before
// anyone could have created it to claim the Exemption.
package provenance

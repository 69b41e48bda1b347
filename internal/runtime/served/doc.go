// Package served says which API versions a cluster serves for the kinds vigil
// writes and reads whose version depends on the Kubernetes release:
// webhook configurations, ValidatingAdmissionPolicy and
// MutatingAdmissionPolicy (v1 from 1.36; v1beta1 from 1.34 and v1alpha1
// from 1.32, each behind a feature gate and runtime-config).
//
// Discover reads it from the API server's discovery; Release says what a
// release serves once its gates are on, for rendering manifests and charts
// for a target (--kubernetes) without a cluster. Missing turns a kind a
// module needs and the cluster does not serve into an error that names the
// kind, the cluster's version and what to enable; vigil refuses to run,
// render or install half-enforced on its word.
package served

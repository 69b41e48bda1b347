// Package v1alpha1 holds the Go types of vigil's Store custom resource,
// stores.vigil.dev/v1alpha1: one namespaced object per module whose data maps
// string keys to string values. The types are the source of truth; the CRD in
// crd/ is generated from them with controller-gen (`make generate`), and a test
// fails when the two drift apart.
//
// +kubebuilder:object:generate=true
// +groupName=vigil.dev
package v1alpha1

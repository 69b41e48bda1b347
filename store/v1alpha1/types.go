package v1alpha1

import (
	_ "embed"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of the Store resource.
var GroupVersion = schema.GroupVersion{Group: "vigil.dev", Version: "v1alpha1"}

// CRDName is the name of the Store CustomResourceDefinition.
const CRDName = "stores.vigil.dev"

// CRDYAML is the Store CustomResourceDefinition, generated from these types.
//
//go:embed crd/vigil.dev_stores.yaml
var CRDYAML []byte

// Store is a module's shared key/value state.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=vigil
// +kubebuilder:printcolumn:name="Keys",type=integer,JSONPath=`.status.keys`,description="Number of keys"
// +kubebuilder:printcolumn:name="Bytes",type=integer,JSONPath=`.status.bytes`,description="Size of keys and values in bytes"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Store struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Data maps keys to values. Keys scoped to a capability are prefixed with
	// the capability's name and a slash.
	// +optional
	Data map[string]string `json:"data,omitempty"`

	// Status summarises Data; every write through vigil keeps it current.
	// +optional
	Status StoreStatus `json:"status,omitempty"`
}

// StoreStatus summarises a Store's data for `kubectl get stores`.
type StoreStatus struct {
	// Keys is the number of keys in Data.
	// +optional
	Keys int `json:"keys,omitempty"`
	// Bytes is the total length of Data's keys and values.
	// +optional
	Bytes int `json:"bytes,omitempty"`
}

// StoreList is a list of Stores.
//
// +kubebuilder:object:root=true
type StoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Store `json:"items"`
}

// AddToScheme registers the Store types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Store{}, &StoreList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Widget is a kind of the module's own.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WidgetSpec   `json:"spec"`
	Status WidgetStatus `json:"status,omitempty"`
}

// WidgetSpec is what a Widget asks for.
type WidgetSpec struct {
	// Size is how many parts the widget has.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	Size int32 `json:"size"`
	// Color is one of red and blue.
	// +kubebuilder:validation:Enum=red;blue
	// +optional
	Color string `json:"color,omitempty"`
}

// WidgetStatus is what the module saw.
type WidgetStatus struct {
	Ready bool `json:"ready,omitempty"`
}

package admission

import (
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/store"
)

// Request is an admission request with its objects decoded as T.
type Request[T client.Object] struct {
	// Object is the object being admitted; a mutation edits it. On DELETE it
	// is the object being deleted (the same as OldObject).
	Object T
	// OldObject is the object before an UPDATE, or the one a DELETE removes;
	// the zero T on CREATE.
	OldObject T
	// Operation is CREATE, UPDATE, DELETE or CONNECT.
	Operation admissionv1.Operation
	// UserInfo is who made the request.
	UserInfo authenticationv1.UserInfo
	// DryRun requests must have no side effects: their Store refuses writes.
	DryRun bool
	// Namespace and Name of the object (Name may be empty on CREATE with
	// generateName).
	Namespace string
	Name      string
	// Kind is the kind of the object as it was sent.
	Kind metav1.GroupVersionKind
	// Store is the module's Store, as handlers may use it.
	Store store.Store
	// Raw is the request as the API server sent it.
	Raw *admissionv1.AdmissionRequest
}

// HasLabel reports whether the object carries the label.
func (r *Request[T]) HasLabel(key string) bool {
	_, ok := r.Object.GetLabels()[key]
	return ok
}

// Label returns a label's value.
func (r *Request[T]) Label(key string) (string, bool) {
	v, ok := r.Object.GetLabels()[key]
	return v, ok
}

// SetLabel sets a label on the object.
func (r *Request[T]) SetLabel(key, value string) {
	l := r.Object.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[key] = value
	r.Object.SetLabels(l)
}

// RemoveLabel removes a label from the object.
func (r *Request[T]) RemoveLabel(key string) {
	l := r.Object.GetLabels()
	if _, ok := l[key]; !ok {
		return
	}
	delete(l, key)
	r.Object.SetLabels(l)
}

// HasAnnotation reports whether the object carries the annotation.
func (r *Request[T]) HasAnnotation(key string) bool {
	_, ok := r.Object.GetAnnotations()[key]
	return ok
}

// Annotation returns an annotation's value.
func (r *Request[T]) Annotation(key string) (string, bool) {
	v, ok := r.Object.GetAnnotations()[key]
	return v, ok
}

// SetAnnotation sets an annotation on the object.
func (r *Request[T]) SetAnnotation(key, value string) {
	a := r.Object.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	r.Object.SetAnnotations(a)
}

// RemoveAnnotation removes an annotation from the object.
func (r *Request[T]) RemoveAnnotation(key string) {
	a := r.Object.GetAnnotations()
	if _, ok := a[key]; !ok {
		return
	}
	delete(a, key)
	r.Object.SetAnnotations(a)
}

package scheme

import (
	"fmt"
	"reflect"
	goruntime "runtime"
	"sync"
	"weak"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1alpha1 "k8s.io/api/admissionregistration/v1alpha1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	internalv1alpha1 "k8s.io/api/apiserverinternal/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	appsv1beta1 "k8s.io/api/apps/v1beta1"
	appsv1beta2 "k8s.io/api/apps/v1beta2"
	authenticationv1 "k8s.io/api/authentication/v1"
	authenticationv1alpha1 "k8s.io/api/authentication/v1alpha1"
	authenticationv1beta1 "k8s.io/api/authentication/v1beta1"
	authorizationv1 "k8s.io/api/authorization/v1"
	authorizationv1beta1 "k8s.io/api/authorization/v1beta1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	batchv1beta1 "k8s.io/api/batch/v1beta1"
	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1alpha1 "k8s.io/api/certificates/v1alpha1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1alpha2 "k8s.io/api/coordination/v1alpha2"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	discoveryv1beta1 "k8s.io/api/discovery/v1beta1"
	eventsv1 "k8s.io/api/events/v1"
	eventsv1beta1 "k8s.io/api/events/v1beta1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	flowcontrolv1beta1 "k8s.io/api/flowcontrol/v1beta1"
	flowcontrolv1beta2 "k8s.io/api/flowcontrol/v1beta2"
	flowcontrolv1beta3 "k8s.io/api/flowcontrol/v1beta3"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	networkingv1 "k8s.io/api/networking/v1"
	networkingv1beta1 "k8s.io/api/networking/v1beta1"
	nodev1 "k8s.io/api/node/v1"
	nodev1alpha1 "k8s.io/api/node/v1alpha1"
	nodev1beta1 "k8s.io/api/node/v1beta1"
	policyv1 "k8s.io/api/policy/v1"
	policyv1beta1 "k8s.io/api/policy/v1beta1"
	rbacv1 "k8s.io/api/rbac/v1"
	rbacv1alpha1 "k8s.io/api/rbac/v1alpha1"
	rbacv1beta1 "k8s.io/api/rbac/v1beta1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	storagev1 "k8s.io/api/storage/v1"
	storagev1alpha1 "k8s.io/api/storage/v1alpha1"
	storagev1beta1 "k8s.io/api/storage/v1beta1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	storagemigrationv1beta1 "k8s.io/api/storagemigration/v1beta1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// defaultGroups are the API groups of a module's default scheme: client-go's
// (those of k8s.io/client-go/kubernetes/scheme, in its order) and
// apiextensions/v1, each by the Go package its types are declared in.
var defaultGroups = [...]struct {
	pkg string
	add func(*runtime.Scheme) error
}{
	{"k8s.io/api/admissionregistration/v1", admissionregistrationv1.AddToScheme},
	{"k8s.io/api/admissionregistration/v1alpha1", admissionregistrationv1alpha1.AddToScheme},
	{"k8s.io/api/admissionregistration/v1beta1", admissionregistrationv1beta1.AddToScheme},
	{"k8s.io/api/apiserverinternal/v1alpha1", internalv1alpha1.AddToScheme},
	{"k8s.io/api/apps/v1", appsv1.AddToScheme},
	{"k8s.io/api/apps/v1beta1", appsv1beta1.AddToScheme},
	{"k8s.io/api/apps/v1beta2", appsv1beta2.AddToScheme},
	{"k8s.io/api/authentication/v1", authenticationv1.AddToScheme},
	{"k8s.io/api/authentication/v1alpha1", authenticationv1alpha1.AddToScheme},
	{"k8s.io/api/authentication/v1beta1", authenticationv1beta1.AddToScheme},
	{"k8s.io/api/authorization/v1", authorizationv1.AddToScheme},
	{"k8s.io/api/authorization/v1beta1", authorizationv1beta1.AddToScheme},
	{"k8s.io/api/autoscaling/v1", autoscalingv1.AddToScheme},
	{"k8s.io/api/autoscaling/v2", autoscalingv2.AddToScheme},
	{"k8s.io/api/batch/v1", batchv1.AddToScheme},
	{"k8s.io/api/batch/v1beta1", batchv1beta1.AddToScheme},
	{"k8s.io/api/certificates/v1", certificatesv1.AddToScheme},
	{"k8s.io/api/certificates/v1beta1", certificatesv1beta1.AddToScheme},
	{"k8s.io/api/certificates/v1alpha1", certificatesv1alpha1.AddToScheme},
	{"k8s.io/api/coordination/v1alpha2", coordinationv1alpha2.AddToScheme},
	{"k8s.io/api/coordination/v1beta1", coordinationv1beta1.AddToScheme},
	{"k8s.io/api/coordination/v1", coordinationv1.AddToScheme},
	{"k8s.io/api/core/v1", corev1.AddToScheme},
	{"k8s.io/api/discovery/v1", discoveryv1.AddToScheme},
	{"k8s.io/api/discovery/v1beta1", discoveryv1beta1.AddToScheme},
	{"k8s.io/api/events/v1", eventsv1.AddToScheme},
	{"k8s.io/api/events/v1beta1", eventsv1beta1.AddToScheme},
	{"k8s.io/api/extensions/v1beta1", extensionsv1beta1.AddToScheme},
	{"k8s.io/api/flowcontrol/v1", flowcontrolv1.AddToScheme},
	{"k8s.io/api/flowcontrol/v1beta1", flowcontrolv1beta1.AddToScheme},
	{"k8s.io/api/flowcontrol/v1beta2", flowcontrolv1beta2.AddToScheme},
	{"k8s.io/api/flowcontrol/v1beta3", flowcontrolv1beta3.AddToScheme},
	{"k8s.io/api/lifecycle/v1alpha1", lifecyclev1alpha1.AddToScheme},
	{"k8s.io/api/networking/v1", networkingv1.AddToScheme},
	{"k8s.io/api/networking/v1beta1", networkingv1beta1.AddToScheme},
	{"k8s.io/api/node/v1", nodev1.AddToScheme},
	{"k8s.io/api/node/v1alpha1", nodev1alpha1.AddToScheme},
	{"k8s.io/api/node/v1beta1", nodev1beta1.AddToScheme},
	{"k8s.io/api/policy/v1", policyv1.AddToScheme},
	{"k8s.io/api/policy/v1beta1", policyv1beta1.AddToScheme},
	{"k8s.io/api/rbac/v1", rbacv1.AddToScheme},
	{"k8s.io/api/rbac/v1beta1", rbacv1beta1.AddToScheme},
	{"k8s.io/api/rbac/v1alpha1", rbacv1alpha1.AddToScheme},
	{"k8s.io/api/resource/v1", resourcev1.AddToScheme},
	{"k8s.io/api/resource/v1beta2", resourcev1beta2.AddToScheme},
	{"k8s.io/api/resource/v1beta1", resourcev1beta1.AddToScheme},
	{"k8s.io/api/resource/v1alpha3", resourcev1alpha3.AddToScheme},
	{"k8s.io/api/scheduling/v1alpha3", schedulingv1alpha3.AddToScheme},
	{"k8s.io/api/scheduling/v1beta1", schedulingv1beta1.AddToScheme},
	{"k8s.io/api/scheduling/v1", schedulingv1.AddToScheme},
	{"k8s.io/api/storage/v1beta1", storagev1beta1.AddToScheme},
	{"k8s.io/api/storage/v1", storagev1.AddToScheme},
	{"k8s.io/api/storage/v1alpha1", storagev1alpha1.AddToScheme},
	{"k8s.io/api/storagemigration/v1", storagemigrationv1.AddToScheme},
	{"k8s.io/api/storagemigration/v1beta1", storagemigrationv1beta1.AddToScheme},
	{"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1", apiextensionsv1.AddToScheme},
}

// lazyGroups is what a default scheme has registered so far. Registering
// every group costs a process a few milliseconds and most of a megabyte,
// which a gate, that resolves a handful of prototypes and then works on
// unstructured objects, has no use for: the default scheme registers the
// group of a prototype when gvkOf first meets it, and the rest when a role
// that hands the scheme to controller-runtime starts (Complete).
type lazyGroups struct {
	mu       sync.Mutex
	added    map[string]bool // package paths of the groups registered
	complete bool
}

// lazySchemes holds the lazyGroups of each default scheme, keyed weakly so
// that a module's scheme is not kept alive by it.
var lazySchemes sync.Map // weak.Pointer[runtime.Scheme] → *lazyGroups

// New is a default scheme — client-go's groups and apiextensions/v1 — with no
// group registered yet: LockGroupOf registers one as a prototype of it is met,
// Complete registers the rest.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	key := weak.Make(s)
	lazySchemes.Store(key, &lazyGroups{added: map[string]bool{}})
	goruntime.AddCleanup(s, func(key weak.Pointer[runtime.Scheme]) { lazySchemes.Delete(key) }, key)
	return s
}

// lazyOf is the lazyGroups of a default scheme; nil for any other scheme,
// such as one given in Options.
func lazyOf(s *runtime.Scheme) *lazyGroups {
	if v, ok := lazySchemes.Load(weak.Make(s)); ok {
		return v.(*lazyGroups)
	}
	return nil
}

// LockGroupOf registers the group of obj's Go type in s, when s is a default
// scheme and the type is one of its groups', and returns the function that
// ends the lock it holds meanwhile: the caller reads the scheme while no
// group is being added.
func LockGroupOf(s *runtime.Scheme, obj any) (unlock func()) {
	l := lazyOf(s)
	if l == nil {
		return func() {}
	}
	l.mu.Lock()
	if !l.complete {
		t := reflect.TypeOf(obj)
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t != nil {
			l.add(s, t.PkgPath())
		}
	}
	return l.mu.Unlock
}

// add registers the default group declared in package pkg, if there is one.
func (l *lazyGroups) add(s *runtime.Scheme, pkg string) {
	if l.added[pkg] {
		return
	}
	for _, g := range defaultGroups {
		if g.pkg == pkg {
			utilruntime.Must(g.add(s))
			l.added[pkg] = true
			return
		}
	}
}

// Complete registers every default group not registered yet, when s
// is a default scheme: the scheme is then the one an eager registration of
// client-go's groups and apiextensions/v1 would have made.
func Complete(s *runtime.Scheme) {
	l := lazyOf(s)
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.complete {
		return
	}
	for _, g := range defaultGroups {
		if !l.added[g.pkg] {
			utilruntime.Must(g.add(s))
			l.added[g.pkg] = true
		}
	}
	l.complete = true
}

// GVKOf finds the group, version and kind of a prototype object: a typed
// object registered in s (registering its group first when s is a default
// scheme), or an unstructured or metadata-only one that names its kind.
func GVKOf(s *runtime.Scheme, proto client.Object) (schema.GroupVersionKind, error) {
	if u, ok := any(proto).(*unstructured.Unstructured); ok {
		gvk := u.GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" {
			return gvk, fmt.Errorf("unstructured prototype without a kind: name it with vigil.Kind(group, version, kind)")
		}
		return gvk, nil
	}
	if m, ok := any(proto).(*metav1.PartialObjectMetadata); ok {
		gvk := m.GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" {
			return gvk, fmt.Errorf("metadata prototype without a kind: name it with vigil.Metadata(group, version, kind)")
		}
		return gvk, nil
	}
	defer LockGroupOf(s, proto)()
	gvk, err := apiutil.GVKForObject(proto, s)
	if err != nil {
		return gvk, fmt.Errorf("type %T is not registered in the module's scheme: add it with its AddToScheme to Options.Scheme (%v)", proto, err)
	}
	return gvk, nil
}

// BuiltIn reports whether every API server serves the kind from its start:
// a kind of client-go's API groups or of apiextensions.k8s.io. Any other
// kind is a CustomResourceDefinition's (or an aggregated API's), which the
// API server may not serve yet.
func BuiltIn(gvk schema.GroupVersionKind) bool {
	return clientgoscheme.Scheme.Recognizes(gvk) || gvk.Group == apiextensionsv1.GroupName
}

package spec

import "k8s.io/apimachinery/pkg/runtime/schema"

// Scope is whether objects of a kind live in a namespace, as far as a
// definition can tell without an API server.
type Scope string

const (
	// ScopeUnknown: a kind of a group Kubernetes does not serve itself (a
	// CRD's), or one it serves that ScopeOf does not list; only the API
	// server's discovery can tell.
	ScopeUnknown  Scope = ""
	Namespaced    Scope = "Namespaced"
	ClusterScoped Scope = "Cluster"
)

// ScopeOf is the scope of a kind Kubernetes itself serves, from a fixed list
// that the tests compare with a real API server's discovery; ScopeUnknown for
// any other.
func ScopeOf(group, kind string) Scope {
	return builtinScopes[schema.GroupKind{Group: group, Kind: kind}]
}

var builtinScopes = func() map[schema.GroupKind]Scope {
	out := map[schema.GroupKind]Scope{}
	add := func(s Scope, group string, kinds ...string) {
		for _, k := range kinds {
			out[schema.GroupKind{Group: group, Kind: k}] = s
		}
	}
	add(Namespaced, "", "Binding", "ConfigMap", "Endpoints", "Event", "LimitRange", "PersistentVolumeClaim", "Pod",
		"PodTemplate", "ReplicationController", "ResourceQuota", "Secret", "Service", "ServiceAccount")
	add(ClusterScoped, "", "ComponentStatus", "Namespace", "Node", "PersistentVolume")
	add(ClusterScoped, "admissionregistration.k8s.io", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")
	add(ClusterScoped, "apiextensions.k8s.io", "CustomResourceDefinition")
	add(ClusterScoped, "apiregistration.k8s.io", "APIService")
	add(Namespaced, "apps", "ControllerRevision", "DaemonSet", "Deployment", "ReplicaSet", "StatefulSet")
	add(ClusterScoped, "authentication.k8s.io", "SelfSubjectReview", "TokenReview")
	add(Namespaced, "authorization.k8s.io", "LocalSubjectAccessReview")
	add(ClusterScoped, "authorization.k8s.io", "SelfSubjectAccessReview", "SelfSubjectRulesReview", "SubjectAccessReview")
	add(Namespaced, "autoscaling", "HorizontalPodAutoscaler")
	add(Namespaced, "batch", "CronJob", "Job")
	add(ClusterScoped, "certificates.k8s.io", "CertificateSigningRequest", "ClusterTrustBundle")
	add(Namespaced, "certificates.k8s.io", "PodCertificateRequest")
	add(Namespaced, "coordination.k8s.io", "Lease", "LeaseCandidate")
	add(Namespaced, "discovery.k8s.io", "EndpointSlice")
	add(Namespaced, "events.k8s.io", "Event")
	add(ClusterScoped, "flowcontrol.apiserver.k8s.io", "FlowSchema", "PriorityLevelConfiguration")
	add(ClusterScoped, "internal.apiserver.k8s.io", "StorageVersion")
	add(Namespaced, "networking.k8s.io", "Ingress", "NetworkPolicy")
	add(ClusterScoped, "networking.k8s.io", "IngressClass", "IPAddress", "ServiceCIDR")
	add(ClusterScoped, "node.k8s.io", "RuntimeClass")
	add(Namespaced, "policy", "PodDisruptionBudget")
	add(Namespaced, "rbac.authorization.k8s.io", "Role", "RoleBinding")
	add(ClusterScoped, "rbac.authorization.k8s.io", "ClusterRole", "ClusterRoleBinding")
	add(Namespaced, "resource.k8s.io", "ResourceClaim", "ResourceClaimTemplate")
	add(ClusterScoped, "resource.k8s.io", "DeviceClass", "ResourceSlice", "DeviceTaintRule")
	add(ClusterScoped, "scheduling.k8s.io", "PriorityClass")
	add(Namespaced, "storage.k8s.io", "CSIStorageCapacity")
	add(ClusterScoped, "storage.k8s.io", "CSIDriver", "CSINode", "StorageClass", "VolumeAttachment", "VolumeAttributesClass")
	add(ClusterScoped, "storagemigration.k8s.io", "StorageVersionMigration")
	return out
}()

package manifests

import (
	"bytes"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/served"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/store"
)

// Options are the deployment's settings, from `<module> manifests` flags.
type Options struct {
	// Image runs every container: the module's own binary.
	Image string
	// Namespace overrides the module's namespace.
	Namespace string
	// Replicas of each Deployment; 2 when zero.
	Replicas int32
	// CABundle, when given, goes into the fail-closed webhook
	// configurations; otherwise the module fills it in once it serves.
	CABundle []byte
	// NoNetworkPolicy leaves out the admission pods' NetworkPolicy, for a
	// cluster that enforces none or governs them with its own.
	NoNetworkPolicy bool
	// Kubernetes is the release the manifests are for: each kind whose
	// version depends on it (MutatingAdmissionPolicy) is written in the
	// version that release serves. The default release (1.37) when zero;
	// never older than the module's MinKubernetes.
	Kubernetes kubeversion.Release
	// IgnoredNamespaces are namespaces the install adds to those the module
	// ignores (spec.Module.IgnoreNamespaces): its roles get them as
	// --ignore-namespace, and its policies and fail-closed webhooks skip them
	// as they skip the definition's own. The definition's fingerprint is the
	// one without them: the roles add them again from their flags.
	IgnoredNamespaces []string
	// AdmissionMemory and WatcherMemory are the admission and watcher
	// containers' memory limits, GOMEMLIMIT following each:
	// AdmissionMemoryLimit and WatcherMemoryLimit when empty.
	AdmissionMemory, WatcherMemory string

	// fingerprint is the definition's, as Render found it: see SpecEnv.
	fingerprint spec.Fingerprint
}

// Target is what release r serves, for manifests rendered for it (the
// default release when r is zero): an error when r is older than the
// module targets, or cannot serve what the module declares.
func Target(m *spec.Module, r kubeversion.Release) (served.Cluster, error) {
	if r == (kubeversion.Release{}) {
		r = kubeversion.Default()
	}
	if m.MinKubernetes != "" {
		if min, err := kubeversion.Parse(m.MinKubernetes); err == nil && r.Minor < min.Minor {
			return served.Cluster{}, fmt.Errorf("--kubernetes %s: module %s targets Kubernetes %s or newer (vigil.Options.MinKubernetes): render it for %s or a newer release", r, m.Name, min, min)
		}
	}
	target := served.Release(r)
	if err := registration.Unservable(m, target); err != nil {
		return served.Cluster{}, fmt.Errorf("--kubernetes %s: %w", r, err)
	}
	return target, nil
}

// SpecAnnotation carries, on the module's Deployments and their pod
// templates, the fingerprint of the definition they were rendered from: a
// definition rendered again with a change rolls the pods.
const SpecAnnotation = "vigil.dev/spec-hash"

// SpecEnv is what every container of the module is given besides its own
// environment: the fingerprint of the definition it was rendered from
// (spec.EnvSpecHash, spec.EnvSpecParts), and the namespace it runs in, its
// pod's (spec.EnvNamespace), and each declared setting as it was resolved
// (spec.Setting). A role whose own definition has
// another exits before serving: see modcli.
func SpecEnv(m *spec.Module, f spec.Fingerprint) []corev1.EnvVar {
	out := []corev1.EnvVar{
		{Name: spec.EnvSpecHash, Value: f.Sum}, {Name: spec.EnvSpecParts, Value: f.PartsString()},
		{Name: spec.EnvNamespace, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}},
	}
	for _, s := range m.Settings {
		out = append(out, corev1.EnvVar{Name: s.Name, Value: s.Value})
	}
	return out
}

// HandoffDir is where gates hand their results to the main container.
const HandoffDir = "/var/run/vigil"

// Render returns the module's objects, in apply order.
func Render(m *spec.Module, o Options) ([]client.Object, error) {
	if o.Image == "" {
		return nil, fmt.Errorf("--image: expected the module's container image, as in --image ghcr.io/acme/%s:1.0.0", m.Name)
	}
	// The definition as the module's binary resolves it, before the
	// install's settings: what each role finds again when it starts.
	fp, err := m.Fingerprint()
	if err != nil {
		return nil, err
	}
	o.fingerprint = fp
	if len(o.IgnoredNamespaces) > 0 {
		installed := *m
		installed.IgnoreNamespaces(o.IgnoredNamespaces...)
		m = &installed
	}
	if o.Namespace != "" && o.Namespace != m.Namespace {
		return nil, fmt.Errorf("--namespace %s: the module's definition was resolved for namespace %s, and its gates, listers, RBAC and exclusions with it; "+
			"render it for %s with %s=%s (%s=%s %s manifests), which resolves the definition there — what it writes as m.Namespace() follows — "+
			"and which its containers get from their pod's namespace", o.Namespace, m.Namespace, o.Namespace, spec.EnvNamespace, o.Namespace, spec.EnvNamespace, o.Namespace, m.Name)
	}
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	for _, l := range []struct {
		limit *string
		def   string
		flag  string
	}{{&o.AdmissionMemory, AdmissionMemoryLimit, "--admission-memory-limit"}, {&o.WatcherMemory, WatcherMemoryLimit, "--watcher-memory-limit"}} {
		if *l.limit == "" {
			*l.limit = l.def
		}
		if err := CheckMemoryLimit(*l.limit); err != nil {
			return nil, fmt.Errorf("%s %s: %w", l.flag, *l.limit, err)
		}
	}
	target, err := Target(m, o.Kubernetes)
	if err != nil {
		return nil, err
	}
	labels := moduleLabels(m)
	objMeta := func(name, ns, component string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels(component)}
	}
	var objs []client.Object
	objs = append(objs, &corev1.Namespace{TypeMeta: tm("v1", "Namespace"), ObjectMeta: objMeta(m.Namespace, "", "")})
	// The trusted namespaces, created by the install before their guards:
	// labelled as the module's, without its version, so that an upgrade
	// leaves them as they are.
	trusted := labels("trusted-namespace")
	delete(trusted, "app.kubernetes.io/version")
	for _, ns := range registration.TrustedNamespaceObjects(m, trusted) {
		objs = append(objs, ns)
	}
	rules := Rules(m)
	objs = append(objs, rbacObjects(m, rules, objMeta)...)
	if m.HasAdmission() || m.HasWatcher() {
		crd, err := store.CRD()
		if err != nil {
			return nil, err
		}
		crd.TypeMeta = tm("apiextensions.k8s.io/v1", "CustomResourceDefinition")
		// Shared by every module; each labels it as its own when it applies
		// it, which changes nothing else.
		crd.Labels = labels("store")
		objs = append(objs, crd)
	}
	// The module's own kinds, before anything that uses them.
	for _, c := range m.CRDs {
		crd := c.Object.DeepCopy()
		crd.TypeMeta = tm("apiextensions.k8s.io/v1", "CustomResourceDefinition")
		crd.Labels = maps.Clone(crd.Labels)
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		maps.Copy(crd.Labels, labels("crd"))
		objs = append(objs, crd)
	}
	if m.HasAdmission() {
		objs = append(objs, admissionObjects(m, o, objMeta, labels)...)
	}
	if m.HasWatcher() {
		objs = append(objs, watcherObjects(m, o, objMeta)...)
	}
	if len(m.Bindings) > 0 {
		hooks, err := webhookObjects(m, o, labels)
		if err != nil {
			return nil, err
		}
		objs = append(objs, hooks...)
	}
	objs = append(objs, policyObjects(m, rules, target, labels)...)
	return objs, nil
}

// moduleLabels returns the labels of the module's objects of a component
// ("" for none).
func moduleLabels(m *spec.Module) func(component string) map[string]string {
	return func(component string) map[string]string {
		l := map[string]string{
			"app.kubernetes.io/name":       m.Name,
			"app.kubernetes.io/managed-by": "vigil",
			"app.kubernetes.io/part-of":    m.Name,
		}
		l["app.kubernetes.io/version"] = m.Version
		if m.Version == "" {
			l["app.kubernetes.io/version"] = "0.0.0" // as registration counts an unversioned module
		}
		if component != "" {
			l["app.kubernetes.io/component"] = component
		}
		return l
	}
}

// rbacObjects are the roles' ServiceAccounts, and their merged rules as
// ClusterRoles or Roles, each bound to its ServiceAccount.
func rbacObjects(m *spec.Module, rules []spec.Rule, objMeta func(string, string, string) metav1.ObjectMeta) []client.Object {
	var objs []client.Object
	for _, role := range Roles(m) {
		sa := ServiceAccount(m.Name, role)
		objs = append(objs, &corev1.ServiceAccount{TypeMeta: tm("v1", "ServiceAccount"), ObjectMeta: objMeta(sa, m.Namespace, role)})
	}
	for _, merged := range Merge(rules) {
		sa := ServiceAccount(m.Name, merged.Role)
		subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: m.Namespace}}
		name := spec.BindingName(sa)
		if merged.Namespace == "" {
			objs = append(objs,
				&rbacv1.ClusterRole{TypeMeta: tm("rbac.authorization.k8s.io/v1", "ClusterRole"), ObjectMeta: objMeta(name, "", merged.Role), Rules: merged.Rules},
				&rbacv1.ClusterRoleBinding{TypeMeta: tm("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), ObjectMeta: objMeta(name, "", merged.Role),
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: subject})
			continue
		}
		if merged.Namespace != m.Namespace {
			// Bound by the role itself once the namespace exists (see
			// Rules): a namespace the module governs may come after it.
			objs = append(objs, &rbacv1.ClusterRole{TypeMeta: tm("rbac.authorization.k8s.io/v1", "ClusterRole"),
				ObjectMeta: objMeta(spec.NamespaceRoleName(sa, merged.Namespace), "", merged.Role), Rules: merged.Rules})
			continue
		}
		objs = append(objs,
			&rbacv1.Role{TypeMeta: tm("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: objMeta(name, merged.Namespace, merged.Role), Rules: merged.Rules},
			&rbacv1.RoleBinding{TypeMeta: tm("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: objMeta(name, merged.Namespace, merged.Role),
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: subject})
	}
	return objs
}

// admissionObjects are the admission role's Deployment, Services, budget
// and network policy.
func admissionObjects(m *spec.Module, o Options, objMeta func(string, string, string) metav1.ObjectMeta, labels func(string) map[string]string) []client.Object {
	var objs []client.Object
	objs = append(objs, admissionDeployment(m, o, objMeta, labels))
	objs = append(objs, &corev1.Service{
		TypeMeta: tm("v1", "Service"), ObjectMeta: objMeta(m.Name, m.Namespace, "admission"),
		Spec: corev1.ServiceSpec{
			Selector: selectorOf(m.Name, "admission"),
			Ports:    []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromString("https")}},
		},
	})
	objs = append(objs, &corev1.Service{
		TypeMeta: tm("v1", "Service"), ObjectMeta: objMeta(m.Name+"-metrics", m.Namespace, "admission"),
		Spec: corev1.ServiceSpec{
			Selector: selectorOf(m.Name, "admission"),
			Ports:    []corev1.ServicePort{{Name: "metrics", Port: 8080, TargetPort: intstr.FromString("metrics")}},
		},
	})
	objs = append(objs, pdb(m, "admission", objMeta))
	if !o.NoNetworkPolicy {
		objs = append(objs, admissionNetworkPolicy(m, objMeta))
	}
	return objs
}

// watcherObjects are the watcher's Deployment, metrics Service and budget.
func watcherObjects(m *spec.Module, o Options, objMeta func(string, string, string) metav1.ObjectMeta) []client.Object {
	var objs []client.Object
	objs = append(objs, watcherDeployment(m, o, objMeta))
	objs = append(objs, &corev1.Service{
		TypeMeta: tm("v1", "Service"), ObjectMeta: objMeta(m.Name+"-watcher-metrics", m.Namespace, "watcher"),
		Spec: corev1.ServiceSpec{
			Selector: selectorOf(m.Name, "watcher"),
			Ports:    []corev1.ServicePort{{Name: "metrics", Port: 8080, TargetPort: intstr.FromString("metrics")}},
		},
	})
	objs = append(objs, pdb(m, "watcher", objMeta))
	return objs
}

// webhookObjects are the bootstrap webhook configurations and the static
// ones, when there are any.
func webhookObjects(m *spec.Module, o Options, labels func(string) map[string]string) ([]client.Object, error) {
	var objs []client.Object
	mut, val := registration.Bootstrap(m.Name)
	mut.Labels, val.Labels = labels("admission"), labels("admission")
	objs = append(objs, mut, val)
	smut, sval, err := static(m, o)
	if err != nil {
		return nil, err
	}
	if len(smut.Webhooks) > 0 {
		smut.Labels = labels("admission")
		objs = append(objs, smut)
	}
	if len(sval.Webhooks) > 0 {
		sval.Labels = labels("admission")
		objs = append(objs, sval)
	}
	return objs, nil
}

// policyObjects are the guards, the checks and the stamps, each a policy
// and its binding.
func policyObjects(m *spec.Module, rules []spec.Rule, target served.Cluster, labels func(string) map[string]string) []client.Object {
	var objs []client.Object
	// The guards and the checks: evaluated by the API server itself, so
	// they hold from install on, and the module needs no rights to them.
	// The guards come before the stamps they guard, so that no stamp is
	// created, and so believed provenance.Settle later, before its guard.
	guards := registration.Policies(m)
	if sas := binders(m, rules); len(sas) > 0 {
		guards = append(guards, registration.BindingGuard(m, sas))
	}
	for _, g := range guards {
		g.Policy.Labels, g.Binding.Labels = labels("admission"), labels("admission")
		objs = append(objs, g.Policy, g.Binding)
	}
	for _, st := range registration.Stamps(m) {
		st.Policy.Labels, st.Binding.Labels = labels("admission"), labels("admission")
		st.Policy.APIVersion = target.APIVersion(served.MutatingAdmissionPolicy)
		st.Binding.APIVersion = st.Policy.APIVersion
		objs = append(objs, st.Policy, st.Binding)
	}
	// A Finalize binding's finalizer, put on at admission where the target
	// serves MutatingAdmissionPolicy without being enabled; elsewhere the
	// watcher puts it on (registration.FinalizerStamps).
	if target.Default(served.MutatingAdmissionPolicy) {
		for _, st := range registration.FinalizerStamps(m) {
			st.Policy.Labels, st.Binding.Labels = labels("watcher"), labels("watcher")
			st.Policy.APIVersion = target.APIVersion(served.MutatingAdmissionPolicy)
			st.Binding.APIVersion = st.Policy.APIVersion
			objs = append(objs, st.Policy, st.Binding)
		}
	}
	return objs
}

// binders are the ServiceAccounts of the roles that bind their rights in
// namespaces other than the module's themselves, by the module's rules
// (Rules).
func binders(m *spec.Module, rules []spec.Rule) []string {
	var out []string
	for _, role := range Roles(m) {
		if len(BoundNamespaces(m.Namespace, role, rules)) > 0 {
			out = append(out, ServiceAccount(m.Name, role))
		}
	}
	return out
}

func tm(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func selectorOf(module, component string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": module, "app.kubernetes.io/component": component}
}

// static builds the fail-closed webhook configurations, reached through the
// module's Service.
func static(m *spec.Module, o Options) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, b := range m.Bindings {
		// The resource the binding's requests are for, under the plural the
		// module declares for it (KindWithPlural, a CRD it ships) where
		// Kubernetes' guess would be wrong.
		kind := b.ResourceKind()
		if b.Plural == "" {
			mapper.Add(kind, meta.RESTScopeNamespace)
			continue
		}
		gv := kind.GroupVersion()
		mapper.AddSpecific(kind, gv.WithResource(b.Plural), gv.WithResource(strings.ToLower(kind.Kind)), meta.RESTScopeNamespace)
	}
	return registrar(m, mapper, o.CABundle).Static()
}

// Enforced returns the configurations of the module's webhooks registered
// when ready, as they are once it enforces them, reached through its
// Service; mapper (a cluster's) turns the bindings' kinds into resources.
// With the static ones the manifests ship, they are every webhook the API
// server calls once the module serves.
func Enforced(m *spec.Module, mapper meta.RESTMapper) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	return registrar(m, mapper, nil).Enforced()
}

func registrar(m *spec.Module, mapper meta.RESTMapper, caBundle []byte) *registration.Registrar {
	return registration.New(nil, registration.Options{
		Module: m.Name, Namespace: m.Namespace, Ignored: m.IgnoredNamespaces, Version: m.Version, Bindings: m.Bindings, Gated: registration.GatedObjects(m),
		FailurePolicy: m.FailurePolicy, Policies: m.Policies(), TimeoutSeconds: m.TimeoutSeconds, Mapper: mapper,
		CABundle: func() []byte { return caBundle },
		ClientConfig: func(path string) admissionregistrationv1.WebhookClientConfig {
			return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
				Namespace: m.Namespace, Name: m.Name, Path: ptr.To(path), Port: ptr.To[int32](443),
			}}
		},
	})
}

var restricted = &corev1.SecurityContext{
	RunAsNonRoot:             ptr.To(true),
	ReadOnlyRootFilesystem:   ptr.To(true),
	AllowPrivilegeEscalation: ptr.To(false),
	Privileged:               ptr.To(false),
	Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
}

func resources(cpu, memory, limit string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)},
	}
}

// AdmissionMemoryLimit is the admission container's memory limit; the
// server's limits keep it well below (see internal/serving/webhook.Limits).
const AdmissionMemoryLimit = "256Mi"

// WatcherMemoryLimit is the watcher container's memory limit: its
// informers hold what its watches and listers select, about 10 KiB a Pod
// read whole and 2.6 KiB read as metadata, resident (docs/scale.md): about
// 28,000 Pods read whole. `plan --cluster` says whether a cluster's objects
// fit, and `manifests --cluster` and `chart --cluster` set the limit they
// need.
const WatcherMemoryLimit = "512Mi"

// minMemoryLimit is the smallest memory limit a role's container takes:
// its request.
var minMemoryLimit = resource.MustParse("64Mi")

// CheckMemoryLimit is nil when limit is a memory quantity a role's
// container can run under.
func CheckMemoryLimit(limit string) error {
	q, err := resource.ParseQuantity(limit)
	if err != nil || q.Cmp(minMemoryLimit) < 0 {
		return fmt.Errorf("expected a memory quantity of at least %s (the container's request), such as 512Mi", minMemoryLimit.String())
	}
	return nil
}

// envFor is the environment of a container with the memory limit given:
// the pod's identity, the handoff folder, and GOMEMLIMIT at 90% of the limit,
// in bytes, so that the Go runtime collects harder as it nears the limit
// rather than being killed at it. A computed value: the downward API gives
// limits.memory only divided by a divisor, as a bare number, which Go would
// read as bytes, so it cannot leave headroom. Whoever changes the limit in a
// copy of these manifests changes GOMEMLIMIT with it.
func envFor(limit string) []corev1.EnvVar {
	env := append([]corev1.EnvVar(nil), podEnv...)
	return append(env, corev1.EnvVar{Name: "GOMEMLIMIT", Value: strconv.FormatInt(GoMemLimit(limit), 10)})
}

// GoMemLimit is the GOMEMLIMIT of a container with the memory limit given:
// 90% of it, in bytes.
func GoMemLimit(limit string) int64 {
	q := resource.MustParse(limit)
	return q.Value() / 10 * 9
}

var podEnv = []corev1.EnvVar{
	{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
	{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
	{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
	{Name: "VIGIL_HANDOFF_DIR", Value: HandoffDir},
}

// Phases are the module's gate phases, ascending.
func Phases(m *spec.Module) []int {
	seen := map[int]bool{}
	var out []int
	for _, g := range m.Gates() {
		if !seen[g.Phase] {
			seen[g.Phase] = true
			out = append(out, g.Phase)
		}
	}
	sort.Ints(out)
	return out
}

// InitContainerName is the init container that runs a phase's gates.
func InitContainerName(phase int) string { return fmt.Sprintf("gate-phase-%d", phase) }

func podSpec(m *spec.Module, o Options, containers, inits []corev1.Container, component string) corev1.PodSpec {
	role := Admission
	if component == "watcher" {
		role = Watcher
	}
	var volumes []corev1.Volume
	if component == "admission" {
		volumes = []corev1.Volume{{Name: "handoff", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			SizeLimit: ptr.To(resource.MustParse("16Mi")),
		}}}}
	}
	for i := range inits {
		inits[i] = withAuthorConfig(m, inits[i])
		inits[i].Env = append(inits[i].Env, SpecEnv(m, o.fingerprint)...)
	}
	for i := range containers {
		containers[i] = withAuthorConfig(m, containers[i])
		containers[i].Env = append(containers[i].Env, SpecEnv(m, o.fingerprint)...)
	}
	volumes = append(volumes, authorVolumes(m, append(append([]corev1.Container(nil), inits...), containers...))...)
	return corev1.PodSpec{
		ServiceAccountName: ServiceAccount(m.Name, role),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		InitContainers: inits,
		Containers:     containers,
		Volumes:        volumes,
		Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100,
				PodAffinityTerm: corev1.PodAffinityTerm{
					LabelSelector: &metav1.LabelSelector{MatchLabels: selectorOf(m.Name, component)},
					TopologyKey:   corev1.LabelHostname,
				},
			}},
		}},
		TerminationGracePeriodSeconds: ptr.To[int64](30),
	}
}

var handoffMount = []corev1.VolumeMount{{Name: "handoff", MountPath: HandoffDir}}

func admissionDeployment(m *spec.Module, o Options, objMeta func(string, string, string) metav1.ObjectMeta, labels func(string) map[string]string) *appsv1.Deployment {
	var inits []corev1.Container
	for _, p := range Phases(m) {
		inits = append(inits, corev1.Container{
			Name: InitContainerName(p), Image: o.Image,
			Args:                     []string{"gate", "--phase", strconv.Itoa(p)},
			Env:                      envFor("128Mi"),
			VolumeMounts:             handoffMount,
			SecurityContext:          restricted,
			Resources:                resources("10m", "32Mi", "128Mi"),
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		})
	}
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromString("https"), Scheme: corev1.URISchemeHTTPS,
		}}, PeriodSeconds: 5, FailureThreshold: 3}
	}
	main := corev1.Container{
		Name: "admission", Image: o.Image,
		Args:            append([]string{"admission", "--cert-secret", CertSecret(m.Name), "--addr", ":9443", "--metrics-addr", ":8080"}, ignoreArgs(o)...),
		Env:             envFor(o.AdmissionMemory),
		Ports:           []corev1.ContainerPort{{Name: "https", ContainerPort: 9443}, {Name: "metrics", ContainerPort: 8080}},
		VolumeMounts:    handoffMount,
		SecurityContext: restricted,
		Resources:       resources("50m", "64Mi", o.AdmissionMemory),
		LivenessProbe:   probe("/healthz"),
		ReadinessProbe:  probe("/readyz"),
	}
	d := &appsv1.Deployment{
		TypeMeta:   tm("apps/v1", "Deployment"),
		ObjectMeta: objMeta(m.Name, m.Namespace, "admission"),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(o.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selectorOf(m.Name, "admission")},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels("admission"), Annotations: map[string]string{SpecAnnotation: o.fingerprint.Sum}},
				Spec:       podSpec(m, o, []corev1.Container{main}, inits, "admission"),
			},
		},
	}
	return d
}

func watcherDeployment(m *spec.Module, o Options, objMeta func(string, string, string) metav1.ObjectMeta) *appsv1.Deployment {
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("probes")}}, PeriodSeconds: 5, FailureThreshold: 3}
	}
	main := corev1.Container{
		Name: "watcher", Image: o.Image,
		Args:            append([]string{"watcher", "--metrics-addr", ":8080", "--probe-addr", ":8081"}, ignoreArgs(o)...),
		Env:             envFor(o.WatcherMemory),
		Ports:           []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080}, {Name: "probes", ContainerPort: 8081}},
		SecurityContext: restricted,
		Resources:       resources("50m", "64Mi", o.WatcherMemory),
		LivenessProbe:   probe("/healthz"),
		ReadinessProbe:  probe("/readyz"),
	}
	objm := objMeta(m.Name+"-watcher", m.Namespace, "watcher")
	return &appsv1.Deployment{
		TypeMeta:   tm("apps/v1", "Deployment"),
		ObjectMeta: objm,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(o.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selectorOf(m.Name, "watcher")},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: objm.Labels, Annotations: map[string]string{SpecAnnotation: o.fingerprint.Sum}},
				Spec:       podSpec(m, o, []corev1.Container{main}, nil, "watcher"),
			},
		},
	}
}

func pdb(m *spec.Module, component string, objMeta func(string, string, string) metav1.ObjectMeta) *policyv1.PodDisruptionBudget {
	name := m.Name
	if component != "admission" {
		name += "-" + component
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   tm("policy/v1", "PodDisruptionBudget"),
		ObjectMeta: objMeta(name, m.Namespace, component),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: selectorOf(m.Name, component)},
		},
	}
}

// YAML renders objects as one multi-document YAML stream, deterministic.
func YAML(objs []client.Object) ([]byte, error) {
	var buf bytes.Buffer
	for i, o := range objs {
		data, err := clean(o)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(data)
	}
	return buf.Bytes(), nil
}

// clean renders an object as YAML without the fields a typed object
// serializes empty: a null creationTimestamp and an empty status.
func clean(o client.Object) ([]byte, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, err
	}
	if md, ok := u["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	if st, ok := u["status"].(map[string]any); ok && len(st) == 0 {
		delete(u, "status")
	}
	dropNullTimestamps(u)
	return yaml.Marshal(u)
}

// dropNullTimestamps removes the null creationTimestamp of embedded
// templates.
func dropNullTimestamps(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if k == "creationTimestamp" && x == nil {
				delete(t, k)
				continue
			}
			dropNullTimestamps(x)
		}
	case []any:
		for _, x := range t {
			dropNullTimestamps(x)
		}
	}
}

// FileName is the name an object is written under by `manifests -o DIR`:
// its apply position, kind and name.
func FileName(i int, o client.Object) string {
	kind := o.GetObjectKind().GroupVersionKind().Kind
	name := o.GetName()
	if ns := o.GetNamespace(); ns != "" {
		name = ns + "." + name
	}
	return fmt.Sprintf("%02d-%s-%s.yaml", i, lower(kind), sanitize(name))
}

func lower(s string) string { return string(bytes.ToLower([]byte(s))) }

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == ':' || c == '/' {
			b[i] = '-'
		}
	}
	return string(b)
}

// ignoreArgs are the flags that hand the install's ignored namespaces
// (Options.IgnoredNamespaces) to a role that admits or watches.
func ignoreArgs(o Options) []string {
	var args []string
	for _, ns := range o.IgnoredNamespaces {
		args = append(args, IgnoreFlag, ns)
	}
	return args
}

// IgnoreFlag is the roles' flag of an ignored namespace the install adds.
const IgnoreFlag = "--ignore-namespace"

package chart

import (
	"maps"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/internal/shipping/manifests"
	"github.com/vigilkit/vigil/store/v1alpha1"
)

// UninstallName names the pre-delete hook's Job and ServiceAccount.
func UninstallName(module string) string { return module + "-uninstall" }

// UninstallArgs are the arguments of the pre-delete hook's container.
func UninstallArgs(m *spec.Module) []string {
	args := []string{"unregister", "--remove-finalizers", "--delete-state"}
	if m.HasWatcher() {
		args = append(args, "--stop-watcher")
	}
	return args
}

// UninstallRules are the rules the pre-delete hook runs with: empty the
// module's webhook configurations, strip its finalizers, and stop its
// watcher. The namespaced ones (the watcher) are in the module's namespace.
func UninstallRules(m *spec.Module) (cluster, namespaced []rbacv1.PolicyRule) {
	cluster = []rbacv1.PolicyRule{{
		APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"},
		ResourceNames: []string{m.Name}, Verbs: []string{"get", "patch"},
	}}
	if stamps := registration.FinalizerStamps(m); len(stamps) > 0 {
		var names []string
		for _, st := range stamps {
			names = append(names, st.Binding.Name)
		}
		cluster = append(cluster, rbacv1.PolicyRule{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingadmissionpolicybindings"},
			ResourceNames: names, Verbs: []string{"get", "delete"}})
	}
	seen := map[string]bool{}
	for _, w := range m.Watches {
		if w.Role != spec.RoleFinalize {
			continue
		}
		res := m.ResourceOf(w.GVK)
		if seen[w.GVK.Group+"/"+res] {
			continue
		}
		seen[w.GVK.Group+"/"+res] = true
		cluster = append(cluster, rbacv1.PolicyRule{APIGroups: []string{w.GVK.Group}, Resources: []string{res}, Verbs: []string{"get", "list", "patch"}})
	}
	// --delete-state: what the module made at run time.
	namespaced = []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{manifests.CertSecret(m.Name)}, Verbs: []string{"delete"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{spec.WatcherLeaseName(m.Name)}, Verbs: []string{"delete"}},
		{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"stores"}, ResourceNames: []string{m.Name}, Verbs: []string{"delete"}},
	}
	if m.HasWatcher() {
		namespaced = append(namespaced,
			rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{manifests.ServiceAccount(m.Name, manifests.Watcher)}, Verbs: []string{"get", "patch"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
		)
	}
	return cluster, namespaced
}

// hookObjects are the pre-delete hook: a ServiceAccount and its RBAC
// (weight -10), then the Job (weight 0); all deleted once it succeeded.
func hookObjects(m *spec.Module, fp spec.Fingerprint, objs []client.Object, nsLabels map[string]string) ([]map[string]any, error) {
	// The hook's pod runs as restricted as the module's own.
	var podSec *corev1.PodSecurityContext
	var sec *corev1.SecurityContext
	for _, o := range objs {
		if dep, ok := o.(*appsv1.Deployment); ok && (podSec == nil || dep.Name == m.Name) {
			podSec = dep.Spec.Template.Spec.SecurityContext
			sec = dep.Spec.Template.Spec.Containers[0].SecurityContext
		}
	}
	name := UninstallName(m.Name)
	labels := maps.Clone(nsLabels)
	labels["app.kubernetes.io/component"] = "uninstall"
	meta := func(n, ns, weight string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Namespace: ns, Labels: labels, Annotations: map[string]string{
			"helm.sh/hook":               "pre-delete",
			"helm.sh/hook-weight":        weight,
			"helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded",
		}}
	}
	rbacName := "vigil:" + name
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: m.Namespace}}
	cluster, namespaced := UninstallRules(m)
	out := []client.Object{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(name, m.Namespace, "-10")},
		&rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: meta(rbacName, "", "-10"), Rules: cluster},
		&rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"}, ObjectMeta: meta(rbacName, "", "-10"),
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rbacName}, Subjects: subject},
	}
	if len(namespaced) > 0 {
		out = append(out,
			&rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"}, ObjectMeta: meta(rbacName, m.Namespace, "-10"), Rules: namespaced},
			&rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}, ObjectMeta: meta(rbacName, m.Namespace, "-10"),
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: rbacName}, Subjects: subject})
	}
	limit := "128Mi"
	out = append(out, &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta(name, m.Namespace, "0"),
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](3),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: name,
					RestartPolicy:      corev1.RestartPolicyNever,
					SecurityContext:    podSec,
					Containers: []corev1.Container{{
						Name: "unregister", Image: imageSentinel,
						Args:            UninstallArgs(m),
						Env:             append([]corev1.EnvVar{{Name: "GOMEMLIMIT", Value: strconv.FormatInt(manifests.GoMemLimit(limit), 10)}}, manifests.SpecEnv(m, fp)...),
						SecurityContext: sec,
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)},
						},
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}},
				},
			},
		},
	})
	var rendered []map[string]any
	for _, o := range out {
		u, err := toMap(o)
		if err != nil {
			return nil, err
		}
		rendered = append(rendered, u)
	}
	return rendered, nil
}

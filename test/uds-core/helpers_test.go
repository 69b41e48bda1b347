package udscore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vigilkit/vigil/internal/testsupport/udscore"
	"github.com/vigilkit/vigil/vigiltest"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// group is the API group of UDS Core's kinds.
const group = "uds.dev"

// apply creates obj as UDS Core's tests apply it (a new object: its
// create is what admission judges), and removes it when the test ends.
func apply(t *testing.T, obj client.Object) error {
	t.Helper()
	err := env.Client.Create(t.Context(), obj)
	if err == nil {
		t.Cleanup(func() {
			_ = env.Client.Delete(context.Background(), obj, client.GracePeriodSeconds(0))
		})
	}
	return err
}

// denied fails the test unless err is a denial whose message contains
// want, as UDS Core's tests match with expect.stringContaining.
func denied(t *testing.T, what string, err error, want string) {
	t.Helper()
	var status apierrors.APIStatus
	if err == nil {
		t.Errorf("%s was admitted; want it denied with %q", what, want)
		return
	}
	if !errors.As(err, &status) || !strings.Contains(status.Status().Message, want) {
		t.Errorf("%s: %v; want a denial containing %q", what, err, want)
	}
}

// testPod is a Pod of UDS Core's tests: one container "test" of image
// 127.0.0.1/fake in policy-tests, edited by with.
func testPod(name string, with func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: udscore.PolicyTests},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "test", Image: "127.0.0.1/fake"}}},
	}
	if with != nil {
		with(p)
	}
	return p
}

// matcher is an Exemption entry's matcher.
type matcher struct{ Namespace, Name, Kind string }

// exemption is an Exemption of namespace with one entry.
func exemption(namespace, name string, policies []string, matcher matcher) *unstructured.Unstructured {
	ps := make([]any, len(policies))
	for i, p := range policies {
		ps[i] = p
	}
	m := map[string]any{"namespace": matcher.Namespace, "name": matcher.Name}
	if matcher.Kind != "" {
		m["kind"] = matcher.Kind
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "uds.dev/v1alpha1", "kind": "Exemption",
		"metadata": map[string]any{"namespace": namespace, "name": name},
		"spec":     map[string]any{"exemptions": []any{map[string]any{"policies": ps, "matcher": m}}},
	}}
}

// privilegedPod is a privileged Pod of namespace, its other settings
// compliant.
func privilegedPod(namespace, name string) *corev1.Pod {
	p := testPod(name, func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	})
	p.Namespace = namespace
	return p
}

// setAllowAll sets the ClusterConfig's spec.policy.allowAllNsExemptions.
func setAllowAll(t *testing.T, allow bool) {
	t.Helper()
	cc := udscore.ClusterConfigObject(allow)
	patch := []byte(fmt.Sprintf(`{"spec":{"policy":{"allowAllNsExemptions":%t}}}`, allow))
	if err := env.Client.Patch(context.Background(), cc, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Error(err)
	}
}

// tenantClient is a client of a user who may create, in namespace ns only,
// Pods and Exemptions.
func tenantClient(t *testing.T, ns string) client.Client {
	t.Helper()
	return env.AsTenant(t, ns, "tenant-"+ns,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "list", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{"exemptions"}, Verbs: []string{"create", "get", "list", "update", "delete"}},
	)
}

// exemptionKind is an empty Exemption, for its kind.
func exemptionKind() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "uds.dev/v1alpha1", "kind": "Exemption"}}
}

// exemptionOf is an Exemption of namespace with one DisallowPrivileged
// entry per name, each naming pods of podNS.
func exemptionOf(namespace, name, podNS string, names ...string) *unstructured.Unstructured {
	entries := make([]any, len(names))
	for i, n := range names {
		entries[i] = map[string]any{
			"policies": []any{"DisallowPrivileged"},
			"matcher":  map[string]any{"namespace": podNS, "name": n, "kind": "pod"},
		}
	}
	ex := exemptionKind()
	ex.SetNamespace(namespace)
	ex.SetName(name)
	ex.Object["spec"] = map[string]any{"exemptions": entries}
	return ex
}

// podIn is an ordinary Pod of namespace.
func podIn(namespace, name string) *corev1.Pod {
	p := testPod(name, nil)
	p.Namespace = namespace
	return p
}

// startUDSCore is startUDSCoreWith the module's own options.
func startUDSCore(t testing.TB) *vigiltest.Module {
	return startUDSCoreWith(t, vigiltest.ModuleOptions{})
}

package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The API server lets a Pod's labels and annotations change through its
// status subresource. A tenant who may update pods/status in her namespace
// (as a controller's ServiceAccount may) writes there the ambient override
// annotation that the Pod's own update is denied: the Istio policies, which
// judge metadata, must deny it on that path too. A status write that leaves
// the metadata as it was (the kubelet's) still passes.
func TestStatusWritesCannotChangeGovernedMetadata(t *testing.T) {
	startUDSCore(t)
	ctx := t.Context()
	const user = "tenant-status"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: PolicyTests, Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "pods/status"}, Verbs: []string{"get", "create", "update", "patch"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: PolicyTests, Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, o) })
	}
	tenant, err := client.New(env.AsUserConfig(user), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}

	pod := testPod("status-path", nil)
	if err := tenant.Create(ctx, pod); err != nil {
		t.Fatalf("the tenant's compliant Pod: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)) })

	// What the kubelet writes: status alone, sent to no webhook.
	pod.Status.Phase = corev1.PodPending
	pod.Status.Message = "scheduled nowhere"
	if err := tenant.Status().Update(ctx, pod); err != nil {
		t.Fatalf("a status write that leaves the metadata as it was: %v; want it to pass", err)
	}

	const key = "ambient.istio.io/bypass-inbound-capture"
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Annotations = map[string]string{key: "true"}
	err = tenant.Status().Patch(ctx, pod, patch)
	denied(t, "the ambient override annotation written through pods/status", err,
		"The following istio ambient annotations that can modify secure mesh behavior are not allowed: "+key)

	got := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	if v, ok := got.Annotations[key]; ok {
		t.Errorf("the Pod stored %s=%q through pods/status; want it refused", key, v)
	}
}

package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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
	tenant := env.AsTenant(t, PolicyTests, "tenant-status", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"pods", "pods/status"}, Verbs: []string{"create", "get", "update", "patch"}})

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
	err := tenant.Status().Patch(ctx, pod, patch)
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

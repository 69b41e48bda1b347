package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// UDS Core's storage policy tests (test/vitest/pepr-policies/storage.spec.ts,
// describe "storage policies"), each subtest named after its it(...).
func TestStoragePolicies(t *testing.T) {
	startUDSCore(t)

	t.Run("should restrict volume types to the allowed list", func(t *testing.T) {
		denied(t, "a hostPath volume", apply(t, storageHostPathPod("storage-volume-type")),
			"Volume host-vol has a disallowed volume type of 'hostPath'.")
	})

	t.Run("should restrict hostPath volumes to read-only", func(t *testing.T) {
		denied(t, "a hostPath volume mounted readOnly: false", apply(t, storageHostPathPod("storage-restrict-hostpath")),
			"hostPath volume 'host-vol' must be mounted as readOnly.")
	})
}

// storageHostPathPod is a test Pod whose container mounts the hostPath
// volume host-vol (/data, DirectoryOrCreate) at /host-data, not readOnly
// (unset and readOnly: false, as UDS Core's two tests write it, are the
// same object once the API server has it).
func storageHostPathPod(name string) *corev1.Pod {
	return testPod(name, func(p *corev1.Pod) {
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "host-vol", MountPath: "/host-data"}}
		p.Spec.Volumes = []corev1.Volume{{Name: "host-vol", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: "/data", Type: ptr.To(corev1.HostPathDirectoryOrCreate)},
		}}}
	})
}

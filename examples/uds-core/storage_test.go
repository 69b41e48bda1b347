package main

import (
	"encoding/json"
	"reflect"
	"strings"
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

// A volume's type is the first key of its JSON after "name", as UDS Core
// reads it: found without encoding, for every source a volume can have,
// and "unknown" for none.
func TestStorageVolumeTypeIsTheFirstKeyOfItsJSON(t *testing.T) {
	src := reflect.TypeFor[corev1.VolumeSource]()
	if src.NumField() < 20 {
		t.Fatalf("VolumeSource has %d fields", src.NumField())
	}
	for i := range src.NumField() {
		v := corev1.Volume{Name: "data"}
		field := reflect.ValueOf(&v.VolumeSource).Elem().Field(i)
		field.Set(reflect.New(field.Type().Elem()))
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		// {"name":"data","<key>":...}
		want, _, _ := strings.Cut(strings.TrimPrefix(string(data), `{"name":"data","`), `"`)
		if got := storageVolumeType(v); got != want {
			t.Errorf("%s: storageVolumeType = %q, want %q (from %s)", src.Field(i).Name, got, want, data)
		}
	}
	if got := storageVolumeType(corev1.Volume{Name: "data"}); got != "unknown" {
		t.Errorf("no source: %q, want unknown", got)
	}
}

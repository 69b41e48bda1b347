package main

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/vigilkit/vigil"
)

// storageAllowedVolumeTypes are the volume types UDS Core allows, as its
// validateVolumeTypes lists them (their JSON field names).
var storageAllowedVolumeTypes = []string{
	"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image",
	"persistentVolumeClaim", "projected", "secret",
}

// declareStorage declares UDS Core's storage policies (its
// policies/storage.ts), in its order.
func (p *policies) declareStorage() {
	// Volume types: only the allowed ones; the first other volume is named.
	p.pod(RestrictVolumeTypes, nil, func(r *vigil.Request[*corev1.Pod]) string {
		for _, v := range r.Object.Spec.Volumes {
			if typ := storageVolumeType(v); !slices.Contains(storageAllowedVolumeTypes, typ) {
				return fmt.Sprintf("Volume %s has a disallowed volume type of '%s'.", v.Name, typ)
			}
		}
		return ""
	})

	// hostPath volumes: every container's mount of one is readOnly; the
	// first volume mounted otherwise is named.
	p.pod(RestrictHostPathWrite, nil, func(r *vigil.Request[*corev1.Pod]) string {
		mounts := storageVolumeMounts(r.Object)
		for _, v := range r.Object.Spec.Volumes {
			if v.HostPath == nil {
				continue
			}
			for _, m := range mounts {
				if m.Name == v.Name && !m.ReadOnly {
					return fmt.Sprintf("hostPath volume '%s' must be mounted as readOnly.", v.Name)
				}
			}
		}
		return ""
	})
}

// storageVolumeType is the volume's type as UDS Core reads it: the first
// key of its JSON other than "name" (the API server writes the volume's
// source after its name, in the Go struct's order), or "unknown" when it
// has none. That is the JSON name of the first source set, in
// VolumeSource's order: found without encoding the volume.
func storageVolumeType(v corev1.Volume) string {
	src := reflect.ValueOf(&v.VolumeSource).Elem()
	for i, key := range volumeSourceKeys {
		if key != "" && !src.Field(i).IsNil() {
			return key
		}
	}
	return "unknown"
}

// volumeSourceKeys are the JSON names of VolumeSource's fields, in its
// order; empty for a field that is not a pointer (none is, today).
var volumeSourceKeys = func() []string {
	t := reflect.TypeFor[corev1.VolumeSource]()
	keys := make([]string, t.NumField())
	for i := range keys {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Pointer {
			keys[i], _, _ = strings.Cut(f.Tag.Get("json"), ",")
		}
	}
	return keys
}()

// storageVolumeMounts are the volume mounts of the Pod's containers, init
// containers and ephemeral containers, in that order.
func storageVolumeMounts(pod *corev1.Pod) []corev1.VolumeMount {
	var out []corev1.VolumeMount
	for _, c := range pod.Spec.Containers {
		out = append(out, c.VolumeMounts...)
	}
	for _, c := range pod.Spec.InitContainers {
		out = append(out, c.VolumeMounts...)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		out = append(out, c.VolumeMounts...)
	}
	return out
}

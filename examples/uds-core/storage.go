package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

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
// has none.
func storageVolumeType(v corev1.Volume) string {
	data, err := json.Marshal(v)
	if err != nil {
		return "unknown"
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // {
		return "unknown"
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "unknown"
		}
		if key, _ := tok.(string); key != "name" {
			return key
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "unknown"
		}
	}
	return "unknown"
}

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

package manifests

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// withAuthorConfig gives a container the variables and volume mounts the
// author declared for it, after vigil's own.
func withAuthorConfig(m *spec.Module, c corev1.Container) corev1.Container {
	for _, e := range m.EnvOf(c.Name) {
		c.Env = append(c.Env, envVar(e))
	}
	for _, mt := range m.MountsOf(c.Name) {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: mt.Volume, MountPath: mt.Path, ReadOnly: true})
	}
	return c
}

func envVar(e spec.Env) corev1.EnvVar {
	if e.From == nil {
		return corev1.EnvVar{Name: e.Name, Value: e.Value}
	}
	f := e.From
	var optional *bool
	if f.Optional {
		optional = ptr.To(true)
	}
	ref := corev1.LocalObjectReference{Name: f.Name}
	if f.Kind == spec.ConfigMapKind {
		return corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: ref, Key: f.Key, Optional: optional,
		}}}
	}
	return corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: ref, Key: f.Key, Optional: optional,
	}}}
}

// authorVolumes are the pod's volumes for the author's mounts of its
// containers.
func authorVolumes(m *spec.Module, containers []corev1.Container) []corev1.Volume {
	var out []corev1.Volume
	seen := map[string]bool{}
	for _, c := range containers {
		for _, mt := range m.MountsOf(c.Name) {
			if seen[mt.Volume] {
				continue
			}
			seen[mt.Volume] = true
			out = append(out, volume(mt))
		}
	}
	return out
}

func volume(mt spec.Mount) corev1.Volume {
	var optional *bool
	if mt.Optional {
		optional = ptr.To(true)
	}
	var items []corev1.KeyToPath
	for _, k := range mt.Keys {
		items = append(items, corev1.KeyToPath{Key: k, Path: k})
	}
	// The default mode (0644): the pod has no fsGroup, so the files belong
	// to root, and the containers' user (65532) reads them as others.
	if mt.Kind == spec.ConfigMapKind {
		return corev1.Volume{Name: mt.Volume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: mt.Name}, Items: items, Optional: optional,
		}}}
	}
	return corev1.Volume{Name: mt.Volume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: mt.Name, Items: items, Optional: optional,
	}}}
}

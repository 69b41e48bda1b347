package dev

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/vigilkit/vigil/internal/clusters/podrun"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/shipping/manifests"
)

// Materialiser gives a module's local processes the variables and volumes
// its definition declares for their containers, as the kubelet gives them
// to a pod's: it reads the Secrets and ConfigMaps from the cluster, writes
// each volume's keys as files under Dir/<container>/<mount path>, and
// returns the variables, with spec.EnvMountRoot naming that folder so that
// the module finds its volumes there (MountBuilder.Path).
type Materialiser struct {
	Client kubernetes.Interface
	Plan   *spec.Module
	// Dir holds one folder per container; the session's own.
	Dir string
}

// MissingError lists the required objects and keys a container cannot start
// without that do not exist yet.
type MissingError struct {
	Container string
	Missing   []string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("%s cannot start before %s exists", e.Container, strings.Join(e.Missing, " and "))
}

// Prepare materialises the container's volumes, replacing what an earlier
// start left, and returns its environment as KEY=value lines: the author's
// variables and spec.EnvMountRoot. A required object or key that is missing
// is a *MissingError, and nothing is written; an optional one is left out
// (an optional volume is an empty folder). What the container is given is
// resolved from its pod's spec as internal/shipping/manifests renders it, by the
// local pod runner vigiltest's pods use too; the waiting, the folder per
// container and the names of the declarations are vigil dev's own.
func (z *Materialiser) Prepare(ctx context.Context, container string) ([]string, error) {
	src := &snapshot{Source: podrun.Client(z.Client, z.Plan.Namespace), objects: map[objectKey]objectRead{}}
	missing, err := z.missing(ctx, src, container)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, &MissingError{Container: container, Missing: missing}
	}
	pod, err := z.pod(container)
	if err != nil {
		return nil, err
	}
	root := filepath.Join(z.Dir, container)
	if err := os.RemoveAll(root); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	if err := pod.Mount(ctx, src, container, root, 0o600); err != nil {
		return nil, err
	}
	all, err := pod.Env(ctx, src, container)
	if err != nil {
		return nil, err
	}
	// The author's variables only: vigil dev sets the pod's identity, the
	// handoff folder and the memory limit of its processes itself.
	authored := map[string]bool{}
	for _, e := range z.Plan.EnvOf(container) {
		authored[e.Name] = true
	}
	env := []string{}
	for _, kv := range all {
		if k, _, _ := strings.Cut(kv, "="); authored[k] {
			env = append(env, kv)
		}
	}
	return append(env, spec.EnvMountRoot+"="+root), nil
}

// missing lists what holds the container, as the module declared it: the
// pod's required volumes before its first container, the container's
// required variables, and the keys of its volumes and variables.
func (z *Materialiser) missing(ctx context.Context, src *snapshot, container string) ([]string, error) {
	ns := z.Plan.Namespace
	var missing []string
	for _, r := range z.Plan.Requirements(container) {
		data, err := z.data(ctx, src, r.Kind, r.Name)
		if err != nil {
			return nil, err
		}
		if data == nil {
			missing = append(missing, fmt.Sprintf("%s %s/%s (%s)", r.Kind, ns, r.Name, r.Why))
		}
	}
	for _, mt := range z.Plan.MountsOf(container) {
		data, err := z.data(ctx, src, mt.Kind, mt.Name)
		if err != nil {
			return nil, err
		}
		if data == nil {
			if !mt.Optional {
				missing = append(missing, fmt.Sprintf("%s %s/%s (volume %s at %s, %s)", mt.Kind, ns, mt.Name, mt.Volume, mt.Path, mt.Site))
			}
			continue
		}
		for _, k := range mt.Keys {
			if _, ok := data[k]; !ok && !mt.Optional {
				missing = append(missing, fmt.Sprintf("key %s of %s %s/%s (volume %s at %s, %s)", k, mt.Kind, ns, mt.Name, mt.Volume, mt.Path, mt.Site))
			}
		}
	}
	for _, e := range z.Plan.EnvOf(container) {
		f := e.From
		if f == nil {
			continue
		}
		data, err := z.data(ctx, src, f.Kind, f.Name)
		if err != nil {
			return nil, err
		}
		if _, ok := data[f.Key]; !ok && data != nil && !f.Optional {
			missing = append(missing, fmt.Sprintf("key %s of %s %s/%s (variable %s, %s)", f.Key, f.Kind, ns, f.Name, e.Name, e.Site))
		}
		// A missing object of a required variable is a requirement, listed.
	}
	return missing, nil
}

// pod is the pod the container runs in, its spec as the module's manifests
// render it.
func (z *Materialiser) pod(container string) (*podrun.Pod, error) {
	objs, err := manifests.Render(z.Plan, manifests.Options{Image: "vigil-dev"})
	if err != nil {
		return nil, fmt.Errorf("render the pod of %s: %w", container, err)
	}
	for _, o := range objs {
		d, ok := o.(*appsv1.Deployment)
		if !ok {
			continue
		}
		pod := &podrun.Pod{Spec: d.Spec.Template.Spec, Namespace: z.Plan.Namespace,
			Labels: d.Spec.Template.Labels, Annotations: d.Spec.Template.Annotations}
		if _, err := pod.Container(container); err != nil {
			continue
		}
		// The container's mounts of the author's volumes only: the handoff
		// folder is the session's (VIGIL_HANDOFF_DIR).
		authored := map[string]bool{}
		for _, mt := range z.Plan.MountsOf(container) {
			authored[mt.Volume] = true
		}
		for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range cs {
				if cs[i].Name == container {
					cs[i].VolumeMounts = slices.DeleteFunc(slices.Clone(cs[i].VolumeMounts), func(m corev1.VolumeMount) bool { return !authored[m.Name] })
				}
				// The session runs the binary it built from the module's
				// source: no rendered definition to hold it to.
				cs[i].Env = slices.DeleteFunc(slices.Clone(cs[i].Env), func(e corev1.EnvVar) bool {
					return e.Name == spec.EnvSpecHash || e.Name == spec.EnvSpecParts
				})
			}
		}
		return pod, nil
	}
	return nil, fmt.Errorf("the module's manifests run no container %s", container)
}

// data is a Secret's or ConfigMap's data in the module's namespace; nil when
// it does not exist.
func (z *Materialiser) data(ctx context.Context, src *snapshot, kind, name string) (map[string][]byte, error) {
	ns := z.Plan.Namespace
	switch kind {
	case spec.SecretKind:
		s, err := src.Secret(ctx, name)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read Secret %s/%s for the module's containers: %w", ns, name, err)
		}
		out := map[string][]byte{}
		maps.Copy(out, s.Data)
		return out, nil
	case spec.ConfigMapKind:
		cm, err := src.ConfigMap(ctx, name)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read ConfigMap %s/%s for the module's containers: %w", ns, name, err)
		}
		out := map[string][]byte{}
		for k, v := range cm.Data {
			out[k] = []byte(v)
		}
		maps.Copy(out, cm.BinaryData)
		return out, nil
	}
	return nil, fmt.Errorf("%s %s: expected a Secret or a ConfigMap", kind, name)
}

type objectKey struct{ kind, name string }

type objectRead struct {
	obj any
	err error
}

// snapshot reads each Secret and ConfigMap once, so that vigil dev's checks
// and the pod runner see the same objects.
type snapshot struct {
	podrun.Source
	objects map[objectKey]objectRead
}

func (s *snapshot) Secret(ctx context.Context, name string) (*corev1.Secret, error) {
	k := objectKey{spec.SecretKind, name}
	r, ok := s.objects[k]
	if !ok {
		r.obj, r.err = s.Source.Secret(ctx, name)
		s.objects[k] = r
	}
	sec, _ := r.obj.(*corev1.Secret)
	return sec, r.err
}

func (s *snapshot) ConfigMap(ctx context.Context, name string) (*corev1.ConfigMap, error) {
	k := objectKey{spec.ConfigMapKind, name}
	r, ok := s.objects[k]
	if !ok {
		r.obj, r.err = s.Source.ConfigMap(ctx, name)
		s.objects[k] = r
	}
	cm, _ := r.obj.(*corev1.ConfigMap)
	return cm, r.err
}

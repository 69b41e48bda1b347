package podrun

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
)

// Pod is a pod's spec and what the downward API tells of the pod.
type Pod struct {
	Spec                 corev1.PodSpec
	Name, Namespace, UID string
	Labels, Annotations  map[string]string
	// NodeName is what spec.nodeName resolves to; IP, status.podIP and
	// status.hostIP.
	NodeName, IP string
}

// Container is the init container or container of that name.
func (p *Pod) Container(name string) (corev1.Container, error) {
	for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		if c.Name == name {
			return c, nil
		}
	}
	return corev1.Container{}, fmt.Errorf("the pod has no container %q", name)
}

// Args are the container's arguments to the module binary: its command and
// args, the command's first word (the image's entrypoint, which the binary
// stands for) left out.
func Args(c corev1.Container) []string {
	args := slices.Concat(c.Command, c.Args)
	if len(c.Command) > 0 {
		args = args[1:]
	}
	return args
}

// Mounts are the container's volume mounts, longest path first.
func Mounts(c corev1.Container) []corev1.VolumeMount {
	ms := slices.Clone(c.VolumeMounts)
	sort.SliceStable(ms, func(i, j int) bool { return len(ms[i].MountPath) > len(ms[j].MountPath) })
	return ms
}

// Local is v, a path under one of the container's mounts, as the same path
// under root, where Mount writes the volumes; any other v as it is.
func Local(c corev1.Container, root, v string) string {
	for _, m := range Mounts(c) {
		mp := filepath.Clean(m.MountPath)
		if v == mp || strings.HasPrefix(v, mp+"/") {
			return filepath.Join(root, v)
		}
	}
	return v
}

// LocalArg is Local of an argument, or of the value of a --flag=value.
func LocalArg(c corev1.Container, root, a string) string {
	if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "--") {
		return k + "=" + Local(c, root, v)
	}
	return Local(c, root, a)
}

// optionalMissing reports whether a read failed only because an optional
// object does not exist, which the kubelet passes over.
func optionalMissing(err error, optional *bool) bool {
	return apierrors.IsNotFound(err) && ptr.Deref(optional, false)
}

func orMissing(err error) error {
	if err == nil {
		return errors.New("no such key")
	}
	return err
}

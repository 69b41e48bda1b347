package podrun

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Mount writes the volumes the named container mounts under root, each at
// its mount path, as the kubelet mounts them: a Secret's or ConfigMap's keys
// (or its items, each at its path) as files of mode perm, an emptyDir as a
// folder, left as it is if there (an init container's files stay for the
// next). Folders get perm with search rights where it has read rights. An
// optional Secret or ConfigMap that does not exist is an empty folder, an
// optional item that is missing no file; a required one is an error, for
// which the kubelet would keep the pod in ContainerCreating.
func (p *Pod) Mount(ctx context.Context, src Source, container, root string, perm os.FileMode) error {
	c, err := p.Container(container)
	if err != nil {
		return err
	}
	dirPerm := perm | (perm&0o444)>>2
	vols := map[string]corev1.Volume{}
	for _, v := range p.Spec.Volumes {
		vols[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok {
			return fmt.Errorf("container %s mounts volume %q, which the pod does not have", c.Name, m.Name)
		}
		if m.SubPath != "" {
			return fmt.Errorf("volume %s: subPath mounts are not emulated", v.Name)
		}
		dir := filepath.Join(root, filepath.Clean(m.MountPath))
		if err := os.MkdirAll(dir, dirPerm); err != nil {
			return err
		}
		files, err := p.volumeFiles(ctx, src, v)
		if err != nil {
			return err
		}
		for k, d := range files {
			f := filepath.Join(dir, k)
			if err := os.MkdirAll(filepath.Dir(f), dirPerm); err != nil {
				return err
			}
			if err := os.WriteFile(f, d, perm); err != nil {
				return err
			}
			// A file an earlier mount wrote takes the mode asked for now.
			if err := os.Chmod(f, perm); err != nil {
				return err
			}
		}
	}
	return nil
}

// volumeFiles are a volume's files by path; none for an emptyDir.
func (p *Pod) volumeFiles(ctx context.Context, src Source, v corev1.Volume) (map[string][]byte, error) {
	files := map[string][]byte{}
	var items []corev1.KeyToPath
	var optional *bool
	switch {
	case v.EmptyDir != nil:
		return nil, nil
	case v.Secret != nil:
		optional = v.Secret.Optional
		s, err := src.Secret(ctx, v.Secret.SecretName)
		if optionalMissing(err, optional) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("volume %s: Secret %s/%s: %w (the kubelet would keep the pod in ContainerCreating)", v.Name, p.Namespace, v.Secret.SecretName, err)
		}
		maps.Copy(files, s.Data)
		items = v.Secret.Items
	case v.ConfigMap != nil:
		optional = v.ConfigMap.Optional
		cm, err := src.ConfigMap(ctx, v.ConfigMap.Name)
		if optionalMissing(err, optional) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("volume %s: ConfigMap %s/%s: %w (the kubelet would keep the pod in ContainerCreating)", v.Name, p.Namespace, v.ConfigMap.Name, err)
		}
		for k, d := range cm.Data {
			files[k] = []byte(d)
		}
		maps.Copy(files, cm.BinaryData)
		items = v.ConfigMap.Items
	default:
		return nil, fmt.Errorf("volume %s: the runner emulates Secret, ConfigMap and emptyDir volumes only", v.Name)
	}
	if len(items) == 0 {
		return files, nil
	}
	picked := map[string][]byte{}
	for _, it := range items {
		d, ok := files[it.Key]
		if !ok {
			if ptr.Deref(optional, false) {
				continue
			}
			return nil, fmt.Errorf("volume %s: key %q missing", v.Name, it.Key)
		}
		picked[it.Path] = d
	}
	return picked, nil
}

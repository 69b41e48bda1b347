package dev

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vigilkit/vigil/internal/spec"
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
// (an optional volume is an empty folder).
func (z *Materialiser) Prepare(ctx context.Context, container string) ([]string, error) {
	ns := z.Plan.Namespace
	type key struct{ kind, name string }
	objects := map[key]map[string][]byte{}
	// read fetches an object's data once; nil when it does not exist.
	read := func(kind, name string) (map[string][]byte, error) {
		k := key{kind, name}
		if data, ok := objects[k]; ok {
			return data, nil
		}
		data, err := z.data(ctx, kind, name)
		if err != nil {
			return nil, err
		}
		objects[k] = data
		return data, nil
	}
	var missing []string
	// The pod's required volumes, before its first container, and the
	// container's own required variables.
	for _, r := range z.Plan.Requirements(container) {
		data, err := read(r.Kind, r.Name)
		if err != nil {
			return nil, err
		}
		if data == nil {
			missing = append(missing, fmt.Sprintf("%s %s/%s (%s)", r.Kind, ns, r.Name, r.Why))
		}
	}
	type file struct {
		path string
		data []byte
	}
	var files []file
	var dirs []string
	root := filepath.Join(z.Dir, container)
	for _, mt := range z.Plan.MountsOf(container) {
		dir := filepath.Join(root, filepath.FromSlash(mt.Path))
		dirs = append(dirs, dir)
		data, err := read(mt.Kind, mt.Name)
		if err != nil {
			return nil, err
		}
		if data == nil {
			if !mt.Optional {
				missing = append(missing, fmt.Sprintf("%s %s/%s (volume %s at %s, %s)", mt.Kind, ns, mt.Name, mt.Volume, mt.Path, mt.Site))
			}
			continue
		}
		keys := mt.Keys
		if len(keys) == 0 {
			keys = sortedKeys(data)
		}
		for _, k := range keys {
			v, ok := data[k]
			if !ok {
				if !mt.Optional {
					missing = append(missing, fmt.Sprintf("key %s of %s %s/%s (volume %s at %s, %s)", k, mt.Kind, ns, mt.Name, mt.Volume, mt.Path, mt.Site))
				}
				continue
			}
			files = append(files, file{filepath.Join(dir, k), v})
		}
	}
	env := []string{}
	for _, e := range z.Plan.EnvOf(container) {
		if e.From == nil {
			env = append(env, e.Name+"="+e.Value)
			continue
		}
		f := e.From
		data, err := read(f.Kind, f.Name)
		if err != nil {
			return nil, err
		}
		v, ok := data[f.Key]
		switch {
		case ok:
			env = append(env, e.Name+"="+string(v))
		case data != nil && !f.Optional:
			missing = append(missing, fmt.Sprintf("key %s of %s %s/%s (variable %s, %s)", f.Key, f.Kind, ns, f.Name, e.Name, e.Site))
		}
		// A missing object of a required variable is a requirement, listed.
	}
	if len(missing) > 0 {
		return nil, &MissingError{Container: container, Missing: missing}
	}
	if err := os.RemoveAll(root); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return nil, err
		}
	}
	return append(env, spec.EnvMountRoot+"="+root), nil
}

// data is a Secret's or ConfigMap's data in the module's namespace; nil when
// it does not exist.
func (z *Materialiser) data(ctx context.Context, kind, name string) (map[string][]byte, error) {
	ns := z.Plan.Namespace
	switch kind {
	case spec.SecretKind:
		s, err := z.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read Secret %s/%s for the module's containers: %w", ns, name, err)
		}
		out := map[string][]byte{}
		maps.Copy(out, s.Data)
		for k, v := range s.StringData {
			out[k] = []byte(v)
		}
		return out, nil
	case spec.ConfigMapKind:
		cm, err := z.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
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

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

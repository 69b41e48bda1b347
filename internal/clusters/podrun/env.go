package podrun

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Env is the named container's environment as the kubelet gives it, as
// KEY=value lines: its envFrom sources' keys first (each source's in key
// order), then its env, in order, a later line of a name overriding an
// earlier one. A variable of an optional key that is missing is left out; a
// required one is an error, for which the kubelet would report
// CreateContainerConfigError.
func (p *Pod) Env(ctx context.Context, src Source, container string) ([]string, error) {
	c, err := p.Container(container)
	if err != nil {
		return nil, err
	}
	env := []string{}
	for _, from := range c.EnvFrom {
		data, err := p.envSource(ctx, src, from)
		if err != nil {
			return nil, err
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			env = append(env, from.Prefix+k+"="+data[k])
		}
	}
	for _, e := range c.Env {
		v, ok, err := p.value(ctx, src, e)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			env = append(env, e.Name+"="+v)
		}
	}
	return env, nil
}

// value is a variable's value; not ok when it is left out.
func (p *Pod) value(ctx context.Context, src Source, e corev1.EnvVar) (string, bool, error) {
	f := e.ValueFrom
	switch {
	case f == nil:
		return e.Value, true, nil
	case f.FieldRef != nil:
		v, err := p.field(f.FieldRef.FieldPath)
		return v, err == nil, err
	case f.SecretKeyRef != nil:
		ref := f.SecretKeyRef
		s, err := src.Secret(ctx, ref.Name)
		if optionalMissing(err, ref.Optional) {
			return "", false, nil
		}
		var v []byte
		if err == nil {
			v = s.Data[ref.Key]
		}
		if v == nil {
			if err == nil && ptr.Deref(ref.Optional, false) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("key %q of Secret %s/%s: %v", ref.Key, p.Namespace, ref.Name, orMissing(err))
		}
		return string(v), true, nil
	case f.ConfigMapKeyRef != nil:
		ref := f.ConfigMapKeyRef
		cm, err := src.ConfigMap(ctx, ref.Name)
		if optionalMissing(err, ref.Optional) {
			return "", false, nil
		}
		v, ok := "", false
		if err == nil {
			v, ok = cm.Data[ref.Key]
		}
		if !ok {
			if err == nil && ptr.Deref(ref.Optional, false) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("key %q of ConfigMap %s/%s: %v", ref.Key, p.Namespace, ref.Name, orMissing(err))
		}
		return v, true, nil
	case f.ResourceFieldRef != nil:
		return "", false, fmt.Errorf("resourceFieldRef %s: the runner does not resolve it", f.ResourceFieldRef.Resource)
	}
	return "", false, nil
}

// field resolves a downward API field path.
func (p *Pod) field(path string) (string, error) {
	switch {
	case path == "metadata.name":
		return p.Name, nil
	case path == "metadata.namespace":
		return p.Namespace, nil
	case path == "metadata.uid":
		return p.UID, nil
	case path == "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case path == "spec.nodeName":
		return p.NodeName, nil
	case path == "status.podIP", path == "status.hostIP":
		return p.IP, nil
	case strings.HasPrefix(path, "metadata.labels['"):
		return p.Labels[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.labels['"), "']")], nil
	case strings.HasPrefix(path, "metadata.annotations['"):
		return p.Annotations[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.annotations['"), "']")], nil
	}
	return "", fmt.Errorf("fieldRef %s: the runner does not resolve it", path)
}

// envSource reads an envFrom source's keys; none of an optional one that
// does not exist.
func (p *Pod) envSource(ctx context.Context, src Source, from corev1.EnvFromSource) (map[string]string, error) {
	out := map[string]string{}
	switch s, c := from.SecretRef, from.ConfigMapRef; {
	case s != nil:
		sec, err := src.Secret(ctx, s.Name)
		if optionalMissing(err, s.Optional) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("envFrom Secret %s/%s: %w", p.Namespace, s.Name, err)
		}
		for k, v := range sec.Data {
			out[k] = string(v)
		}
	case c != nil:
		cm, err := src.ConfigMap(ctx, c.Name)
		if optionalMissing(err, c.Optional) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("envFrom ConfigMap %s/%s: %w", p.Namespace, c.Name, err)
		}
		for k, v := range cm.Data {
			out[k] = v
		}
	}
	return out, nil
}

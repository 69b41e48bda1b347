package vigiltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Manifests are a module's objects as they ship: the output of
// `<module> manifests`, or its chart rendered.
type Manifests struct {
	Objects []*unstructured.Unstructured
}

// DecodeManifests reads YAML documents (separated by ---) into Manifests.
func DecodeManifests(data []byte) (*Manifests, error) {
	m := &Manifests{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return m, nil
			}
			return nil, fmt.Errorf("decode manifests: %w", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		m.Objects = append(m.Objects, u)
	}
}

// Deployments are the manifests' Deployments.
func (m *Manifests) Deployments() ([]*appsv1.Deployment, error) {
	var out []*appsv1.Deployment
	for _, u := range m.Objects {
		if u.GetKind() != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
			return nil, fmt.Errorf("Deployment %s: %w", u.GetName(), err)
		}
		out = append(out, d)
	}
	return out, nil
}

// Deployment is the manifests' Deployment of a role: the one labelled
// app.kubernetes.io/component=component ("admission", "watcher"); nil if
// none.
func (m *Manifests) Deployment(component string) (*appsv1.Deployment, error) {
	ds, err := m.Deployments()
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		if d.Labels["app.kubernetes.io/component"] == component {
			return d, nil
		}
	}
	return nil, nil
}

// Apply creates the manifests' objects, or updates those that exist, as an
// install would: the Namespace, then CRDs (waiting until they are served),
// then the rest. Deployments and PodDisruptionBudgets are created too, but
// nothing runs their pods here: run them with NewPod. It returns the
// objects created, for Delete.
func (e *Env) Apply(ctx context.Context, m *Manifests) ([]*unstructured.Unstructured, error) {
	rank := func(u *unstructured.Unstructured) int {
		switch u.GetKind() {
		case "Namespace":
			return 0
		case "CustomResourceDefinition":
			return 1
		case "ServiceAccount", "ClusterRole", "Role":
			return 2
		}
		return 3
	}
	var created []*unstructured.Unstructured
	for r := 0; r <= 3; r++ {
		for _, u := range m.Objects {
			if rank(u) != r {
				continue
			}
			if u.GetKind() == "CustomResourceDefinition" {
				crd := &apiextensionsv1.CustomResourceDefinition{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
					return created, fmt.Errorf("CRD %s: %w", u.GetName(), err)
				}
				if err := e.InstallCRDs(crd); err != nil {
					return created, err
				}
				continue
			}
			obj := u.DeepCopy()
			err := e.Client.Create(ctx, obj)
			if apierrors.IsAlreadyExists(err) {
				have := &unstructured.Unstructured{}
				have.SetGroupVersionKind(u.GroupVersionKind())
				if err = e.Client.Get(ctx, client.ObjectKeyFromObject(u), have); err == nil {
					obj.SetResourceVersion(have.GetResourceVersion())
					err = e.Client.Update(ctx, obj)
				}
			} else if err == nil {
				created = append(created, obj)
			}
			if err != nil {
				return created, fmt.Errorf("apply %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(u), err)
			}
		}
	}
	return created, nil
}

// CheckPodSpec reports what in a pod spec a container runtime would enforce
// and the runner cannot: each a sentence saying what was expected and what
// is there. vigil's pods run as a non-root user (65532), with a read-only
// root filesystem, no privilege escalation and no capabilities, under their
// ServiceAccount's token.
func CheckPodSpec(spec corev1.PodSpec) []string {
	var out []string
	sc := spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		out = append(out, "pod securityContext.runAsNonRoot: want true")
	}
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		out = append(out, "pod securityContext.runAsUser: want a non-root uid (65532)")
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		out = append(out, "pod uses the host's network, PID or IPC namespace: want none")
	}
	if spec.ServiceAccountName == "" {
		out = append(out, "pod serviceAccountName: want the module's ServiceAccount, not default")
	}
	if spec.AutomountServiceAccountToken != nil && !*spec.AutomountServiceAccountToken {
		out = append(out, "pod automountServiceAccountToken is false: the module reaches the API server with that token")
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			out = append(out, fmt.Sprintf("volume %s is a hostPath: want none", v.Name))
		}
	}
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		csc := c.SecurityContext
		where := "container " + c.Name
		if c.Image == "" {
			out = append(out, where+": no image")
		}
		if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
			out = append(out, where+": securityContext.readOnlyRootFilesystem: want true")
		}
		if csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
			out = append(out, where+": securityContext.allowPrivilegeEscalation: want false")
		}
		if csc == nil || csc.Capabilities == nil || len(csc.Capabilities.Drop) != 1 || csc.Capabilities.Drop[0] != "ALL" || len(csc.Capabilities.Add) > 0 {
			out = append(out, where+": securityContext.capabilities: want drop [ALL], add none")
		}
		if csc != nil && csc.Privileged != nil && *csc.Privileged {
			out = append(out, where+": privileged: want false")
		}
		if csc != nil && csc.RunAsUser != nil && *csc.RunAsUser == 0 {
			out = append(out, where+": runAsUser 0: want non-root")
		}
	}
	return out
}

// checkPodSpec fails the test with CheckPodSpec's findings.
func checkPodSpec(t testing.TB, what string, spec corev1.PodSpec) {
	t.Helper()
	if problems := CheckPodSpec(spec); len(problems) > 0 {
		t.Errorf("%s would not run as vigil's pods must:\n  %s", what, strings.Join(problems, "\n  "))
	}
}

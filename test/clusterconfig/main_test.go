package clusterconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

// moduleDir is the module these tests build, install and attack: the
// founding discussion's module as examples/clusterconfig ships it.
const moduleDir = "../../examples/clusterconfig"

// The module's names, as examples/clusterconfig declares them (its main
// package cannot be imported): a renamed one fails these tests.
const (
	group   = "uds.dev"
	version = "v1alpha1"

	// ClusterLabel is the label every admitted Pod carries.
	ClusterLabel = "uds.dev/cluster"
	// PolicyPrivileged is the policy an Exemption names to allow privileged Pods.
	PolicyPrivileged = "DisallowPrivileged"

	// Store keys of what the gates found.
	keyInitialConfig     = "initialClusterConfig"
	keyInitialExemptions = "initialExemptions"

	// DefaultsSecret holds the default ClusterConfig spec as YAML under
	// DefaultsKey; it is mounted at DefaultsDir.
	DefaultsSecret = "uds-core-defaults"
	DefaultsKey    = "defaults.yaml"
	DefaultsDir    = "/etc/uds"
)

// moduleFile is the path of one of the module's files: its CRDs, samples
// and defaults.
func moduleFile(name string) string { return filepath.Join(moduleDir, name) }

// readYAML reads one of the module's YAML files.
func readYAML(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(moduleFile(file))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return u
}

// pod is a Pod of one container, privileged or not.
func pod(ns, name string, privileged bool) *corev1.Pod {
	c := corev1.Container{Name: "main", Image: "busybox"}
	if privileged {
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
}

// removeCRDs removes the module's CRDs, as before its install, and returns
// once the API server no longer serves them.
func removeCRDs(t *testing.T) {
	t.Helper()
	for _, name := range []string{"clusterconfigs.uds.dev", "exemptions.uds.dev"} {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := env.Client.Delete(t.Context(), crd); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		vigiltest.Eventually(t, 60*time.Second, func() error {
			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(crd), crd); !apierrors.IsNotFound(err) {
				return fmt.Errorf("CRD %s still there (%v)", name, err)
			}
			return nil
		})
	}
}

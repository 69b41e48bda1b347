// Command phases is a vigil module with three phases of startup gates: what a
// module holds back its start for, in order, before it serves.
//
//   - phase 0: the Widget CRD is Established and the settings ConfigMap
//     exists — two gates, waited for at once;
//   - phase 1: the Widget named "first" has a size of 3 or more; it is handed
//     to the module through the Store;
//   - phase 2: a file says "ready" (sampled, not watched), and the overrides
//     ConfigMap is used if it appears within a second, else defaults read
//     from a mounted file.
//
// Run `phases plan` to see the phases and the init containers they become,
// and `phases gate --phase N` to run one.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/store"
)

func main() { vigil.Run(newModule()) }

func newModule() *vigil.Module {
	// Installed elsewhere when rendered with VIGIL_NAMESPACE.
	m := vigil.NewModule("phases", vigil.Options{Namespace: "phases-system"})
	ns := m.Namespace()

	vigil.WaitFor(m, &apiextensionsv1.CustomResourceDefinition{}).
		WithName("widgets.example.vigil.dev").
		ToBe(gate.Established())
	vigil.WaitFor(m, &corev1.ConfigMap{}).
		WithName("settings").InNamespace(ns).
		ToBeCreated(nil)

	vigil.WaitFor(m, vigil.Kind("example.vigil.dev", "v1", "Widget")).
		WithName("first").InNamespace(ns).InPhase(1).
		ToBe(gate.CEL("object.spec.size >= 3")).
		Then(func(ctx context.Context, w *unstructured.Unstructured, s vigil.Store) error {
			return store.SetJSONAndWait(ctx, s, "firstWidget", w.Object["spec"])
		})

	defaultsFile := vigil.Setting(m, "PHASES_DEFAULTS_FILE", "/etc/phases/defaults.json")
	vigil.Sample(m, readFile(vigil.Setting(m, "PHASES_READY_FILE", "/var/run/phases/ready")), vigil.Every(100*time.Millisecond)).
		Named("ready-file").InPhase(2).
		ToMatch(func(s string) bool { return strings.TrimSpace(s) == "ready" })
	vigil.WaitFor(m, &corev1.ConfigMap{}).
		WithName("overrides").InNamespace(ns).InPhase(2).
		Timeout(time.Second).
		OnTimeout(func(context.Context) (*corev1.ConfigMap, error) {
			return defaults(defaultsFile)
		}).
		ToBeCreated(nil)
	return m
}

// readFile samples a file's content; a missing file is not ready yet.
func readFile(path string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		data, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			return "", nil
		}
		return string(data), err
	}
}

// defaults reads the overrides to use when none are in the cluster, as a
// module would from a Secret mounted into its pod.
func defaults(path string) (*corev1.ConfigMap, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read defaults: %w", err)
	}
	cm := &corev1.ConfigMap{}
	if err := json.Unmarshal(raw, &cm.Data); err != nil {
		return nil, fmt.Errorf("decode defaults %s: expected a JSON object of strings: %w", path, err)
	}
	cm.Name = "overrides"
	return cm, nil
}

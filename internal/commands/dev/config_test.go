package dev

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/testsupport/testenv"
	"github.com/vigilkit/vigil/vigiltest"
)

// The materialiser gives a local process what the kubelet gives the
// container: the variables, with keys read from the real API server, and
// the volumes' keys as files under the run's folder, holding the container
// while a required object is missing — the pod's volumes before its first
// container, a variable before its own.
func TestMaterialiserGivesContainersTheirEnvAndVolumes(t *testing.T) {
	testenv.ControlPlane(t)
	env, err := vigiltest.Start(vigiltest.Options{})
	if err != nil {
		t.Fatalf("the materialiser reads from a real API server: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := t.Context()
	ns := env.Namespace(t)
	cs := env.Clientset
	plan := &spec.Module{
		Name: "configured", Namespace: ns,
		Phases: []spec.Phase{{Phase: 0, InitContainer: "gate-phase-0", Gates: []spec.Gate{{Name: "g"}}}},
		Env: []spec.Env{
			{Name: "LOG_FORMAT", Value: "json", Containers: []string{"gate-phase-0", "admission"}},
			{Name: "API_TOKEN", From: &spec.KeyRef{Kind: spec.SecretKind, Name: "api", Key: "token"}, Containers: []string{"admission"}, Site: "main.go:10"},
			{Name: "REGION", From: &spec.KeyRef{Kind: spec.ConfigMapKind, Name: "cluster", Key: "region", Optional: true}, Containers: []string{"admission"}},
		},
		Mounts: []spec.Mount{
			{Volume: "secret-defaults", Kind: spec.SecretKind, Name: "defaults", Path: "/etc/uds/defaults", Containers: []string{"admission"}, Site: "main.go:12"},
			{Volume: "configmap-tuning", Kind: spec.ConfigMapKind, Name: "tuning", Path: "/etc/tuning", Keys: []string{"limits.yaml"}, Optional: true, Containers: []string{"admission"}},
		},
	}
	dir := t.TempDir()
	z := &Materialiser{Client: cs, Plan: plan, Dir: dir}
	lookup := func(env []string, name string) (string, bool) {
		for _, kv := range env {
			if k, v, _ := strings.Cut(kv, "="); k == name {
				return v, true
			}
		}
		return "", false
	}

	// Nothing exists yet: the pod's volume holds its first container, the
	// variable only its own.
	_, err = z.Prepare(ctx, "gate-phase-0")
	var missing *MissingError
	if !errors.As(err, &missing) || len(missing.Missing) != 1 || !strings.Contains(missing.Missing[0], "Secret "+ns+"/defaults (volume secret-defaults at /etc/uds/defaults") {
		t.Fatalf("Prepare(gate-phase-0) before the Secret exists: %v, want it held by the pod's volume alone", err)
	}
	_, err = z.Prepare(ctx, "admission")
	if !errors.As(err, &missing) || len(missing.Missing) != 2 || !strings.Contains(err.Error(), "Secret "+ns+"/api (variable API_TOKEN (main.go:10))") {
		t.Fatalf("Prepare(admission) before the Secrets exist: %v, want the volume and the variable", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a held container had files written: %v", entries)
	}

	create := func(obj interface{ GetName() string }) {
		t.Helper()
		var err error
		switch o := obj.(type) {
		case *corev1.Secret:
			_, err = cs.CoreV1().Secrets(ns).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ConfigMap:
			_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "defaults"}, Data: map[string][]byte{"defaults.yaml": []byte("clusterName: unnamed\n"), "extra": []byte("x")}})
	phase0, err := z.Prepare(ctx, "gate-phase-0")
	if err != nil {
		t.Fatalf("Prepare(gate-phase-0) once the pod's volume exists: %v", err)
	}
	if v, _ := lookup(phase0, "LOG_FORMAT"); v != "json" {
		t.Errorf("gate-phase-0 env %q: want LOG_FORMAT=json", phase0)
	}
	if _, ok := lookup(phase0, "API_TOKEN"); ok {
		t.Errorf("gate-phase-0 got the admission container's API_TOKEN: %q", phase0)
	}
	root0, _ := lookup(phase0, spec.EnvMountRoot)
	if root0 != filepath.Join(dir, "gate-phase-0") {
		t.Errorf("%s=%q, want the container's folder under %s", spec.EnvMountRoot, root0, dir)
	}
	if _, err := os.Stat(filepath.Join(root0, "etc", "uds", "defaults")); !os.IsNotExist(err) {
		t.Errorf("gate-phase-0, which does not mount the volume, has it: %v", err)
	}
	if _, err := z.Prepare(ctx, "admission"); !errors.As(err, &missing) || len(missing.Missing) != 1 {
		t.Fatalf("Prepare(admission) without Secret api: %v, want it held by the variable", err)
	}

	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "api"}, Data: map[string][]byte{"token": []byte("s3cret")}})
	adm, err := z.Prepare(ctx, "admission")
	if err != nil {
		t.Fatalf("Prepare(admission): %v", err)
	}
	if v, _ := lookup(adm, "API_TOKEN"); v != "s3cret" {
		t.Errorf("admission env %q: want API_TOKEN=s3cret from the Secret", adm)
	}
	if _, ok := lookup(adm, "REGION"); ok {
		t.Errorf("an optional variable whose ConfigMap is missing is set: %q", adm)
	}
	root, _ := lookup(adm, spec.EnvMountRoot)
	defaults := spec.Mount{Path: "/etc/uds/defaults"}.LocalPath(root)
	if data, err := os.ReadFile(filepath.Join(defaults, "defaults.yaml")); err != nil || string(data) != "clusterName: unnamed\n" {
		t.Errorf("the Secret's key as a file: %q, %v", data, err)
	}
	if st, err := os.Stat(filepath.Join(defaults, "extra")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("every key of a volume without Keys, readable by its user only: %v, %v", st, err)
	}
	if entries, err := os.ReadDir(filepath.Join(root, "etc", "tuning")); err != nil || len(entries) != 0 {
		t.Errorf("an optional volume whose ConfigMap is missing is an empty folder: %v, %v", entries, err)
	}

	create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tuning"}, Data: map[string]string{"limits.yaml": "cpu: 1\n", "other": "no"}})
	create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}, Data: map[string]string{"region": "eu-1"}})
	if err := cs.CoreV1().Secrets(ns).Delete(ctx, "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "api"}, Data: map[string][]byte{"other": []byte("x")}})
	if _, err := z.Prepare(ctx, "admission"); !errors.As(err, &missing) || !strings.Contains(err.Error(), "key token of Secret "+ns+"/api") {
		t.Fatalf("Prepare(admission) when the variable's key is gone: %v, want it held by the key", err)
	}
	if err := cs.CoreV1().Secrets(ns).Delete(ctx, "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "api"}, Data: map[string][]byte{"token": []byte("rotated")}})
	adm, err = z.Prepare(ctx, "admission")
	if err != nil {
		t.Fatalf("Prepare(admission) again: %v", err)
	}
	if v, _ := lookup(adm, "REGION"); v != "eu-1" {
		t.Errorf("admission env %q: want REGION=eu-1 from the ConfigMap", adm)
	}
	if v, _ := lookup(adm, "API_TOKEN"); v != "rotated" {
		t.Errorf("admission env %q: want API_TOKEN=rotated, read again at the start", adm)
	}
	entries, err := os.ReadDir(filepath.Join(root, "etc", "tuning"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if err != nil || !slices.Equal(names, []string{"limits.yaml"}) {
		t.Errorf("a volume with Keys holds only them: %v, %v", names, err)
	}
}

package clusterconfig

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/store/v1alpha1"
	"github.com/vigilkit/vigil/vigiltest"
)

// The defaults Secret is mounted where the module reads it, in the
// containers that need it, and phase 1 — run from the manifests' pod spec as
// the kubelet would, the Secret's key a file under the pod's volumes — falls
// back to it when no ClusterConfig exists, and merges a ClusterConfig over
// it when one does.
func TestDefaultsSecretIsMountedAndMergedUnder(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	crds, err := os.ReadFile(moduleFile("crds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDYAML(crds); err != nil {
		t.Fatal(err)
	}
	moduleEnv := []string{"VIGIL_NAMESPACE=" + ns, "CLUSTERCONFIG_TIMEOUT=1s", "CLUSTERCONFIG_EXEMPTIONS_NAMESPACE=" + env.Namespace(t)}
	m := env.InstallModule(t, vigiltest.ModuleOptions{Dir: moduleDir, Env: moduleEnv})

	// The manifests mount it where the module reads it.
	ds, err := m.Manifests.Deployments()
	if err != nil {
		t.Fatal(err)
	}
	mounted := map[string]bool{}
	var volumes []corev1.Volume
	for _, d := range ds {
		volumes = append(volumes, d.Spec.Template.Spec.Volumes...)
		for _, c := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
			for _, vm := range c.VolumeMounts {
				if vm.Name == "secret-uds-core-defaults" {
					mounted[c.Name] = vm.MountPath == DefaultsDir && vm.ReadOnly
				}
			}
		}
	}
	if want := map[string]bool{"gate-phase-1": true, "admission": true, "watcher": true}; !maps.Equal(mounted, want) {
		t.Errorf("containers mounting the defaults at %s read-only: %v, want %v", DefaultsDir, mounted, want)
	}
	var secretVolumes int
	for _, v := range volumes {
		if s := v.Secret; s != nil && s.SecretName == DefaultsSecret {
			secretVolumes++
			if s.Optional != nil && *s.Optional || len(s.Items) != 1 || s.Items[0].Key != DefaultsKey || s.Items[0].Path != DefaultsKey {
				t.Errorf("the defaults volume %+v: want it required, with key %s as the file %s", s, DefaultsKey, DefaultsKey)
			}
		}
	}
	if secretVolumes != 2 {
		t.Errorf("%d pod volumes of Secret %s, want one per Deployment (admission, watcher)", secretVolumes, DefaultsSecret)
	}
	// plan names it as what the pods cannot start without.
	plan, err := exec.Command(m.Binary, "plan").CombinedOutput()
	if err != nil || !strings.Contains(string(plan), DefaultsSecret) {
		t.Errorf("plan (%v) does not name the Secret %s:\n%s", err, DefaultsSecret, plan)
	}

	// The platform's Secret, with defaults of its own.
	defaults := "attributes:\n  clusterName: from-the-secret\nexpose:\n  domain: secret.example\n  adminDomain: admin.secret.example\npolicy:\n  allowAllNsExemptions: false\n"
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: DefaultsSecret}, Data: map[string][]byte{DefaultsKey: []byte(defaults)}}); err != nil {
		t.Fatal(err)
	}
	cc := readYAML(t, "clusterconfig.yaml")
	deleteInitial := func() {
		if err := env.Client.Delete(context.Background(), cc.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	deleteInitial() // an earlier test's
	t.Cleanup(deleteInitial)

	// phase1 runs phases 0 and 1 of a new admission pod, as the kubelet
	// runs its init containers, and returns what phase 1 stored.
	admission, err := m.Manifests.Deployment("admission")
	if err != nil || admission == nil {
		t.Fatalf("the admission Deployment: %v", err)
	}
	phase1 := func() (map[string]any, string) {
		t.Helper()
		pod := env.NewPod(t, ns, admission.Spec.Template, vigiltest.PodOptions{Binary: m.Binary, Env: moduleEnv})
		pod.RunInit(30 * time.Second)
		p := pod.RunInit(30 * time.Second)
		st := &v1alpha1.Store{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "uds-core"}, st); err != nil {
			t.Fatalf("the Store phase 1 wrote: %v", err)
		}
		stored := map[string]any{}
		if err := json.Unmarshal([]byte(st.Data[keyInitialConfig]), &stored); err != nil {
			t.Fatalf("Store %s = %q: %v", keyInitialConfig, st.Data[keyInitialConfig], err)
		}
		return stored, p.Output.String()
	}
	str := func(stored map[string]any, path ...string) string {
		v, _, _ := unstructured.NestedString(stored, path...)
		return v
	}

	// No ClusterConfig: the fallback reads the Secret's file.
	stored, logs := phase1()
	if !strings.Contains(logs, "gate fallback") {
		t.Errorf("phase 1 did not finish with its fallback:\n%s", logs)
	}
	if got := str(stored, "attributes", "clusterName"); got != "from-the-secret" {
		t.Errorf("fallback clusterName %q, want the Secret's from-the-secret (stored %v)", got, stored)
	}
	if got := str(stored, "expose", "adminDomain"); got != "admin.secret.example" {
		t.Errorf("fallback adminDomain %q, want the Secret's", got)
	}

	// A ClusterConfig: merged over the Secret's defaults.
	if err := env.Client.Create(ctx, cc.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	stored, logs = phase1()
	if strings.Contains(logs, "gate fallback") {
		t.Errorf("phase 1 fell back although the ClusterConfig exists:\n%s", logs)
	}
	for path, want := range map[string]string{
		"attributes.clusterName": "demo-cluster",         // the ClusterConfig's
		"expose.domain":          "uds.dev",              // the ClusterConfig's, over the Secret's
		"expose.adminDomain":     "admin.secret.example", // the Secret's, which the ClusterConfig leaves out
	} {
		if got := str(stored, strings.Split(path, ".")...); got != want {
			t.Errorf("merged %s = %q, want %q (stored %v)", path, got, want, stored)
		}
	}
	if all, found, _ := unstructured.NestedBool(stored, "policy", "allowAllNsExemptions"); !found || all {
		t.Errorf("merged policy.allowAllNsExemptions = %v (found %v), want the Secret's false", all, found)
	}
	if tags, _, _ := unstructured.NestedStringSlice(stored, "attributes", "tags"); !slices.Equal(tags, []string{"dev"}) {
		t.Errorf("merged attributes.tags = %v, want the ClusterConfig's [dev]", tags)
	}
}

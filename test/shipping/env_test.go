package shipping

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
)

// here is the line it is called on.
func here() int {
	_, _, line, _ := runtime.Caller(1)
	return line
}

// gated is a module with gates in phases 0 and 1 and a watcher.
func gated(ns string) *vigil.Module {
	m := vigil.NewModule("configured", vigil.Options{Namespace: ns})
	vigil.WaitFor(m, &corev1.ConfigMap{}).InNamespace("apps").WithName("first").ToBeCreated(nil)
	vigil.WaitFor(m, &corev1.ConfigMap{}).InNamespace("apps").WithName("second").InPhase(1).ToBeCreated(nil)
	m.OnSchedule("tick", vigil.Every(time.Hour), func(context.Context) error { return nil })
	return m
}

// Every mistake in declaring variables and volumes is reported before
// anything starts, naming the call that made it.
func TestEnvAndMountMistakesNameTheirCallSite(t *testing.T) {
	for _, tc := range []struct {
		name   string
		line   int
		define func(m *vigil.Module)
		want   string
	}{
		{"not a C identifier", here(), func(m *vigil.Module) { vigil.Env(m, "LOG-FORMAT").Value("json").For(vigil.Admission) }, `Env("LOG-FORMAT"): expected a variable name of letters, digits and '_'`},
		{"starts with a digit", here(), func(m *vigil.Module) { vigil.Env(m, "1X").Value("json").For(vigil.Admission) }, `Env("1X")`},
		{"vigil's own variable", here(), func(m *vigil.Module) { vigil.Env(m, "POD_NAME").Value("x").For(vigil.Admission) }, `vigil sets this variable itself`},
		{"vigil's prefix", here(), func(m *vigil.Module) { vigil.Env(m, "VIGIL_MOUNT_ROOT").Value("x").For(vigil.Admission) }, `vigil sets this variable itself`},
		{"no value", here(), func(m *vigil.Module) { vigil.Env(m, "X").For(vigil.Admission) }, `Env("X") has no value: give it one with Value, FromSecret or FromConfigMap`},
		{"two values", here(), func(m *vigil.Module) { vigil.Env(m, "X").Value("a").FromSecret("s", "k").For(vigil.Admission) }, `FromSecret after Value at env_test.go:`},
		{"optional literal", here(), func(m *vigil.Module) { vigil.Env(m, "X").Value("a").Optional().For(vigil.Admission) }, `is Optional, but its value is a literal`},
		{"bad Secret name", here(), func(m *vigil.Module) { vigil.Env(m, "X").FromSecret("Api_Token", "k").For(vigil.Admission) }, `Secret name "Api_Token": expected lower-case letters`},
		{"bad key", here(), func(m *vigil.Module) { vigil.Env(m, "X").FromConfigMap("cfg", "a/b").For(vigil.Admission) }, `key "a/b"`},
		{"no For", here(), func(m *vigil.Module) { vigil.Env(m, "X").Value("a") }, `Env("X") names no container: end it with For(`},
		{"empty For", here(), func(m *vigil.Module) { vigil.Env(m, "X").Value("a").For() }, `For(): expected at least one container`},
		{"phase without gates", here(), func(m *vigil.Module) { vigil.Env(m, "X").Value("a").For(vigil.Phase(3)) }, `For(Phase(3)): no gate runs in phase 3, so there is no such init container (its gates run in phase 0, 1)`},
		{"twice in a container", here() + 2, func(m *vigil.Module) {
			vigil.Env(m, "X").Value("a").For(vigil.Admission, vigil.Watcher)
			vigil.Env(m, "X").Value("b").For(vigil.Watcher)
		}, `Env("X") is already given to container watcher by the declaration at env_test.go:`},
		{"relative mount path", here(), func(m *vigil.Module) { vigil.MountSecret(m, "defaults", "etc/defaults").For(vigil.Admission) }, `expected an absolute, clean mount path`},
		{"unclean mount path", here(), func(m *vigil.Module) { vigil.MountSecret(m, "defaults", "/etc/defaults/").For(vigil.Admission) }, `expected an absolute, clean mount path`},
		{"over the handoff folder", here() + 1, func(m *vigil.Module) {
			vigil.MountSecret(m, "defaults", "/var/run/vigil/defaults").For(vigil.Admission)
		}, `would overlap vigil's own mount /var/run/vigil`},
		{"over the certificate", here(), func(m *vigil.Module) { vigil.MountConfigMap(m, "tls", "/etc/vigil").For(vigil.Admission) }, `would overlap vigil's own mount /etc/vigil`},
		{"bad ConfigMap name", here(), func(m *vigil.Module) { vigil.MountConfigMap(m, "-cfg", "/etc/cfg").For(vigil.Admission) }, `ConfigMap name "-cfg"`},
		{"two mounts at one path", here() + 2, func(m *vigil.Module) {
			vigil.MountSecret(m, "a", "/etc/a").For(vigil.Admission)
			vigil.MountConfigMap(m, "b", "/etc/a/b").For(vigil.Admission, vigil.Watcher)
		}, `overlaps, in container admission, the mount at /etc/a declared at env_test.go:`},
		{"mount without For", here(), func(m *vigil.Module) { vigil.MountSecret(m, "a", "/etc/a") }, `MountSecret("a", "/etc/a") names no container`},
		{"no keys", here(), func(m *vigil.Module) { vigil.MountSecret(m, "a", "/etc/a").Keys().For(vigil.Admission) }, `Keys(): expected at least one key`},
		{"negative phase", here(), func(m *vigil.Module) { vigil.Env(m, "X").Value("a").For(vigil.Phase(-1)) }, `For(Phase(-1)): expected a phase of 0 or more`},
		{"For twice", here(), func(m *vigil.Module) { vigil.MountSecret(m, "a", "/etc/a").For(vigil.Admission).For(vigil.Watcher) }, `For again, after For at env_test.go:`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := gated("configured-system")
			tc.define(m)
			err := m.Verify()
			if err == nil {
				t.Fatal("Verify() = nil, want an error")
			}
			site := fmt.Sprintf("env_test.go:%d: ", tc.line)
			if !strings.Contains(err.Error(), site) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Verify() = %q, want it to name %q and say %q", err, site, tc.want)
			}
		})
	}
	// A role the module does not run.
	m := vigil.NewModule("nowatcher", vigil.Options{})
	vigil.WaitFor(m, &corev1.ConfigMap{}).InNamespace("apps").WithName("first").ToBeCreated(nil)
	vigil.Env(m, "X").Value("a").For(vigil.Watcher)
	line := here() - 1
	if err := m.Verify(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("env_test.go:%d: Env(\"X\"): the module runs none of its containers (watcher)", line)) {
		t.Fatalf("Verify() = %v, want the watcher it does not run named", err)
	}
	// And a valid one.
	m = gated("configured-system")
	configure(m)
	if err := m.Verify(); err != nil {
		t.Fatalf("Verify() = %v", err)
	}
}

// configure declares a variable and a volume of each kind.
func configure(m *vigil.Module) {
	vigil.Env(m, "LOG_FORMAT").Value("json").For(vigil.Admission, vigil.Watcher)
	vigil.Env(m, "API_TOKEN").FromSecret("api", "token").For(vigil.Phase(1))
	vigil.Env(m, "REGION").FromConfigMap("cluster", "region").Optional().For(vigil.Watcher)
	vigil.MountSecret(m, "uds-defaults", "/etc/uds/defaults").For(vigil.Phase(1), vigil.Admission)
	vigil.MountConfigMap(m, "tuning", "/etc/tuning").Keys("limits.yaml").Optional().For(vigil.Watcher)
}

// containerConfig is what the author gave one container: its variables
// beyond vigil's, and its mounts beyond the handoff folder.
func containerConfig(c corev1.Container) (env, mounts []string) {
	for _, e := range c.Env {
		switch {
		case slices.Contains([]string{"POD_NAME", "POD_NAMESPACE", "POD_UID", "VIGIL_HANDOFF_DIR", "GOMEMLIMIT", "VIGIL_SPEC_HASH", "VIGIL_SPEC_PARTS", "VIGIL_NAMESPACE"}, e.Name):
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			r := e.ValueFrom.SecretKeyRef
			env = append(env, fmt.Sprintf("%s=secret:%s/%s optional=%v", e.Name, r.Name, r.Key, r.Optional != nil && *r.Optional))
		case e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil:
			r := e.ValueFrom.ConfigMapKeyRef
			env = append(env, fmt.Sprintf("%s=configmap:%s/%s optional=%v", e.Name, r.Name, r.Key, r.Optional != nil && *r.Optional))
		default:
			env = append(env, e.Name+"="+e.Value)
		}
	}
	for _, vm := range c.VolumeMounts {
		if vm.Name != "handoff" {
			mounts = append(mounts, fmt.Sprintf("%s@%s ro=%v", vm.Name, vm.MountPath, vm.ReadOnly))
		}
	}
	return env, mounts
}

// The manifests give each variable and volume to exactly the containers
// named, and the API server accepts the Deployments.
func TestManifestsGiveEnvAndVolumesToTheNamedContainers(t *testing.T) {
	ns := env.Namespace(t)
	m := gated(ns)
	configure(m)
	objs := testkit.RenderManifests(t, m)
	deployments := map[string]*appsv1.Deployment{}
	var rest []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			d := &appsv1.Deployment{}
			if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
				t.Fatal(err)
			}
			deployments[d.Name] = d
		}
		if o.GetKind() == "Deployment" || o.GetKind() == "ServiceAccount" {
			rest = append(rest, o)
		}
	}
	adm, watcher := deployments["configured"], deployments["configured-watcher"]
	if adm == nil || watcher == nil {
		t.Fatalf("want Deployments configured and configured-watcher, got %v", deployments)
	}
	got := map[string][2][]string{}
	hashes, carried, containers := map[string]bool{}, 0, 0
	for _, c := range append(append([]corev1.Container{}, adm.Spec.Template.Spec.InitContainers...), append(adm.Spec.Template.Spec.Containers, watcher.Spec.Template.Spec.Containers...)...) {
		e, v := containerConfig(c)
		got[c.Name] = [2][]string{e, v}
		containers++
		for _, e := range c.Env {
			if e.Name == "VIGIL_SPEC_HASH" {
				hashes[e.Value] = true
				carried++
			}
		}
	}
	// vigil's own besides the author's: every container carries the one
	// fingerprint of the definition rendered.
	if len(hashes) != 1 || carried != containers {
		t.Errorf("%d of %d containers carry VIGIL_SPEC_HASH, with values %v; want one value in all", carried, containers, hashes)
	}
	want := map[string][2][]string{
		"gate-phase-0": {nil, nil},
		"gate-phase-1": {{"API_TOKEN=secret:api/token optional=false"}, {"secret-uds-defaults@/etc/uds/defaults ro=true"}},
		"admission":    {{"LOG_FORMAT=json"}, {"secret-uds-defaults@/etc/uds/defaults ro=true"}},
		"watcher":      {{"LOG_FORMAT=json", "REGION=configmap:cluster/region optional=true"}, {"configmap-tuning@/etc/tuning ro=true"}},
	}
	for name, w := range want {
		g := got[name]
		if !slices.Equal(g[0], w[0]) || !slices.Equal(g[1], w[1]) {
			t.Errorf("container %s: env %q and mounts %q, want %q and %q", name, g[0], g[1], w[0], w[1])
		}
	}
	if len(got) != len(want) {
		t.Errorf("containers %v, want those of %v", got, want)
	}
	volumes := func(d *appsv1.Deployment) string {
		b, _ := json.Marshal(d.Spec.Template.Spec.Volumes)
		return string(b)
	}
	if v := volumes(adm); v != `[{"name":"handoff","emptyDir":{"sizeLimit":"16Mi"}},{"name":"secret-uds-defaults","secret":{"secretName":"uds-defaults"}}]` {
		t.Errorf("admission pod volumes %s", v)
	}
	if v := volumes(watcher); v != `[{"name":"configmap-tuning","configMap":{"name":"tuning","items":[{"key":"limits.yaml","path":"limits.yaml"}],"optional":true}}]` {
		t.Errorf("watcher pod volumes %s", v)
	}
	// The API server validates the pod templates.
	applyObjects(t, rest, true)
}

// plan lists each variable and volume with the containers that get it, and
// the startup dependencies they make; plan -o json carries them.
func TestPlanShowsEnvVolumesAndStartupDependencies(t *testing.T) {
	m := gated("configured-system")
	configure(m)
	code, out := testkit.RunCapture(t, m, "plan")
	if code != 0 {
		t.Fatalf("plan exit %d:\n%s", code, out)
	}
	for _, want := range []string{
		"environment (the author's):",
		`LOG_FORMAT  "json"`,
		"→ admission, watcher",
		"API_TOKEN   key token of Secret configured-system/api, required",
		"→ gate-phase-1",
		"key region of ConfigMap configured-system/cluster, optional",
		"volumes (the author's, read-only):",
		"secret-uds-defaults  Secret configured-system/uds-defaults (every key), required",
		"at /etc/uds/defaults → gate-phase-1, admission",
		"configmap-tuning     ConfigMap configured-system/tuning (keys limits.yaml), optional",
		"startup dependencies: these containers do not start until the object exists:",
		"gate-phase-0 needs Secret configured-system/uds-defaults: volume secret-uds-defaults at /etc/uds/defaults of gate-phase-1, admission, mounted before the pod's first container starts (env_test.go:",
		"gate-phase-1 needs Secret configured-system/api: variable API_TOKEN (env_test.go:",
		"deadlocks: none found",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"watcher needs", "admission needs", "gate-phase-1 needs Secret configured-system/uds-defaults"} {
		if strings.Contains(out, not) {
			t.Errorf("plan says %q: the watcher's volume and variable are optional, and the pod's volume is needed before its first container:\n%s", not, out)
		}
	}
	code, out = testkit.RunCapture(t, m, "plan", "-o", "json")
	if code != 0 {
		t.Fatalf("plan -o json exit %d", code)
	}
	var plan struct {
		Env []struct {
			Name       string
			From       *struct{ Kind, Name, Key string }
			Containers []string
		}
		Mounts []struct {
			Volume, Kind, Name, Path string
			Optional                 bool
			Containers               []string
		}
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan.Env) != 3 || plan.Env[1].Name != "API_TOKEN" || plan.Env[1].From == nil || plan.Env[1].From.Kind != "Secret" || !slices.Equal(plan.Env[1].Containers, []string{"gate-phase-1"}) {
		t.Errorf("plan -o json env: %+v", plan.Env)
	}
	if len(plan.Mounts) != 2 || plan.Mounts[0].Path != "/etc/uds/defaults" || plan.Mounts[0].Optional || !slices.Equal(plan.Mounts[0].Containers, []string{"gate-phase-1", "admission"}) {
		t.Errorf("plan -o json mounts: %+v", plan.Mounts)
	}
	// A module that declares none keeps its plan as it was: no env, no mounts.
	if _, out := testkit.RunCapture(t, gated("configured-system"), "plan", "-o", "json"); strings.Contains(out, `"env"`) || strings.Contains(out, `"mounts"`) {
		t.Errorf("plan -o json of a module without env or volumes has the fields:\n%s", out)
	}
}

// A required Secret is a startup dependency the deadlock analysis sees: one
// that only a gate of the same pod creates holds the pod (the kubelet mounts
// every volume before the first init container); a variable of the admission
// container that a gate creates is fine.
func TestPlanFindsDeadlocksOfRequiredSecrets(t *testing.T) {
	creates := func(m *vigil.Module, phase int, secret string) {
		vigil.WaitFor(m, &corev1.ConfigMap{}).InNamespace("apps").WithName(fmt.Sprintf("maker-%d", phase)).InPhase(phase).ToBeCreated(nil).
			Creates(&corev1.Secret{}, "configured-system", secret)
	}
	t.Run("a volume of the pod only its own gate creates", func(t *testing.T) {
		m := gated("configured-system")
		creates(m, 1, "made")
		vigil.MountSecret(m, "made", "/etc/made").For(vigil.Admission)
		code, out := testkit.RunCapture(t, m, "plan")
		if code != 1 || !strings.Contains(out, "deadlocks: 1 found") ||
			!strings.Contains(out, "configured phase 0 (init container gate-phase-0) cannot start before Secret configured-system/made exists: volume secret-made at /etc/made of admission, mounted before the pod's first container starts (env_test.go:") ||
			!strings.Contains(out, "Secret configured-system/made is created only by configured phase 1 (gate configmap-maker-1") {
			t.Fatalf("plan exit %d:\n%s", code, out)
		}
	})
	t.Run("a phase's variable a later phase creates", func(t *testing.T) {
		m := gated("configured-system")
		creates(m, 1, "made")
		vigil.Env(m, "TOKEN").FromSecret("made", "token").For(vigil.Phase(0))
		code, out := testkit.RunCapture(t, m, "plan")
		if code != 1 || !strings.Contains(out, "configured phase 0 (init container gate-phase-0) cannot start before Secret configured-system/made exists: variable TOKEN") {
			t.Fatalf("plan exit %d:\n%s", code, out)
		}
	})
	t.Run("a phase's variable its own phase creates", func(t *testing.T) {
		m := gated("configured-system")
		creates(m, 1, "made")
		vigil.Env(m, "TOKEN").FromSecret("made", "token").For(vigil.Phase(1))
		if code, out := testkit.RunCapture(t, m, "plan"); code != 1 || !strings.Contains(out, "deadlocks: 1 found") {
			t.Fatalf("plan exit %d:\n%s", code, out)
		}
	})
	t.Run("the admission container's variable a gate creates", func(t *testing.T) {
		m := gated("configured-system")
		creates(m, 1, "made")
		vigil.Env(m, "TOKEN").FromSecret("made", "token").For(vigil.Admission)
		if code, out := testkit.RunCapture(t, m, "plan"); code != 0 || !strings.Contains(out, "deadlocks: none found") {
			t.Fatalf("plan exit %d:\n%s", code, out)
		}
	})
	t.Run("an optional volume a gate creates", func(t *testing.T) {
		m := gated("configured-system")
		creates(m, 1, "made")
		vigil.MountSecret(m, "made", "/etc/made").Optional().For(vigil.Admission)
		if code, out := testkit.RunCapture(t, m, "plan"); code != 0 || !strings.Contains(out, "deadlocks: none found") {
			t.Fatalf("plan exit %d:\n%s", code, out)
		}
	})
}

// A mount's Path is its mount path in a pod, and the same path under the
// folder VIGIL_MOUNT_ROOT names where vigil dev materialised it.
func TestMountPathFollowsTheMountRoot(t *testing.T) {
	m := gated("configured-system")
	defaults := vigil.MountSecret(m, "uds-defaults", "/etc/uds/defaults").For(vigil.Admission)
	t.Setenv("VIGIL_MOUNT_ROOT", "")
	if p := defaults.File("defaults.yaml"); p != filepath.FromSlash("/etc/uds/defaults/defaults.yaml") {
		t.Errorf("in a pod, File = %q, want the mount path", p)
	}
	root := t.TempDir()
	t.Setenv("VIGIL_MOUNT_ROOT", root)
	if p := defaults.Path(); p != filepath.Join(root, "etc", "uds", "defaults") {
		t.Errorf("under vigil dev, Path = %q, want the mount path under %s", p, root)
	}
}

// A parsed setting gives the author the parsed value of the environment's
// variable, and the containers get the text it was parsed from.
func TestSettingAsParsesAndIsCarried(t *testing.T) {
	t.Setenv("CONFIGURED_TIMEOUT", "45s")
	m := gated(vigil.DefaultNamespace)
	if got := vigil.SettingAs(m, "CONFIGURED_TIMEOUT", "2m", time.ParseDuration); got != 45*time.Second {
		t.Fatalf("SettingAs = %s, want 45s from the environment", got)
	}
	if err := m.Verify(); err != nil {
		t.Fatal(err)
	}
	var seen int
	for _, o := range testkit.RenderManifests(t, m) {
		if o.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			t.Fatal(err)
		}
		for _, c := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
			seen++
			if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "CONFIGURED_TIMEOUT" && e.Value == "45s" }) {
				t.Errorf("%s's container %s lacks CONFIGURED_TIMEOUT=45s: %v", d.Name, c.Name, c.Env)
			}
		}
	}
	if seen == 0 {
		t.Fatal("the manifests render no Deployment's containers")
	}
}

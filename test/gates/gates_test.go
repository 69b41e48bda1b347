package gates

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/internal/commands/cli"
	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/commands/modcli"
	"github.com/vigilkit/vigil/internal/runtime/progress"
	"github.com/vigilkit/vigil/store"
)

// Every definition mistake is reported before anything starts, with the file
// and line of the call that made it.
func TestDefinitionMistakesNameTheirCallSite(t *testing.T) {
	for _, tc := range []struct {
		name   string
		define func(m *vigil.Module)
		want   []string
	}{
		{"invalid CEL", func(m *vigil.Module) {
			vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("a").ToBe(gate.CEL("object.data.x =="))
		}, []string{"gates_test.go:", "CEL"}},
		{"invalid JSONPath", func(m *vigil.Module) {
			vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("a").ToBe(gate.JSONPath("{.data[", "x"))
		}, []string{"gates_test.go:", "{.data["}},
		{"negative phase", func(m *vigil.Module) {
			vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("a").InPhase(-1).ToBeCreated(nil)
		}, []string{"gates_test.go:", "InPhase(-1)"}},
		{"two gates with one name", func(m *vigil.Module) {
			vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("a").Named("same").ToBeCreated(nil)
			vigil.WaitFor(m, &corev1.Secret{}).WithName("b").Named("same").ToBeCreated(nil)
		}, []string{`gate name "same" is already used by the gate at gates_test.go:`}},
		{"selector with no outcome", func(m *vigil.Module) {
			vigil.WaitFor(m, &corev1.ConfigMap{}).WithLabelValue("app", "x")
		}, []string{"gates_test.go:", "has no outcome"}},
		{"established on a ConfigMap", func(m *vigil.Module) {
			vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("a").ToBe(gate.Established())
		}, []string{"gates_test.go:", "Established"}},
		{"two outcomes", func(m *vigil.Module) {
			vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("a").ToBeCreated(nil).ToBeGone()
		}, []string{"gates_test.go:", "ToBeGone after ToBeCreated"}},
		{"fallback without timeout", func(m *vigil.Module) {
			vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("a").
				OnTimeout(func(context.Context) (*corev1.ConfigMap, error) { return nil, nil }).ToBeCreated(nil)
		}, []string{"has OnTimeout but no Timeout"}},
		{"type not in the scheme", func(m *vigil.Module) {
			vigil.WaitFor(m, &notRegistered{}).WithName("a").ToBeCreated(nil)
		}, []string{"gates_test.go:", "not registered in the module's scheme"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vigil.NewModule("mod", vigil.Options{})
			tc.define(m)
			err := m.Verify()
			if err == nil {
				t.Fatal("Verify() = nil, want the mistake")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Verify() = %q, want it to contain %q", err, w)
				}
			}
			// The binary refuses to run any role with them.
			if code := vigil.Execute(t.Context(), m, []string{"plan"}); code != cmdutil.ExitFailed {
				t.Errorf("plan with definition mistakes: exit %d, want %d", code, cmdutil.ExitFailed)
			}
		})
	}
}

// A Sample without an outcome is told of the one a sample has, ToMatch, not
// of the outcomes of object gates.
func TestSampleWithoutOutcomeNamesToMatch(t *testing.T) {
	m := vigil.NewModule("mod", vigil.Options{})
	vigil.Sample(m, func(context.Context) (int, error) { return 1, nil }, vigil.Every(time.Second))
	err := m.Verify()
	if err == nil || !strings.Contains(err.Error(), "gates_test.go:") || !strings.Contains(err.Error(), "has no outcome: end it with ToMatch") {
		t.Fatalf("Verify() = %v, want the call site and ToMatch", err)
	}
	for _, other := range []string{"ToBeCreated", "ToBeGone", "ToBe "} {
		if strings.Contains(err.Error(), other) {
			t.Errorf("Verify() = %q names %s, which a sample does not have", err, other)
		}
	}
}

type notRegistered struct{ corev1.ConfigMap }

// Typed gates hand typed objects to their callbacks, sets get the matched
// set, and the main process reads the results with GateResult.
func TestTypedGatesAndGateResult(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	handoff := t.TempDir()
	t.Setenv(modcli.EnvHandoffDir, handoff)
	for i, name := range []string{"ex-a", "ex-b", "other"} {
		app := "exemption"
		if i == 2 {
			app = "other"
		}
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}}, Data: map[string]string{"policy": "privileged"}}
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	m := vigil.NewModule("typed", vigil.Options{Namespace: ns})
	var gotCRD *apiextensionsv1.CustomResourceDefinition
	var gotSet []*corev1.ConfigMap
	vigil.WaitFor(m, &apiextensionsv1.CustomResourceDefinition{}).
		WithName("stores.vigil.dev").
		ToBe(gate.Established()).
		Then(func(_ context.Context, crd *apiextensionsv1.CustomResourceDefinition, _ vigil.Store) error {
			gotCRD = crd
			return nil
		})
	vigil.WaitFor(m, &corev1.ConfigMap{}).
		InNamespace(ns).WithLabelValue("app", "exemption").Named("exemptions").
		AtLeast(2).
		ToMatch(func(c *corev1.ConfigMap) bool { return c.Data["policy"] == "privileged" }).
		Then(func(_ context.Context, cms []*corev1.ConfigMap, _ vigil.Store) error {
			gotSet = cms
			return nil
		})
	vigil.Sample(m, func(context.Context) (int, error) { return 42, nil }, vigil.Every(time.Second)).
		Named("answer").ToMatch(func(n int) bool { return n == 42 })
	// The Store CRD must exist for the CRD gate: any Store start installs it.
	if err := env.InstallCRDYAML(storeCRD(t)); err != nil {
		t.Fatal(err)
	}
	if code := vigil.Execute(ctx, m, []string{"gate", "--phase", "0", "--kubeconfig", kubeconfig(t)}); code != cmdutil.ExitOK {
		t.Fatalf("gate --phase 0: exit %d", code)
	}
	if gotCRD == nil || gotCRD.Spec.Group != "vigil.dev" {
		t.Fatalf("CRD callback got %+v", gotCRD)
	}
	if len(gotSet) != 2 || gotSet[0].Name != "ex-a" || gotSet[1].Name != "ex-b" {
		t.Fatalf("set callback got %d objects, want ex-a and ex-b", len(gotSet))
	}
	set, found, err := vigil.GateResult[[]corev1.ConfigMap](m, "exemptions")
	if err != nil || !found || len(set) != 2 || set[1].Data["policy"] != "privileged" {
		t.Fatalf("GateResult(exemptions) = %v, %v, %v", set, found, err)
	}
	answer, found, err := vigil.GateResult[int](m, "answer")
	if err != nil || !found || answer != 42 {
		t.Fatalf("GateResult(answer) = %v, %v, %v", answer, found, err)
	}
	if _, found, err := vigil.GateResult[int](m, "never-ran"); found || err != nil {
		t.Fatalf("GateResult of a gate that never ran: found %v, err %v", found, err)
	}
}

func storeCRD(t *testing.T) []byte {
	t.Helper()
	var out bytes.Buffer
	if code := cli.Execute(t.Context(), []string{"store", "crd"}, &out, &out); code != 0 {
		t.Fatalf("vigil store crd: %s", out.String())
	}
	return out.Bytes()
}

// A required gate with a timeout that expires ends the phase with exit 124.
func TestRequiredGateTimeoutExits124(t *testing.T) {
	ns := env.Namespace(t)
	m := vigil.NewModule("slow", vigil.Options{Namespace: ns})
	vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("never").InNamespace(ns).Timeout(300 * time.Millisecond).ToBeCreated(nil)
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())
	term := filepath.Join(t.TempDir(), "termination-log")
	code := vigil.Execute(t.Context(), m, []string{"gate", "--phase", "0", "--kubeconfig", kubeconfig(t), "--termination-log", term})
	if code != cmdutil.ExitTimedOut {
		t.Fatalf("exit %d, want %d", code, cmdutil.ExitTimedOut)
	}
	summary, err := os.ReadFile(term)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(summary), "configmap-never: timed out") || !strings.Contains(string(summary), "not found") {
		t.Fatalf("termination message %q: want the gate, its state and what it last saw", summary)
	}
}

// A phase stopped while its gate waits (SIGTERM, a canceled context) did not
// pass: it exits 1, hands nothing off, and its termination message says why.
func TestCanceledPhaseDoesNotPass(t *testing.T) {
	ns := env.Namespace(t)
	m := vigil.NewModule("stopped", vigil.Options{Namespace: ns})
	vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("never").InNamespace(ns).ToBeCreated(nil)
	handoff := t.TempDir()
	t.Setenv(modcli.EnvHandoffDir, handoff)
	term := filepath.Join(t.TempDir(), "termination-log")
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel) // the SIGTERM, while the gate waits
	code := vigil.Execute(ctx, m, []string{"gate", "--phase", "0", "--kubeconfig", kubeconfig(t), "--termination-log", term})
	if code == cmdutil.ExitOK {
		t.Fatalf("exit %d: a phase stopped before its gate was done passed", code)
	}
	summary, err := os.ReadFile(term)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(summary), "phase 0 canceled") || !strings.Contains(string(summary), "configmap-never: canceled") {
		t.Fatalf("termination message %q: want the phase canceled and the gate named", summary)
	}
	if files, _ := os.ReadDir(handoff); len(files) != 0 {
		t.Fatalf("handoff folder holds %d files, want none", len(files))
	}
}

// While a gate's callback runs, its progress says so (the line "gate
// callback running", not "waiting"): for an object gate and a Sample gate.
func TestGateCallbacksAreMarkedRunning(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}); err != nil {
		t.Fatal(err)
	}
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())
	m := vigil.NewModule("marked", vigil.Options{Namespace: ns})
	running := map[string]bool{}
	marked := func(name string, ctx context.Context) {
		it := progress.ItemFrom(ctx)
		running[name] = it != nil && !it.CallingSince().IsZero()
	}
	vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("settings").InNamespace(ns).
		ToBeCreated(func(ctx context.Context, _ *corev1.ConfigMap, _ vigil.Store) error {
			marked("object", ctx)
			return nil
		})
	vigil.Sample(m, func(context.Context) (int, error) { return 1, nil }, vigil.Every(time.Second)).
		Named("sampled").ToMatch(func(int) bool { return true }).
		Then(func(ctx context.Context, _ int, _ vigil.Store) error {
			marked("sample", ctx)
			return nil
		})
	if code := vigil.Execute(ctx, m, []string{"gate", "--phase", "0", "--kubeconfig", kubeconfig(t)}); code != cmdutil.ExitOK {
		t.Fatalf("gate --phase 0: exit %d", code)
	}
	if !running["object"] || !running["sample"] {
		t.Fatalf("callbacks marked running: %v, want both", running)
	}
}

// The typed Store helpers read every view of the Store an author is handed:
// the callback's own Store and the Reader of its Module.
func TestTypedHelpersReadEveryStoreView(t *testing.T) {
	ctx := t.Context()
	if err := env.InstallCRDYAML(storeCRD(t)); err != nil {
		t.Fatal(err)
	}
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())
	m := vigil.NewModule("views", vigil.Options{Namespace: env.Namespace(t)})
	type team struct{ Name string }
	var fromOwn, fromModule team
	var errs []error
	vigil.Sample(m, func(context.Context) (int, error) { return 1, nil }, vigil.Every(time.Second)).
		Named("team").ToMatch(func(int) bool { return true }).
		Then(func(ctx context.Context, _ int, s vigil.Store) error {
			if err := store.SetJSONAndWait(ctx, s, "team", team{Name: "platform"}); err != nil {
				return err
			}
			var err error
			fromOwn, _, err = store.GetJSON[team](vigil.StoreFrom(ctx), "team")
			errs = append(errs, err)
			fromModule, _, err = store.GetJSON[team](vigil.StoreFrom(ctx).Module(), "team")
			errs = append(errs, err)
			return nil
		})
	if code := vigil.Execute(ctx, m, []string{"gate", "--phase", "0", "--kubeconfig", kubeconfig(t)}); code != cmdutil.ExitOK {
		t.Fatalf("gate --phase 0: exit %d", code)
	}
	if err := errors.Join(errs...); err != nil || fromOwn.Name != "platform" || fromModule.Name != "platform" {
		t.Fatalf("GetJSON from StoreFrom = %+v, from StoreFrom(ctx).Module() = %+v, err %v; want platform from both", fromOwn, fromModule, err)
	}
}

// The ...From accessors work in every function the gate role calls, as
// ClientFrom documents — a Sample's function, a gate callback, an OnTimeout
// fallback — and are nil elsewhere.
func TestFromAccessorsInGateFunctions(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "remote"}, Data: map[string]string{"state": "up"}}); err != nil {
		t.Fatal(err)
	}
	if vigil.ClientFrom(ctx) != nil || vigil.ConfigFrom(ctx) != nil || vigil.StoreFrom(ctx) != nil {
		t.Fatal("an accessor returned something outside the functions vigil calls")
	}
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())
	m := vigil.NewModule("accessors", vigil.Options{Namespace: ns})
	var mu sync.Mutex
	got := map[string]string{}
	check := func(where string, ctx context.Context) {
		var missing []string
		if vigil.ConfigFrom(ctx) == nil {
			missing = append(missing, "ConfigFrom")
		}
		if vigil.StoreFrom(ctx) == nil {
			missing = append(missing, "StoreFrom")
		}
		if s := vigil.StoreFrom(ctx); s != nil && s.Module() == nil {
			missing = append(missing, "StoreFrom(ctx).Module()")
		}
		cm := &corev1.ConfigMap{}
		if c := vigil.ClientFrom(ctx); c == nil {
			missing = append(missing, "ClientFrom")
		} else if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "remote"}, cm); err != nil || cm.Data["state"] != "up" {
			missing = append(missing, fmt.Sprintf("ClientFrom's Get: %v", err))
		}
		mu.Lock()
		defer mu.Unlock()
		got[where] = strings.Join(missing, ", ")
	}
	vigil.Sample(m, func(ctx context.Context) (int, error) {
		check("sample function", ctx)
		return 1, nil
	}, vigil.Every(time.Second)).Named("sampled").ToMatch(func(int) bool { return true }).
		Then(func(ctx context.Context, _ int, _ vigil.Store) error {
			check("sample callback", ctx)
			return nil
		})
	vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("remote").InNamespace(ns).
		ToBeCreated(func(ctx context.Context, _ *corev1.ConfigMap, _ vigil.Store) error {
			check("gate callback", ctx)
			return nil
		})
	vigil.Sample(m, func(context.Context) (int, error) { return 0, nil }, vigil.Every(50*time.Millisecond)).
		Named("fallback").Timeout(200 * time.Millisecond).ToMatch(func(n int) bool { return n == 1 }).
		OnTimeout(func(ctx context.Context) (int, error) {
			check("OnTimeout fallback", ctx)
			return 1, nil
		})
	if code := vigil.Execute(ctx, m, []string{"gate", "--phase", "0", "--kubeconfig", kubeconfig(t)}); code != cmdutil.ExitOK {
		t.Fatalf("gate --phase 0: exit %d", code)
	}
	for _, where := range []string{"sample function", "sample callback", "gate callback", "OnTimeout fallback"} {
		missing, ran := got[where]
		if !ran {
			t.Errorf("the %s did not run", where)
		} else if missing != "" {
			t.Errorf("in the %s: %s missing", where, missing)
		}
	}
}

// A callback's gate.Permanent error fails the phase at once with exit 1.
func TestPermanentCallbackErrorExits1(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}}); err != nil {
		t.Fatal(err)
	}
	m := vigil.NewModule("strict", vigil.Options{Namespace: ns})
	vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("bad").InNamespace(ns).
		ToBeCreated(func(context.Context, *corev1.ConfigMap, vigil.Store) error {
			return gate.Permanent(errors.New("the config is malformed"))
		})
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())
	if code := vigil.Execute(ctx, m, []string{"gate", "--phase", "0", "--kubeconfig", kubeconfig(t)}); code != cmdutil.ExitFailed {
		t.Fatalf("exit %d, want %d", code, cmdutil.ExitFailed)
	}
}

// A sample that fails or hangs is retried with backoff, each call bounded by
// the sample timeout, until one matches; the first sample is taken at once.
func TestSampleRetriesErrorsAndHangs(t *testing.T) {
	ctx := t.Context()
	m := vigil.NewModule("sampler", vigil.Options{Namespace: env.Namespace(t)})
	var calls []time.Time
	vigil.Sample(m, func(ctx context.Context) (string, error) {
		calls = append(calls, time.Now())
		switch len(calls) {
		case 1:
			return "", errors.New("license server unreachable")
		case 2:
			<-ctx.Done() // hangs until the sample timeout
			return "", ctx.Err()
		case 3:
			return "expired", nil
		default:
			return "valid", nil
		}
	}, vigil.Every(50*time.Millisecond)).Named("license").SampleTimeout(100 * time.Millisecond).
		ToMatch(func(s string) bool { return s == "valid" })
	t.Setenv(modcli.EnvHandoffDir, t.TempDir())
	began := time.Now()
	if code := vigil.Execute(ctx, m, []string{"gate", "--phase", "0", "--kubeconfig", kubeconfig(t)}); code != cmdutil.ExitOK {
		t.Fatalf("exit %d", code)
	}
	if len(calls) != 4 {
		t.Fatalf("%d samples, want 4 (error, hang, no match, match)", len(calls))
	}
	if first := calls[0].Sub(began); first > time.Second {
		t.Errorf("first sample after %s, want it at once", first)
	}
	if hang := calls[2].Sub(calls[1]); hang < 100*time.Millisecond {
		t.Errorf("the hanging sample was given up after %s, before its 100ms timeout", hang)
	}
	if backoff := calls[1].Sub(calls[0]); backoff < 100*time.Millisecond {
		t.Errorf("retry after an error came after %s, want a backoff of at least two intervals", backoff)
	}
	got, found, err := vigil.GateResult[string](m, "license")
	if err != nil || !found || got != "valid" {
		t.Fatalf("GateResult = %q, %v, %v", got, found, err)
	}
}

// A gate has one callback, however it is set: a second is a definition
// mistake naming both call sites, on every gate builder. The options every
// builder shares report the author's call site too.
func TestOneCallbackPerGate(t *testing.T) {
	m := vigil.NewModule("mod", vigil.Options{})
	one := func(context.Context, *corev1.ConfigMap, vigil.Store) error { return nil }
	many := func(context.Context, []*corev1.ConfigMap, vigil.Store) error { return nil }
	sampled := func(context.Context, string, vigil.Store) error { return nil }

	single := vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("a")
	set := vigil.WaitFor(m, &corev1.ConfigMap{}).WithLabelValue("app", "x").Named("set").All()
	sample := vigil.Sample(m, func(context.Context) (string, error) { return "", nil }, vigil.Every(time.Second))
	_, _, line, _ := goruntime.Caller(0)
	single.ToBeCreated(one)
	single.Then(one)
	set.ToBeCreated(many)
	set.Then(many)
	sample.ToMatch(nil).Then(sampled)
	sample.Then(sampled)
	set.InPhase(-1)

	err := m.Verify()
	if err == nil {
		t.Fatal("Verify() = nil, want the second callbacks refused")
	}
	for _, want := range []string{
		fmt.Sprintf("gates_test.go:%d: gate configmap-a: Then sets a callback, but ToBeCreated at gates_test.go:%d already set one", line+2, line+1),
		fmt.Sprintf("gates_test.go:%d: gate set: Then sets a callback, but ToBeCreated at gates_test.go:%d already set one", line+4, line+3),
		fmt.Sprintf("gates_test.go:%d: gate sample-2: Then sets a callback, but Then at gates_test.go:%d already set one", line+6, line+5),
		fmt.Sprintf("gates_test.go:%d: gate set: InPhase(-1)", line+7),
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Verify() = %q\nwant it to contain %q", err, want)
		}
	}
}

// A gate looks in one namespace: InNamespace takes one (more than one does
// not compile: see TestInvalidDeclarationsDoNotCompile), and a name that is
// not a namespace's is a mistake at its call site.
func TestGateInOneNamespace(t *testing.T) {
	m := vigil.NewModule("mod", vigil.Options{})
	vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("a").InNamespace("apps").ToBeCreated(nil)
	if err := m.Verify(); err != nil {
		t.Fatalf("one namespace: %v", err)
	}
	vigil.WaitFor(m, &corev1.ConfigMap{}).WithName("b").InNamespace("Apps_Web").ToBeCreated(nil)
	err := m.Verify()
	if err == nil || !strings.Contains(err.Error(), "gates_test.go:") || !strings.Contains(err.Error(), `InNamespace("Apps_Web"): not a namespace name`) {
		t.Fatalf("Verify() = %v, want the name refused at its call site", err)
	}
}

// Subresources bind admission only, and scale goes through WhenScaled.
func TestSubresourceMistakes(t *testing.T) {
	m := vigil.NewModule("mod", vigil.Options{})
	vigil.When(m.Capability("a"), &corev1.Pod{}).Subresource("scale").IsUpdated().
		Validate(func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict { return admission.Allow() })
	// A watch with a Subresource does not compile: see
	// TestInvalidDeclarationsDoNotCompile.
	err := m.Verify()
	for _, want := range []string{`Subresource("scale"): expected a subresource whose requests carry Pod`, "for scale use WhenScaled"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Verify() = %v, want it to contain %q", err, want)
		}
	}
	if err != nil && !strings.Contains(err.Error(), "gates_test.go:") {
		t.Errorf("Verify() = %v, want the call sites", err)
	}
}

// WithField selects by a field the API server selects on, and Any is done
// when one selected object holds, its callback receiving those that hold.
func TestGateWithFieldAndAny(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ns := env.Namespace(t)
	for name, ready := range map[string]string{"a": "no", "b": "yes", "c": "yes"} {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "x"}}, Data: map[string]string{"ready": ready}}
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	m := vigil.NewModule("fields", vigil.Options{Namespace: ns})
	holds := func(c *corev1.ConfigMap) bool { return c.Data["ready"] == "yes" }
	var byField, anyOf []*corev1.ConfigMap
	vigil.WaitFor(m, &corev1.ConfigMap{}).InNamespace(ns).WithLabelValue("app", "x").WithField("metadata.name", "b").
		Named("by-field").Any().ToMatch(holds).
		Then(func(_ context.Context, cms []*corev1.ConfigMap, _ vigil.Store) error { byField = cms; return nil })
	// a never holds: only Any, not All, is done.
	vigil.WaitFor(m, &corev1.ConfigMap{}).InNamespace(ns).WithLabelValue("app", "x").
		Named("any-of").Any().ToMatch(holds).
		Then(func(_ context.Context, cms []*corev1.ConfigMap, _ vigil.Store) error { anyOf = cms; return nil })
	if code := vigil.Execute(ctx, m, []string{"gate", "--phase", "0", "--kubeconfig", kubeconfig(t)}); code != cmdutil.ExitOK {
		t.Fatalf("gate --phase 0: exit %d", code)
	}
	if len(byField) != 1 || byField[0].Name != "b" {
		t.Errorf("by-field callback got %d objects %v, want b alone (c holds too, but its name is not selected)", len(byField), names(byField))
	}
	if len(anyOf) == 0 {
		t.Errorf("any-of callback got no objects, want those that hold")
	}
	for _, c := range anyOf {
		if !holds(c) {
			t.Errorf("any-of callback got %s, which does not hold", c.Name)
		}
	}
}

func names(cms []*corev1.ConfigMap) []string {
	var out []string
	for _, c := range cms {
		out = append(out, c.Name)
	}
	return out
}

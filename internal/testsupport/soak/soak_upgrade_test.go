package soak_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/commands/modcli"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/internal/testsupport/bench"
	"github.com/vigilkit/vigil/vigiltest"
)

// upgradeResult is what one upgrade run counted.
type upgradeResult struct {
	creates, rejected, unmutated int64
	// With a flood (soakUpgrade's flood): the creates the policy must deny
	// that were admitted, how many of them were tried, the connections the
	// flood dialled, and how long any webhook was failurePolicy Ignore
	// after version 1 enforced.
	violations, violationTries int64
	floodDialed                int64
	ignoreWindow               time.Duration
}

// soakUpgrade upgrades a module from version 1 to version 2 while a client
// creates without pause, every create after version 1 registered expected
// mutated: the new version's objects are applied — by the Helm v4 SDK
// (server-side apply: how "helm") or by kubectl apply (client-side
// three-way merge: how "kubectl") — then, in the order a maxUnavailable: 0
// rollout gives, version 2's replica starts and registers, the Service
// moves to it, and version 1's stops. Neither apply may reset what the
// module registered: the objects ship its webhook configurations without
// the webhooks field.
//
// With flood, the module also denies ConfigMaps labelled violate, which a
// second client tries to create throughout, and from just before version 2's
// objects are applied until version 1's replica stopped, one source
// (127.0.0.2) holds more connections to each replica's webhook port than
// its MaxConns: every violating create admitted is counted (violations), as
// is how long any webhook was Ignore (ignoreWindow).
func soakUpgrade(b *testing.B, how string, flood bool) upgradeResult {
	ctx := b.Context()
	home, apps := env.Namespace(b), env.Namespace(b)
	name := "up" + how[:1] + "-" + home[len(home)-6:]
	if flood {
		name = "upf" + how[:1] + "-" + home[len(home)-6:]
	}
	newModule := func(version string) *vigil.Module {
		m := vigil.NewModule(name, vigil.Options{Namespace: home, Version: version})
		c := m.Capability("soak", vigil.InNamespaces(apps))
		vigil.When(c, &corev1.ConfigMap{}).IsCreated().Mutate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) error {
			r.SetLabel("soaked", "yes")
			return nil
		})
		if flood {
			vigil.When(c, &corev1.ConfigMap{}).IsCreated().Named("no-violations").Validate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) vigil.Verdict {
				if r.HasLabel("violate") {
					return admission.Deny("ConfigMaps labelled violate are denied")
				}
				return admission.Allow()
			})
		}
		return m
	}
	kc := env.KubeConfigFile(b)
	var cfg *action.Configuration
	if how == "helm" {
		flags := genericclioptions.NewConfigFlags(false)
		flags.KubeConfig, flags.Namespace = ptr.To(kc), ptr.To(home)
		cfg = action.NewConfiguration()
		if err := cfg.Init(flags, home, "secret"); err != nil {
			b.Fatal(err)
		}
	}
	// apply applies a version's objects as the run's tool does.
	apply := func(version string, first bool) {
		b.Helper()
		dir := filepath.Join(b.TempDir(), version)
		image := "example.com/" + name + ":" + version
		if how == "kubectl" {
			if code := vigil.Execute(ctx, newModule(version), []string{"manifests", "--image", image, "-o", dir}); code != 0 {
				b.Fatalf("manifests exited %d", code)
			}
			out, err := exec.Command(filepath.Join(env.BinDir, "kubectl"), "--kubeconfig", kc, "apply", "-f", dir).CombinedOutput()
			if err != nil {
				b.Fatalf("kubectl apply (version %s): %v\n%s", version, err, out)
			}
			return
		}
		if code := vigil.Execute(ctx, newModule(version), []string{"chart", "-o", dir, "--image", image}); code != 0 {
			b.Fatalf("chart exited %d", code)
		}
		ch, err := loader.Load(dir)
		if err != nil {
			b.Fatal(err)
		}
		vals := map[string]any{"namespace": map[string]any{"create": false}}
		if first {
			i := action.NewInstall(cfg)
			i.ReleaseName, i.Namespace = name, home
			i.WaitStrategy, i.Timeout = kube.HookOnlyStrategy, time.Minute
			if _, err := i.RunWithContext(ctx, ch, vals); err != nil {
				b.Fatalf("helm install (version %s): %v", version, err)
			}
			return
		}
		u := action.NewUpgrade(cfg)
		u.Namespace = home
		u.WaitStrategy, u.Timeout = kube.HookOnlyStrategy, time.Minute
		if _, err := u.RunWithContext(ctx, name, ch, vals); err != nil {
			b.Fatalf("helm upgrade (version %s): %v", version, err)
		}
	}
	// enforcedBy waits until the version given has enforced its webhooks.
	enforcedBy := func(version string) {
		b.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			c := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, c); err == nil {
				var rec registration.Record
				_ = json.Unmarshal([]byte(c.Annotations[registration.Annotation]), &rec)
				if rec.Version == version && rec.State == registration.StateEnforced {
					return
				}
			}
			if time.Now().After(deadline) {
				b.Fatalf("version %s never enforced its webhooks", version)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	_, certDir := servingDir(b)
	b.Setenv(modcli.EnvHandoffDir, b.TempDir())
	f := newFront(b)
	replica := func(version, addr string) (stop func()) {
		return runAdmission(b, newModule(version), addr, "--cert-dir", certDir, "--kubeconfig", kc,
			"--shutdown-delay", "1s", "--webhook-url", "https://"+f.ln.Addr().String())
	}

	apply("1.0.0", true)
	addrA := vigiltest.FreeAddr(b)
	f.target.Store(addrA)
	stopA := replica("1.0.0", addrA)
	enforcedBy("1.0.0")

	var res upgradeResult
	var firstErr atomic.Value
	var mu sync.Mutex
	stopWatch := func() {}
	stopViolations := func() {}
	var violations, violationTries atomic.Int64
	if flood {
		stopWatch = ignoreWindow(ctx, name, &res.ignoreWindow)
		stopViolations = violationLoop(ctx, apps, &violationTries, &violations)
	}
	stopClient := createLoop(ctx, apps, "up", nil, func(c *corev1.ConfigMap, err error, _, _ time.Time) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			res.rejected++
			firstErr.CompareAndSwap(nil, err)
		case c.Labels["soaked"] != "yes":
			res.creates++
			res.unmutated++
		default:
			res.creates++
		}
	})

	time.Sleep(2 * time.Second)
	var floods []*bench.Flooder
	startFlood := func(addr string) {
		f := bench.Flood(b, bench.FloodOptions{Addr: addr, Silent: floodConns, Redial: 20 * time.Millisecond})
		f.WaitTried(b, 10*time.Second)
		floods = append(floods, f)
	}
	if flood {
		startFlood(addrA)
	}
	apply("2.0.0", false) // version 2's objects, version 1 still serving
	time.Sleep(2 * time.Second)
	// maxUnavailable: 0 — the new replica first, ready (registered), then
	// the Service's endpoints move to it, then the old one ends.
	addrB := vigiltest.FreeAddr(b)
	if flood {
		startFlood(addrB)
	}
	stopB := replica("2.0.0", addrB)
	enforcedBy("2.0.0")
	time.Sleep(2 * time.Second)
	f.target.Store(addrB)
	stopA()
	for _, f := range floods {
		res.floodDialed += int64(f.Dialed())
		f.Stop()
	}
	time.Sleep(2 * time.Second)
	stopClient()
	stopViolations()
	stopWatch()
	res.violations, res.violationTries = violations.Load(), violationTries.Load()
	stopB()
	if err, _ := firstErr.Load().(error); err != nil {
		b.Errorf("upgrade by %s (flood %v): first rejection: %v", how, flood, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if flood {
		// The flood's source holds at most its share of each replica's
		// connections, so the API server's calls keep being served: none
		// rejected; and no create the policy denies is ever admitted.
		if res.rejected > 0 || res.violations > 0 || res.unmutated > 0 || res.creates < 50 || res.violationTries < 20 || res.floodDialed < 2*floodConns {
			b.Errorf("upgrade by %s under a flood of %d connections a replica (%d dialled): creates=%d rejected=%d unmutated=%d violations=%d/%d ignore_window=%s: want at least 50 creates and 20 violating tries, none rejected, unmutated or admitted in violation",
				how, floodConns, res.floodDialed, res.creates, res.rejected, res.unmutated, res.violations, res.violationTries, res.ignoreWindow)
		}
		return res
	}
	if res.rejected > 0 || res.unmutated > 0 || res.creates < 100 {
		b.Errorf("upgrade by %s: creates=%d rejected=%d unmutated=%d: want at least 100 creates, none rejected or unmutated", how, res.creates, res.rejected, res.unmutated)
	}
	return res
}

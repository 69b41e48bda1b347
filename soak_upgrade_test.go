package vigil_test

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
	"github.com/vigilkit/vigil/internal/registration"
	"github.com/vigilkit/vigil/vigiltest"
)

// upgradeResult is what one upgrade run counted.
type upgradeResult struct {
	creates, rejected, unmutated int64
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
func soakUpgrade(b *testing.B, how string) upgradeResult {
	ctx := b.Context()
	home, apps := env.Namespace(b), env.Namespace(b)
	name := "up" + how[:1] + "-" + home[len(home)-6:]
	newModule := func(version string) *vigil.Module {
		m := vigil.NewModule(name, vigil.Options{Namespace: home, Version: version})
		c := m.Capability("soak", vigil.InNamespaces(apps))
		vigil.When(c, &corev1.ConfigMap{}).IsCreated().Mutate(func(_ context.Context, r *vigil.Request[*corev1.ConfigMap]) error {
			r.SetLabel("soaked", "yes")
			return nil
		})
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
	b.Setenv(vigil.EnvHandoffDir, b.TempDir())
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
	stopClient := createLoop(ctx, apps, "up", func(c *corev1.ConfigMap, err error, _, _ time.Time) {
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
	apply("2.0.0", false) // version 2's objects, version 1 still serving
	time.Sleep(2 * time.Second)
	// maxUnavailable: 0 — the new replica first, ready (registered), then
	// the Service's endpoints move to it, then the old one ends.
	addrB := vigiltest.FreeAddr(b)
	stopB := replica("2.0.0", addrB)
	enforcedBy("2.0.0")
	time.Sleep(2 * time.Second)
	f.target.Store(addrB)
	stopA()
	time.Sleep(2 * time.Second)
	stopClient()
	stopB()
	if err, _ := firstErr.Load().(error); err != nil {
		b.Errorf("upgrade by %s: first rejection: %v", how, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if res.rejected > 0 || res.unmutated > 0 || res.creates < 100 {
		b.Errorf("upgrade by %s: creates=%d rejected=%d unmutated=%d: want at least 100 creates, none rejected or unmutated", how, res.creates, res.rejected, res.unmutated)
	}
	return res
}

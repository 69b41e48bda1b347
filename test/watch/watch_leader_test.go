package watch

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

// leaderModule reconciles ConfigMaps labelled work by stamping them with its
// process ID. A reconcile holds a lock object while it runs; meeting another
// replica's lock records an overlap.
func leaderModule(ns string, cfg *rest.Config) *vigil.Module {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		panic(err)
	}
	m := vigil.NewModule("leader", vigil.Options{Namespace: ns})
	pid := fmt.Sprint(os.Getpid())
	vigil.Watch(m.Capability("work"), &corev1.ConfigMap{}).InNamespace(ns).WithLabel("work").
		Reconcile(func(ctx context.Context, cm *corev1.ConfigMap) error {
			lock := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lock-" + cm.Name}, Data: map[string]string{"pid": pid}}
			if err := c.Create(ctx, lock); apierrors.IsAlreadyExists(err) {
				// Held by another process: an overlap, unless the holder
				// is dead (killed while it reconciled).
				held := &corev1.ConfigMap{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(lock), held); err == nil {
					var holder int
					fmt.Sscan(held.Data["pid"], &holder)
					if holder > 0 && syscall.Kill(holder, 0) == nil {
						overlap := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "overlap-"}, Data: map[string]string{"object": cm.Name, "pid": pid, "holder": held.Data["pid"]}}
						_ = c.Create(ctx, overlap)
					}
				}
			} else if err != nil {
				// A create cut off by a stop (context canceled) may have
				// happened all the same: release what is this process's,
				// or the next leader meets a lock no reconcile holds.
				held := &corev1.ConfigMap{}
				if c.Get(context.Background(), client.ObjectKeyFromObject(lock), held) == nil && held.Data["pid"] == pid {
					_ = c.Delete(context.Background(), held, client.Preconditions{UID: &held.UID})
				}
				return err
			}
			defer c.Delete(context.Background(), lock)
			time.Sleep(30 * time.Millisecond) // the scenario: a reconcile takes a while, so overlaps would show
			if cm.Annotations["reconciled-by"] == pid {
				return nil
			}
			patch := client.MergeFrom(cm.DeepCopy())
			if cm.Annotations == nil {
				cm.Annotations = map[string]string{}
			}
			cm.Annotations["reconciled-by"] = pid
			return c.Patch(ctx, cm, patch)
		})
	return m
}

// leaseDuration of the leader-election tests' watchers.
const leaseDuration = 4 * time.Second

// watcherProcess is a watcher of the leader module, with its probe address.
type watcherProcess struct {
	*vigiltest.Process
	probe string
}

func startWatcherProcess(t *testing.T, ns, kubeconfig string) *watcherProcess {
	t.Helper()
	probe := vigiltest.FreeAddr(t)
	p := testkit.StartChild(t, "leader", map[string]string{"VIGIL_TEST_NAMESPACE": ns, "VIGIL_TEST_KUBECONFIG": kubeconfig},
		"watcher", "--kubeconfig", kubeconfig, "--metrics-addr=", "--probe-addr", probe,
		"--lease-duration", leaseDuration.String(), "--renew-deadline", "3s", "--retry-period", "200ms")
	return &watcherProcess{Process: p, probe: probe}
}

func (p *watcherProcess) pid() string { return fmt.Sprint(p.Pid()) }

func (p *watcherProcess) waitReady(t *testing.T) {
	t.Helper()
	testkit.WaitReady(t, "http://"+p.probe+"/readyz", p.Exited())
}

// Two watcher processes: only the Lease holder reconciles; when it is killed
// the other takes over within the lease duration; when one stops gracefully
// it releases the Lease and the other takes over at once. No object is ever
// reconciled by both at the same time.
func TestWatcherLeaderElection(t *testing.T) {
	ns := env.Namespace(t)
	c := newClient(t)
	kc := kubeconfig(t)
	a := startWatcherProcess(t, ns, kc)
	b := startWatcherProcess(t, ns, kc)
	a.waitReady(t)
	b.waitReady(t)

	batch := 0
	// work creates five labelled objects and returns who reconciled them.
	work := func(within time.Duration) (by map[string]int, took time.Duration) {
		t.Helper()
		batch++
		start := time.Now()
		var names []string
		for i := range 5 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("work-%d-%d", batch, i), Labels: map[string]string{"work": "yes"}}}
			if err := c.Create(t.Context(), cm); err != nil {
				t.Fatal(err)
			}
			names = append(names, cm.Name)
		}
		by = map[string]int{}
		testkit.Eventually(t, within, fmt.Sprintf("batch %d reconciled", batch), func() bool {
			clear(by)
			for _, n := range names {
				cm := &corev1.ConfigMap{}
				if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: n}, cm); err != nil || cm.Annotations["reconciled-by"] == "" {
					return false
				}
				by[cm.Annotations["reconciled-by"]]++
			}
			return true
		})
		return by, time.Since(start)
	}

	by, _ := work(15 * time.Second)
	if len(by) != 1 {
		t.Fatalf("two replicas reconciled: %v", by)
	}
	leader, standby := a, b
	if by[b.pid()] == 5 {
		leader, standby = b, a
	} else if by[a.pid()] != 5 {
		t.Fatalf("reconciled by %v, neither %s nor %s", by, a.pid(), b.pid())
	}

	// A crash: the Lease is not released, the standby waits it out.
	killed := time.Now()
	if err := leader.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	by, _ = work(15 * time.Second)
	takeover := time.Since(killed)
	t.Logf("takeover after a kill: %s (lease duration %s, retry period 200ms)", takeover.Round(time.Millisecond), leaseDuration)
	if by[standby.pid()] != 5 {
		t.Fatalf("after the leader was killed, reconciled by %v; want all by %s", by, standby.pid())
	}
	if takeover > leaseDuration+2*time.Second {
		t.Errorf("takeover took %s; want within the lease duration (%s), a retry and the batch's reconciles", takeover, leaseDuration)
	}

	// A graceful stop releases the Lease: the new replica takes over at once.
	c2 := startWatcherProcess(t, ns, kc)
	c2.waitReady(t)
	stopped := time.Now()
	if code := standby.Stop(t, 20*time.Second); code != 0 {
		t.Errorf("the leader exited %d on SIGTERM", code)
	}
	// A planned release is not an error.
	for _, l := range strings.Split(standby.Output.String(), "\n") {
		if strings.Contains(l, "level=ERROR") && strings.Contains(l, "leader election") {
			t.Errorf("the leader logged an error on a graceful stop: %s", l)
		}
	}
	if !strings.Contains(standby.Output.String(), "leader lease released") {
		t.Errorf("the leader did not log its release of the Lease on a graceful stop:\n%s", standby.Output)
	}
	by, _ = work(15 * time.Second)
	handover := time.Since(stopped)
	t.Logf("handover after a graceful stop: %s", handover.Round(time.Millisecond))
	if by[c2.pid()] != 5 {
		t.Fatalf("after a graceful stop, reconciled by %v; want all by %s", by, c2.pid())
	}
	// Unreleased, the Lease would hold the new replica back for up to the
	// lease duration after the last renewal.
	if handover > leaseDuration/2+500*time.Millisecond {
		t.Errorf("handover after a graceful stop took %s; the Lease should be released at once, well within its %s", handover, leaseDuration)
	}

	list := &corev1.ConfigMapList{}
	if err := c.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, "overlap-") {
			t.Errorf("object %s was reconciled by two replicas at once (%s and %s)", cm.Data["object"], cm.Data["pid"], cm.Data["holder"])
		}
	}
}

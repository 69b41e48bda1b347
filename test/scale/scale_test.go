package scale

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil/internal/clusters/controlplane"
	"github.com/vigilkit/vigil/internal/clusters/k8sbuild"
	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
	"github.com/vigilkit/vigil/internal/testsupport/bench"
	"github.com/vigilkit/vigil/internal/testsupport/udscore"
	"github.com/vigilkit/vigil/vigiltest"
	"github.com/vigilkit/vigil/vigiltest/fault"
)

// udsCoreDir is UDS Core's policy engine as examples/uds-core ports it.
const udsCoreDir = "../../examples/uds-core"

// steps are the pod counts the bench grows the cluster to: SCALE_PODS
// (comma-separated), else 1,000, 10,000 and 50,000.
func steps(b *testing.B) []int {
	v := os.Getenv("SCALE_PODS")
	if v == "" {
		return []int{1000, 10000, 50000}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1000 {
			b.Fatalf("SCALE_PODS=%q: expected pod counts of 1000 or more, comma-separated, as 1000,10000,50000", v)
		}
		out = append(out, n)
	}
	return out
}

// memoryNeeded is what a step of pods needs of the machine's memory, in
// MiB: an estimate, not a measurement — 3 GiB for the 1,000 nodes and the
// processes, and about 100 KiB a pod across the API server, etcd, the
// controllers, kwok and the modules (with 52,000 pods the API server held
// about 2.8 GiB resident).
func memoryNeeded(pods int) int { return 3072 + pods/10 }

// memAvailable is the machine's available memory in MiB.
func memAvailable() int {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return kb / 1024
		}
	}
	return 0
}

// BenchmarkScale (make bench-scale) grows a real API server's cluster, its
// nodes and pods simulated by kwok, to 1,000 nodes and 1,000, 10,000 and
// 50,000 pods in 1,000 namespaces (Deployments, and Jobs that complete),
// and measures at each step what a module costs there: UDS Core's policy
// engine (examples/uds-core) in admission, two replicas behind one address
// (SCALE_ADMISSION_REPLICAS), and podwatch, which Reconciles every Pod. It
// prints one line per step and create rate (adm_rss_mib is the largest
// replica's):
//
//	scale: pods=N nodes=N creates_per_s=N p50_ms=.. p99_ms=.. base_p50_ms=.. base_p99_ms=.. adm_cpu_per_req_us=.. adm_rss_mib=.. watcher_rss_mib=.. relist_peak_mib=.. reconcile_lag_p99_ms=.. audit_s=.. audit_peak_mib=..
//
// a line "scale-review:" per step and rate with the replicas' own review
// time and a create's latency through a floor server as the same two
// webhooks, and a line "scale-more:" with the step's other figures. Run it
// with -benchtime 1x.
func BenchmarkScale(b *testing.B) {
	nodes, namespaces := 1000, 1000
	if v := os.Getenv("SCALE_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("SCALE_NODES=%q: expected a node count", v)
		}
		nodes = n
	}
	// The admission replicas, behind one address as behind a Service:
	// SCALE_ADMISSION_REPLICAS, 2 when unset.
	replicas := 2
	if v := os.Getenv("SCALE_ADMISSION_REPLICAS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("SCALE_ADMISSION_REPLICAS=%q: expected a replica count, 1 or more", v)
		}
		replicas = n
	}
	plan := steps(b)
	release, err := kubeversion.FromEnv()
	if err != nil {
		b.Fatal(err)
	}
	say("building or finding the node's binaries and kwok %s (cached after the first run)", k8sbuild.Kwok)
	nodeDir, err := controlplane.EnsureNode(b.Context(), release, os.Stderr)
	if err != nil {
		b.Fatal(err)
	}
	kwokDir, err := k8sbuild.EnsureKwok(b.Context(), k8sbuild.BuildOptions{Release: release, Progress: os.Stderr})
	if err != nil {
		b.Fatal(err)
	}
	env, err := vigiltest.Start(vigiltest.Options{Build: true, QPS: 2000, Burst: 4000,
		APIServerFlags: map[string]string{"max-requests-inflight": "2000", "max-mutating-requests-inflight": "1000"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Stop() })
	kubeconfig := env.KubeConfigFile(b)
	cluster := startCluster(b, nodeDir, kwokDir, kubeconfig)
	createNodes(b, env.Clientset, cluster, nodes)
	createNamespaces(b, env, namespaces)

	// UDS Core's engine: its admission as its pod runs it.
	// With SCALE_PPROF=FILE.pprof, a CPU profile of the admission process
	// is taken through the module's creates at 200 a second (profiling
	// costs CPU: that window's figures include it).
	profile := os.Getenv("SCALE_PPROF")
	udsOpts := vigiltest.ModuleOptions{AdmissionReplicas: replicas}
	if profile != "" {
		udsOpts.Args = map[string][]string{"admission": {"--shutdown-delay", "0s", "--pprof"}}
	}
	// The floor: any two webhooks' cost to a create, to tell the module's
	// part of the added latency from the API server's.
	startFloor(b, env.Clientset)
	uds := udscore.Install(b, env, udsCoreDir, udsOpts)
	adm := uds.StartAdmission(2 * time.Minute)
	adms := admissionsOf(uds.AdmissionPods())

	// podwatch: its watcher behind a fault proxy, to force a relist; and
	// controller-runtime's cache of Pods to hold it against. Their memory
	// before the workloads is what each object's bytes are counted from.
	pwBin := env.InstallModule(b, vigiltest.ModuleOptions{Dir: "./podwatch"}).Binary
	crBin := vigiltest.BuildModule(b, "./crcache")
	vigilBin := vigiltest.BuildModule(b, "../../cmd/vigil")
	proxy, err := fault.NewProxy(env.Config, fault.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { proxy.Close() })
	proxyKubeconfig := vigiltest.WriteKubeConfig(b, proxy.Config())
	baseWhole := watchPods(b, cluster, env.Clientset, pwBin, nil, proxyKubeconfig, "pod", false)
	baseMeta := watchPods(b, cluster, env.Clientset, pwBin, nil, proxyKubeconfig, "metadata", false)
	basePlain := watchPods(b, cluster, env.Clientset, crBin, nil, kubeconfig, "", false)

	for _, pods := range plan {
		if need, have := memoryNeeded(pods), memAvailable(); have < need {
			say("scale: the step of %d pods needs about %d MiB of memory and the machine has %d MiB available: it and the larger steps are skipped", pods, need, have)
			break
		}
		say("step: %d pods on %d nodes", pods, nodes)
		began := time.Now()
		grow(b, env.Clientset, namespaces, pods)
		waitFor(b, cluster, 45*time.Minute, fmt.Sprintf("%d pods running or done", pods), func() (bool, string) {
			ready, succeeded, err := workloadPods(b.Context(), env.Clientset)
			if err != nil {
				return false, err.Error()
			}
			return ready+succeeded >= pods, fmt.Sprintf("%d ready, %d succeeded", ready, succeeded)
		})
		growTook := time.Since(began)

		// podwatch started over, reading whole Pods and then metadata
		// alone, and controller-runtime's default cache beside them.
		whole := watchPods(b, cluster, env.Clientset, pwBin, proxy, proxyKubeconfig, "pod", true)
		meta := watchPods(b, cluster, env.Clientset, pwBin, proxy, proxyKubeconfig, "metadata", false)
		plain := watchPods(b, cluster, env.Clientset, crBin, nil, kubeconfig, "", false)

		// The audit over every pod, by a watcher of UDS Core's engine.
		audited := auditOnce(b, uds.Binary, kubeconfig)
		running, _, err := workloadPods(b.Context(), env.Clientset)
		if err != nil {
			b.Fatal(err)
		}
		gateTook, statusTook, planTook := operatorTimes(b, pwBin, vigilBin, kubeconfig, running)
		takeoverTook := takeover(b, env.Clientset, pwBin, kubeconfig)

		for _, rate := range []int{50, 200, 500} {
			n := rate * 10
			if n > 2000 {
				n = 2000
			}
			run := fmt.Sprintf("r%d-%d", pods, rate)
			// The admission's CPU through the creates the module does not
			// see (its background: registration checks, informers,
			// metrics) is taken off what it used through the module's.
			floor := createLabelled(b.Context(), env.Clientset, metav1.NamespaceSystem, run+"-floor", map[string]string{floorLabel: "true"}, rate, n)
			idle0 := adms.cpu()
			base := createAt(b.Context(), env.Clientset, metav1.NamespaceSystem, run+"-base", rate, n)
			idle := adms.cpu() - idle0
			cpu0, judged0 := adms.cpu(), adms.metric("vigil_admission_binding_requests_total")
			conns0 := adms.metric("vigil_admission_connections_total")
			var profiled chan error
			if profile != "" && rate == 200 {
				profiled = make(chan error, 1)
				go func() {
					profiled <- saveProfile("http://"+adm.Ports["metrics"]+"/debug/pprof/profile?seconds=8", strings.TrimSuffix(profile, ".pprof")+fmt.Sprintf("-%d.pprof", pods))
				}()
			}
			logged := adms.logged()
			with := createAt(b.Context(), env.Clientset, workloadNamespace(1), run, rate, n)
			if profiled != nil {
				if err := <-profiled; err != nil {
					b.Fatalf("the admission's CPU profile: %v", err)
				}
			}
			cpu, judged := adms.cpu()-cpu0, adms.metric("vigil_admission_binding_requests_total")-judged0
			conns := adms.metric("vigil_admission_connections_total") - conns0
			checkCluster(b, cluster)
			// A create the API server refuses under load (a timeout, a
			// webhook it could not reach) is counted, not timed, and said;
			// when none got through, the step's figures would say nothing.
			if with.failed+base.failed > 0 {
				say("creates at %d/s: %d of %d failed with the module (first: %v), %d without (first: %v)", rate, with.failed, n, with.first, base.failed, base.first)
			}
			if len(with.lat) == 0 || len(base.lat) == 0 {
				b.Fatalf("creates at %d/s: none got through (%d failed with the module, %d without), so no figure of the step stands", rate, with.failed, base.failed)
			}
			// A request is a create through admission: its mutating and its
			// validating review, every binding of both.
			background := time.Duration(float64(idle) * with.took.Seconds() / base.took.Seconds())
			perReq := bench.Us(max(0, cpu-background)) / float64(len(with.lat))
			fmt.Printf("scale: pods=%d nodes=%d creates_per_s=%d p50_ms=%.2f p99_ms=%.2f base_p50_ms=%.2f base_p99_ms=%.2f adm_cpu_per_req_us=%.1f adm_rss_mib=%.1f watcher_rss_mib=%.1f relist_peak_mib=%.1f reconcile_lag_p99_ms=%.1f audit_s=%.1f audit_peak_mib=%.1f\n",
				pods, nodes, rate, with.p(50), with.p(99), base.p(50), base.p(99), perReq, adms.rss(),
				whole.steady, whole.relistPeak, bench.Ms(bench.Percentile(whole.lags, 99)), audited.took.Seconds(), audited.peakMiB)
			// The module's own time, from the request read to its answer
			// written: what the cluster's size could change of it, without
			// the API server's queueing around it.
			// Beside it, a create's latency through the floor server as
			// the same two webhooks.
			if reviews := adms.reviews(logged, run); len(reviews) > 0 && len(floor.lat) > 0 {
				fmt.Printf("scale-review: pods=%d creates_per_s=%d reviews_sampled=%d review_p50_ms=%.3f review_p99_ms=%.3f floor_p50_ms=%.2f floor_p99_ms=%.2f\n",
					pods, rate, len(reviews), bench.Ms(bench.Percentile(reviews, 50)), bench.Ms(bench.Percentile(reviews, 99)), floor.p(50), floor.p(99))
			}
			if floor.failed > 0 {
				say("creates at %d/s through the floor server: %d of %d failed (first: %v)", rate, floor.failed, n, floor.first)
			}
			say("creates at %d/s: %d with the module in %s (%.0f/s achieved, %d failed), %d without in %s (%d failed); %v binding decisions; %v connections (TLS handshakes) from the API server to %d admission replicas", rate, n, with.took.Round(time.Millisecond),
				float64(n)/with.took.Seconds(), with.failed, n, base.took.Round(time.Millisecond), base.failed, judged, conns, len(adms))
		}
		perPod := func(w, base watched) (rss, live float64) {
			return (w.steady - base.steady) * (1 << 20) / float64(pods), (w.live - base.live) * (1 << 20) / float64(pods)
		}
		wholeRSS, wholeLive := perPod(whole, baseWhole)
		metaRSS, metaLive := perPod(meta, baseMeta)
		plainRSS, plainLive := perPod(plain, basePlain)
		fmt.Printf("scale-more: pods=%d grow_s=%.0f watcher_ready_s=%.1f reconcile_lag_p50_ms=%.1f pod_rss_bytes_per_pod=%.0f pod_heap_bytes_per_pod=%.0f metadata_rss_mib=%.1f metadata_rss_bytes_per_pod=%.0f metadata_heap_bytes_per_pod=%.0f metadata_relist_peak_mib=%.1f metadata_ready_s=%.1f crcache_rss_mib=%.1f crcache_rss_bytes_per_pod=%.0f crcache_heap_bytes_per_pod=%.0f gate_s=%.2f status_s=%.2f plan_cluster_s=%.2f takeover_s=%.1f audit_streams=%d audit_pages=%d audit_slowest_page_s=%.2f\n",
			pods, growTook.Seconds(), whole.ready.Seconds(), bench.Ms(bench.Percentile(whole.lags, 50)), wholeRSS, wholeLive,
			meta.steady, metaRSS, metaLive, meta.relistPeak, meta.ready.Seconds(), plain.steady, plainRSS, plainLive,
			gateTook.Seconds(), statusTook.Seconds(), planTook.Seconds(), takeoverTook.Seconds(), audited.streams, audited.pages, audited.slowestPage.Seconds())
	}
}

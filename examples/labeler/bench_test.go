package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vigilkit/vigil/store"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

// The module's own answers, straight from its server: the mutation's patch
// and the validation's denial.
func TestLabelerAnswers(t *testing.T) {
	srv := startLabeler(t)
	resp := srv.review(t, mutatePath, configMapReview(t, 0))
	if !resp.Allowed || !strings.Contains(string(resp.Patch), `"/metadata/labels/vigil.dev~1labeled"`) {
		t.Fatalf("mutate: %+v (patch %s)", resp, resp.Patch)
	}
	body := configMapReview(t, 0)
	body = bytes.Replace(body, []byte(`"app":"bench"`), []byte(`"team":"bench"`), 1)
	resp = srv.review(t, validatePath, body)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "has no app label") {
		t.Fatalf("validate without app: %+v", resp)
	}
}

type labeler struct {
	cmd        *exec.Cmd
	base       string
	metrics    string // http://<metrics address>
	client     *http.Client
	readyAfter time.Duration
}

// The labeler's admission paths, as `labeler admission --help` documents
// them: /mutate/<module> and /validate/<module>.
const (
	mutatePath   = "/mutate/labeler"
	validatePath = "/validate/labeler"
)

// startLabeler starts the labeler's admission role, with extraEnv added to its
// environment, and waits until it is ready.
func startLabeler(t testing.TB, extraEnv ...string) *labeler {
	t.Helper()
	dir := t.TempDir()
	bin := vigiltest.BuildModule(t, ".")
	serving := vigiltest.NewServingCert(t, "127.0.0.1")
	_ = os.WriteFile(filepath.Join(dir, "tls.crt"), serving.CertPEM, 0o600)
	_ = os.WriteFile(filepath.Join(dir, "tls.key"), serving.KeyPEM, 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ns := env.Namespace(t)
	// The Store CRD is installed as the module's manifests install it, so
	// that readiness measures the module, not the CRD's first establishment.
	crd, err := store.CRD()
	if err != nil {
		t.Fatal(err)
	}
	if err := env.InstallCRDs(crd); err != nil {
		t.Fatal(err)
	}
	metrics := vigiltest.FreeAddr(t)
	cmd := exec.Command(bin, "admission", "--addr", addr, "--metrics-addr", metrics, "--cert-dir", dir, "--kubeconfig", env.KubeConfigFile(t), "--shutdown-delay", "0s")
	cmd.Env = append(append(os.Environ(), "LABELER_NAMESPACE="+ns, "VIGIL_HANDOFF_DIR="+dir), extraEnv...)
	logs := &vigiltest.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	l := &labeler{cmd: cmd, base: "https://" + addr, metrics: "http://" + metrics}
	l.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: serving.Pool},
		// One HTTP/1.1 keep-alive connection per worker, as load generators
		// and the API server's webhook clients use.
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
		MaxIdleConnsPerHost: 128,
	}}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for {
		resp, err := l.client.Get(l.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Since(began) > 30*time.Second {
			t.Fatalf("labeler not ready within 30s:\n%s", logs)
		}
		time.Sleep(2 * time.Millisecond)
	}
	l.readyAfter = time.Since(began)
	return l
}

func (l *labeler) review(t testing.TB, path string, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	resp, err := l.client.Post(l.base+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil || out.Response == nil {
		t.Fatalf("decode response (%d): %v", resp.StatusCode, err)
	}
	return out.Response
}

// configMapReview is a CREATE of a ConfigMap of about 1.5 KB.
func configMapReview(t testing.TB, _ int) []byte {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "apps", Labels: map[string]string{"app": "bench"}},
		Data:       map[string]string{"config.yaml": strings.Repeat("key: value\n", 120)},
	}
	return reviewOf(t, cm, "configmaps")
}

// podReview is a CREATE of a Pod of about 4 KB.
func podReview(t testing.TB) []byte {
	var containers []corev1.Container
	for i := range 4 {
		c := corev1.Container{
			Name: fmt.Sprint("c", i), Image: "registry.example/app@sha256:" + strings.Repeat("ab", 32),
			Args:         []string{"--listen=:8080", "--log-level=info", "--config=/etc/app/config.yaml"},
			Env:          []corev1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "REGION", Value: "eu-west"}},
			Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}},
		}
		containers = append(containers, c)
	}
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", Labels: map[string]string{"app": "bench", "tier": "web"},
			Annotations: map[string]string{"note": strings.Repeat("x", 600)}},
		Spec: corev1.PodSpec{Containers: containers, Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}}},
	}
	return reviewOf(t, p, "pods")
}

func reviewOf(t testing.TB, obj runtime.Object, resource string) []byte {
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("bench"), Kind: metav1.GroupVersionKind{Version: gvk.Version, Kind: gvk.Kind},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: resource},
			Operation: admissionv1.Create, Namespace: "apps", Name: "x",
			Object: runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

type loadResult struct {
	payload     string
	concurrency int
	requests    int64
	rps         float64
	p50, p99    time.Duration
	cpuPerReq   time.Duration
}

// BenchmarkAdmission loads the labeler (mutate + validate) over TLS keep-alive
// at concurrency 1, 16 and 64, with a ConfigMap and a Pod payload, and reports
// throughput, latency, the server's own CPU per request, its memory idle and
// under load, and how soon it is ready. Run it with -benchtime 1x: each load
// runs for a fixed time.
func BenchmarkAdmission(b *testing.B) {
	l := startLabeler(b)
	pid := l.cmd.Process.Pid
	time.Sleep(300 * time.Millisecond) // the scenario: idle a moment before the idle RSS is read
	rssIdle := vigiltest.ProcStatus(pid, "VmRSS")
	payloads := []struct {
		name string
		body []byte
	}{{"configmap", configMapReview(b, 0)}, {"pod", podReview(b)}}
	var results []loadResult
	for _, p := range payloads {
		for _, c := range []int{1, 16, 64} {
			results = append(results, l.load(b, p.name, p.body, c, 4*time.Second))
		}
	}
	rssLoad := vigiltest.ProcStatus(pid, "VmHWM")

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "payload\tconcurrency\trequests\treq/s\tp50\tp99\tserver cpu/req")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.2f ms\t%.2f ms\t%d µs\n", r.payload, r.concurrency, r.requests, r.rps, ms(r.p50), ms(r.p99), r.cpuPerReq.Microseconds())
	}
	tw.Flush()
	for _, name := range []string{"configmap", "pod"} {
		var c16 loadResult
		for _, r := range results {
			if r.payload == name && r.concurrency == 16 {
				c16 = r
			}
		}
		prefix := "admission"
		if name == "pod" {
			prefix = "admission-pod"
		}
		fmt.Printf("%s: c16_rps=%.0f c16_p50=%.2fms c16_p99=%.2fms cpu_per_req=%dus rss_idle=%.1fMiB rss_load=%.1fMiB ready_after=%dms\n",
			prefix, c16.rps, ms(c16.p50), ms(c16.p99), c16.cpuPerReq.Microseconds(), float64(rssIdle)/1024, float64(rssLoad)/1024, l.readyAfter.Milliseconds())
	}
}

// load sends each review to the mutate path and then the validate path, as
// the API server does, from c workers for d, and measures each request.
func (l *labeler) load(b *testing.B, name string, body []byte, c int, d time.Duration) loadResult {
	pid := l.cmd.Process.Pid
	paths := []string{l.base + mutatePath, l.base + validatePath}
	// Warm the connections.
	for range c {
		resp, err := l.client.Post(paths[0], "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	cpuBefore := procCPU(pid)
	var total atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, 4096)
			for i := w; time.Now().Before(stop); i++ {
				t0 := time.Now()
				resp, err := l.client.Post(paths[i%2], "application/json", bytes.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
				mine = append(mine, time.Since(t0))
				total.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	cpu := procCPU(pid) - cpuBefore
	slices.Sort(lat)
	n := total.Load()
	return loadResult{
		payload: name, concurrency: c, requests: n, rps: float64(n) / d.Seconds(),
		p50: pct(lat, 50), p99: pct(lat, 99), cpuPerReq: cpu / time.Duration(max(n, 1)),
	}
}

// procCPU is the process's user and system CPU time from /proc.
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

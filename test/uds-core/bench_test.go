package udscore

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/testsupport/bench"
	"github.com/vigilkit/vigil/vigiltest"
)

// benchPod is a Pod as UDS Core's users run them: four containers, each
// with args, env, a port and a mount, and a ConfigMap volume; compliant
// with every policy (as the mutations leave it), or privileged.
func benchPod(privileged bool) *corev1.Pod {
	var containers []corev1.Container
	for i := range 4 {
		containers = append(containers, corev1.Container{
			Name: fmt.Sprint("c", i), Image: "registry.example/app@sha256:" + strings.Repeat("ab", 32),
			Args:         []string{"--listen=:8080", "--log-level=info", "--config=/etc/app/config.yaml"},
			Env:          []corev1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "REGION", Value: "eu-west"}},
			Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}},
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		})
	}
	if privileged {
		containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", Labels: map[string]string{"app": "bench", "tier": "web"},
			Annotations: map[string]string{"note": strings.Repeat("x", 600)}},
		Spec: corev1.PodSpec{
			Containers:      containers,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000)},
			Volumes:         []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}},
		},
	}
}

// podReview is the AdmissionReview of a CREATE of the Pod.
func podReview(t testing.TB, p *corev1.Pod) []byte {
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("bench"), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: p.Namespace, Name: p.Name, Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// clientTrusting is an HTTP/1.1 keep-alive client trusting the CA bundle.
func clientTrusting(t testing.TB, ca []byte) *http.Client {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("no certificate in the CA bundle")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 128,
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	return &http.Client{Timeout: 10 * time.Second, Transport: tr}
}

// BenchmarkUDS (make bench-uds) loads UDS Core's policy engine, its real
// admission process, over TLS keep-alive at c=16 with a compliant Pod
// through every policy (its mutating and its validating path) and a denied
// one, beside the floor server (bench.StartFloor) under the same load in
// the same run; it reports req/s, p99, the module's CPU per request against
// the floor's, and its memory under load. Run it with -benchtime 1x.
//
// With UDS_BENCH_PPROF=FILE.pprof it also writes CPU profiles of the
// module's admission process under the validating load (FILE.pprof) and the
// mutating one (FILE-mutate.pprof), each taken in a load of its own
// (profiling costs CPU), for go tool pprof.
func BenchmarkUDS(b *testing.B) {
	opts := vigiltest.ModuleOptions{Dir: udsCoreDir}
	profile := os.Getenv("UDS_BENCH_PPROF")
	if profile != "" {
		opts.Args = map[string][]string{"admission": {"--shutdown-delay", "0s", "--pprof"}}
	}
	m := startUDSCoreWith(b, opts)
	pod := m.AdmissionPod()
	pid := pod.Process("admission").Pid()
	val, err := env.Clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(b.Context(), m.Name, metav1.GetOptions{})
	if err != nil || len(val.Webhooks) == 0 {
		b.Fatalf("the module's validating webhooks: %v", err)
	}
	vigilClient := clientTrusting(b, val.Webhooks[0].ClientConfig.CABundle)
	floorCert := vigiltest.NewServingCert(b, "127.0.0.1")
	fl := bench.StartFloor(b, floorCert.Dir)
	floorClient := clientTrusting(b, floorCert.CABundle)
	base := "https://" + pod.Ports["https"]
	mutate, validate := base+"/mutate/uds-core/"+CapabilityName, base+"/validate/uds-core/"+CapabilityName
	compliant, denied := podReview(b, benchPod(false)), podReview(b, benchPod(true))

	// The answers are what the policies say before anything is timed.
	for _, c := range []struct {
		url     string
		body    []byte
		allowed bool
	}{{validate, compliant, true}, {validate, denied, false}, {mutate, compliant, true}} {
		resp, err := vigilClient.Post(c.url, "application/json", strings.NewReader(string(c.body)))
		if err != nil {
			b.Fatal(err)
		}
		var review admissionv1.AdmissionReview
		err = json.NewDecoder(resp.Body).Decode(&review)
		resp.Body.Close()
		if err != nil || review.Response == nil || review.Response.Allowed != c.allowed {
			b.Fatalf("%s: %+v (%v); want allowed=%t", c.url, review.Response, err, c.allowed)
		}
	}

	const d = 3 * time.Second
	var v, mu, dn, f bench.LoadResult
	for round := range 2 { // the second round counts: the first warms both
		v = bench.Load(b, pid, "vigil validate", validate, vigilClient, "pod", compliant, 16, d)
		f = bench.Load(b, fl.Cmd.Process.Pid, "floor", fl.Base+"/validate", floorClient, "pod", compliant, 16, d)
		mu = bench.Load(b, pid, "vigil mutate", mutate, vigilClient, "pod", compliant, 16, d)
		dn = bench.Load(b, pid, "vigil validate denied", validate, vigilClient, "pod", denied, 16, d)
		if round == 0 {
			b.Logf("warm-up round: vigil validate %.1fus, floor %.1fus", bench.Us(v.CPUPerReq), bench.Us(f.CPUPerReq))
		}
	}
	rss := bench.ProcStatus(pid, "VmRSS")
	if profile != "" {
		writeProfile(b, "http://"+pod.Ports["metrics"]+"/debug/pprof/profile?seconds=3", profile, func() {
			bench.Load(b, pid, "vigil validate (profiled)", validate, vigilClient, "pod", compliant, 16, 4*time.Second)
		})
		writeProfile(b, "http://"+pod.Ports["metrics"]+"/debug/pprof/profile?seconds=3", strings.TrimSuffix(profile, ".pprof")+"-mutate.pprof", func() {
			bench.Load(b, pid, "vigil mutate (profiled)", mutate, vigilClient, "pod", compliant, 16, 4*time.Second)
		})
	}
	fmt.Printf("uds: cpu_per_req=%.1fus floor_cpu_per_req=%.1fus c16_rps=%.0f c16_p99=%.2fms rss_load=%.1fMiB vs_floor=%.2fx cpu_per_req_mutate=%.1fus vs_floor_mutate=%.2fx cpu_per_req_denied=%.1fus c16_p99_mutate=%.2fms floor_rps=%.0f\n",
		bench.Us(v.CPUPerReq), bench.Us(f.CPUPerReq), v.RPS, bench.Ms(v.P99), float64(rss)/1024, v.Ratio(f),
		bench.Us(mu.CPUPerReq), mu.Ratio(f), bench.Us(dn.CPUPerReq), bench.Ms(mu.P99), f.RPS)
}

// writeProfile fetches the CPU profile at url while load runs, into file.
func writeProfile(b *testing.B, url, file string, load func()) {
	done := make(chan error, 1)
	go func() {
		resp, err := http.Get(url)
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s: %s: %s", url, resp.Status, data)
		}
		if err == nil {
			err = os.WriteFile(file, data, 0o644)
		}
		done <- err
	}()
	load()
	if err := <-done; err != nil {
		b.Fatalf("CPU profile: %v", err)
	}
	b.Logf("CPU profile of the validating load written to %s", file)
}

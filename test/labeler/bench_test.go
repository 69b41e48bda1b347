package labeler

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vigilkit/vigil/internal/testsupport/bench"
	"github.com/vigilkit/vigil/store"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

// labelerDir is the module these tests load: the example an author copies.
const labelerDir = "../../examples/labeler"

func TestMain(m *testing.M) {
	bench.FloorMain() // this binary, run again by BenchmarkAdmission, as the floor server
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
	serving    *vigiltest.ServingCert
	readyAfter time.Duration
	certDir    string
	logs       *vigiltest.Buffer
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
	return startLabelerWith(t, nil, extraEnv...)
}

// startLabelerWith starts the labeler's admission role with extraArgs ({addr}
// in them replaced by the address it serves on) and extraEnv, and waits until
// it is ready. Its checks are served by its validating webhook
// (LABELER_CHECKS=webhook), for the tests and benchmarks that send it reviews
// themselves; extraEnv may say LABELER_CHECKS=require for the labeler as it
// ships.
func startLabelerWith(t testing.TB, extraArgs []string, extraEnv ...string) *labeler {
	t.Helper()
	return startModule(t, labelerDir, extraArgs, append([]string{"LABELER_CHECKS=webhook"}, extraEnv...)...)
}

// startModule is startLabelerWith for the module in dir.
func startModule(t testing.TB, moduleDir string, extraArgs []string, extraEnv ...string) *labeler {
	t.Helper()
	return startModuleCRD(t, moduleDir, true, extraArgs, extraEnv...)
}

// startModuleCRD is startModule that installs the Store CRD first, or leaves
// it to the module (installCRD false).
func startModuleCRD(t testing.TB, moduleDir string, installCRD bool, extraArgs []string, extraEnv ...string) *labeler {
	t.Helper()
	dir := t.TempDir()
	bin := vigiltest.BuildModule(t, moduleDir)
	serving := vigiltest.NewServingCert(t, "127.0.0.1")
	_ = os.WriteFile(filepath.Join(dir, "tls.crt"), serving.CertPEM, 0o600)
	_ = os.WriteFile(filepath.Join(dir, "tls.key"), serving.KeyPEM, 0o600)
	_ = os.WriteFile(filepath.Join(dir, "ca.crt"), serving.CABundle, 0o600)
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
	if !installCRD {
		// No Store CRD: the module installs it.
	} else if err := env.InstallCRDs(crd); err != nil {
		t.Fatal(err)
	}
	metrics := vigiltest.FreeAddr(t)
	args := []string{"admission", "--addr", addr, "--metrics-addr", metrics, "--cert-dir", dir, "--kubeconfig", env.KubeConfigFile(t), "--shutdown-delay", "0s"}
	for _, a := range extraArgs {
		args = append(args, strings.ReplaceAll(a, "{addr}", addr))
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "VIGIL_NAMESPACE="+ns, "VIGIL_HANDOFF_DIR="+dir), extraEnv...)
	logs := &vigiltest.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	l := &labeler{cmd: cmd, base: "https://" + addr, metrics: "http://" + metrics, serving: serving, logs: logs, certDir: dir}
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
	// The role writes its admission-ready line, which says where the time
	// went, just after /readyz turns 200: wait for it.
	for deadline := time.Now().Add(2 * time.Second); !strings.Contains(logs.String(), "event=admission-ready") && time.Now().Before(deadline); {
		time.Sleep(2 * time.Millisecond)
	}
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

package labeler

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/vigiltest"
)

// bodySizes is a webhook that records the size of each review it is sent.
type bodySizes struct {
	mu      sync.Mutex
	sizes   map[string]int // "<resource> <name>" → largest body
	largest []byte
}

func (b *bodySizes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	review := struct {
		Request struct {
			UID      string `json:"uid"`
			Name     string `json:"name"`
			Resource struct {
				Resource string `json:"resource"`
			} `json:"resource"`
		} `json:"request"`
	}{}
	_ = json.Unmarshal(data, &review)
	key := review.Request.Resource.Resource + " " + review.Request.Name
	b.mu.Lock()
	b.sizes[key] = max(b.sizes[key], len(data))
	if len(data) > len(b.largest) {
		b.largest = data
	}
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":%q,"allowed":true}}`, review.Request.UID)
}

func (b *bodySizes) of(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sizes[key]
}

// TestLargestReviewFitsTheBodyLimit measures, against the real API server,
// the largest AdmissionReview it sends — an UPDATE, which carries the object
// and its old version — and fails if the module's server would refuse
// it. Three objects are taken to the limits the API server and etcd enforce:
//   - a custom resource, stored as JSON, as large as etcd takes (its request
//     limit, 1.5 MiB): its review carries about twice that;
//   - a ConfigMap written as protobuf with 1 MiB of data (the most a
//     ConfigMap may hold) made of control characters: stored as 1 MiB, but
//     JSON writes each such byte as a six-byte escape (\u0001), so its
//     review carries about 2 × 6 MiB;
//   - a Pod written as protobuf whose one argument is as many control
//     characters as etcd takes: 2 × 6 × 1.5 MiB, the largest of all.
func TestLargestReviewFitsTheBodyLimit(t *testing.T) {
	ns := env.Namespace(t)
	sizes := &bodySizes{sizes: map[string]int{}}
	serving := vigiltest.NewServingCert(t, "127.0.0.1")
	cert := serving.Certificate
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: sizes, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	// The custom resource's CRD keeps whatever it is given.
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "blobs.measure.vigil.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "measure.vigil.dev", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "blobs", Singular: "blob", Kind: "Blob", ListKind: "BlobList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
	if err := env.InstallCRDs(crd); err != nil {
		t.Fatal(err)
	}

	ctx := t.Context()
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "measure-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "measure.vigil.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + ln.Addr().String() + "/"), CABundle: serving.CABundle},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"UPDATE"}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"", "measure.vigil.dev"}, APIVersions: []string{"v1"}, Resources: []string{"configmaps", "blobs", "pods"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
	if _, err := env.Clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, hook, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), hook.Name, metav1.DeleteOptions{})
	})

	// The largest Blob etcd takes: halve the step until it is 1 KiB.
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	blobs := dyn.Resource(schema.GroupVersionResource{Group: "measure.vigil.dev", Version: "v1", Resource: "blobs"}).Namespace(ns)
	fits := func(n int) bool {
		name := fmt.Sprintf("try-%d", n)
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "measure.vigil.dev/v1", "kind": "Blob",
			"metadata": map[string]any{"name": name},
			"data":     strings.Repeat("x", n),
		}}
		_, err := blobs.Create(ctx, u, metav1.CreateOptions{})
		if err == nil {
			_ = blobs.Delete(ctx, name, metav1.DeleteOptions{})
			return true
		}
		if !strings.Contains(err.Error(), "too large") {
			t.Fatalf("create a Blob of %d bytes: %v", n, err)
		}
		return false
	}
	n, step := 1<<20, 256<<10
	for step >= 1<<10 {
		if fits(n + step) {
			n += step
		} else {
			step /= 2
		}
	}
	if !fits(n) {
		t.Fatalf("a Blob of %d bytes no longer fits", n)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "measure.vigil.dev/v1", "kind": "Blob",
		"metadata": map[string]any{"name": "largest"},
		"data":     strings.Repeat("x", n),
	}}
	created, err := blobs.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.SetLabels(map[string]string{"touched": "yes"})
	if _, err := blobs.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update the largest Blob: %v", err)
	}

	// The ConfigMap, written as protobuf, as client-go writes built-in kinds
	// when asked to.
	proto := rest.CopyConfig(env.Config)
	proto.ContentType = "application/vnd.kubernetes.protobuf"
	pcs, err := kubernetes.NewForConfig(proto)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "escapes", Namespace: ns},
		Data:       map[string]string{"d": strings.Repeat("\x01", 1<<20-1)},
	}
	cmCreated, err := pcs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the ConfigMap of escapes: %v", err)
	}
	cmCreated.Labels = map[string]string{"touched": "yes"}
	if _, err := pcs.CoreV1().ConfigMaps(ns).Update(ctx, cmCreated, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update the ConfigMap of escapes: %v", err)
	}

	// A Pod, written as protobuf, whose container's argument is as many
	// control characters as etcd takes: nothing bounds a single argument.
	if _, err := env.Clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := func(name string, n int) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1", Args: []string{strings.Repeat("\x01", n)}}}},
		}
	}
	podFits := func(n int) bool {
		name := fmt.Sprintf("try-%d", n)
		_, err := pcs.CoreV1().Pods(ns).Create(ctx, pod(name, n), metav1.CreateOptions{})
		if err == nil {
			_ = pcs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			return true
		}
		if !strings.Contains(err.Error(), "too large") {
			t.Fatalf("create a Pod with an argument of %d bytes: %v", n, err)
		}
		return false
	}
	pn, step := 1<<20, 256<<10
	for step >= 1<<10 {
		if podFits(pn + step) {
			pn += step
		} else {
			step /= 2
		}
	}
	largestPod, err := pcs.CoreV1().Pods(ns).Create(ctx, pod("escapes", pn), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the Pod of escapes: %v", err)
	}
	largestPod.Labels = map[string]string{"touched": "yes"}
	if _, err := pcs.CoreV1().Pods(ns).Update(ctx, largestPod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update the Pod of escapes: %v", err)
	}

	blob, escapes, podEscapes := sizes.of("blobs largest"), sizes.of("configmaps escapes"), sizes.of("pods escapes")
	t.Logf("Pod with an argument of %d control characters: its UPDATE review: %d bytes (%.2f MiB)", pn, podEscapes, float64(podEscapes)/(1<<20))
	t.Logf("largest Blob etcd stores: %d bytes of data; its UPDATE review: %d bytes (%.2f MiB)", n, blob, float64(blob)/(1<<20))
	t.Logf("ConfigMap of 1 MiB of control characters: its UPDATE review: %d bytes (%.2f MiB)", escapes, float64(escapes)/(1<<20))
	if blob == 0 || escapes == 0 || podEscapes == 0 {
		t.Fatalf("the webhook saw no review: blob %d, configmap %d, pod %d", blob, escapes, podEscapes)
	}
	largest := max(blob, escapes, podEscapes)
	t.Logf("the largest review: %d bytes (%.2f MiB)", largest, float64(largest)/(1<<20))

	// The module's server reads it and answers it (the labeler has no
	// binding for a Pod UPDATE: its failure policy answers) rather than
	// refusing it as over its body limit.
	l := startLabeler(t)
	sizes.mu.Lock()
	body := sizes.largest
	sizes.mu.Unlock()
	resp := l.review(t, validatePath, body)
	if resp.Result == nil || !strings.Contains(resp.Result.Message, "no binding") {
		t.Fatalf("the labeler's answer to the largest review: %+v", resp)
	}
	t.Logf("the labeler answered the largest review: allowed %v, %q", resp.Allowed, resp.Result.Message)
}

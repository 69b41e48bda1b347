package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/clusters/podrun"
	"github.com/vigilkit/vigil/internal/operating/status"
	"github.com/vigilkit/vigil/internal/serving/certs"
	"github.com/vigilkit/vigil/internal/testsupport/meshtest"
)

// The namespaces of the deadlock test's module (testdata/meshed) and of its
// injector.
const meshedNamespace, meshNamespace = "meshed-system", "istio-system"

// injectorLabel is the label the test's injector sets on each Pod it is
// called for.
const injectorLabel = "sidecar.istio.io/status"

// UDS Core's worst operational bug, on a real node: a second webhook
// server, as istiod's sidecar injector is one, fails closed on the Pods of
// namespaces labelled istio-injection=enabled — the module's among them —
// while the module's Pod policy fails closed where the injector's own pods
// are created. With the policy answering Ignore in istio-system
// (FailurePolicyIn), vigil status reports no deadlock and, both stopped at
// once and started again as after a cluster's restart, the injector comes
// back, then the module. The version without it is reported deadlocked by
// vigil status and, stopped and started the same way, neither comes back:
// each ReplicaSet's creates are refused by the other's webhook.
func TestDeadlockWithAnInjectorOnANode(t *testing.T) {
	n := startNode(t)
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(n.Config)
	if err != nil {
		t.Fatal(err)
	}
	ignoreRef, ignoreBin := moduleImage(t, n, filepath.Join("testdata", "meshed", "ignore"), "1.0.0")
	failRef, failBin := moduleImage(t, n, filepath.Join("testdata", "meshed", "fail"), "2.0.0")
	startInjector(t, n, cs)

	const module, apps = "meshed", "meshed-apps"
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: meshedNamespace, Labels: map[string]string{"istio-injection": "enabled"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: apps}},
	} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rel := installChart(t, n, ignoreBin, ignoreRef, module, meshedNamespace)
	bothServe(t, cs, 3*time.Minute)
	injected(t, cs)
	if d := deadlocksReported(t, cs, 0); len(d) != 0 {
		t.Fatalf("vigil status reports deadlocks %v with Ignore in %s: want none", d, meshNamespace)
	}

	// Both down at once, then started: the injector's pods are created
	// through the module's webhook, which answers Ignore there while it is
	// down; the module's through the injector's, once it is back.
	killed := stopAndStart(t, cs)
	bothServe(t, cs, 3*time.Minute)
	recovered := time.Since(killed)
	injected(t, cs)
	t.Logf("with Ignore in %s: both serve again %.1fs after they were started", meshNamespace, recovered.Seconds())

	// The version whose policy fails closed in istio-system too.
	rel.upgrade(failBin, failRef)
	waitUntil(t, 3*time.Minute, "version 2.0.0 to roll out and register", func() error {
		d, err := cs.AppsV1().Deployments(meshedNamespace).Get(ctx, module, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < ptr.Deref(d.Spec.Replicas, 1) || d.Status.ReadyReplicas < ptr.Deref(d.Spec.Replicas, 1) {
			return fmt.Errorf("rollout: %d updated, %d ready; pods: %s", d.Status.UpdatedReplicas, d.Status.ReadyReplicas, podStates(ctx, cs, meshedNamespace))
		}
		if v := registeredVersion(t, cs, module); v != "2.0.0" {
			return fmt.Errorf("registered by version %q", v)
		}
		return nil
	})
	reported := deadlocksReported(t, cs, 1)
	if len(reported) != 1 || !strings.Contains(reported[0], "sidecar-injector") || !strings.Contains(reported[0], meshNamespace) {
		t.Fatalf("vigil status reports deadlocks %q: want the one with the injector, broken by Ignore in %s", reported, meshNamespace)
	}

	started := stopAndStart(t, cs)
	const hold = 30 * time.Second
	for time.Since(started) < hold {
		for _, d := range []struct{ ns, name string }{{meshNamespace, "istiod"}, {meshedNamespace, module}} {
			dep, err := cs.AppsV1().Deployments(d.ns).Get(ctx, d.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if dep.Status.ReadyReplicas > 0 {
				t.Fatalf("Deployment %s/%s has %d ready replicas %.0fs after both were started: the deadlock vigil status reported did not hold; pods: %s",
					d.ns, d.name, dep.Status.ReadyReplicas, time.Since(started).Seconds(), podStates(ctx, cs, d.ns))
			}
		}
		time.Sleep(time.Second)
	}
	injectorRefused := failedCreate(t, cs, meshNamespace, "policies.validate.meshed.vigil.dev", started)
	moduleRefused := failedCreate(t, cs, meshedNamespace, "sidecar-injector.istio.io", started)
	t.Logf("the injector's ReplicaSet: %s", injectorRefused)
	t.Logf("the module's ReplicaSet: %s", moduleRefused)
	if injectorRefused == "" || moduleRefused == "" {
		t.Errorf("want each side's pod creates refused by the other's webhook: injector's %q, module's %q", injectorRefused, moduleRefused)
	}
	// vigil status says why the module's pods do not come: the injector's
	// webhook refuses them.
	var r *status.Report
	waitUntil(t, 30*time.Second, "vigil status to say the injector refuses the module's pods", func() error {
		r, err = status.Collect(ctx, status.Clients{Kube: cs}, status.Options{Module: module})
		if err != nil {
			return err
		}
		if len(r.Modules) != 1 {
			return fmt.Errorf("%d modules named %s", len(r.Modules), module)
		}
		for _, role := range r.Modules[0].Roles {
			if role.Name == "admission" && strings.Contains(role.CreateRefused, "sidecar-injector.istio.io") {
				return nil
			}
		}
		return fmt.Errorf("roles %+v: want the admission role's creates refused by the injector", r.Modules[0].Roles)
	})
	var b strings.Builder
	if err := status.Write(&b, r, time.Now()); err != nil {
		t.Fatal(err)
	}
	t.Logf("vigil status in the deadlock:\n%s", b.String())
	if !strings.Contains(b.String(), "admission pods cannot be created") || !strings.Contains(b.String(), "DEADLOCKS") {
		t.Errorf("vigil status in the deadlock does not say the pods cannot be created and why:\n%s", b.String())
	}
	fmt.Printf("deadlock: reported_with_ignore=0 recovered_with_ignore_s=%.1f reported_without=%d held_without_s=%.0f\n",
		recovered.Seconds(), len(reported), hold.Seconds())
}

// startInjector builds and runs the test's sidecar injector in istio-system
// (testdata/injector): a Deployment of one replica, its Service, and a
// fail-closed mutating webhook on the Pod creates of namespaces labelled
// istio-injection=enabled, as istiod's.
func startInjector(t *testing.T, n *Node, cs kubernetes.Interface) {
	t.Helper()
	ctx := t.Context()
	work := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(work, "injector"), "./testdata/injector")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the injector: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(filepath.Join(work, "injector"))
	if err != nil {
		t.Fatal(err)
	}
	const ref = "vigil.local/e2e/injector:1"
	if err := importBinary(ctx, n.layout, bin, "injector", "65532:65532", ref, work); err != nil {
		t.Fatal(err)
	}
	ca, err := certs.NewCA("injector", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Issue([]string{"istiod." + meshNamespace + ".svc"}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "istiod", "istio": "pilot"}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: meshNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(meshNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "istiod-tls"},
		Data: map[string][]byte{"tls.crt": serving.CertPEM, "tls.key": serving.KeyPEM}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8443), Scheme: corev1.URISchemeHTTPS}}, PeriodSeconds: 1}
	if _, err := cs.AppsV1().Deployments(meshNamespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "istiod"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{Name: "discovery", Image: ref, ImagePullPolicy: corev1.PullNever, ReadinessProbe: probe,
						Ports:        []corev1.ContainerPort{{Name: "https-webhook", ContainerPort: 8443}},
						VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/tls", ReadOnly: true}}}},
					Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "istiod-tls"}}}},
				}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services(meshNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "istiod"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "https-webhook", Port: 443, TargetPort: intstr.FromInt32(8443)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 2*time.Minute, "the injector to be Ready", func() error {
		return ready(ctx, cs, meshNamespace, "istiod")
	})
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx,
		meshtest.Injector("istio-sidecar-injector", meshNamespace, ca.CertPEM), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ready is nil once every replica of the Deployment is ready.
func ready(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if want := ptr.Deref(d.Spec.Replicas, 1); d.Status.ReadyReplicas < want {
		return fmt.Errorf("%s/%s: %d of %d replicas ready; pods: %s", ns, name, d.Status.ReadyReplicas, want, podStates(ctx, cs, ns))
	}
	return nil
}

// bothServe waits until the injector and the module's admission are ready
// and the module enforces: a privileged Pod is denied.
func bothServe(t *testing.T, cs kubernetes.Interface, within time.Duration) {
	t.Helper()
	ctx := t.Context()
	waitUntil(t, within, "the injector and the module to serve", func() error {
		if err := ready(ctx, cs, meshNamespace, "istiod"); err != nil {
			return err
		}
		if err := ready(ctx, cs, meshedNamespace, "meshed"); err != nil {
			return err
		}
		_, err := cs.CoreV1().Pods("meshed-apps").Create(ctx, testPod("privileged", true), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), "privileged pods are not allowed") {
			return fmt.Errorf("a privileged Pod: %v; want it denied by the module", err)
		}
		return nil
	})
}

// injected fails the test unless every running pod of the module carries
// the injector's label: the injector was called for each.
func injected(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	pods, err := cs.CoreV1().Pods(meshedNamespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Labels[injectorLabel] != "injected" {
			t.Errorf("pod %s was created without the injector (labels %v): want its webhook called on the module's pods", p.Name, p.Labels)
		}
	}
	if len(pods.Items) == 0 {
		t.Error("the module has no pods")
	}
}

// deadlocksReported reads vigil status of the module until it reports want
// deadlocks with the cluster's other webhooks, and returns them.
func deadlocksReported(t *testing.T, cs kubernetes.Interface, want int) []string {
	t.Helper()
	var got []string
	waitUntil(t, 30*time.Second, fmt.Sprintf("vigil status to report %d deadlocks", want), func() error {
		r, err := status.Collect(t.Context(), status.Clients{Kube: cs}, status.Options{Module: "meshed"})
		if err != nil {
			return err
		}
		if len(r.Modules) != 1 {
			return fmt.Errorf("%d modules named meshed (missing %v)", len(r.Modules), r.Missing)
		}
		m := r.Modules[0]
		if len(m.Interceptors) == 0 {
			return fmt.Errorf("no interceptors of the module's pods reported: want the injector")
		}
		got = m.Deadlocks
		if len(got) != want {
			return fmt.Errorf("deadlocks %q", got)
		}
		return nil
	})
	return got
}

// stopAndStart scales every Deployment of the injector and of the module
// to 0, waits until their pods are gone — both down at once, as when a
// cluster is stopped — and scales each back; it returns when the scale-up
// was written.
func stopAndStart(t *testing.T, cs kubernetes.Interface) time.Time {
	t.Helper()
	ctx := t.Context()
	replicas := map[string]int32{}
	for _, ns := range []string{meshNamespace, meshedNamespace} {
		deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range deps.Items {
			replicas[ns+"/"+d.Name] = ptr.Deref(d.Spec.Replicas, 1)
			scale(t, cs, ns, d.Name, 0)
		}
	}
	waitUntil(t, 2*time.Minute, "every pod of the injector and the module to go", func() error {
		for _, ns := range []string{meshNamespace, meshedNamespace} {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(pods.Items) > 0 {
				return fmt.Errorf("pods left: %s", podrun.States(pods.Items))
			}
		}
		return nil
	})
	for key, n := range replicas {
		ns, name, _ := strings.Cut(key, "/")
		scale(t, cs, ns, name, n)
	}
	return time.Now()
}

func scale(t *testing.T, cs kubernetes.Interface, ns, name string, replicas int32) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	if _, err := cs.AppsV1().Deployments(ns).Patch(t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// failedCreate is the message of the newest FailedCreate Event of a
// ReplicaSet in ns that names webhook and was last seen after since, or "".
func failedCreate(t *testing.T, cs kubernetes.Interface, ns, webhook string, since time.Time) string {
	t.Helper()
	evs, err := cs.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
	if err != nil {
		t.Fatal(err)
	}
	var msg string
	var at time.Time
	for _, e := range evs.Items {
		when := e.LastTimestamp.Time
		if when.IsZero() {
			when = e.EventTime.Time
		}
		if e.InvolvedObject.Kind == "ReplicaSet" && strings.Contains(e.Message, webhook) && when.After(since.Add(-time.Second)) && !when.Before(at) {
			msg, at = e.Message, when
		}
	}
	return msg
}

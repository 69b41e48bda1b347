package udscore

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/testsupport/udscore"
	"github.com/vigilkit/vigil/vigiltest"
	"github.com/vigilkit/vigil/vigiltest/node"
)

// UDS Core's policy engine from its own image on a real node, installed
// before UDS Core's CRDs exist: its phases wait for the CRDs, then the
// ClusterConfig, as init containers the kubelet runs; its watcher, started
// before the ClusterConfig, waits without a restart; once admission is
// enforcing, the API server calls it on the pods' network and a privileged
// Pod is denied with UDS Core's message while a plain one is mutated; the
// ClusterConfig's status becomes Ready. No container of the module restarts.
func TestUDSCoreOnANode(t *testing.T) {
	if os.Getenv("VIGIL_E2E") == "" {
		t.Skip("a real node: set VIGIL_E2E=1 (make e2e) to run it")
	}
	nodeEnv, err := vigiltest.Start(vigiltest.Options{Node: node.Start, Build: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nodeEnv.Stop(); err != nil {
			t.Errorf("stop the node: %v", err)
		}
	})
	ctx := t.Context()
	m := nodeEnv.InstallModule(t, vigiltest.ModuleOptions{Dir: udsCoreDir, OnNode: true})
	if err := nodeEnv.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: udscore.OperatorConfigSecret},
		StringData: map[string]string{"KEYCLOAK_CLIENT_MODE": "AUTO"}}); err != nil {
		t.Fatal(err)
	}

	// Phase 0 waits for UDS Core's CRDs, which come late.
	p0 := m.StartPhase(0)
	p0.WaitOutput(t, "gate waiting", 2*time.Minute)
	udscore.InstallCRDs(t, nodeEnv, udsCoreDir)
	p0.WaitOK(t, time.Minute)

	// Phase 1 waits for the ClusterConfig; the watcher starts meanwhile.
	p1 := m.StartPhase(1)
	p1.WaitOutput(t, "gate waiting", time.Minute)
	m.StartWatcher(2 * time.Minute)
	if err := nodeEnv.Client.Create(ctx, udscore.ClusterConfigObject(false)); err != nil {
		t.Fatal(err)
	}
	p1.WaitOK(t, time.Minute)
	m.StartAdmission(2 * time.Minute)

	for _, ns := range []string{udscore.PolicyTests, udscore.ExemptionsNamespace} {
		if err := nodeEnv.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	// Dry runs: judged and mutated as any create, never pulled or run.
	privileged := testPod("node-privileged", func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	})
	vigiltest.Eventually(t, 30*time.Second, func() error {
		err := nodeEnv.Client.Create(ctx, privileged.DeepCopy(), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "Privilege escalation is disallowed. Authorized: [allowPrivilegeEscalation = false | privileged = false]") {
			return fmt.Errorf("a privileged Pod: %v; want UDS Core's denial", err)
		}
		return nil
	})
	plain := testPod("node-plain", nil)
	if err := nodeEnv.Client.Create(ctx, plain, client.DryRunAll); err != nil {
		t.Fatalf("a plain Pod: %v; want it admitted", err)
	}
	if sc := plain.Spec.Containers[0].SecurityContext; sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("the plain Pod as admitted: %+v; want capabilities.drop [ALL]", sc)
	}
	vigiltest.Eventually(t, 30*time.Second, func() error {
		cc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "uds.dev/v1alpha1", "kind": "ClusterConfig"}}
		if err := nodeEnv.Client.Get(ctx, client.ObjectKey{Name: udscore.ClusterConfig}, cc); err != nil {
			return err
		}
		if phase, _, _ := unstructured.NestedString(cc.Object, "status", "phase"); phase != "Ready" {
			return fmt.Errorf("ClusterConfig status.phase %q", phase)
		}
		return nil
	})

	pods := &corev1.PodList{}
	if err := nodeEnv.Client.List(ctx, pods, client.InNamespace(m.Namespace)); err != nil {
		t.Fatal(err)
	}
	restarts := 0
	for _, p := range pods.Items {
		for _, s := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			restarts += int(s.RestartCount)
			if s.RestartCount > 0 {
				t.Errorf("pod %s container %s restarted %d times", p.Name, s.Name, s.RestartCount)
			}
		}
	}
	t.Logf("uds-core on a node: %d pods, %d restarts", len(pods.Items), restarts)
}

package udscore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/internal/testsupport/udscore"
	"github.com/vigilkit/vigil/provenance"
	"github.com/vigilkit/vigil/vigiltest"
)

// stampSettled waits until a namespace created now is believed under the
// installed stamp of namespace creators (provenance.Settle).
func stampSettled(t *testing.T) {
	t.Helper()
	policy, err := udscore.StampMeta(t.Context(), env)
	if err != nil {
		t.Fatal(err)
	}
	testkit.AwaitSettled(t, policy.CreationTimestamp)
}

// uds-policy-exemptions is the install's and an Exemption in it is not
// claimable by whoever creates the namespace it names, tried as the
// report's tenant against the module as shipped:
//
//   - she cannot create uds-policy-exemptions (the guard refuses it by name,
//     whether or not it exists: where it does not, she could otherwise take
//     it and write there an Exemption for every Pod of hers), nor, with
//     RBAC that lets her, relabel or delete it;
//   - an Exemption an admin wrote in it for namespace monitoring-…, before
//     she created it, or for ledger-…, after she had, admits none of her
//     privileged Pods, while the same Exemption admits an admin's Pod in the
//     namespace an admin created.
func TestExemptionsNamespaceIsTheInstalls(t *testing.T) {
	ctx := t.Context()
	m := startUDSCore(t)
	id := testkit.RandomID()
	tess := testkit.NewSelfService(t, env, "tess-"+id, group, "exemptions")
	createNamespace := func(name string) {
		t.Helper()
		ns := tess.CreateNamespace(name)
		if got := ns.Annotations[provenance.CreatedBy]; got != tess.User {
			t.Fatalf("namespace %s records creator %q, want %s", name, got, tess.User)
		}
	}

	want := "only group:system:masters may create or delete namespace " + udscore.ExemptionsNamespace
	// The API server applies the install's guard within a moment of its
	// creation (another test's uninstall may have just removed it): dry
	// runs until then.
	vigiltest.Eventually(t, 10*time.Second, func() error {
		err := tess.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: udscore.ExemptionsNamespace}}, client.DryRunAll)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("the tenant creates %s: %v, want it refused (%s)", udscore.ExemptionsNamespace, err, want)
		}
		return nil
	})
	tess.Grant(udscore.ExemptionsNamespace)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/name":null,"team":"tess"}}}`))
	if err := tess.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: udscore.ExemptionsNamespace}}, patch); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant relabels %s: %v, want it refused", udscore.ExemptionsNamespace, err)
	}
	if err := tess.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: udscore.ExemptionsNamespace}}, client.DryRunAll); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant deletes %s: %v, want it refused", udscore.ExemptionsNamespace, err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: udscore.ExemptionsNamespace}, &corev1.Namespace{}); err != nil {
		t.Fatalf("the install's %s: %v", udscore.ExemptionsNamespace, err)
	}

	// Every Pod policy, for every Pod of the namespaces it names.
	podPolicies := udscore.PodPolicies(t, udsCoreDir)
	every := func(name string, namespaces ...string) []error {
		var errs []error
		for _, ns := range namespaces {
			errs = append(errs, apply(t, exemption(udscore.ExemptionsNamespace, name+"-"+ns, podPolicies, matcher{Namespace: ns, Name: ".*", Kind: "pod"})))
		}
		return errs
	}
	stampSettled(t)
	ledger, monitoring, admins := "ledger-"+id, "monitoring-"+id, "monitoring-admin-"+id
	createNamespace(ledger)
	for _, err := range every("everything", monitoring, admins, ledger) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: admins}}); err != nil {
		t.Fatal(err)
	}
	// The admin's namespace claims it, once the module's cache has it.
	vigiltest.Eventually(t, 10*time.Second, func() error { return apply(t, privilegedPod(admins, "agent")) })

	createNamespace(monitoring)
	for _, ns := range []string{monitoring, ledger} {
		err := tess.Client.Create(ctx, privilegedPod(ns, "agent"))
		denied(t, "the tenant's privileged Pod in "+ns+", which she created and an Exemption names", err, "Privilege escalation is disallowed")
	}
	logged := m.Output("admission")
	if want := "an Exemption names a namespace that no trusted identity created"; !strings.Contains(logged, want) || !strings.Contains(logged, "namespace="+monitoring) {
		t.Errorf("admission's log does not report the Exemption for %s (%q):\n%s", monitoring, want, logged)
	}
}

package vigil_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/provenance"
)

// A trusted namespace or the provenance declared wrong is a definition
// mistake named at its call.
func TestTrustMistakes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		declare func(m *vigil.Module)
		want    string
	}{
		{"not a namespace name", func(m *vigil.Module) { vigil.TrustedNamespace(m, "Not_A_Name") }, "not a namespace name"},
		{"the module's own", func(m *vigil.Module) { vigil.TrustedNamespace(m, "mod-system") }, "the module's own namespace"},
		{"kubernetes'", func(m *vigil.Module) { vigil.TrustedNamespace(m, "kube-public") }, "one of Kubernetes' own namespaces"},
		{"twice", func(m *vigil.Module) { vigil.TrustedNamespace(m, "trusted"); vigil.TrustedNamespace(m, "trusted") }, "already declared at trust_test.go:"},
		{"empty group", func(m *vigil.Module) { vigil.TrustedNamespace(m, "trusted", "group:") }, `allowed "group:"`},
		{"a comma", func(m *vigil.Module) { vigil.NamespaceProvenance(m, "group:a,b") }, "without commas"},
		{"provenance twice", func(m *vigil.Module) { vigil.NamespaceProvenance(m); vigil.NamespaceProvenance(m) }, "NamespaceProvenance: already declared"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vigil.NewModule("mod", vigil.Options{Namespace: "mod-system"})
			tc.declare(m)
			err := m.Verify()
			if err == nil {
				t.Fatal("Verify() = nil, want the mistake")
			}
			for _, w := range []string{"trust_test.go:", tc.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Verify() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
	m := vigil.NewModule("mod", vigil.Options{Namespace: "mod-system"})
	ex := vigil.TrustedNamespace(m, "mod-exemptions")
	p := vigil.NamespaceProvenance(m, "system:serviceaccount:ci:deployer", "group:platform")
	if err := m.Verify(); err != nil {
		t.Fatalf("well-formed declarations: %v", err)
	}
	if ex.Name() != "mod-exemptions" || strings.Join(ex.Allowed(), ",") != "group:system:masters" || len(p.Allowed()) != 2 {
		t.Errorf("TrustedNamespace %s allows %v, provenance allows %v; want group:system:masters by default and the two named", ex.Name(), ex.Allowed(), p.Allowed())
	}
}

// Origin.Trusted: created by one of the identities (a username, or a group
// of the creator's), or strictly before the time, in whole seconds; an
// unstamped namespace only by its age.
func TestOriginTrusted(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ns := func(created time.Time, annotations map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring", CreationTimestamp: metav1.NewTime(created), Annotations: annotations}}
	}
	tess := map[string]string{provenance.CreatedBy: "tess", provenance.CreatedByGroups: "tenants,system:authenticated"}
	admin := map[string]string{provenance.CreatedBy: "admin", provenance.CreatedByGroups: "system:masters,system:authenticated"}
	for _, tc := range []struct {
		name string
		ns   *corev1.Namespace
		at   time.Time
		want bool
	}{
		{"hers, after", ns(at, tess), at.Add(-time.Hour), false},
		{"hers, in the same second", ns(at, tess), at.Add(500 * time.Millisecond), false},
		{"hers, before", ns(at, tess), at.Add(time.Second), true},
		{"an admin's, after", ns(at, admin), at.Add(-time.Hour), true},
		{"unstamped, after", ns(at, nil), at, false},
		{"unstamped, before", ns(at, nil), at.Add(2 * time.Second), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := provenance.Of(tc.ns).Trusted(tc.at, "group:system:masters", "ci")
			if got != tc.want || why == "" {
				t.Errorf("Trusted = %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}

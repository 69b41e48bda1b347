// Command uds-core is UDS Core's policy engine on vigil: the admission
// policies of UDS Core's Pepr module (src/pepr/policies in
// defenseunicorns/uds-core), with its CRDs, names, Exemptions and denial
// messages unchanged, so that a cluster's ClusterConfig and Exemptions, and
// the tests and users that match on its messages, work as they do with UDS
// Core. It is a port of the policy engine, not of UDS Core's operator.
//
// It starts as the discussion vigil was founded on asked, without a crash
// loop:
//
//   - phase 0: UDS Core's ClusterConfig CRD (clusterconfig.uds.dev) is
//     Established — UDS Core's CRD chart installs it; the module ships no CRD
//     of UDS Core's;
//   - phase 1: the ClusterConfig uds-cluster-config exists; its spec, merged
//     over the operator-config Secret (uds-operator-config in pepr-system,
//     mounted: "a secret guaranteed to exist at pod startup"), is handed to
//     admission through the Store. When none appears within
//     UDS_CLUSTERCONFIG_TIMEOUT (default 2m), the Secret's settings and UDS
//     Core's defaults stand in for it;
//   - phase 2: the Exemption CRD (exemptions.uds.dev) is Established and the
//     Exemptions that exist are listed.
//
// Its webhooks are registered only then. The watcher sets the
// ClusterConfig's status.phase as UDS Core's operator does (Pending, then
// Ready with observedGeneration), and waits for the kind instead of
// crash-looping while it is not served.
//
// Policies: every Pod, Service and Istio policy UDS Core ships, each a
// mutation (which marks an exempt object, and for some policies sets a safe
// default) and a validation, declared in UDS Core's order in one capability,
// uds-core-policies, whose denials are joined with "; " as Pepr joins them
// (vigil.JoinDenials). An Exemption exempts the objects its matchers name
// from the policies each entry lists; only Exemptions in
// uds-policy-exemptions count, unless the ClusterConfig sets
// spec.policy.allowAllNsExemptions. Unlike UDS Core, the install creates
// uds-policy-exemptions and guards it, and an Exemption applies only to a
// namespace a trusted identity created or vouched for (trust.go).
// Exemptions themselves are validated at admission as UDS Core validates
// them.
//
// Environment: UDS_CLUSTERCONFIG_TIMEOUT (default 2m), ZARF_REGISTRY_ADDRESS
// (the registry Istio proxy images may come from besides their own; default
// 127.0.0.1:31999, as in UDS Core), UDS_NAMESPACE_CREATORS (identities
// trusted to create the namespaces Exemptions name, besides
// group:system:masters).
package main

import (
	"fmt"
	"time"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
)

const (
	group   = "uds.dev"
	version = "v1alpha1"

	// Namespace is where UDS Core's Pepr module runs, and the module here.
	Namespace = "pepr-system"
	// ExemptionsNamespace is the one namespace whose Exemptions count unless
	// the ClusterConfig allows all.
	ExemptionsNamespace = "uds-policy-exemptions"
	// ClusterConfigName is the one ClusterConfig UDS Core's CRD allows.
	ClusterConfigName = "uds-cluster-config"
	// OperatorConfigSecret holds UDS Core's operator settings; it is
	// mounted at OperatorConfigDir.
	OperatorConfigSecret = "uds-operator-config"
	OperatorConfigDir    = "/etc/uds-operator-config"

	// CapabilityName is UDS Core's policies capability.
	CapabilityName = "uds-core-policies"
	// IstioSystem is where the policies fail open while the module is
	// down (UDS Core's ADR 0004).
	IstioSystem = "istio-system"
)

func main() { vigil.Run(newModule()) }

// settings are what the module reads from its environment, declared as
// settings so that every container runs with the values it was rendered
// with.
type settings struct {
	timeout time.Duration
	// zarfRegistry is the registry an Istio proxy image may come from
	// besides its flavor's.
	zarfRegistry string
	// operatorConfigDir holds the operator-config Secret's keys; the mount's
	// path when empty.
	operatorConfigDir string
}

func declareSettings(m *vigil.Module) settings {
	return settings{
		timeout:      vigil.SettingAs(m, "UDS_CLUSTERCONFIG_TIMEOUT", "2m", positiveDuration),
		zarfRegistry: vigil.Setting(m, "ZARF_REGISTRY_ADDRESS", "127.0.0.1:31999"),
	}
}

// positiveDuration parses a duration such as 30s or 2m, and refuses 0 and
// less.
func positiveDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil && d <= 0 {
		err = fmt.Errorf("%s is not positive", v)
	}
	return d, err
}

func newModule() *vigil.Module {
	m := vigil.NewModule("uds-core", vigil.Options{Namespace: Namespace})
	s := declareSettings(m)
	// The operator config, in every container that merges a ClusterConfig
	// over it. UDS Core's chart creates it before the module.
	opcfg := vigil.MountSecret(m, OperatorConfigSecret, OperatorConfigDir).
		For(vigil.Phase(1), vigil.Admission, vigil.Watcher)
	if s.operatorConfigDir == "" {
		s.operatorConfigDir = opcfg.Path()
	}
	// What UDS Core's operator does here: the ClusterConfig's status and
	// the Exemptions' validation.
	operator := m.Capability("uds-core-operator")
	cfg := declareConfig(m, s, operator)
	ex := declareExemptions(m, cfg)
	ex.trust = declareTrust(m)
	p := &policies{
		// Fail everywhere but istio-system, as UDS Core's ADR 0004 keeps
		// them: the mesh's own pods, which the module's may wait for, are
		// never held up by the module being down.
		capability: m.Capability(CapabilityName, vigil.JoinDenials(), vigil.FailurePolicyIn(admission.Ignore, IstioSystem)),
		exemptions: ex,
		istio:      istioImages{zarfRegistry: s.zarfRegistry},
	}
	// UDS Core's order: its policies/index.ts imports istio, networking,
	// security and storage, in that order, and Pepr runs (and joins the
	// denials of) the bindings in the order they were declared.
	p.declareIstio()
	p.declareNetworking()
	p.declareSecurity()
	p.declareStorage()
	p.declareMutations()
	declareExemptionValidation(operator, cfg)
	declarePrometheus(m)
	return m
}

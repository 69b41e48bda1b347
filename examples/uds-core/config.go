package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/store"
)

// Names of the gates and of what they hand over in the Store.
const (
	gateClusterConfig = "uds-cluster-config"
	keyUDSConfig      = "udsConfig"
	keyExemptions     = "initialExemptions"
)

// UDSConfig is UDS Core's operator configuration as the policy engine
// knows it: the operator-config Secret's settings with the ClusterConfig's
// merged over them, as UDS Core's config.ts merges them.
type UDSConfig struct {
	Domain               string `json:"domain"`
	AdminDomain          string `json:"adminDomain"`
	AllowAllNSExemptions bool   `json:"allowAllNSExemptions"`
	AuthserviceRedisURI  string `json:"authserviceRedisUri"`
	KeycloakClientMode   string `json:"keycloakClientMode"`
	AllowPublicClients   bool   `json:"allowPublicClients"`
	// FromClusterConfig is false when no ClusterConfig appeared in time and
	// the Secret's settings and UDS Core's defaults stand in for it.
	FromClusterConfig bool `json:"fromClusterConfig"`
}

// config is where the policies read the configuration from: the
// ClusterConfig itself, as fresh as the request, or what the gate handed
// over while there is none.
type config struct {
	m              *vigil.Module
	s              settings
	clusterConfigs *vigil.Lister[*unstructured.Unstructured]
}

// declareConfig declares the first two phases, the ClusterConfig's cache
// and the watcher's status reconcile.
func declareConfig(m *vigil.Module, s settings, operator *vigil.Capability) *config {
	c := &config{m: m, s: s, clusterConfigs: vigil.NewLister(m, clusterConfigKind())}

	// Phase 0: ClusterConfigs are served (UDS Core's CRD chart installs them).
	vigil.WaitFor(m, &apiextensionsv1.CustomResourceDefinition{}).
		WithName("clusterconfig.uds.dev").
		ToBe(gate.Established())

	// Phase 1: the ClusterConfig, merged over the operator config; the
	// operator config and UDS Core's defaults alone once the timeout is up.
	vigil.WaitFor(m, clusterConfigKind()).
		WithName(ClusterConfigName).InPhase(1).Named(gateClusterConfig).
		Timeout(s.timeout).
		OnTimeout(func(ctx context.Context) (*unstructured.Unstructured, error) {
			logr.FromContextOrDiscard(ctx).Info("no ClusterConfig "+ClusterConfigName+" in time: the operator config's settings and UDS Core's defaults stand in for it",
				"waited", s.timeout.String())
			return nil, nil
		}).
		ToBeCreated(func(ctx context.Context, cc *unstructured.Unstructured, st vigil.Store) error {
			cfg, err := c.merge(cc)
			if err != nil {
				return err
			}
			logr.FromContextOrDiscard(ctx).Info("configuration", "domain", cfg.Domain, "allowAllNSExemptions", cfg.AllowAllNSExemptions,
				"fromClusterConfig", cfg.FromClusterConfig)
			return store.SetJSONAndWait(ctx, st, keyUDSConfig, cfg)
		})

	// Phase 2: Exemptions are served; list those that exist.
	vigil.WaitFor(m, &apiextensionsv1.CustomResourceDefinition{}).
		WithName("exemptions.uds.dev").InPhase(2).
		ToBe(gate.Established()).
		Then(func(ctx context.Context, _ *apiextensionsv1.CustomResourceDefinition, st vigil.Store) error {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(vigil.Kind(group, version, "ExemptionList").GroupVersionKind())
			if err := vigil.ClientFrom(ctx).List(ctx, list); err != nil {
				return fmt.Errorf("list Exemptions: %w", err) // retried: discovery may lag the CRD
			}
			names := []string{}
			for _, e := range list.Items {
				names = append(names, e.GetNamespace()+"/"+e.GetName())
			}
			logr.FromContextOrDiscard(ctx).Info("exemptions loaded", "count", len(names), "exemptions", names)
			return store.SetJSONAndWait(ctx, st, keyExemptions, names)
		})

	declareStatus(m, c, operator)
	return c
}

// declareStatus declares the reconcile that sets the ClusterConfig's
// status as UDS Core's operator does: Pending while it takes an edit in,
// then Ready with the generation it took in.
func declareStatus(m *vigil.Module, c *config, operator *vigil.Capability) {
	m.RBAC("the clusterconfig-status reconcile sets the ClusterConfig's status.phase", rbacv1.PolicyRule{
		APIGroups: []string{group}, Resources: []string{"clusterconfig/status"}, Verbs: []string{"patch"}, ResourceNames: []string{ClusterConfigName},
	}).For(vigil.Watcher)
	vigil.Watch(operator, clusterConfigKind()).WithName(ClusterConfigName).Named("clusterconfig-status").
		Reconcile(func(ctx context.Context, cc *unstructured.Unstructured) error {
			observed, _, _ := unstructured.NestedInt64(cc.Object, "status", "observedGeneration")
			phase, _, _ := unstructured.NestedString(cc.Object, "status", "phase")
			if phase == "Ready" && observed == cc.GetGeneration() {
				return nil
			}
			cl := vigil.ClientFrom(ctx)
			status := func(phase string, generation int64) error {
				st := map[string]any{"phase": phase}
				if generation > 0 {
					st["observedGeneration"] = generation
				}
				patch := &unstructured.Unstructured{Object: map[string]any{"status": st}}
				patch.SetGroupVersionKind(cc.GroupVersionKind())
				patch.SetName(cc.GetName())
				return cl.Status().Patch(ctx, patch, client.Merge)
			}
			if err := status("Pending", 0); err != nil {
				if apierrors.IsNotFound(err) {
					return nil
				}
				return err
			}
			if _, err := c.merge(cc); err != nil {
				return vigil.Terminal(err)
			}
			return status("Ready", cc.GetGeneration())
		})
}

// allowAllNsExemptions is the ClusterConfig's spec.policy.allowAllNsExemptions
// as it is now; without a ClusterConfig, what the gate handed over.
func (c *config) allowAllNsExemptions(ctx context.Context) bool {
	cc, err := c.clusterConfigs.Get(ctx, "", ClusterConfigName)
	if err == nil {
		allow, _, _ := unstructured.NestedBool(cc.Object, "spec", "policy", "allowAllNsExemptions")
		return allow
	}
	if st := vigil.StoreFrom(ctx); st != nil {
		if cfg, found, err := store.GetJSON[UDSConfig](st, keyUDSConfig); err == nil && found {
			return cfg.AllowAllNSExemptions
		}
	}
	return false
}

// merge is the configuration: the operator config's settings, then the
// ClusterConfig's (nil when none appeared), over UDS Core's defaults.
func (c *config) merge(cc *unstructured.Unstructured) (UDSConfig, error) {
	cfg := UDSConfig{Domain: "uds.dev", KeycloakClientMode: "AUTO"}
	secret, err := c.operatorConfig()
	if err != nil {
		return cfg, err
	}
	if v := secret["AUTHSERVICE_REDIS_URI"]; v != "###ZARF_VAR_AUTHSERVICE_REDIS_URI###" {
		cfg.AuthserviceRedisURI = v
	}
	cfg.AllowPublicClients = secret["ALLOW_PUBLIC_CLIENTS"] == "true"
	switch mode := secret["KEYCLOAK_CLIENT_MODE"]; mode {
	case "AUTO", "CLIENT_SECRET", "SIGNED_JWT":
		cfg.KeycloakClientMode = mode
	}
	if cc == nil {
		cfg.AdminDomain = "admin." + cfg.Domain
		return cfg, nil
	}
	cfg.FromClusterConfig = true
	if d, _, _ := unstructured.NestedString(cc.Object, "spec", "expose", "domain"); d != "" && d != "###ZARF_VAR_DOMAIN###" {
		cfg.Domain = d
	}
	cfg.AdminDomain = "admin." + cfg.Domain
	if d, _, _ := unstructured.NestedString(cc.Object, "spec", "expose", "adminDomain"); d != "" && d != "###ZARF_VAR_ADMIN_DOMAIN###" {
		cfg.AdminDomain = d
	}
	cfg.AllowAllNSExemptions, _, _ = unstructured.NestedBool(cc.Object, "spec", "policy", "allowAllNsExemptions")
	return cfg, nil
}

// operatorConfig reads the mounted operator-config Secret's keys.
func (c *config) operatorConfig() (map[string]string, error) {
	entries, err := os.ReadDir(c.s.operatorConfigDir)
	if err != nil {
		return nil, fmt.Errorf("read the operator config %s at %s: %w (the Secret %s/%s must exist: UDS Core's chart creates it)",
			OperatorConfigSecret, c.s.operatorConfigDir, err, Namespace, OperatorConfigSecret)
	}
	out := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), "..") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(c.s.operatorConfigDir, e.Name()))
		if err != nil {
			return nil, err
		}
		out[e.Name()] = string(data)
	}
	return out, nil
}

// clusterConfigKind is UDS Core's ClusterConfig, whose CRD names its
// resource clusterconfig, not the clusterconfigs Kubernetes would guess.
func clusterConfigKind() *unstructured.Unstructured {
	return vigil.KindWithPlural(group, version, "ClusterConfig", "clusterconfig")
}

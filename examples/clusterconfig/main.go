// Command clusterconfig is the module of vigil's founding discussion: UDS
// Core's policy engine, which must not admit anything before it knows the
// cluster's configuration and its exemptions.
//
//   - phase 0: the ClusterConfig CRD (clusterconfigs.uds.dev) is Established;
//   - phase 1: the ClusterConfig "initial" exists with a cluster name; its
//     spec, merged over the defaults, is stored with SetAndWait. When none
//     appears within CLUSTERCONFIG_TIMEOUT the gate finishes with the
//     defaults alone.
//
// The defaults are the key defaults.yaml of the Secret uds-core-defaults,
// "a secret that is guaranteed to exist at pod startup": the platform
// creates it before the module, which mounts it (required, read-only) at
// /etc/uds in phase 1, admission and the watcher — the three that merge a
// ClusterConfig over it. Its pods do not start without it, and `plan` lists
// it as a startup dependency. Create it from the sample with
//
//		kubectl create secret generic uds-core-defaults -n uds-system --from-file=defaults.yaml
//	  - phase 2: the Exemption CRD (exemptions.uds.dev) is Established and the
//	    Exemptions that exist are loaded.
//
// Then it admits: every Pod gets the label uds.dev/cluster with the cluster's
// name, and privileged Pods are denied unless an Exemption matches them. As in
// UDS Core, only Exemptions in the exemptions namespace (uds-policy-exemptions)
// count, unless the ClusterConfig sets policy.allowAllNsExemptions: true —
// otherwise anyone who may write Exemptions in her own namespace could exempt
// her own Pods. That setting is read from the ClusterConfig itself, as fresh
// as the request. The install creates the exemptions namespace and guards it
// (vigil.TrustedNamespace), and an Exemption applies to a namespace only if a
// trusted identity created it or an admin vouched for it, however old it is
// (vigil.NamespaceProvenance, vigil.Claimable; see provenance.go). The exemptions namespace's
// Exemptions are read from a live cache scoped to it, so a new one applies to
// the next request without a restart; while all namespaces count, the others
// are read page by page (see exemptions.go, which also says how a
// matcher.name matches). A Reconcile keeps the ClusterConfig's status up to
// date and shares its spec with the admission replicas through the Store.
//
// Its CRDs are crds.yaml; clusterconfig.yaml and exemption.yaml are samples.
// Run it locally with `vigil dev ./examples/clusterconfig`, or see it all
// with `make demo`.
//
// Environment: CLUSTERCONFIG_NAMESPACE (default uds-system),
// CLUSTERCONFIG_DEFAULTS (the defaults file, instead of the mounted Secret's), CLUSTERCONFIG_TIMEOUT
// (default 2m), CLUSTERCONFIG_EXEMPTIONS_NAMESPACE (default
// uds-policy-exemptions), CLUSTERCONFIG_NAMESPACE_CREATORS (identities
// trusted to create namespaces Exemptions name, besides group:system:masters).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/pattern"
	"github.com/vigilkit/vigil/store"
)

const (
	group   = "uds.dev"
	version = "v1alpha1"

	// ClusterLabel is the label every admitted Pod carries.
	ClusterLabel = "uds.dev/cluster"
	// PolicyPrivileged is the policy an Exemption names to allow privileged Pods.
	PolicyPrivileged = "DisallowPrivileged"

	// Store keys: what the gates found (module-wide scope) and the current
	// spec the Reconcile shares with admission (the policies capability's
	// scope, which is the one its handlers see).
	keyInitialConfig     = "initialClusterConfig"
	keyInitialExemptions = "initialExemptions"
	keyClusterConfig     = "clusterConfig"

	gateInitial = "clusterconfig-initial"

	// DefaultsSecret holds the default ClusterConfig spec as YAML under
	// DefaultsKey; it is mounted at DefaultsDir.
	DefaultsSecret = "uds-core-defaults"
	DefaultsKey    = "defaults.yaml"
	DefaultsDir    = "/etc/uds"
)

func main() { vigil.Run(newModule()) }

// settings are what the module reads from its environment, declared as
// settings so that every container runs with the values it was rendered
// with.
type settings struct {
	// defaultsPath is the defaults file; the mounted Secret's when empty.
	defaultsPath string
	timeout      time.Duration
	// exemptionsNamespace is the one namespace whose Exemptions count,
	// unless the ClusterConfig allows all.
	exemptionsNamespace string
	// creators are identities trusted to create namespaces that Exemptions
	// name, comma-separated.
	creators string
}

func declareSettings(m *vigil.Module) settings {
	return settings{
		defaultsPath:        vigil.Setting(m, "CLUSTERCONFIG_DEFAULTS", ""),
		timeout:             vigil.SettingAs(m, "CLUSTERCONFIG_TIMEOUT", "2m", positiveDuration),
		exemptionsNamespace: vigil.Setting(m, "CLUSTERCONFIG_EXEMPTIONS_NAMESPACE", "uds-policy-exemptions"),
		creators:            vigil.Setting(m, "CLUSTERCONFIG_NAMESPACE_CREATORS", ""),
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
	// Installed elsewhere when rendered with VIGIL_NAMESPACE.
	m := vigil.NewModule("uds-core", vigil.Options{Namespace: "uds-system"})
	s := declareSettings(m)

	// The defaults, in every container that merges a ClusterConfig over them.
	defaults := vigil.MountSecret(m, DefaultsSecret, DefaultsDir).Keys(DefaultsKey).
		For(vigil.Phase(1), vigil.Admission, vigil.Watcher)
	if s.defaultsPath == "" {
		s.defaultsPath = defaults.File(DefaultsKey)
	}
	declareGates(m, s)
	// Only the exemptions namespace's Exemptions are cached: only admins
	// write there, so the cache is bounded by what they write. When the
	// ClusterConfig allows all namespaces, the others are read page by page
	// from the API server (matchAllNamespaces), never cached.
	exemptions := vigil.NewLister(m, vigil.Kind(group, version, "Exemption")).InNamespace(s.exemptionsNamespace)
	m.RBAC("when the ClusterConfig allows Exemptions from all namespaces, admission reads them page by page", rbacv1.PolicyRule{
		APIGroups: []string{group}, Resources: []string{"exemptions"}, Verbs: []string{"list"},
	}).For(vigil.Admission)
	// The ClusterConfig itself, for the settings a decision depends on:
	// read as fresh as the request, so an edit or a deletion applies to the
	// next one, with or without the watcher.
	clusterConfigs := vigil.NewLister(m, vigil.Kind(group, version, "ClusterConfig"))
	trusted := declareTrust(m, s)
	policies := m.Capability("policies")
	declareAdmission(m, s, policies, disallowPrivileged(s, trusted, exemptions, clusterConfigs))
	declareStatus(m, s, policies)
	return m
}

// declareGates declares the three startup phases: ClusterConfigs served,
// the initial ClusterConfig (or the defaults), the Exemptions that exist.
func declareGates(m *vigil.Module, s settings) {
	// Phase 0: ClusterConfigs are served.
	vigil.WaitFor(m, &apiextensionsv1.CustomResourceDefinition{}).
		WithName("clusterconfigs.uds.dev").
		ToBe(gate.Established())

	// Phase 1: the initial ClusterConfig names the cluster, or the defaults
	// stand in for it once the timeout is up.
	vigil.WaitFor(m, vigil.Kind(group, version, "ClusterConfig")).
		WithName("initial").InPhase(1).Named(gateInitial).
		ToBe(gate.CEL(`object.?spec.?attributes.?clusterName.orValue("") != ""`)).
		Timeout(s.timeout).
		OnTimeout(func(context.Context) (*unstructured.Unstructured, error) {
			spec, err := s.defaults(true)
			if err != nil {
				return nil, err
			}
			cc := vigil.Kind(group, version, "ClusterConfig")
			cc.SetName("initial")
			cc.Object["spec"] = spec
			return cc, nil
		}).
		Then(func(ctx context.Context, cc *unstructured.Unstructured, st vigil.Store) error {
			spec, err := s.effective(cc)
			if err != nil {
				return err
			}
			logr.FromContextOrDiscard(ctx).Info("cluster configuration", "clusterName", clusterName(spec))
			return store.SetJSONAndWait(ctx, st, keyInitialConfig, spec)
		})

	// Phase 2: Exemptions are served; load those that exist.
	vigil.WaitFor(m, &apiextensionsv1.CustomResourceDefinition{}).
		WithName("exemptions.uds.dev").InPhase(2).
		ToBe(gate.Established()).
		Then(func(ctx context.Context, _ *apiextensionsv1.CustomResourceDefinition, st vigil.Store) error {
			c := vigil.ClientFrom(ctx)
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(vigil.Kind(group, version, "ExemptionList").GroupVersionKind())
			if err := c.List(ctx, list, client.InNamespace(s.exemptionsNamespace)); err != nil {
				return fmt.Errorf("list exemptions: %w", err) // retried: discovery may lag the CRD
			}
			names := []string{}
			for _, e := range list.Items {
				names = append(names, e.GetNamespace()+"/"+e.GetName())
			}
			logr.FromContextOrDiscard(ctx).Info("exemptions loaded", "count", len(names), "exemptions", names)
			return store.SetJSONAndWait(ctx, st, keyInitialExemptions, names)
		})
}

// declareAdmission declares the policies' bindings: the cluster label on
// every Pod, no privileged containers without an Exemption, and Exemptions
// whose names compile.
func declareAdmission(m *vigil.Module, s settings, policies *vigil.Capability, judgePrivileged func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict) {
	initial := sync.OnceValues(func() (map[string]any, error) {
		cc, found, err := vigil.GateResult[*unstructured.Unstructured](m, gateInitial)
		if err != nil || !found {
			return nil, fmt.Errorf("the cluster configuration is unknown: gate %s handed nothing over (found %v): %v", gateInitial, found, err)
		}
		return s.effective(cc)
	})
	// config is the stored ClusterConfig spec: the Reconcile's copy follows
	// edits of the ClusterConfig; before its first run, what the gate found
	// stands.
	config := func(st vigil.Store) (map[string]any, error) {
		spec, found, err := store.GetJSON[map[string]any](st, keyClusterConfig)
		if err != nil || !found {
			return initial()
		}
		return spec, nil
	}
	// On UPDATE too, so that a label stripped with `kubectl label pod x
	// uds.dev/cluster-` comes back.
	vigil.When(policies, &corev1.Pod{}).IsCreatedOrUpdated().Named("label-cluster").
		Mutate(func(_ context.Context, r *vigil.Request[*corev1.Pod]) error {
			spec, err := config(r.Store)
			if err != nil {
				return err
			}
			r.SetLabel(ClusterLabel, clusterName(spec))
			return nil
		})
	vigil.When(policies, &corev1.Pod{}).IsCreated().Named("disallow-privileged").Validate(judgePrivileged)
	// An Exemption whose names do not compile is refused.
	vigil.When(policies, vigil.Kind(group, version, "Exemption")).IsCreatedOrUpdated().Named("exemption-names").
		Validate(validateExemption)
	vigil.When(policies, &corev1.Pod{}).Subresource("ephemeralcontainers").IsUpdated().Named("disallow-privileged-debug").
		Validate(judgePrivileged)
}

// disallowPrivileged denies a privileged container unless an Exemption it
// may claim names its pod. A Pod's containers cannot change once it exists,
// but ephemeral containers are added later through pods/ephemeralcontainers
// (kubectl debug): the same policy judges both paths.
func disallowPrivileged(s settings, trusted *trust, exemptions *vigil.Lister[*unstructured.Unstructured], clusterConfigs *vigil.Lister[*unstructured.Unstructured]) func(context.Context, *vigil.Request[*corev1.Pod]) vigil.Verdict {
	return func(ctx context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
		container := privileged(r.Object)
		if container == "" {
			return admission.Allow()
		}
		name := r.Object.Name
		if name == "" {
			name = r.Object.GenerateName
		}
		// Only the exemptions namespace counts unless the ClusterConfig, as
		// it is now, allows all; one that cannot be read allows nothing more.
		where := fmt.Sprintf(" in namespace %q", s.exemptionsNamespace)
		var unclaimed string
		// One budget for all this request's matches (see names).
		m := names.Matcher(ctx)
		// judge drops the Exemptions that name a namespace its creator may
		// not claim, and those of namespace skip, then matches what is left.
		judge := func(from, skip string) func([]*unstructured.Unstructured) (string, []string, error) {
			return func(list []*unstructured.Unstructured) (string, []string, error) {
				list = slices.DeleteFunc(slices.Clone(list), func(u *unstructured.Unstructured) bool { return u.GetNamespace() == skip })
				list, why := trusted.claimable(ctx, list, r.Namespace)
				unclaimed += why
				return matchExemption(m, list, from, r.Namespace, name, PolicyPrivileged)
			}
		}
		// The exemptions namespace's Exemptions, cached, come first: an
		// admin's Exemption is found without reading, or waiting for, any
		// tenant's.
		list, err := exemptions.List(ctx)
		if err != nil {
			return admission.Deny("privileged container " + container + ": the Exemptions cannot be read, so none can apply: " + err.Error())
		}
		ex, invalid, err := judge(s.exemptionsNamespace, "")(list)
		if ex == "" && err == nil && s.allowAll(ctx, clusterConfigs) {
			where = ""
			var more []string
			ex, more, err = matchAllNamespaces(ctx, r.UserInfo.Username+" in namespace "+r.Namespace, judge("", s.exemptionsNamespace))
			invalid = append(invalid, more...)
		}
		if err != nil {
			return admission.Deny("privileged container " + container + ": the Exemptions were not all read and matched, so none applies: " + err.Error())
		}
		for _, bad := range invalid {
			logr.FromContextOrDiscard(ctx).Info("an Exemption entry for this pod's namespace is skipped: its matcher.name is not a valid expression, or is over its budget; correct it",
				"entry", bad, "namespace", r.Namespace, "pod", name)
		}
		if ex != "" {
			return admission.Allow().WithWarnings(fmt.Sprintf("privileged container %q admitted under Exemption %s", container, ex))
		}
		return admission.Deny(fmt.Sprintf(
			"Pod %s/%s: container %q is privileged, which policy %s denies. Drop securityContext.privileged, or add an Exemption (uds.dev/v1alpha1)%s whose matcher names namespace %q and this pod's name, with policy %s%s",
			r.Namespace, name, container, PolicyPrivileged, where, r.Namespace, PolicyPrivileged, unclaimed))
	}
}

// declareStatus declares the reconcile that takes an edited ClusterConfig
// in: its status, and the Store's copy admission reads.
func declareStatus(m *vigil.Module, s settings, policies *vigil.Capability) {
	// The ClusterConfig's status says the module has taken it in, and admission
	// learns of edits through the Store. Patching the status is the one call
	// beyond what vigil derives RBAC for.
	m.RBAC("the clusterconfig-status reconcile patches the ClusterConfig's status", rbacv1.PolicyRule{
		APIGroups: []string{group}, Resources: []string{"clusterconfigs/status"}, Verbs: []string{"patch"}, ResourceNames: []string{"initial"},
	})
	vigil.Watch(policies, vigil.Kind(group, version, "ClusterConfig")).WithName("initial").Named("clusterconfig-status").
		Reconcile(func(ctx context.Context, cc *unstructured.Unstructured) error {
			spec, err := s.effective(cc)
			if err != nil {
				return vigil.Terminal(err)
			}
			if st := vigil.StoreFrom(ctx); st != nil {
				if err := store.SetJSON(ctx, st, keyClusterConfig, spec); err != nil {
					return err
				}
			}
			return updateStatus(ctx, cc, clusterName(spec))
		})
}

// updateStatus records on the ClusterConfig that this generation was taken in.
func updateStatus(ctx context.Context, cc *unstructured.Unstructured, name string) error {
	gen, _, _ := unstructured.NestedInt64(cc.Object, "status", "observedGeneration")
	phase, _, _ := unstructured.NestedString(cc.Object, "status", "phase")
	seen, _, _ := unstructured.NestedString(cc.Object, "status", "clusterName")
	if gen == cc.GetGeneration() && phase == "Ready" && seen == name {
		return nil
	}
	c := vigil.ClientFrom(ctx)
	orig := cc.DeepCopy()
	status := map[string]any{"phase": "Ready", "observedGeneration": cc.GetGeneration(), "clusterName": name}
	if err := unstructured.SetNestedMap(cc.Object, status, "status"); err != nil {
		return err
	}
	if err := c.Status().Patch(ctx, cc, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("patch the status of clusterconfig %q: %w", cc.GetName(), err)
	}
	logr.FromContextOrDiscard(ctx).Info("clusterconfig status updated", "name", cc.GetName(), "generation", cc.GetGeneration(), "clusterName", name)
	return nil
}

// defaults reads the default ClusterConfig spec from the mounted file; a
// missing file is an error only when required.
func (s settings) defaults(required bool) (map[string]any, error) {
	raw, err := os.ReadFile(s.defaultsPath)
	if os.IsNotExist(err) && !required {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the ClusterConfig defaults (mount the defaults Secret, or set CLUSTERCONFIG_DEFAULTS): %w", err)
	}
	spec := map[string]any{}
	if err := yaml.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("decode the ClusterConfig defaults %s: expected a YAML ClusterConfig spec: %w", s.defaultsPath, err)
	}
	return spec, nil
}

// effective is the ClusterConfig's spec merged over the defaults.
func (s settings) effective(cc *unstructured.Unstructured) (map[string]any, error) {
	spec, err := s.defaults(false)
	if err != nil {
		return nil, err
	}
	if cc != nil {
		if own, ok := cc.Object["spec"].(map[string]any); ok {
			merge(spec, own)
		}
	}
	return spec, nil
}

// merge sets over's values into into, merging nested objects.
func merge(into, over map[string]any) {
	for k, v := range over {
		if sub, ok := v.(map[string]any); ok {
			if have, ok := into[k].(map[string]any); ok {
				merge(have, sub)
				continue
			}
		}
		into[k] = v
	}
}

func clusterName(spec map[string]any) string {
	name, _, _ := unstructured.NestedString(spec, "attributes", "clusterName")
	return name
}

// privileged names the first privileged container of the pod, or "".
func privileged(pod *corev1.Pod) string {
	var all []corev1.Container
	all = append(all, pod.Spec.InitContainers...)
	all = append(all, pod.Spec.Containers...)
	for _, c := range all {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			return c.Name
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if sc := c.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
			return c.Name
		}
	}
	return ""
}

// allowAll reports whether the ClusterConfig, as the API server has it now,
// honours Exemptions from every namespace. It reads the ClusterConfig itself
// through a lister, not the copy the watcher shares: an admission decision
// that read it and allowed is made again once the lister has caught up with
// the API server, so a revocation applies to the next request even while the
// watcher is down. Without a ClusterConfig the defaults decide; one that
// cannot be read allows nothing more.
func (s settings) allowAll(ctx context.Context, configs *vigil.Lister[*unstructured.Unstructured]) bool {
	cc, err := configs.Get(ctx, "", "initial")
	if apierrors.IsNotFound(err) {
		cc, err = nil, nil
	}
	if err != nil {
		logr.FromContextOrDiscard(ctx).Info("the ClusterConfig cannot be read: only the exemptions namespace counts", "err", err.Error())
		return false
	}
	spec, err := s.effective(cc)
	return err == nil && allowAllNsExemptions(spec)
}

// allowAllNsExemptions reports whether the ClusterConfig spec honours
// Exemptions from every namespace (policy.allowAllNsExemptions: true).
func allowAllNsExemptions(spec map[string]any) bool {
	all, _, _ := unstructured.NestedBool(spec, "policy", "allowAllNsExemptions")
	return all
}

// matchExemption returns the Exemption (namespace/name) one of whose entries
// exempts the pod from the policy, or "", and the entries for the pod's
// namespace and policy whose matcher.name is refused or gave up ("ns/name:
// spec.exemptions[i].matcher.name ..."), which exempt nothing. Only
// Exemptions in namespace from count; all do when from is "". A name matches
// the whole pod name (see matchName), within the request's matcher m: the
// error says it stopped before all were matched.
func matchExemption(m *pattern.Matcher, exemptions []*unstructured.Unstructured, from, namespace, pod, policy string) (match string, invalid []string, err error) {
	for _, ex := range exemptions {
		if from != "" && ex.GetNamespace() != from {
			continue
		}
		entries, _, _ := unstructured.NestedSlice(ex.Object, "spec", "exemptions")
		for i, e := range entries {
			entry, ok := e.(map[string]any)
			if !ok {
				continue
			}
			ns, _, _ := unstructured.NestedString(entry, "matcher", "namespace")
			expr, _, _ := unstructured.NestedString(entry, "matcher", "name")
			policies, _, _ := unstructured.NestedStringSlice(entry, "policies")
			if ns != namespace || !slices.Contains(policies, policy) {
				continue
			}
			ok, err := matchName(m, expr, pod)
			if errors.Is(err, pattern.ErrStopped) {
				return "", invalid, fmt.Errorf("at %s/%s: spec.exemptions[%d]: %w", ex.GetNamespace(), ex.GetName(), i, err)
			}
			if err != nil {
				invalid = append(invalid, fmt.Sprintf("%s/%s: spec.exemptions[%d].matcher.name %s: %v", ex.GetNamespace(), ex.GetName(), i, clip(expr), err))
				continue
			}
			if ok {
				return ex.GetNamespace() + "/" + ex.GetName(), invalid, nil
			}
		}
	}
	return "", invalid, nil
}

package registration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/admit"
)

// withPolicy returns the webhooks of one configuration as written with the
// failure policy given — enforcing, each capability's own where it has
// one; the canary is always Ignore.
func (h *hooks) withPolicy(k kind, policy admissionregistrationv1.FailurePolicyType, enforcing bool) webhooks {
	ws := k.of(h).clone()
	setPolicies(ws, func(name string) *admissionregistrationv1.FailurePolicyType {
		if p, ok := h.policies[name]; ok && enforcing {
			return ptr.To(p)
		}
		return ptr.To(policy)
	})
	return ws
}

// proving returns the webhooks of one configuration as written while a new
// client configuration is proven: each webhook the configuration has keeps
// its client configuration (URL or Service, and caBundle) and gets its
// enforced failure policy, with the rules, selectors and match conditions
// of the spec — everything that does not question reachability is
// enforced at once; a webhook the configuration lacks, never enforced, is
// Ignore until the proof, unless the whole configuration was emptied
// (re-created, or its webhooks removed) after the module enforced it: then
// every webhook is restored at its enforced policy at once, as a repair of
// a failure policy is — the empty configuration admitted everything
// already, and the canary that follows proves the client configuration.
// The canary alone carries the new client configuration, at Ignore.
//
// Webhooks the watcher failed open (failedOpen) stay Ignore until the proof:
// no replica was known to serve them.
func (h *hooks) proving(k kind, enforce admissionregistrationv1.FailurePolicyType, actual []hookView, failedOpen []string) webhooks {
	old := map[string]hookView{}
	for _, a := range actual {
		if !spec.IsCanary(a.name) {
			old[a.name] = a
		}
	}
	ws := h.withPolicy(k, enforce, true)
	for i := range ws.Len() {
		w := ws.at(i)
		if spec.IsCanary(w.name) {
			continue
		}
		a, ok := old[w.name]
		switch {
		case ok && slices.Contains(failedOpen, w.name) && a.failurePolicy == admissionregistrationv1.Ignore:
			*w.clientConfig, *w.failurePolicy = *a.clientConfig.DeepCopy(), ptr.To(admissionregistrationv1.Ignore)
		case ok:
			*w.clientConfig = *a.clientConfig.DeepCopy()
		case len(old) > 0:
			*w.failurePolicy = ptr.To(admissionregistrationv1.Ignore)
		}
	}
	return ws
}

// views are the webhooks of one configuration as Sync compares them.
func (h *hooks) views(k kind, policy admissionregistrationv1.FailurePolicyType, enforcing bool) []hookView {
	return h.withPolicy(k, policy, enforcing).views()
}

type hooks struct {
	mutating   mutatingHooks
	validating validatingHooks
	// policies are the enforced failure policies of the webhooks whose
	// capability overrides the module's, and of those a capability's
	// namespace policies give.
	policies map[string]admissionregistrationv1.FailurePolicyType
	// nsPolicies are the failure policies of the webhooks of a capability's
	// namespace policies, static or registered.
	nsPolicies map[string]admissionregistrationv1.FailurePolicyType
	hash       string
}

// build turns the bindings registered when ready into webhooks, one per
// capability and action, plus the canary.
func (r *Registrar) build() (*hooks, error) { return r.hooksFor(false) }

// hookGroup is the bindings of one capability and action: one webhook.
type hookGroup struct {
	capability string
	action     spec.Action
	namespaces []string
	optOut     string
	optIn      string
	// nsPolicies are the capability's failure policies by namespace: each
	// policy's namespaces get a webhook of their own.
	nsPolicies []spec.NamespacePolicy
	rules      map[schema.GroupVersionResource][]admissionregistrationv1.OperationType
	// statusMetadata is whether a binding's rules include its kind's status
	// writes that change labels or annotations (spec.Binding.StatusMetadata),
	// and allStatus the status resources a binding asked for whole
	// (Subresource("status")).
	statusMetadata bool
	allStatus      []string
}

// condition is the match condition of a webhook whose rules include status
// writes for their metadata only: every request but those status writes
// that leave labels and annotations as they were.
func (g *hookGroup) condition() []admissionregistrationv1.MatchCondition {
	if !g.statusMetadata {
		return nil
	}
	expr := spec.NotStatus
	if len(g.allStatus) > 0 {
		quoted := make([]string, len(g.allStatus))
		for i, r := range g.allStatus {
			quoted[i] = strconv.Quote(r)
		}
		expr += ` || request.resource.resource in [` + strings.Join(quoted, ", ") + `]`
	}
	return []admissionregistrationv1.MatchCondition{{Name: "status-changes-metadata", Expression: expr + " || " + spec.MetadataChanged}}
}

// groups are the bindings, fail-closed (static) or registered when ready,
// by capability and action, and their keys, sorted.
func (r *Registrar) groups(static bool) (map[string]*hookGroup, []string, error) {
	groups := map[string]*hookGroup{}
	var order []string
	for _, b := range r.opts.Bindings {
		if b.FailClosed != static {
			continue
		}
		kind := b.ResourceKind()
		m, err := r.opts.Mapper.RESTMapping(kind.GroupKind(), kind.Version)
		if err != nil && b.IfServed && meta.IsNoMatchError(err) {
			continue // registered once its kind is served
		}
		if err != nil {
			return nil, nil, fmt.Errorf("register binding %s: resource of %s: %w", b.ID(), kind, err)
		}
		key := b.Capability + "/" + b.Action.String()
		g, ok := groups[key]
		if !ok {
			g = &hookGroup{capability: b.Capability, action: b.Action, namespaces: b.Namespaces, optOut: b.OptOut, optIn: b.OptIn, nsPolicies: b.NamespacePolicies,
				rules: map[schema.GroupVersionResource][]admissionregistrationv1.OperationType{}}
			groups[key] = g
			order = append(order, key)
		}
		res := m.Resource
		if b.Subresource != "" {
			res.Resource += "/" + b.Subresource
		}
		for _, op := range b.Operations {
			g.rule(res, admissionregistrationv1.OperationType(op))
		}
		if b.Subresource == spec.StatusSubresource && !slices.Contains(g.allStatus, m.Resource.Resource) {
			g.allStatus = append(g.allStatus, m.Resource.Resource)
		}
		if b.StatusMetadata() {
			status := m.Resource
			status.Resource += "/" + spec.StatusSubresource
			g.rule(status, admissionregistrationv1.Update)
			g.statusMetadata = true
		}
	}
	sort.Strings(order)
	return groups, order, nil
}

// rule adds op on res to the group's rules.
func (g *hookGroup) rule(res schema.GroupVersionResource, op admissionregistrationv1.OperationType) {
	if ops := g.rules[res]; !slices.Contains(ops, op) {
		g.rules[res] = append(ops, op)
	}
}

func (r *Registrar) hooksFor(static bool) (*hooks, error) {
	groups, order, err := r.groups(static)
	if err != nil {
		return nil, err
	}
	h := &hooks{}
	caBundle := r.opts.CABundle()
	for _, key := range order {
		g := groups[key]
		// Each capability's webhook calls its own path, so that a request its
		// webhook and another capability's both match runs each binding once.
		path := admit.CapabilityPath(g.action, r.opts.Module, g.capability)
		cc := r.opts.ClientConfig(path)
		cc.CABundle = caBundle
		name := spec.WebhookName(r.opts.Module, g.capability, g.action)
		if p, ok := r.opts.Policies[g.capability]; ok && !static {
			if h.policies == nil {
				h.policies = map[string]admissionregistrationv1.FailurePolicyType{}
			}
			h.policies[name] = admissionregistrationv1.Ignore
			if p != admission.Ignore {
				h.policies[name] = admissionregistrationv1.Fail
			}
		}
		rules := rulesOf(g.rules)
		excluded := r.exclusion().For(g.namespaces, g.optOut).WithOptIn(g.optIn)
		for _, in := range byPolicy(g.nsPolicies) {
			excluded.Namespaces = append(slices.Clone(excluded.Namespaces), in.namespaces...)
		}
		h.add(g.action, name, cc, rules, excluded, r.opts.TimeoutSeconds, g.condition()...)
		for _, in := range byPolicy(g.nsPolicies) {
			only := in.namespaces
			if len(g.namespaces) > 0 {
				only = slices.DeleteFunc(slices.Clone(only), func(ns string) bool { return !slices.Contains(g.namespaces, ns) })
			}
			if len(only) == 0 {
				continue
			}
			nsName := spec.NamespaceWebhookName(r.opts.Module, g.capability, g.action, in.policy)
			if h.nsPolicies == nil {
				h.nsPolicies = map[string]admissionregistrationv1.FailurePolicyType{}
			}
			h.nsPolicies[nsName] = admissionregistrationv1.FailurePolicyType(in.policy)
			if !static {
				if h.policies == nil {
					h.policies = map[string]admissionregistrationv1.FailurePolicyType{}
				}
				h.policies[nsName] = admissionregistrationv1.FailurePolicyType(in.policy)
			}
			// A cluster-scoped object other than a Namespace is in no
			// namespace: the capability's own webhook judges it.
			namespaced := admissionregistrationv1.MatchCondition{Name: "in-namespaces", Expression: `request.namespace != "" || request.kind.kind == "Namespace"`}
			h.add(g.action, nsName, cc, rules, r.exclusion().For(only, g.optOut).WithOptIn(g.optIn), r.opts.TimeoutSeconds, append(g.condition(), namespaced)...)
		}
	}
	if static {
		return h, nil
	}
	h.mutating = append(h.mutating, r.canaryHook(caBundle))
	sum := sha256.New()
	_ = json.NewEncoder(sum).Encode(struct {
		M []admissionregistrationv1.MutatingWebhook
		V []admissionregistrationv1.ValidatingWebhook
		P map[string]admissionregistrationv1.FailurePolicyType `json:",omitempty"`
	}{h.mutating, h.validating, h.policies})
	h.hash = hex.EncodeToString(sum.Sum(nil))[:16]
	return h, nil
}

// add appends the webhook of an action, its selectors and match conditions
// those of excluded, plus more.
func (h *hooks) add(action spec.Action, name string, cc admissionregistrationv1.WebhookClientConfig, rules []admissionregistrationv1.RuleWithOperations,
	excluded spec.ExclusionPolicy, timeout int32, more ...admissionregistrationv1.MatchCondition) {
	selector, objects, conds := excluded.NamespaceSelector(), excluded.ObjectSelector(), excluded.MatchConditions()
	conds = append(conds, more...)
	if action == spec.Mutate {
		h.mutating = append(h.mutating, admissionregistrationv1.MutatingWebhook{
			Name: name, ClientConfig: cc, Rules: rules, NamespaceSelector: selector, ObjectSelector: objects, MatchConditions: conds,
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds: ptr.To(timeout), MatchPolicy: ptr.To(admissionregistrationv1.Exact),
			ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		})
		return
	}
	h.validating = append(h.validating, admissionregistrationv1.ValidatingWebhook{
		Name: name, ClientConfig: cc, Rules: rules, NamespaceSelector: selector, ObjectSelector: objects, MatchConditions: conds,
		SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		TimeoutSeconds: ptr.To(timeout), MatchPolicy: ptr.To(admissionregistrationv1.Exact),
	})
}

// policyNamespaces are a policy's namespaces, of a capability's
// NamespacePolicies.
type policyNamespaces struct {
	policy     admission.FailurePolicy
	namespaces []string
}

// byPolicy merges namespace policies by policy, Fail before Ignore, each
// list sorted: one webhook each.
func byPolicy(nps []spec.NamespacePolicy) []policyNamespaces {
	var out []policyNamespaces
	for _, p := range []admission.FailurePolicy{admission.Fail, admission.Ignore} {
		var ns []string
		for _, np := range nps {
			if np.Policy == p {
				ns = append(ns, np.Namespaces...)
			}
		}
		if len(ns) > 0 {
			slices.Sort(ns)
			out = append(out, policyNamespaces{policy: p, namespaces: slices.Compact(ns)})
		}
	}
	return out
}

func rulesOf(m map[schema.GroupVersionResource][]admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
	keys := make([]schema.GroupVersionResource, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	var rules []admissionregistrationv1.RuleWithOperations
	for _, k := range keys {
		ops := m[k]
		slices.Sort(ops)
		rules = append(rules, admissionregistrationv1.RuleWithOperations{
			Operations: ops,
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{k.Group}, APIVersions: []string{k.Version}, Resources: []string{k.Resource}},
		})
	}
	return rules
}

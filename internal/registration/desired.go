package registration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/admit"
	"github.com/vigilkit/vigil/internal/spec"
)

// withPolicy returns the webhooks of one configuration as written with the
// failure policy given — enforcing, each capability's own where it has
// one; the canary is always Ignore.
func (h *hooks) withPolicy(kind string, policy admissionregistrationv1.FailurePolicyType, enforcing bool) any {
	of := func(name string) *admissionregistrationv1.FailurePolicyType {
		if p, ok := h.policies[name]; ok && enforcing {
			return ptr.To(p)
		}
		return ptr.To(policy)
	}
	if kind == "mutating" {
		ws := slices.Clone(h.mutating)
		for i := range ws {
			if !IsCanary(ws[i].Name) {
				ws[i].FailurePolicy = of(ws[i].Name)
			}
		}
		return ws
	}
	ws := slices.Clone(h.validating)
	for i := range ws {
		if !IsCanary(ws[i].Name) {
			ws[i].FailurePolicy = of(ws[i].Name)
		}
	}
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
func (h *hooks) proving(kind string, enforce admissionregistrationv1.FailurePolicyType, actual []hookView, failedOpen []string) any {
	old := map[string]hookView{}
	for _, a := range actual {
		if !IsCanary(a.name) {
			old[a.name] = a
		}
	}
	keep := func(name string, cc *admissionregistrationv1.WebhookClientConfig, fp **admissionregistrationv1.FailurePolicyType) {
		if IsCanary(name) {
			return
		}
		a, ok := old[name]
		switch {
		case ok && slices.Contains(failedOpen, name) && a.failurePolicy == admissionregistrationv1.Ignore:
			*cc, *fp = *a.clientConfig.DeepCopy(), ptr.To(admissionregistrationv1.Ignore)
		case ok:
			*cc = *a.clientConfig.DeepCopy()
		case len(old) > 0:
			*fp = ptr.To(admissionregistrationv1.Ignore)
		}
	}
	if kind == "mutating" {
		ws := slices.Clone(h.withPolicy(kind, enforce, true).([]admissionregistrationv1.MutatingWebhook))
		for i := range ws {
			keep(ws[i].Name, &ws[i].ClientConfig, &ws[i].FailurePolicy)
		}
		return ws
	}
	ws := slices.Clone(h.withPolicy(kind, enforce, true).([]admissionregistrationv1.ValidatingWebhook))
	for i := range ws {
		keep(ws[i].Name, &ws[i].ClientConfig, &ws[i].FailurePolicy)
	}
	return ws
}

// views are the webhooks of one configuration as Sync compares them.
func (h *hooks) views(kind string, policy admissionregistrationv1.FailurePolicyType, enforcing bool) []hookView {
	if kind == "mutating" {
		return mutatingViews(h.withPolicy(kind, policy, enforcing).([]admissionregistrationv1.MutatingWebhook))
	}
	return validatingViews(h.withPolicy(kind, policy, enforcing).([]admissionregistrationv1.ValidatingWebhook))
}

type hooks struct {
	mutating   []admissionregistrationv1.MutatingWebhook
	validating []admissionregistrationv1.ValidatingWebhook
	// policies are the enforced failure policies of the webhooks whose
	// capability overrides the module's.
	policies map[string]admissionregistrationv1.FailurePolicyType
	hash     string
}

// build turns the bindings registered when ready into webhooks, one per
// capability and action, plus the canary.
func (r *Registrar) build() (*hooks, error) { return r.hooksFor(false) }

func (r *Registrar) hooksFor(static bool) (*hooks, error) {
	type group struct {
		capability string
		action     spec.Action
		namespaces []string
		optOut     string
		rules      map[schema.GroupVersionResource][]admissionregistrationv1.OperationType
	}
	groups := map[string]*group{}
	var order []string
	for _, b := range r.opts.Bindings {
		if b.FailClosed != static {
			continue
		}
		key := b.Capability + "/" + b.Action.String()
		g, ok := groups[key]
		if !ok {
			g = &group{capability: b.Capability, action: b.Action, namespaces: b.Namespaces, optOut: b.OptOut, rules: map[schema.GroupVersionResource][]admissionregistrationv1.OperationType{}}
			groups[key] = g
			order = append(order, key)
		}
		kind := b.ResourceKind()
		m, err := r.opts.Mapper.RESTMapping(kind.GroupKind(), kind.Version)
		if err != nil {
			return nil, fmt.Errorf("register binding %s: resource of %s: %w", b.ID(), kind, err)
		}
		res := m.Resource
		if b.Subresource != "" {
			res.Resource += "/" + b.Subresource
		}
		for _, op := range b.Operations {
			ops := g.rules[res]
			if !slices.Contains(ops, admissionregistrationv1.OperationType(op)) {
				g.rules[res] = append(ops, admissionregistrationv1.OperationType(op))
			}
		}
	}
	sort.Strings(order)
	h := &hooks{}
	caBundle := r.opts.CABundle()
	for _, key := range order {
		g := groups[key]
		// Each capability's webhook calls its own path, so that a request its
		// webhook and another capability's both match runs each binding once.
		path := admit.CapabilityPath(g.action, r.opts.Module, g.capability)
		cc := r.opts.ClientConfig(path)
		cc.CABundle = caBundle
		name := WebhookName(r.opts.Module, g.capability, g.action)
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
		selector, objects := r.namespaceSelector(g.namespaces, g.optOut), objectSelector(g.optOut)
		conds := r.matchConditions()
		if g.action == spec.Mutate {
			h.mutating = append(h.mutating, admissionregistrationv1.MutatingWebhook{
				Name: name, ClientConfig: cc, Rules: rules, NamespaceSelector: selector, ObjectSelector: objects, MatchConditions: conds,
				SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
				TimeoutSeconds: ptr.To(r.opts.TimeoutSeconds), MatchPolicy: ptr.To(admissionregistrationv1.Exact),
				ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
			})
		} else {
			h.validating = append(h.validating, admissionregistrationv1.ValidatingWebhook{
				Name: name, ClientConfig: cc, Rules: rules, NamespaceSelector: selector, ObjectSelector: objects, MatchConditions: conds,
				SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
				TimeoutSeconds: ptr.To(r.opts.TimeoutSeconds), MatchPolicy: ptr.To(admissionregistrationv1.Exact),
			})
		}
	}
	if static {
		return h, nil
	}
	// The canary: one labelled ConfigMap in the module's own namespace, never
	// anything else, and never blocking. It is a mutating webhook (that
	// mutates nothing) because the API server calls every mutating webhook
	// before any ValidatingAdmissionPolicy or validating webhook: a policy
	// that refuses the ConfigMap cannot keep the canary from the module, and
	// the warning it echoes stays on the refused answer (see reached).
	cc := r.opts.ClientConfig(admit.CanaryPath(r.opts.Module))
	cc.CABundle = caBundle
	h.mutating = append(h.mutating, admissionregistrationv1.MutatingWebhook{
		Name: CanaryName(r.opts.Module), ClientConfig: cc, ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		MatchPolicy: ptr.To(admissionregistrationv1.Exact),
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: r.opts.Namespace}},
		ObjectSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{CanaryLabel: r.opts.Module}},
		FailurePolicy:     ptr.To(admissionregistrationv1.Ignore),
		SideEffects:       ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		TimeoutSeconds: ptr.To[int32](5),
	})
	sum := sha256.New()
	_ = json.NewEncoder(sum).Encode(struct {
		M []admissionregistrationv1.MutatingWebhook
		V []admissionregistrationv1.ValidatingWebhook
		P map[string]admissionregistrationv1.FailurePolicyType `json:",omitempty"`
	}{h.mutating, h.validating, h.policies})
	h.hash = hex.EncodeToString(sum.Sum(nil))[:16]
	return h, nil
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

package deadlock

import (
	"context"
	"fmt"
	"slices"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// A Hook is one webhook as a cluster holds it (or as a module registers it
// once enforced), with the pods that serve it: what the analysis across a
// cluster's webhooks (Between) reads.
type Hook struct {
	// Configuration names the webhook's configuration, Mutating says which
	// kind it is, and Name the webhook in it.
	Configuration string
	Mutating      bool
	Name          string
	// Module is the vigil module that owns the configuration (its
	// app.kubernetes.io/part-of and name labels, managed by vigil or Helm); "" for
	// another's.
	Module            string
	FailurePolicy     admissionregistrationv1.FailurePolicyType
	Rules             []admissionregistrationv1.RuleWithOperations
	NamespaceSelector *metav1.LabelSelector
	ObjectSelector    *metav1.LabelSelector
	// Conditions counts its match conditions: CEL the analysis does not
	// evaluate (a webhook with some is assumed to match).
	Conditions int
	// Backend are the pods that serve it; nil when it is called by URL, or
	// its Service selects no pods the analysis knows.
	Backend *Backend
}

// Backend is where a webhook's pods run: their namespace, its labels, and
// the labels their template gives them.
type Backend struct {
	// Service names the webhook's Service, namespace/name.
	Service         string
	Namespace       string
	NamespaceLabels map[string]string
	PodLabels       map[string]string
}

func (h Hook) fails() bool {
	return h.FailurePolicy == "" || h.FailurePolicy == admissionregistrationv1.Fail
}

func (h Hook) desc() string {
	kind := "ValidatingWebhookConfiguration"
	if h.Mutating {
		kind = "MutatingWebhookConfiguration"
	}
	owner := "another component's"
	if h.Module != "" {
		owner = "module " + h.Module + "'s"
	}
	return fmt.Sprintf("%s webhook %s (%s %s, failurePolicy Fail)", owner, h.Name, kind, h.Configuration)
}

// InterceptsPods reports whether h is called when a pod of b is created:
// its rules take pod CREATE, its namespace selector takes b's namespace and
// its object selector b's pod labels. Match conditions are assumed to match.
func (h Hook) InterceptsPods(b *Backend) bool {
	if b == nil || !h.rulesTakePodCreate() {
		return false
	}
	nsLabels := labels.Set{corev1.LabelMetadataName: b.Namespace}
	for k, v := range b.NamespaceLabels {
		nsLabels[k] = v
	}
	return selects(h.NamespaceSelector, nsLabels) && selects(h.ObjectSelector, labels.Set(b.PodLabels))
}

func selects(s *metav1.LabelSelector, set labels.Set) bool {
	if s == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return true // the API server refuses such a selector: assume it matches
	}
	return sel.Matches(set)
}

func (h Hook) rulesTakePodCreate() bool {
	has := func(list []string, want ...string) bool {
		for _, v := range list {
			if slices.Contains(want, v) {
				return true
			}
		}
		return false
	}
	for _, r := range h.Rules {
		ops := make([]string, len(r.Operations))
		for i, op := range r.Operations {
			ops[i] = string(op)
		}
		if !has(ops, "CREATE", "*") || !has(r.APIGroups, "", "*") || !has(r.APIVersions, "v1", "*") || !has(r.Resources, "pods", "*", "*/*") {
			continue
		}
		if r.Scope != nil && *r.Scope == admissionregistrationv1.ClusterScope {
			continue
		}
		return true
	}
	return false
}

// Between returns the deadlocks between the webhooks of module (those whose
// Module is module) and every other webhook: a fail-closed webhook of the
// module intercepts the creation of another's pods while that one's
// fail-closed webhook intercepts the creation of the module's. Once both
// sets of pods are gone — a node restarted, a cluster scaled from zero —
// neither can be created again. Each is reported once, the module's webhook
// first.
func Between(module string, hooks []Hook) []Cycle {
	var out []Cycle
	seen := map[string]bool{}
	for _, own := range hooks {
		if own.Module != module || !own.fails() || own.Backend == nil {
			continue
		}
		for _, other := range hooks {
			if other.Module == module || !other.fails() || other.Backend == nil {
				continue
			}
			if !own.InterceptsPods(other.Backend) || !other.InterceptsPods(own.Backend) {
				continue
			}
			key := own.Configuration + "/" + own.Name + "|" + other.Configuration + "/" + other.Name
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, Cycle{
				Steps: []string{
					fmt.Sprintf("the module's pods (namespace %s) are created only through %s%s", own.Backend.Namespace, other.desc(), conditions(other)),
					fmt.Sprintf("its pods (Service %s) are created only through %s, which the module's pods serve", other.Backend.Service, own.desc()),
				},
				Break: fmt.Sprintf("answer with Ignore in namespace %s — FailurePolicyIn(admission.Ignore, %q) on the capability — or keep %s's webhook off namespace %s",
					other.Backend.Namespace, other.Backend.Namespace, other.Configuration, own.Backend.Namespace),
			})
		}
	}
	return out
}

func conditions(h Hook) string {
	if h.Conditions == 0 {
		return ""
	}
	return fmt.Sprintf(" (its %d match condition(s) are assumed to match)", h.Conditions)
}

// ReadHooks reads every webhook of the cluster's mutating and validating
// configurations, each with the pods that serve it, found through its
// Service's selector: the pod template labels of the Deployments, StatefulSets
// and DaemonSets it selects in that namespace (their pods may all be gone,
// as in the restart a deadlock is about), else the selector's own labels.
// A right it lacks is said in missing, and what it could read is returned.
func ReadHooks(ctx context.Context, cs kubernetes.Interface) (hooks []Hook, missing []string, err error) {
	backends := &backendCache{cs: cs, ctx: ctx, byService: map[string]*Backend{}, missing: &missing}
	muts, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		if !apierrors.IsForbidden(err) {
			return nil, nil, err
		}
		missing = append(missing, "list mutatingwebhookconfigurations.admissionregistration.k8s.io (cluster-wide): "+err.Error())
		muts = &admissionregistrationv1.MutatingWebhookConfigurationList{}
	}
	for i := range muts.Items {
		c := &muts.Items[i]
		hooks = append(hooks, HooksOf(c, nil, ModuleOf(c.Labels), backends.of)...)
	}
	vals, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		if !apierrors.IsForbidden(err) {
			return nil, nil, err
		}
		missing = append(missing, "list validatingwebhookconfigurations.admissionregistration.k8s.io (cluster-wide): "+err.Error())
		vals = &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	}
	for i := range vals.Items {
		c := &vals.Items[i]
		hooks = append(hooks, HooksOf(nil, c, ModuleOf(c.Labels), backends.of)...)
	}
	sort.Strings(missing)
	return hooks, slices.Compact(missing), nil
}

// HooksOf returns the webhooks of a mutating and a validating configuration
// (either may be nil) owned by module ("" for another's), with the backend
// that serves each Service.
func HooksOf(mut *admissionregistrationv1.MutatingWebhookConfiguration, val *admissionregistrationv1.ValidatingWebhookConfiguration, module string,
	backend func(*admissionregistrationv1.ServiceReference) *Backend) []Hook {
	var out []Hook
	if mut != nil {
		for _, w := range mut.Webhooks {
			out = append(out, Hook{Configuration: mut.Name, Mutating: true, Name: w.Name, Module: module,
				FailurePolicy: deref(w.FailurePolicy), Rules: w.Rules, NamespaceSelector: w.NamespaceSelector, ObjectSelector: w.ObjectSelector,
				Conditions: len(w.MatchConditions), Backend: backend(w.ClientConfig.Service)})
		}
	}
	if val != nil {
		for _, w := range val.Webhooks {
			out = append(out, Hook{Configuration: val.Name, Name: w.Name, Module: module,
				FailurePolicy: deref(w.FailurePolicy), Rules: w.Rules, NamespaceSelector: w.NamespaceSelector, ObjectSelector: w.ObjectSelector,
				Conditions: len(w.MatchConditions), Backend: backend(w.ClientConfig.Service)})
		}
	}
	return out
}

func deref(p *admissionregistrationv1.FailurePolicyType) admissionregistrationv1.FailurePolicyType {
	if p == nil {
		return admissionregistrationv1.Fail
	}
	return *p
}

// ModuleOf is the vigil module that owns an object with these labels
// (app.kubernetes.io/part-of and app.kubernetes.io/name, which its manifests
// give every object, managed-by vigil — or Helm, for its chart's); "" for
// another's.
func ModuleOf(l map[string]string) string {
	if by := l["app.kubernetes.io/managed-by"]; (by != "vigil" && by != "Helm") || l["app.kubernetes.io/name"] != l["app.kubernetes.io/part-of"] {
		return ""
	}
	return l["app.kubernetes.io/part-of"]
}

type backendCache struct {
	cs        kubernetes.Interface
	ctx       context.Context
	byService map[string]*Backend
	missing   *[]string
}

func (b *backendCache) of(ref *admissionregistrationv1.ServiceReference) *Backend {
	if ref == nil {
		return nil
	}
	key := ref.Namespace + "/" + ref.Name
	if be, ok := b.byService[key]; ok {
		return be
	}
	be := b.read(ref)
	b.byService[key] = be
	return be
}

func (b *backendCache) read(ref *admissionregistrationv1.ServiceReference) *Backend {
	be := &Backend{Service: ref.Namespace + "/" + ref.Name, Namespace: ref.Namespace}
	if ns, err := b.cs.CoreV1().Namespaces().Get(b.ctx, ref.Namespace, metav1.GetOptions{}); err == nil {
		be.NamespaceLabels = ns.Labels
	} else if apierrors.IsForbidden(err) {
		*b.missing = append(*b.missing, "get namespaces (to match webhooks' namespace selectors): "+err.Error())
	}
	svc, err := b.cs.CoreV1().Services(ref.Namespace).Get(b.ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) {
			*b.missing = append(*b.missing, fmt.Sprintf("get services in %s: %v", ref.Namespace, err))
		}
		return nil
	}
	if len(svc.Spec.Selector) == 0 {
		return nil
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	be.PodLabels = svc.Spec.Selector
	var templates []map[string]string
	if ds, err := b.cs.AppsV1().Deployments(ref.Namespace).List(b.ctx, metav1.ListOptions{}); err == nil {
		for _, d := range ds.Items {
			templates = append(templates, d.Spec.Template.Labels)
		}
	} else if apierrors.IsForbidden(err) {
		*b.missing = append(*b.missing, fmt.Sprintf("list deployments in %s: %v", ref.Namespace, err))
	}
	if ss, err := b.cs.AppsV1().StatefulSets(ref.Namespace).List(b.ctx, metav1.ListOptions{}); err == nil {
		for _, s := range ss.Items {
			templates = append(templates, s.Spec.Template.Labels)
		}
	}
	if ds, err := b.cs.AppsV1().DaemonSets(ref.Namespace).List(b.ctx, metav1.ListOptions{}); err == nil {
		for _, d := range ds.Items {
			templates = append(templates, d.Spec.Template.Labels)
		}
	}
	for _, l := range templates {
		if sel.Matches(labels.Set(l)) {
			be.PodLabels = l
			break
		}
	}
	return be
}

package registration

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// hookView is what Sync compares of a webhook, mutating or validating, with
// the API server's defaults filled in.
type hookView struct {
	name               string
	clientConfig       admissionregistrationv1.WebhookClientConfig
	rules              []admissionregistrationv1.RuleWithOperations
	failurePolicy      admissionregistrationv1.FailurePolicyType
	matchPolicy        admissionregistrationv1.MatchPolicyType
	namespaceSelector  *metav1.LabelSelector
	objectSelector     *metav1.LabelSelector
	sideEffects        *admissionregistrationv1.SideEffectClass
	timeoutSeconds     int32
	reviewVersions     []string
	reinvocationPolicy admissionregistrationv1.ReinvocationPolicyType
	matchConditions    []admissionregistrationv1.MatchCondition
}

func viewOf(name string, cc admissionregistrationv1.WebhookClientConfig, rules []admissionregistrationv1.RuleWithOperations,
	fp *admissionregistrationv1.FailurePolicyType, mp *admissionregistrationv1.MatchPolicyType, ns, obj *metav1.LabelSelector,
	se *admissionregistrationv1.SideEffectClass, timeout *int32, versions []string, rp *admissionregistrationv1.ReinvocationPolicyType,
	conds []admissionregistrationv1.MatchCondition) hookView {
	v := hookView{
		name: name, clientConfig: *cc.DeepCopy(), failurePolicy: ptr.Deref(fp, admissionregistrationv1.Fail),
		matchPolicy: ptr.Deref(mp, admissionregistrationv1.Equivalent), namespaceSelector: ns, objectSelector: obj,
		sideEffects: se, timeoutSeconds: ptr.Deref(timeout, 10), reviewVersions: versions,
		reinvocationPolicy: ptr.Deref(rp, ""), matchConditions: conds,
	}
	if v.namespaceSelector == nil {
		v.namespaceSelector = &metav1.LabelSelector{}
	}
	if v.objectSelector == nil {
		v.objectSelector = &metav1.LabelSelector{}
	}
	if s := v.clientConfig.Service; s != nil && s.Port == nil {
		s.Port = ptr.To[int32](443)
	}
	for _, r := range rules {
		r = *r.DeepCopy()
		if r.Scope == nil {
			r.Scope = ptr.To(admissionregistrationv1.AllScopes)
		}
		v.rules = append(v.rules, r)
	}
	return v
}

// diffHooks says in words how the actual webhooks differ from those wanted,
// and whether reachability is in question: a wanted webhook's client
// configuration (URL, Service or caBundle) is not as wanted.
func diffHooks(want, actual []hookView) (diffs []string, reach bool) {
	names := func(vs []hookView) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.name)
		}
		return out
	}
	byName := map[string]hookView{}
	for _, a := range actual {
		byName[a.name] = a
	}
	var missing []string
	for _, w := range want {
		a, ok := byName[w.name]
		if !ok {
			missing = append(missing, w.name)
			continue
		}
		var fields []string
		eq := apiequality.Semantic.DeepEqual
		if !bytes.Equal(a.clientConfig.CABundle, w.clientConfig.CABundle) {
			fields, reach = append(fields, "caBundle"), true
		}
		ac, wc := a.clientConfig, w.clientConfig
		ac.CABundle, wc.CABundle = nil, nil
		if !eq(ac, wc) {
			fields, reach = append(fields, "clientConfig"), true
		}
		if !eq(a.rules, w.rules) {
			fields = append(fields, "rules")
		}
		if a.failurePolicy != w.failurePolicy {
			fields = append(fields, fmt.Sprintf("failurePolicy %s (want %s)", a.failurePolicy, w.failurePolicy))
		}
		if a.timeoutSeconds != w.timeoutSeconds {
			fields = append(fields, fmt.Sprintf("timeoutSeconds %d (want %d)", a.timeoutSeconds, w.timeoutSeconds))
		}
		if !eq(a.namespaceSelector, w.namespaceSelector) {
			fields = append(fields, "namespaceSelector")
		}
		if !eq(a.objectSelector, w.objectSelector) {
			fields = append(fields, "objectSelector")
		}
		if !eq(a.matchConditions, w.matchConditions) {
			fields = append(fields, "matchConditions")
		}
		if a.matchPolicy != w.matchPolicy {
			fields = append(fields, "matchPolicy")
		}
		if !eq(a.sideEffects, w.sideEffects) {
			fields = append(fields, "sideEffects")
		}
		if !eq(a.reviewVersions, w.reviewVersions) {
			fields = append(fields, "admissionReviewVersions")
		}
		if a.reinvocationPolicy != w.reinvocationPolicy {
			fields = append(fields, "reinvocationPolicy")
		}
		if len(fields) > 0 {
			diffs = append(diffs, fmt.Sprintf("webhook %s: %s", w.name, strings.Join(fields, ", ")))
		}
	}
	if len(missing) > 0 {
		diffs = append(diffs, "webhooks missing: "+strings.Join(missing, ", "))
		if len(missing) == len(want) {
			reach = true // nothing of the registration is left
		}
	}
	wanted := names(want)
	var extra []string
	for _, a := range actual {
		if !slices.Contains(wanted, a.name) {
			extra = append(extra, a.name)
		}
	}
	if len(extra) > 0 {
		diffs = append(diffs, "webhooks not of the module's spec: "+strings.Join(extra, ", "))
	}
	if len(missing) == 0 && len(extra) == 0 && !slices.Equal(names(actual), wanted) {
		diffs = append(diffs, "webhooks out of order")
	}
	return diffs, reach
}

package registration

import (
	"context"

	"github.com/vigilkit/vigil/internal/definition/spec"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// kind is one of the two kinds of webhook configuration a module owns: each
// place that differs between them dispatches on it, by type.
type kind interface {
	// String is the kind in words: "mutating" or "validating".
	String() string
	// get reads the named configuration: its metadata and its webhooks.
	get(ctx context.Context, c kubernetes.Interface, name string) (metav1.Object, webhooks, error)
	// patch patches the named configuration.
	patch(ctx context.Context, c kubernetes.Interface, name string, pt types.PatchType, data []byte) error
	// of is this kind's share of the desired webhooks.
	of(h *hooks) webhooks
}

// kinds are both kinds, in the order they are read and written: mutating
// first, as the API server calls them.
var kinds = []kind{mutatingKind{}, validatingKind{}}

type (
	mutatingKind   struct{}
	validatingKind struct{}
)

func (mutatingKind) String() string   { return "mutating" }
func (validatingKind) String() string { return "validating" }

func (mutatingKind) get(ctx context.Context, c kubernetes.Interface, name string) (metav1.Object, webhooks, error) {
	cfg, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	return cfg, mutatingHooks(cfg.Webhooks), nil
}

func (validatingKind) get(ctx context.Context, c kubernetes.Interface, name string) (metav1.Object, webhooks, error) {
	cfg, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	return cfg, validatingHooks(cfg.Webhooks), nil
}

func (mutatingKind) patch(ctx context.Context, c kubernetes.Interface, name string, pt types.PatchType, data []byte) error {
	_, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, name, pt, data, metav1.PatchOptions{FieldManager: "vigil"})
	return err
}

func (validatingKind) patch(ctx context.Context, c kubernetes.Interface, name string, pt types.PatchType, data []byte) error {
	_, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, name, pt, data, metav1.PatchOptions{FieldManager: "vigil"})
	return err
}

func (mutatingKind) of(h *hooks) webhooks   { return h.mutating }
func (validatingKind) of(h *hooks) webhooks { return h.validating }

// webhooks are one configuration's webhooks, of either kind; they marshal
// as the configuration's webhooks list.
type webhooks interface {
	// Len is how many there are.
	Len() int
	// at points into the i-th: what the registrar changes of a webhook.
	at(i int) hookRef
	// clone is a copy whose webhooks can be changed through at.
	clone() webhooks
	// views are the webhooks as Sync compares them.
	views() []hookView
}

// hookRef points into one webhook, of either kind.
type hookRef struct {
	name          string
	clientConfig  *admissionregistrationv1.WebhookClientConfig
	failurePolicy **admissionregistrationv1.FailurePolicyType
}

type (
	mutatingHooks   []admissionregistrationv1.MutatingWebhook
	validatingHooks []admissionregistrationv1.ValidatingWebhook
)

func (ws mutatingHooks) Len() int   { return len(ws) }
func (ws validatingHooks) Len() int { return len(ws) }

func (ws mutatingHooks) at(i int) hookRef {
	return hookRef{ws[i].Name, &ws[i].ClientConfig, &ws[i].FailurePolicy}
}

func (ws validatingHooks) at(i int) hookRef {
	return hookRef{ws[i].Name, &ws[i].ClientConfig, &ws[i].FailurePolicy}
}

func (ws mutatingHooks) clone() webhooks {
	out := make(mutatingHooks, len(ws))
	for i := range ws {
		ws[i].DeepCopyInto(&out[i])
	}
	return out
}

func (ws validatingHooks) clone() webhooks {
	out := make(validatingHooks, len(ws))
	for i := range ws {
		ws[i].DeepCopyInto(&out[i])
	}
	return out
}

func (ws mutatingHooks) views() []hookView {
	var out []hookView
	for _, w := range ws {
		rp := w.ReinvocationPolicy
		if rp == nil {
			rp = ptr.To(admissionregistrationv1.NeverReinvocationPolicy)
		}
		out = append(out, viewOf(w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector,
			w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, rp, w.MatchConditions))
	}
	return out
}

func (ws validatingHooks) views() []hookView {
	var out []hookView
	for _, w := range ws {
		out = append(out, viewOf(w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector,
			w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, nil, w.MatchConditions))
	}
	return out
}

// setPolicies gives each webhook but the canary the failure policy of its
// name.
func setPolicies(ws webhooks, of func(name string) *admissionregistrationv1.FailurePolicyType) {
	for i := range ws.Len() {
		if ref := ws.at(i); !spec.IsCanary(ref.name) {
			*ref.failurePolicy = of(ref.name)
		}
	}
}

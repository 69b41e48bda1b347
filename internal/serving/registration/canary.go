package registration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vigilkit/vigil/internal/definition/spec"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/runtime/events"
	"github.com/vigilkit/vigil/internal/serving/admit"
)

// StuckAfter is how long the canary may go without reaching the module
// before the registration is reported stuck (OnStuck, the Record's Problem);
// a refusal by another admission control is reported at its third attempt.
const StuckAfter = 10 * time.Second

// What a stuck registration reports.
var (
	// ErrCanaryRefused: the canary's dry run came back refused, without the
	// module's token.
	ErrCanaryRefused = errors.New("the canary was refused without reaching the module")
	// ErrCanaryUnanswered: the canary's dry run passed, or failed, without
	// the module's token.
	ErrCanaryUnanswered = errors.New("the canary did not reach the module")
)

// OnStuck sets what the registrar tells when its canary has not reached the
// module for StuckAfter (problem says why, ErrCanaryRefused or
// ErrCanaryUnanswered), and once it does again (nil). Set it before Sync
// runs.
func (r *Registrar) OnStuck(f func(problem error)) { r.onStuck = f }

// probe dry-runs the canary until the handler has seen it: proof that the API
// server reaches a replica through the configuration just written.
func (r *Registrar) probe(ctx context.Context) error {
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 1.5, Jitter: 0.3, Steps: 1 << 30, Cap: 5 * time.Second}
	began, stuck := time.Now(), false
	for attempt := 1; ; attempt++ {
		reached, err := r.reached(ctx)
		if reached {
			events.Info(r.opts.Log, events.CanaryReached, "the API server reaches the module", "attempts", attempt)
			if stuck && r.onStuck != nil {
				r.onStuck(nil)
			}
			return nil
		}
		if isRBAC(err) {
			return fmt.Errorf("dry-run the canary ConfigMap in %s: %w: the module needs {apiGroups: [\"\"], resources: [configmaps], verbs: [create]} in its namespace (a dry run writes nothing)", r.opts.Namespace, err)
		}
		problem := r.canaryProblem(err)
		if !stuck && (time.Since(began) >= StuckAfter || (errors.Is(problem, ErrCanaryRefused) && attempt >= 3)) {
			stuck = true
			events.Info(r.opts.Log, events.RegistrationStuck, "the registration cannot finish: "+problem.Error(), "attempts", attempt)
			r.noteProblem(ctx, problem.Error())
			if r.onStuck != nil {
				r.onStuck(problem)
			}
		} else if attempt%10 == 0 {
			r.opts.Log.Info("the API server does not reach the module yet; the registration waits for the canary", "attempts", attempt, "err", problem.Error())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("probe reachability: %w", context.Cause(ctx))
		case <-time.After(backoff.Step()):
		}
	}
}

// isRBAC tells the API server's refusal of the dry run for want of the
// right from a refusal by an admission control.
func isRBAC(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "cannot create resource")
}

// canaryProblem says why a dry run of the canary did not reach the module.
func (r *Registrar) canaryProblem(err error) error {
	what := fmt.Sprintf("the canary (a dry-run create of ConfigMap %s/%s labelled %s=%s)", r.opts.Namespace, spec.CanaryConfigMapName(r.opts.Module), CanaryLabel, r.opts.Module)
	var status apierrors.APIStatus
	switch {
	case err == nil:
		return fmt.Errorf("%w: %s was admitted without the module's token: the API server does not reach a replica through the module's client configuration (URL or Service, caBundle) and its failurePolicy Ignore let it on; check the Service, its endpoints and the serving certificate", ErrCanaryUnanswered, what)
	case errors.As(err, &status) && (apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)):
		return fmt.Errorf("%w: %s was refused: %q. Expected the module's canary webhook to see it first (it is mutating, and runs before every validation); so either a mutating admission control that runs before it refused it — exempt ConfigMaps labelled %s=%s in %s from it, nothing is ever written — or the API server does not reach the module at all", ErrCanaryRefused, what, err.Error(), CanaryLabel, r.opts.Module, r.opts.Namespace)
	default:
		return fmt.Errorf("%w: %s failed: %v", ErrCanaryUnanswered, what, err)
	}
}

// noteProblem records a problem in the Record of each configuration this
// version wrote, compare-and-swap, once; the write that enforces clears it.
func (r *Registrar) noteProblem(ctx context.Context, problem string) {
	for _, k := range kinds {
		rv, rec, err := r.get(ctx, k)
		if err != nil || rec.Problem != "" || (rec.Version != r.opts.Version && rec.Version != r.over) {
			continue
		}
		rec.Problem, rec.ProblemSince = problem, time.Now().UTC().Format(time.RFC3339)
		ann, _ := json.Marshal(rec)
		body := map[string]any{"metadata": map[string]any{"resourceVersion": rv, "annotations": map[string]any{Annotation: string(ann)}}}
		if err := r.patch(ctx, k, body); err != nil && !apierrors.IsConflict(err) {
			r.opts.Log.Error(err, "record the registration's problem", "kind", k.String())
		}
	}
}

// reached dry-runs the canary once and reports whether a replica answered
// it through the module's configuration (it echoes the token:
// admit.CanaryWarning). The API server keeps the warnings of the webhooks
// it called on an answer that refuses the request, so a canary refused
// after the module saw it — by a ValidatingAdmissionPolicy, say — counts as
// reached.
func (r *Registrar) reached(ctx context.Context) (bool, error) {
	token := randomToken()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.opts.Namespace, Name: spec.CanaryConfigMapName(r.opts.Module), Labels: map[string]string{CanaryLabel: r.opts.Module}},
		Data:       map[string]string{"token": token},
	}
	var warned atomic.Bool
	err := r.c.CoreV1().RESTClient().Post().
		Namespace(r.opts.Namespace).Resource("configmaps").
		Param("dryRun", metav1.DryRunAll).
		Body(cm).
		WarningHandlerWithContext(warningFunc(func(text string) {
			if text == admit.CanaryWarning(token) {
				warned.Store(true)
			}
		})).
		Do(ctx).Error()
	if warned.Load() {
		return true, nil // whichever replica answered echoed the token
	}
	if err == nil || apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	return false, err
}

// CanaryLabel marks the canary ConfigMap a module dry-runs to prove the API
// server reaches it.
const CanaryLabel = "vigil.dev/canary"

// warningFunc adapts a function to client-go's warning handler.
type warningFunc func(text string)

func (f warningFunc) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	f(text)
}

func randomToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// The canary: one labelled ConfigMap in the module's own namespace, never
// anything else, and never blocking. It is a mutating webhook (that
// mutates nothing) because the API server calls every mutating webhook
// before any ValidatingAdmissionPolicy or validating webhook: a policy
// that refuses the ConfigMap cannot keep the canary from the module, and
// the warning it echoes stays on the refused answer (see reached).
func (r *Registrar) canaryHook(caBundle []byte) admissionregistrationv1.MutatingWebhook {
	cc := r.opts.ClientConfig(admit.CanaryPath(r.opts.Module))
	cc.CABundle = caBundle
	return admissionregistrationv1.MutatingWebhook{
		Name: spec.CanaryName(r.opts.Module), ClientConfig: cc, ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
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
	}
}

package admit

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/vigilkit/vigil/internal/events"
	"github.com/vigilkit/vigil/internal/spec"
)

// EnvDecisionLog bounds how many decisions a replica logs each second
// (events.Decision lines, which `vigil monitor` follows); 0 logs none.
// DefaultDecisionLog when unset.
const EnvDecisionLog = "VIGIL_DECISION_LOG"

// DefaultDecisionLog is the default bound of EnvDecisionLog: enough to follow
// a cluster's ordinary traffic, too few for a flood to turn the log into the
// replica's main work.
const DefaultDecisionLog = 100

// MaxLoggedPatch bounds the patch a decision line carries, in bytes; a
// longer one is cut and says so.
const MaxLoggedPatch = 2048

// DecisionLogFromEnv is EnvDecisionLog's bound, DefaultDecisionLog when it
// is unset or not a number of lines (said on log).
func DecisionLogFromEnv(log logr.Logger) int {
	v := os.Getenv(EnvDecisionLog)
	if v == "" {
		return DefaultDecisionLog
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		log.Info("ignored: expected a number of decision lines per second, 0 for none", "variable", EnvDecisionLog, "value", v, "using", DefaultDecisionLog)
		return DefaultDecisionLog
	}
	return n
}

// decisionLog logs up to limit decisions a second; those over it are
// counted, and the count is logged with the next second's first decision.
type decisionLog struct {
	log   logr.Logger
	limit int

	mu      sync.Mutex
	second  int64
	logged  int
	dropped int
}

func newDecisionLog(log logr.Logger, limit int) *decisionLog {
	if limit <= 0 || !log.Enabled() {
		return nil
	}
	return &decisionLog{log: log, limit: limit}
}

// take reports whether a decision at now may be logged, and how many were
// not logged before it.
func (d *decisionLog) take(now time.Time) (ok bool, dropped int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := now.Unix(); s != d.second {
		d.second, d.logged = s, 0
	}
	if d.logged >= d.limit {
		d.dropped++
		return false, 0
	}
	d.logged++
	dropped, d.dropped = d.dropped, 0
	return true, dropped
}

// Verdicts of a decision line.
const (
	VerdictAllowed = "allowed"
	VerdictDenied  = "denied"
	VerdictMutated = "mutated"
	VerdictWarned  = "warned"
)

// decided logs one answered request: b is the binding that decided it (the
// one that denied or failed), or the last that ran.
func (d *decisionLog) decided(req *admissionv1.AdmissionRequest, b *spec.Binding, resp *admissionv1.AdmissionResponse, began time.Time) {
	if d == nil {
		return
	}
	now := time.Now()
	ok, dropped := d.take(now)
	if dropped > 0 {
		events.Info(d.log, events.DecisionsUnlogged, "decisions not logged: more than the bound a second", "decisions", dropped, "bound", d.limit)
	}
	if !ok {
		return
	}
	verdict := VerdictAllowed
	switch {
	case !resp.Allowed:
		verdict = VerdictDenied
	case len(resp.Patch) > 0:
		verdict = VerdictMutated
	case len(resp.Warnings) > 0:
		verdict = VerdictWarned
	}
	kv := []any{
		"uid", string(req.UID), "operation", string(req.Operation), "kind", req.Kind.Kind,
		"namespace", req.Namespace, "name", req.Name, "user", req.UserInfo.Username,
		"verdict", verdict, "took", now.Sub(began).String(),
	}
	if req.SubResource != "" {
		kv = append(kv, "subresource", req.SubResource)
	}
	if b != nil {
		kv = append(kv, "capability", b.Capability, "binding", b.Name)
	}
	if req.DryRun != nil && *req.DryRun {
		kv = append(kv, "dryRun", true)
	}
	if resp.Result != nil && resp.Result.Message != "" {
		kv = append(kv, "message", resp.Result.Message)
	}
	if len(resp.Warnings) > 0 {
		kv = append(kv, "warnings", strings.Join(resp.Warnings, "; "))
	}
	if p := resp.Patch; len(p) > 0 {
		if len(p) > MaxLoggedPatch {
			kv = append(kv, "patch", string(p[:MaxLoggedPatch]), "patchCut", len(p))
		} else {
			kv = append(kv, "patch", string(p))
		}
	}
	events.Info(d.log, events.Decision, "admission decision", kv...)
}

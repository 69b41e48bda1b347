package registration

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vigilkit/vigil/internal/definition/spec"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Annotation carries what wrote a configuration: see Record.
const Annotation = "vigil.dev/registration"

// Record is the annotation a registration writes.
type Record struct {
	Version    string `json:"version"`
	Hash       string `json:"hash"`
	Generation int64  `json:"generation"`
	// State is "probing" (a first install: failurePolicy Ignore until the
	// canary passes), "proving" (the webhooks stay enforced, on the client
	// configuration they had, while the new one is proven on the canary
	// alone), "enforced", or "failed-open" (the watcher set the webhooks of
	// the capabilities with an outage bound to Ignore while no replica
	// served: see FailOpen).
	State string `json:"state"`
	// Problem says why the registration cannot finish, since ProblemSince
	// (RFC 3339, UTC): the canary refused by another admission control
	// before it reached the module, or unanswered. Cleared once it
	// enforces.
	Problem      string `json:"problem,omitempty"`
	ProblemSince string `json:"problemSince,omitempty"`
	// Enforced is when this version of the module, with this spec (Hash),
	// first enforced its webhooks (RFC 3339, UTC); empty before. The audit
	// tells objects admitted before it from those admitted after.
	Enforced string `json:"enforced,omitempty"`
	// FailedOpen names the webhooks the watcher failed open, since
	// FailedOpenSince (RFC 3339, UTC); set while State is "failed-open".
	FailedOpen      []string `json:"failedOpen,omitempty"`
	FailedOpenSince string   `json:"failedOpenSince,omitempty"`
	// Outages are the last MaxOutages windows in which webhooks were failed
	// open and enforced again, oldest first, kept across versions: the audit
	// reports what got in during each.
	Outages []Outage `json:"outages,omitempty"`
	// Repairs are the last MaxRepairs drifts of this configuration the
	// module found and wrote back, oldest first, kept across versions.
	Repairs []Repair `json:"repairs,omitempty"`
}

// Repair is one drift written back: when it was enforced again, and what
// differed.
type Repair struct {
	At    string `json:"at"`
	Drift string `json:"drift"`
}

// MaxRepairs bounds a Record's Repairs; MaxRepairDrift, the length of each
// one's Drift.
const (
	MaxRepairs     = 10
	MaxRepairDrift = 512
)

// addRepairs adds the drift of configuration kind k among drift (each
// entry names its kind) as one Repair, now.
func addRepairs(repairs []Repair, k kind, drift []string) []Repair {
	var mine []string
	for _, d := range drift {
		if strings.HasPrefix(d, k.String()+" ") {
			mine = append(mine, d)
		}
	}
	if len(mine) == 0 {
		return repairs
	}
	text := strings.Join(mine, "; ")
	if len(text) > MaxRepairDrift {
		n := MaxRepairDrift
		for n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		text = text[:n] + "…"
	}
	repairs = append(slices.Clone(repairs), Repair{At: time.Now().UTC().Format(time.RFC3339), Drift: text})
	if len(repairs) > MaxRepairs {
		repairs = repairs[len(repairs)-MaxRepairs:]
	}
	return repairs
}

// Outage is a window in which webhooks were failed open (failurePolicy
// Ignore while no admission replica served). To is "" while it lasts.
type Outage struct {
	From     string   `json:"from"`
	To       string   `json:"to,omitempty"`
	Webhooks []string `json:"webhooks"`
}

// MaxOutages bounds a Record's Outages.
const MaxOutages = 20

// IsZero reports whether the Record is missing: a configuration as the
// manifests ship it, or re-created or emptied by a re-apply.
func (r Record) IsZero() bool {
	return r.Version == "" && r.Hash == "" && r.Generation == 0 && r.State == "" && r.Enforced == "" &&
		len(r.FailedOpen) == 0 && r.FailedOpenSince == "" && len(r.Outages) == 0 && len(r.Repairs) == 0
}

// Windows are the Record's outages, the one still open (To "") included.
func (r Record) Windows() []Outage {
	out := slices.Clone(r.Outages)
	if r.State == StateFailedOpen && r.FailedOpenSince != "" {
		out = append(out, Outage{From: r.FailedOpenSince, Webhooks: slices.Clone(r.FailedOpen)})
	}
	return out
}

// Covers reports whether the window covers t for the named webhook; an open
// window lasts until now.
func (o Outage) Covers(webhook string, t time.Time) bool {
	if !slices.Contains(o.Webhooks, webhook) {
		return false
	}
	from, err := time.Parse(time.RFC3339, o.From)
	if err != nil {
		return false
	}
	to := time.Now()
	if o.To != "" {
		if to, err = time.Parse(time.RFC3339, o.To); err != nil {
			return false
		}
	}
	// creationTimestamp has second precision: the second the window opened
	// and the one it closed count as inside.
	return !t.Before(from.Truncate(time.Second)) && !t.After(to.Truncate(time.Second).Add(time.Second))
}

// EnforcedAt is Enforced as a time; zero when not enforced yet.
func (r Record) EnforcedAt() time.Time {
	t, _ := time.Parse(time.RFC3339, r.Enforced)
	return t
}

// ReadRecord reads the Record of the module's validating webhook
// configuration: what registered it, and since when it enforces. A
// configuration without one gives a zero Record.
func ReadRecord(ctx context.Context, c kubernetes.Interface, module string) (Record, error) {
	return readRecord(ctx, c, validatingKind{}, spec.ConfigurationName(module))
}

// ReadMutatingRecord reads the Record of the module's mutating webhook
// configuration, whose outage windows say when its mutations did not run.
func ReadMutatingRecord(ctx context.Context, c kubernetes.Interface, module string) (Record, error) {
	return readRecord(ctx, c, mutatingKind{}, spec.ConfigurationName(module))
}

func readRecord(ctx context.Context, c kubernetes.Interface, k kind, module string) (Record, error) {
	cfg, _, err := k.get(ctx, c, module)
	if err != nil {
		return Record{}, err
	}
	return recordOf(cfg), nil
}

func recordOf(cfg metav1.Object) Record {
	var rec Record
	if raw := cfg.GetAnnotations()[Annotation]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &rec)
	}
	return rec
}

// The states of a Record.
const (
	StateProbing    = "probing"
	StateProving    = "proving"
	StateEnforced   = "enforced"
	StateFailedOpen = "failed-open"
)

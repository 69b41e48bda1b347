package admit

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/events"
)

// EnvDecisionLog bounds how many decisions a replica logs each second
// (events.Decision lines, which `vigil monitor` follows); 0 logs none.
// DefaultDecisionLog when unset. Dry runs have a pool of their own besides,
// a quarter of it: see decisionLog.
const EnvDecisionLog = "VIGIL_DECISION_LOG"

// DefaultDecisionLog is the default bound of EnvDecisionLog: enough to follow
// a cluster's ordinary traffic, too few for a flood to turn the log into the
// replica's main work.
const DefaultDecisionLog = 100

// MaxLoggedPatch bounds the patch a decision line carries, in bytes; a
// longer one is cut and says so (patchCut holds its length).
const MaxLoggedPatch = 2048

// MaxLoggedText bounds the message and the warnings a decision line
// carries, in bytes: a longer one is cut and says so (messageCut,
// warningsCut hold its length).
const MaxLoggedText = 2048

// MaxLoggedName bounds each of a decision line's other fields that come
// from the request (uid, operation, kind, subresource, namespace, name,
// user), in bytes: a longer one is cut and says so (nameCut, userCut...).
// A mutating webhook sees a request's name before the API server validates
// it.
const MaxLoggedName = 256

// MaxDecisionLine bounds a decision line, in bytes, whatever the request
// holds: each field is cut at its bound above, and quoting at most
// quadruples a byte (\xNN): 4*(3*MaxLoggedText+7*MaxLoggedName), and
// the keys, the verdict, the latency, the capability and the binding.
const MaxDecisionLine = 34 << 10

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

// decisionLog logs a sample of each second's decisions, fair to each user
// and namespace, and says who it left out.
//
// Real requests and dry runs draw on two pools a second: limit lines for
// real requests, a quarter of it (at least one) for dry runs, so that no
// dry run ever takes a real decision's line. Within a pool the first half
// of the second's lines go to whoever comes first; after that, a user or a
// namespace that already has a tenth of the pool (at least one line) this
// second gets no more, so the rest is shared among the others (a
// cluster-scoped object's decision counts for its user alone). The
// decisions left out are counted per user and namespace, and the next
// second's first decision logs a decisions-unlogged line that names them.
type decisionLog struct {
	log logr.Logger
	// limit and dryLimit are the two pools; share is what a user or a
	// namespace may have of the real pool once half of it is used,
	// dryShare of the dry pool.
	limit, dryLimit, share, dryShare int

	mu     sync.Mutex
	second int64
	// logged and dry count this second's lines of each pool.
	logged, dry int
	// had counts this second's lines of each user and namespace, per pool.
	had map[haveKey]int
	// dropped counts the decisions left out since the last report, per
	// user and namespace; others those of whoever came after maxWho.
	dropped       map[who]*dropCount
	others        dropCount
	droppedSecond int64
}

// haveKey is a user or a namespace (ns), in one pool (dry).
type haveKey struct {
	name   string
	ns     bool
	dryRun bool
}

// who made requests: a user, in a namespace ("" for cluster-scoped objects).
type who struct{ user, namespace string }

type dropCount struct{ n, dryRuns, denied int }

// maxWho bounds the users and namespaces a second's counts keep: a flood
// from ever new names (ServiceAccounts, namespaces) costs no more memory;
// those beyond it count as having their share, and their drops as others'.
const maxWho = 4096

// maxNamed bounds the users and namespaces a decisions-unlogged line names,
// those with the most decisions left out; the rest are summed.
const maxNamed = 10

func newDecisionLog(log logr.Logger, limit int) *decisionLog {
	if limit <= 0 || !log.Enabled() {
		return nil
	}
	dry := max(1, limit/4)
	return &decisionLog{log: log, limit: limit, dryLimit: dry, share: max(1, limit/10), dryShare: max(1, dry/10),
		had: map[haveKey]int{}, dropped: map[who]*dropCount{}}
}

// unlogged is what a decisions-unlogged line reports.
type unlogged struct {
	second  int64
	total   dropCount
	by      []whoDropped
	others  dropCount
	sources int
}

type whoDropped struct {
	who
	dropCount
}

// take reports whether a decision at now, of user on an object in
// namespace, may be logged; and, when a second with decisions left out has
// passed, what was left out.
func (d *decisionLog) take(now time.Time, user, namespace string, dryRun, denied bool) (ok bool, report *unlogged) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := now.Unix(); s != d.second {
		if len(d.dropped) > 0 || d.others.n > 0 {
			report = d.report()
		}
		d.second, d.logged, d.dry = s, 0, 0
		clear(d.had)
	}
	if d.admits(user, namespace, dryRun) {
		return true, report
	}
	if len(d.dropped) == 0 && d.others.n == 0 {
		d.droppedSecond = d.second
	}
	c := d.dropped[who{user, namespace}]
	if c == nil {
		if len(d.dropped) < maxWho {
			c = &dropCount{}
			d.dropped[who{user, namespace}] = c
		} else {
			c = &d.others
		}
	}
	c.n++
	if dryRun {
		c.dryRuns++
	}
	if denied {
		c.denied++
	}
	return false, report
}

// admits applies the pools and the shares, and counts a line taken.
func (d *decisionLog) admits(user, namespace string, dryRun bool) bool {
	used, limit, share := &d.logged, d.limit, d.share
	if dryRun {
		used, limit, share = &d.dry, d.dryLimit, d.dryShare
	}
	if *used >= limit {
		return false
	}
	// A cluster-scoped object's decisions share no namespace: only their
	// user's share applies.
	u, n := haveKey{name: user, dryRun: dryRun}, haveKey{name: namespace, ns: true, dryRun: dryRun}
	hu, knownU := d.had[u]
	hn, knownN := d.had[n]
	if namespace == "" {
		hn, knownN = 0, true
	}
	full := len(d.had) >= maxWho
	if *used >= limit/2 && (hu >= share || hn >= share || full && (!knownU || !knownN)) {
		return false
	}
	*used++
	if knownU || !full {
		d.had[u] = hu + 1
	}
	if namespace != "" && (knownN || !full) {
		d.had[n] = hn + 1
	}
	return true
}

// report takes the counts of the decisions left out, most first.
func (d *decisionLog) report() *unlogged {
	r := &unlogged{second: d.droppedSecond, others: d.others, sources: len(d.dropped)}
	for w, c := range d.dropped {
		r.by = append(r.by, whoDropped{w, *c})
	}
	sort.Slice(r.by, func(i, j int) bool {
		if r.by[i].n != r.by[j].n {
			return r.by[i].n > r.by[j].n
		}
		if r.by[i].user != r.by[j].user {
			return r.by[i].user < r.by[j].user
		}
		return r.by[i].namespace < r.by[j].namespace
	})
	if len(r.by) > maxNamed {
		for _, c := range r.by[maxNamed:] {
			r.others.n, r.others.dryRuns, r.others.denied = r.others.n+c.n, r.others.dryRuns+c.dryRuns, r.others.denied+c.denied
		}
		r.by = r.by[:maxNamed]
	}
	for _, c := range r.by {
		r.total.n, r.total.dryRuns, r.total.denied = r.total.n+c.n, r.total.dryRuns+c.dryRuns, r.total.denied+c.denied
	}
	r.total.n, r.total.dryRuns, r.total.denied = r.total.n+r.others.n, r.total.dryRuns+r.others.dryRuns, r.total.denied+r.others.denied
	if d.others.n > 0 {
		r.sources = -1 // more than maxWho
	}
	clear(d.dropped)
	d.others = dropCount{}
	return r
}

// log writes the decisions-unlogged line: who was left out, most first.
func (d *decisionLog) logUnlogged(r *unlogged) {
	var by strings.Builder
	for i, c := range r.by {
		if i > 0 {
			by.WriteString("; ")
		}
		user, _ := clip(c.user, MaxLoggedName)
		fmt.Fprintf(&by, "%s in %s: %d", strconv.Quote(user), namespaceOf(c.namespace), c.n)
		c.dropCount.describe(&by)
	}
	if r.others.n > 0 {
		sources := "other users and namespaces"
		if r.sources > 0 {
			sources = fmt.Sprintf("%d other users and namespaces", r.sources-len(r.by))
		}
		fmt.Fprintf(&by, "; %s: %d", sources, r.others.n)
		r.others.describe(&by)
	}
	events.Info(d.log, events.DecisionsUnlogged, "decisions not logged: over the bound a second, or over a user's or a namespace's share of it",
		"decisions", r.total.n, "dryRuns", r.total.dryRuns, "denied", r.total.denied, "second", time.Unix(r.second, 0).UTC().Format(time.RFC3339),
		"bound", d.limit, "dryRunBound", d.dryLimit, "share", d.share, "by", by.String())
}

func (c dropCount) describe(b *strings.Builder) {
	switch {
	case c.dryRuns > 0 && c.denied > 0:
		fmt.Fprintf(b, " (%d dry runs, %d denied)", c.dryRuns, c.denied)
	case c.dryRuns > 0:
		fmt.Fprintf(b, " (%d dry runs)", c.dryRuns)
	case c.denied > 0:
		fmt.Fprintf(b, " (%d denied)", c.denied)
	}
}

func namespaceOf(ns string) string {
	if ns == "" {
		return "the cluster"
	}
	ns, _ = clip(ns, MaxLoggedName)
	return strconv.Quote(ns)
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
	dryRun := req.DryRun != nil && *req.DryRun
	ok, report := d.take(now, req.UserInfo.Username, req.Namespace, dryRun, !resp.Allowed)
	if report != nil {
		d.logUnlogged(report)
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
	kv := make([]any, 0, 32)
	kv = field(kv, "uid", string(req.UID), MaxLoggedName)
	kv = field(kv, "operation", string(req.Operation), MaxLoggedName)
	kv = field(kv, "kind", req.Kind.Kind, MaxLoggedName)
	kv = field(kv, "namespace", req.Namespace, MaxLoggedName)
	kv = field(kv, "name", req.Name, MaxLoggedName)
	kv = field(kv, "user", req.UserInfo.Username, MaxLoggedName)
	kv = append(kv, "verdict", verdict, "took", now.Sub(began).String())
	if req.SubResource != "" {
		kv = field(kv, "subresource", req.SubResource, MaxLoggedName)
	}
	if b != nil {
		kv = append(kv, "capability", b.Capability, "binding", b.Name)
	}
	if dryRun {
		kv = append(kv, "dryRun", true)
	}
	if resp.Result != nil && resp.Result.Message != "" {
		kv = field(kv, "message", resp.Result.Message, MaxLoggedText)
	}
	if len(resp.Warnings) > 0 {
		kv = field(kv, "warnings", strings.Join(resp.Warnings, "; "), MaxLoggedText)
	}
	if p := resp.Patch; len(p) > 0 {
		if len(p) > MaxLoggedPatch {
			cut, _ := clip(string(p[:MaxLoggedPatch+1]), MaxLoggedPatch)
			kv = append(kv, "patch", cut, "patchCut", len(p))
		} else {
			kv = append(kv, "patch", string(p))
		}
	}
	events.Info(d.log, events.Decision, "admission decision", kv...)
}

// field appends key and value, cut at limit bytes; a value cut is followed
// by key+"Cut" and its whole length.
func field(kv []any, key, value string, limit int) []any {
	v, cut := clip(value, limit)
	kv = append(kv, key, v)
	if cut {
		kv = append(kv, key+"Cut", len(value))
	}
	return kv
}

// clip cuts s at limit bytes, on a rune's boundary, and says whether it
// did.
func clip(s string, limit int) (string, bool) {
	if len(s) <= limit {
		return s, false
	}
	i := limit
	for i > 0 && i > limit-utf8.UTFMax && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], true
}

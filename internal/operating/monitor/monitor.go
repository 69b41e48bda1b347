package monitor

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vigilkit/vigil/internal/operating/locate"
	"github.com/vigilkit/vigil/internal/runtime/events"
)

// Decision is one answered admission request, as a replica logged it.
type Decision struct {
	Time        string `json:"time"`
	Pod         string `json:"pod"`
	UID         string `json:"uid"`
	Operation   string `json:"operation"`
	Kind        string `json:"kind"`
	Subresource string `json:"subresource,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`
	User        string `json:"user"`
	Capability  string `json:"capability,omitempty"`
	Binding     string `json:"binding,omitempty"`
	// Verdict is allowed, denied, mutated or warned.
	Verdict  string `json:"verdict"`
	Message  string `json:"message,omitempty"`
	Warnings string `json:"warnings,omitempty"`
	Patch    string `json:"patch,omitempty"`
	DryRun   bool   `json:"dryRun,omitempty"`
	Took     string `json:"took"`
	// Cut names each field the replica cut at its bound (message, patch,
	// name...), with its whole length in bytes.
	Cut map[string]int `json:"cut,omitempty"`
	// Unlogged, when set, makes this no decision but the replica's report
	// of the decisions it left out (events.DecisionsUnlogged): only Time
	// and Pod are set besides. Every filter passes it.
	Unlogged *Unlogged `json:"unlogged,omitempty"`
}

// Unlogged is a replica's report of the decisions it did not log: how
// many, of which how many were dry runs and denials, from the second
// Second on, and By whom, most first.
type Unlogged struct {
	Decisions string `json:"decisions"`
	DryRuns   string `json:"dryRuns"`
	Denied    string `json:"denied"`
	Second    string `json:"second"`
	By        string `json:"by"`
}

// Parse reads a Decision from one log line of pod; ok is false for every
// other line.
func Parse(pod, line string) (Decision, bool) {
	f, ok := events.ParseLine(line)
	if ok && f[events.Key] == string(events.DecisionsUnlogged) {
		return Decision{Time: f["time"], Pod: pod, Unlogged: &Unlogged{Decisions: f["decisions"], DryRuns: f["dryRuns"], Denied: f["denied"],
			Second: f["second"], By: f["by"]}}, true
	}
	if !ok || f[events.Key] != string(events.Decision) {
		return Decision{}, false
	}
	d := Decision{
		Time: f["time"], Pod: pod, UID: f["uid"], Operation: f["operation"], Kind: f["kind"], Subresource: f["subresource"],
		Namespace: f["namespace"], Name: f["name"], User: f["user"], Capability: f["capability"], Binding: f["binding"],
		Verdict: f["verdict"], Message: f["message"], Warnings: f["warnings"], Patch: f["patch"], DryRun: f["dryRun"] == "true", Took: f["took"],
	}
	for k, v := range f {
		field, ok := strings.CutSuffix(k, "Cut")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(v); err == nil {
			if d.Cut == nil {
				d.Cut = map[string]int{}
			}
			d.Cut[field] = n
		}
	}
	return d, true
}

// Filter selects decisions; an empty field selects every value.
type Filter struct {
	Namespace  string
	Capability string
	Verdict    string
}

// Verdicts are the values of Decision.Verdict.
var Verdicts = []string{"allowed", "denied", "mutated", "warned"}

// Check says what is wrong with the filter.
func (f Filter) Check() error {
	if f.Verdict == "" {
		return nil
	}
	for _, v := range Verdicts {
		if f.Verdict == v {
			return nil
		}
	}
	return fmt.Errorf("--verdict %q: expected one of %s", f.Verdict, strings.Join(Verdicts, ", "))
}

// Match reports whether d passes the filter.
func (f Filter) Match(d Decision) bool {
	return d.Unlogged != nil || (f.Namespace == "" || d.Namespace == f.Namespace) && (f.Capability == "" || d.Capability == f.Capability) &&
		(f.Verdict == "" || d.Verdict == f.Verdict)
}

// Options say what to follow.
type Options struct {
	Module string
	// Namespace is the module's; found by Locate when empty.
	Namespace string
	// Note, when set, is told which namespace Locate chose and which it
	// did not, when Deployments labelled as the module's are in several.
	Note func(string)
	// Since reads this far back in each pod's log when it is first
	// followed; only new lines when zero.
	Since time.Duration
	// Poll is how often the module's pods are listed; 2s when zero.
	Poll   time.Duration
	Filter Filter
}

// Follow hands each decision that passes the filter to emit, in the order
// each pod logged them, until ctx ends. Calls to emit do not overlap.
func Follow(ctx context.Context, cs kubernetes.Interface, o Options, emit func(Decision)) error {
	if err := o.Filter.Check(); err != nil {
		return err
	}
	ns := o.Namespace
	sel := admissionSelector(o.Module)
	if ns == "" {
		var (
			note string
			err  error
		)
		ns, note, err = Locate(ctx, cs, o.Module)
		if err != nil {
			return err
		}
		if note != "" && o.Note != nil {
			o.Note(note)
		}
	}
	poll := o.Poll
	if poll <= 0 {
		poll = 2 * time.Second
	}
	var mu sync.Mutex
	out := func(d Decision) {
		if !o.Filter.Match(d) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		emit(d)
	}
	started := time.Now().Add(-o.Since)
	following := map[string]*follower{}
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("list module %s's admission pods in %s: %w", o.Module, ns, err)
		}
		if pods != nil {
			for i := range pods.Items {
				p := &pods.Items[i]
				if !admissionRunning(p) {
					continue
				}
				f, ok := following[string(p.UID)]
				if ok && f.running() {
					continue
				}
				if !ok {
					f = &follower{cs: cs, ns: ns, pod: p.Name, since: started}
					following[string(p.UID)] = f
				}
				f.start(ctx, &wg, out)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func admissionSelector(module string) string {
	return "app.kubernetes.io/name=" + module + ",app.kubernetes.io/part-of=" + module + ",app.kubernetes.io/component=admission"
}

// Locate finds module's namespace: of the namespaces holding its admission
// Deployment (by its labels), the one its cluster-scoped objects name
// (internal/operating/locate). Labels alone are not enough: whoever may create a
// Deployment may label it as the module's admission, and the decisions
// read from her pods' logs would be hers to write. note names the
// namespaces not believed, and why; the error says what to give instead
// when no namespace, or more than one, is confirmed.
func Locate(ctx context.Context, cs kubernetes.Interface, module string) (ns, note string, err error) {
	sel := admissionSelector(module)
	deps, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return "", "", fmt.Errorf("find module %s: list its admission Deployment cluster-wide: %w; give its namespace with --module-namespace", module, err)
	}
	var candidates []string
	for _, d := range deps.Items {
		if !slices.Contains(candidates, d.Namespace) {
			candidates = append(candidates, d.Namespace)
		}
	}
	if len(candidates) == 0 {
		return "", "", fmt.Errorf("module %s: no admission Deployment labelled %s in the cluster: is it installed, and does it have capabilities?", module, sel)
	}
	homes, err := locate.Read(ctx, cs, []string{module})
	if err != nil {
		return "", "", fmt.Errorf("find module %s: %w; give its namespace with --module-namespace", module, err)
	}
	sorted := homes.Sort(module, candidates)
	var notes []string
	for _, nb := range sorted.NotBelieved {
		notes = append(notes, fmt.Sprintf("not following the admission Deployment labelled as module %s's in namespace %s: %s", module, nb.Name, nb.Why))
	}
	switch {
	case sorted.Unconfirmed != "":
		return "", "", fmt.Errorf("module %s: admission Deployments labelled as its are in namespace %s, but none is confirmed as the module's: %s; "+
			"whoever may create a Deployment may label it so. Give the module's namespace with --module-namespace, or grant list on "+
			"validatingwebhookconfigurations, mutatingwebhookconfigurations and clusterrolebindings", module, strings.Join(candidates, ", "), sorted.Unconfirmed)
	case len(sorted.Believed) == 0:
		return "", "", fmt.Errorf("module %s: no admission Deployment in the namespace its cluster-scoped objects name; %s", module, strings.Join(notes, "; "))
	case len(sorted.Believed) > 1:
		var each []string
		for _, b := range sorted.Believed {
			each = append(each, b.Name+" ("+b.Why+")")
		}
		return "", "", fmt.Errorf("module %s: its cluster-scoped objects name %d namespaces holding its admission Deployment: %s; give the one to follow with --module-namespace",
			module, len(sorted.Believed), strings.Join(each, "; "))
	}
	b := sorted.Believed[0]
	if len(notes) > 0 {
		note = fmt.Sprintf("following module %s in namespace %s: %s; %s", module, b.Name, b.Why, strings.Join(notes, "; "))
	}
	return b.Name, note, nil
}

func admissionRunning(p *corev1.Pod) bool {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == "admission" && s.State.Running != nil {
			return true
		}
	}
	return false
}

// follower reads one pod's log; started again from its last line when the
// stream ends while the pod still runs.
type follower struct {
	cs    kubernetes.Interface
	ns    string
	pod   string
	since time.Time

	mu   sync.Mutex
	busy bool
	seen map[string]bool // UIDs read at the last second, not read twice
}

func (f *follower) running() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.busy
}

func (f *follower) start(ctx context.Context, wg *sync.WaitGroup, emit func(Decision)) {
	f.mu.Lock()
	f.busy = true
	since := metav1.NewTime(f.since)
	f.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			f.mu.Lock()
			f.busy = false
			f.mu.Unlock()
		}()
		stream, err := f.cs.CoreV1().Pods(f.ns).GetLogs(f.pod, &corev1.PodLogOptions{Container: "admission", Follow: true, SinceTime: &since}).Stream(ctx)
		if err != nil {
			return
		}
		defer func() { _ = stream.Close() }()
		f.read(stream, emit)
	}()
}

func (f *follower) read(r io.Reader, emit func(Decision)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		d, ok := Parse(f.pod, sc.Text())
		if !ok {
			continue
		}
		key := d.UID
		if d.Unlogged != nil {
			key = "unlogged/" + d.Time // a replica writes one a second at most
		}
		f.mu.Lock()
		if f.seen[key] {
			f.mu.Unlock()
			continue
		}
		if t, err := time.Parse(time.RFC3339Nano, d.Time); err == nil {
			if t.Truncate(time.Second).After(f.since) {
				f.seen = map[string]bool{}
			}
			f.since = t.Truncate(time.Second)
		}
		if f.seen == nil {
			f.seen = map[string]bool{}
		}
		f.seen[key] = true
		f.mu.Unlock()
		emit(d)
	}
}

// WriteJSON writes d as one line of JSON.
func WriteJSON(out io.Writer, d Decision) error {
	var v any = d
	if d.Unlogged != nil {
		v = struct {
			Time     string    `json:"time"`
			Pod      string    `json:"pod"`
			Unlogged *Unlogged `json:"unlogged"`
		}{d.Time, d.Pod, d.Unlogged}
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", data)
	return err
}

// Write prints d for people: one line, and the patch of a mutation on the
// next.
func Write(out io.Writer, d Decision) {
	at := d.Time
	if t, err := time.Parse(time.RFC3339Nano, d.Time); err == nil {
		at = t.Local().Format("15:04:05.000")
	}
	if u := d.Unlogged; u != nil {
		fmt.Fprintf(out, "%s UNLOGGED %s decisions (%s dry runs, %s denied) from %s on, over the replica's bound or a user's or namespace's share of it  [%s]\n    by: %s\n",
			at, u.Decisions, u.DryRuns, u.Denied, u.Second, d.Pod, u.By)
		return
	}
	obj := d.Kind
	if d.Subresource != "" {
		obj += "/" + d.Subresource
	}
	obj += " " + d.Name
	if d.Namespace != "" {
		obj += " in " + d.Namespace
	}
	by := d.Capability
	if d.Binding != "" {
		by += "/" + d.Binding
	}
	dry := ""
	if d.DryRun {
		dry = " (dry run)"
	}
	fmt.Fprintf(out, "%s %-7s %s %s%s by %s  [%s] %s\n", at, strings.ToUpper(d.Verdict), d.Operation, obj, dry, d.User, by, d.Took)
	if d.Message != "" {
		fmt.Fprintf(out, "    message: %s\n", d.Message)
	}
	if d.Warnings != "" {
		fmt.Fprintf(out, "    warnings: %s\n", d.Warnings)
	}
	if d.Patch != "" {
		fmt.Fprintf(out, "    patch: %s\n", d.Patch)
	}
	if len(d.Cut) > 0 {
		var cut []string
		for field, n := range d.Cut {
			cut = append(cut, fmt.Sprintf("%s (%d bytes)", field, n))
		}
		sort.Strings(cut)
		fmt.Fprintf(out, "    cut by the replica, too long to log whole: %s\n", strings.Join(cut, ", "))
	}
}

package deadlock

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Gate is one gate of a module.
type Gate struct {
	Name    string
	Phase   int
	Waits   spec.Object   // what it waits for; Kind "" when it waits for no Kubernetes object
	Creates []spec.Object // what its callback creates once its wait passed
	Site    string        // file:line of its declaration
}

// Webhook is a fail-closed webhook: installed statically with failurePolicy
// Fail, it rejects what it matches until its module serves.
type Webhook struct {
	Name       string // e.g. capability/binding
	Group      string
	Kind       string   // the kind it admits ("*" for any, as Group)
	Operations []string // CREATE, UPDATE, DELETE ("*" for all)
	Namespaces []string // empty = all namespaces
	// Except are namespaces whose requests the capability answers with
	// failurePolicy Ignore (FailurePolicyIn): the webhook never blocks there.
	Except []string
	Site   string
}

// Need is an object a container of the module cannot start without: a
// required Secret or ConfigMap its pod mounts, or that one of its variables
// reads.
type Need struct {
	Object spec.Object
	// Phase is the phase whose init container needs it; -1 for the
	// admission container, which serves.
	Phase int
	Why   string // e.g. "volume secret-x at /etc/x (main.go:12)"
}

// Module is one module as far as its startup goes: what the analysis reads
// of a spec.Module (see Of).
type Module struct {
	Name      string
	Namespace string
	// Ignored are the namespaces the module ignores.
	Ignored    []string
	Gates      []Gate
	FailClosed []Webhook
	Needs      []Need
	// Ships are the CRDs the module's install applies (the chart's crds/)
	// before its pods: their creator, the install, is the module's.
	Ships []spec.Object
}

// Of is what the analysis reads of a module: its gates, what they wait for
// and create, and its fail-closed webhooks.
func Of(m *spec.Module) Module {
	out := Module{Name: m.Name, Namespace: m.Namespace, Ignored: m.IgnoredNamespaces}
	for _, c := range m.CRDs {
		out.Ships = append(out.Ships, spec.Object{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Name: c.Name})
	}
	for _, g := range m.Gates() {
		dg := Gate{Name: g.Name, Phase: g.Phase, Creates: g.Creates, Site: g.Site}
		if g.Waits != nil {
			dg.Waits = *g.Waits
		}
		out.Gates = append(out.Gates, dg)
	}
	containers := []int{}
	for _, p := range m.Phases {
		containers = append(containers, p.Phase)
	}
	if m.HasAdmission() {
		containers = append(containers, -1)
	}
	for _, p := range containers {
		name := spec.AdmissionContainer
		if p >= 0 {
			name = spec.InitContainerName(p)
		}
		for _, r := range m.Requirements(name) {
			out.Needs = append(out.Needs, Need{Object: spec.Object{Version: "v1", Kind: r.Kind, Namespace: m.Namespace, Name: r.Name}, Phase: p, Why: r.Why})
		}
	}
	for _, b := range m.Bindings {
		// A subresource's webhook (pods/ephemeralcontainers,
		// deployments/scale) never stands in the way of creating an object.
		if !b.FailClosed || b.Subresource != "" {
			continue
		}
		w := Webhook{Name: b.ID(), Group: b.GVK.Group, Kind: b.GVK.Kind, Namespaces: b.Namespaces}
		for _, np := range b.NamespacePolicies {
			if np.Policy == admission.Ignore {
				w.Except = append(w.Except, np.Namespaces...)
			}
		}
		for _, op := range b.Operations {
			w.Operations = append(w.Operations, string(op))
		}
		out.FailClosed = append(out.FailClosed, w)
	}
	return out
}

// Cycle is one deadlock: the steps around it, each a sentence, e.g.
// "uds-core phase 1 (gate clusterconfig-initial at main.go:40) waits for ClusterConfig initial",
// "ClusterConfig initial is created only by uds-core phase 2 (gate x at main.go:52)",
// "uds-core phase 2 runs after phase 1".
type Cycle struct {
	Steps []string
	// Break says how to break it, when the analysis knows.
	Break string
}

// String joins the steps with arrows and ends back at the first one.
func (c Cycle) String() string {
	if len(c.Steps) == 0 {
		return ""
	}
	return strings.Join(c.Steps, " → ") + " → " + c.Steps[0]
}

// maxCycles bounds the cycles Find reports: the count of elementary cycles
// can grow exponentially, and past this many nobody reads them.
const maxCycles = 1000

// Find returns every distinct deadlock among the modules: each elementary
// cycle of blocking dependencies once, starting at its smallest node (modules
// by name; within a module its pods, then its phases in order — each phase
// before its gates, gates by name — then its serving webhooks), in that
// order. It reports at most 1000.
func Find(mods []Module) []Cycle {
	g := build(mods)
	live := g.live()
	adj := g.blocking(live)
	var out []Cycle
	for _, c := range elementaryCycles(adj) {
		var steps []string
		for i, v := range c {
			w := c[(i+1)%len(c)]
			for _, e := range adj[v] {
				if e.to == w {
					steps = append(steps, e.steps...)
					break
				}
			}
		}
		out = append(out, Cycle{Steps: steps})
	}
	return out
}

// The graph: node v depends on its edges' targets ("v cannot finish before
// them"). A node finishes once every "and" edge's target finished and, if it
// has "or" edges (the creators of what it waits for), one of their targets.
type graph struct {
	nodes []node
}

type node struct {
	and, or []edge
}

type edge struct {
	to    int
	steps []string // why the dependency exists, as sentences
}

// mod is a module with its nodes.
type mod struct {
	m            *Module
	install      int // its CRDs applied; -1 when it ships none
	pods         int
	serving      int
	phases       []int       // ascending, each with gates
	phaseNode    map[int]int // phase → node
	gatesOfPhase map[int][]*gateRef
	needNode     map[spec.Object]int // a needed object → its node: it exists
}

// gateRef is a gate with its nodes: wait (its wait passed) and done (its wait
// passed after the previous phase finished: its callback creates).
type gateRef struct {
	mod        *mod
	g          *Gate
	wait, done int
}

func (g *graph) add() int {
	g.nodes = append(g.nodes, node{})
	return len(g.nodes) - 1
}

func (g *graph) and(from, to int, steps ...string) {
	g.nodes[from].and = append(g.nodes[from].and, edge{to: to, steps: steps})
}

// build lays out the nodes in their reporting order and adds the edges.
func build(in []Module) *graph {
	mods := make([]*mod, len(in))
	for i := range in {
		mods[i] = &mod{m: &in[i], phaseNode: map[int]int{}, gatesOfPhase: map[int][]*gateRef{}, needNode: map[spec.Object]int{}}
	}
	slices.SortStableFunc(mods, func(a, b *mod) int { return cmp.Compare(a.m.Name, b.m.Name) })

	g := &graph{}
	gates := g.layout(mods)
	g.addModules(mods)
	g.addNeeds(mods, gates)
	g.addWaits(mods, gates)
	return g
}

// layout adds each module's nodes, in their reporting order, and returns
// the gates.
func (g *graph) layout(mods []*mod) []*gateRef {
	var gates []*gateRef
	for _, md := range mods {
		md.install = -1
		if len(md.m.Ships) > 0 {
			md.install = g.add()
		}
		md.pods = g.add()
		for i := range md.m.Gates {
			gt := &md.m.Gates[i]
			if _, ok := md.gatesOfPhase[gt.Phase]; !ok {
				md.phases = append(md.phases, gt.Phase)
			}
			md.gatesOfPhase[gt.Phase] = append(md.gatesOfPhase[gt.Phase], &gateRef{mod: md, g: gt})
		}
		slices.Sort(md.phases)
		for _, p := range md.phases {
			md.phaseNode[p] = g.add()
			refs := md.gatesOfPhase[p]
			slices.SortStableFunc(refs, func(a, b *gateRef) int { return cmp.Compare(a.g.Name, b.g.Name) })
			for _, r := range refs {
				r.wait, r.done = g.add(), g.add()
				gates = append(gates, r)
			}
		}
		md.serving = g.add()
		for _, n := range md.m.Needs {
			if _, ok := md.needNode[n.Object]; !ok {
				md.needNode[n.Object] = g.add()
			}
		}
	}
	return gates
}

// addModules adds each module's own edges: its pods need the other
// modules' fail-closed webhooks they must pass, its phases run in order, and
// it serves after the last.
func (g *graph) addModules(mods []*mod) {
	for _, md := range mods {
		name := md.m.Name
		// Its install applies its CRDs before its pods, through every
		// module's fail-closed webhooks that match them.
		if md.install >= 0 {
			g.and(md.pods, md.install, fmt.Sprintf("%s's pods are created only after its install applied its CRDs (crds/)", name))
			for _, o := range md.m.Ships {
				for _, n := range mods {
					// Its own webhooks are registered only once it serves,
					// after its install, and a restart does not apply again.
					if n == md {
						continue
					}
					if why := mustPass(n.m, o); why != "" {
						g.and(md.install, n.serving, fmt.Sprintf("%s's install applies %s", name, describe(o)), why)
					}
				}
			}
		}
		// Its pods are created by the Deployment and ReplicaSet controllers in
		// its namespace, through every other module's fail-closed webhooks.
		for _, n := range mods {
			if n == md {
				continue
			}
			var hooks []string
			for _, k := range podObjects {
				o := k
				o.Namespace = md.m.Namespace
				for _, h := range n.m.FailClosed {
					if admits(n.m, &h, o) {
						hooks = append(hooks, fmt.Sprintf("webhook %s%s on %s CREATE", h.Name, at(h.Site), o.Kind))
					}
				}
			}
			if len(hooks) > 0 {
				where := ""
				if md.m.Namespace != "" {
					where = " in namespace " + md.m.Namespace
				}
				g.and(md.pods, n.serving, fmt.Sprintf("%s's pods%s are created only once %s serves: they must pass its fail-closed %s",
					name, where, n.m.Name, strings.Join(hooks, " and ")))
			}
		}
		// Phases run in order, in the module's pods.
		for i, p := range md.phases {
			from := md.phaseNode[p]
			prev, why := md.before(i)
			g.and(from, prev, why)
			for _, r := range md.gatesOfPhase[p] {
				g.and(from, r.wait)
				g.and(r.done, prev, why)
				g.and(r.done, r.wait)
			}
		}
		// It serves once its last phase finished.
		if len(md.phases) == 0 {
			g.and(md.serving, md.pods, fmt.Sprintf("%s serves only once its pods exist", name))
		} else {
			last := md.phases[len(md.phases)-1]
			g.and(md.serving, md.phaseNode[last], fmt.Sprintf("%s serves only after its phase %d finished", name, last))
		}
	}
}

// addNeeds: a container cannot start before the objects it needs exist: a phase
// neither finishes nor runs its callbacks, the admission container does
// not serve. A needed object exists once one of its creators ran, and it
// passed every fail-closed webhook.
func (g *graph) addNeeds(mods []*mod, gates []*gateRef) {
	for _, md := range mods {
		for _, n := range md.m.Needs {
			need := md.needNode[n.Object]
			who := fmt.Sprintf("%s's admission container", md.m.Name)
			if n.Phase >= 0 {
				who = fmt.Sprintf("%s phase %d (init container %s)", md.m.Name, n.Phase, spec.InitContainerName(n.Phase))
			}
			why := fmt.Sprintf("%s cannot start before %s exists: %s", who, describe(n.Object), n.Why)
			if n.Phase < 0 {
				g.and(md.serving, need, why)
				continue
			}
			g.and(md.phaseNode[n.Phase], need, why)
			for _, r := range md.gatesOfPhase[n.Phase] {
				g.and(r.done, need, why)
			}
		}
		for o, need := range md.needNode {
			addCreators(g, mods, gates, need, o, "")
			for _, n := range mods {
				if why := mustPass(n.m, o); why != "" {
					g.and(need, n.serving, why)
				}
			}
		}
	}
}

// addWaits: a gate's wait needs one of the object's creators and every fail-closed
// webhook the object must pass.
func (g *graph) addWaits(mods []*mod, gates []*gateRef) {
	for _, r := range gates {
		o := r.g.Waits
		if o.Kind == "" {
			continue
		}
		if shipped([]*mod{r.mod}, o) {
			continue // met: its install applied it before its pods
		}
		waits := fmt.Sprintf("%s waits for %s", r.desc(), describe(o))
		addCreators(g, mods, gates, r.wait, o, waits)
		if shipped(mods, o) {
			continue // its install passed the webhooks, or is held up by them
		}
		for _, n := range mods {
			if why := mustPass(n.m, o); why != "" {
				g.and(r.wait, n.serving, waits, why)
			}
		}
	}
}

// addCreators makes node v, which needs object o, finish once one of o's
// creators did — a gate's callback, or the install of a module that ships
// it; first, when given, is the step that says why v needs o.
func addCreators(g *graph, mods []*mod, gates []*gateRef, v int, o spec.Object, first string) {
	type creator struct {
		desc string
		node int
	}
	var creators []creator
	for _, md := range mods {
		if md.install >= 0 && slices.ContainsFunc(md.m.Ships, func(cr spec.Object) bool { return creates(cr, o) }) {
			creators = append(creators, creator{md.m.Name + "'s install (its crds/)", md.install})
		}
	}
	for _, c := range gates {
		if slices.ContainsFunc(c.g.Creates, func(cr spec.Object) bool { return creates(cr, o) }) {
			creators = append(creators, creator{c.desc(), c.done})
		}
	}
	for i, c := range creators {
		s := fmt.Sprintf("%s is created only by %s", describe(o), c.desc)
		if len(creators) > 1 {
			var others []string
			for j, d := range creators {
				if j != i {
					others = append(others, d.desc)
				}
			}
			s += fmt.Sprintf(" (or by %s, blocked too)", strings.Join(others, ", "))
		}
		steps := []string{s}
		if first != "" {
			steps = []string{first, s}
		}
		g.nodes[v].or = append(g.nodes[v].or, edge{to: c.node, steps: steps})
	}
}

// shipped says whether a module's install applies o.
func shipped(mods []*mod, o spec.Object) bool {
	return slices.ContainsFunc(mods, func(md *mod) bool {
		return slices.ContainsFunc(md.m.Ships, func(cr spec.Object) bool { return creates(cr, o) })
	})
}

// podObjects are what the controllers create, in the module's namespace, for
// its pods to exist.
var podObjects = []spec.Object{
	{Group: "apps", Version: "v1", Kind: "ReplicaSet"},
	{Version: "v1", Kind: "Pod"},
}

// before is the node phase i of the module runs after, and why.
func (md *mod) before(i int) (int, string) {
	p := md.phases[i]
	if i == 0 {
		return md.pods, fmt.Sprintf("%s phase %d runs only once %s's pods exist", md.m.Name, p, md.m.Name)
	}
	q := md.phases[i-1]
	return md.phaseNode[q], fmt.Sprintf("%s phase %d runs after phase %d", md.m.Name, p, q)
}

func (r *gateRef) desc() string {
	return fmt.Sprintf("%s phase %d (gate %s%s)", r.mod.m.Name, r.g.Phase, r.g.Name, at(r.g.Site))
}

func at(site string) string {
	if site == "" {
		return ""
	}
	return " at " + site
}

// describe names an object: "ClusterConfig initial", "ConfigMap apps/x",
// "Pod with labels app=x in namespace apps", "any Secret".
func describe(o spec.Object) string {
	if o.Name != "" {
		if o.Namespace != "" {
			return o.Kind + " " + o.Namespace + "/" + o.Name
		}
		return o.Kind + " " + o.Name
	}
	s := "any " + o.Kind
	if o.Labels != "" {
		s = o.Kind + " with labels " + o.Labels
	}
	if o.Namespace != "" {
		s += " in namespace " + o.Namespace
	}
	return s
}

// creates says whether creating c may create what wait waits for: an
// unnamed create may have any name, an unnamed wait takes any name, a
// namespace left out may be any.
func creates(c, wait spec.Object) bool {
	return c.Group == wait.Group && c.Kind == wait.Kind &&
		(c.Name == "" || wait.Name == "" || c.Name == wait.Name) &&
		(c.Namespace == "" || wait.Namespace == "" || c.Namespace == wait.Namespace)
}

// live says which nodes finish: the least fixpoint of the rule in graph.
func (g *graph) live() []bool {
	live := make([]bool, len(g.nodes))
	for changed := true; changed; {
		changed = false
		for v, n := range g.nodes {
			if live[v] {
				continue
			}
			ok := !slices.ContainsFunc(n.and, func(e edge) bool { return !live[e.to] })
			if ok && len(n.or) > 0 {
				ok = slices.ContainsFunc(n.or, func(e edge) bool { return live[e.to] })
			}
			if ok {
				live[v], changed = true, true
			}
		}
	}
	return live
}

// blocking keeps the edges that hold a blocked node: "and" edges to blocked
// nodes, and "or" edges when every alternative is blocked. Every blocked node
// keeps one at least, so every blocked node leads into a cycle. Edges are
// sorted by target.
func (g *graph) blocking(live []bool) [][]edge {
	adj := make([][]edge, len(g.nodes))
	for v, n := range g.nodes {
		if live[v] {
			continue
		}
		for _, e := range n.and {
			if !live[e.to] {
				adj[v] = append(adj[v], e)
			}
		}
		if !slices.ContainsFunc(n.or, func(e edge) bool { return live[e.to] }) {
			adj[v] = append(adj[v], n.or...)
		}
		slices.SortStableFunc(adj[v], func(a, b edge) int { return cmp.Compare(a.to, b.to) })
	}
	return adj
}

// elementaryCycles lists each elementary cycle once, as its nodes starting at
// the smallest, in lexicographic order; at most maxCycles. It is Johnson's
// algorithm: for each start s, the circuits through s among the nodes above
// it that share its strongly connected component, with blocking, so the time
// between two cycles found is linear in the graph.
func elementaryCycles(adj [][]edge) [][]int {
	n := len(adj)
	fadj, radj := make([][]int, n), make([][]int, n)
	for v, es := range adj {
		for _, e := range es {
			fadj[v] = append(fadj[v], e.to)
			radj[e.to] = append(radj[e.to], v)
		}
	}
	var (
		out     [][]int
		fwd     = make([]bool, n)
		inSCC   = make([]bool, n)
		blocked = make([]bool, n)
		b       = make([][]int, n)
		path    []int
	)
	// mark sets seen for the nodes at or above s reachable from s along adj.
	mark := func(s int, seen []bool, adj [][]int) {
		clear(seen)
		seen[s] = true
		stack := []int{s}
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, u := range adj[v] {
				if u > s && !seen[u] {
					seen[u] = true
					stack = append(stack, u)
				}
			}
		}
	}
	var unblock func(u int)
	unblock = func(u int) {
		blocked[u] = false
		for _, w := range b[u] {
			if blocked[w] {
				unblock(w)
			}
		}
		b[u] = b[u][:0]
	}
	var circuit func(s, v int) bool
	circuit = func(s, v int) bool {
		found := false
		path = append(path, v)
		blocked[v] = true
		for _, e := range adj[v] {
			if len(out) >= maxCycles {
				return true
			}
			switch w := e.to; {
			case w == s:
				out = append(out, slices.Clone(path))
				found = true
			case inSCC[w] && !blocked[w]:
				if circuit(s, w) {
					found = true
				}
			}
		}
		if found {
			unblock(v)
		} else {
			for _, e := range adj[v] {
				if w := e.to; inSCC[w] && !slices.Contains(b[w], v) {
					b[w] = append(b[w], v)
				}
			}
		}
		path = path[:len(path)-1]
		return found
	}
	for s := 0; s < n && len(out) < maxCycles; s++ {
		if len(adj[s]) == 0 {
			continue
		}
		mark(s, fwd, fadj)
		mark(s, inSCC, radj)
		for v := range inSCC {
			inSCC[v] = inSCC[v] && fwd[v]
			blocked[v] = false
			b[v] = b[v][:0]
		}
		path = path[:0]
		circuit(s, s)
	}
	return out
}

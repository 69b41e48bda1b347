package modcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/operating/deadlock"
	"github.com/vigilkit/vigil/internal/operating/sizing"
	"github.com/vigilkit/vigil/internal/runtime/served"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/internal/shipping/manifests"
)

// WritePlan prints a module's phases and gates.
func WritePlan(out io.Writer, m *spec.Module) error {
	phases := m.Phases
	fmt.Fprintf(out, "module %s (namespace %s)\n", m.Name, m.Namespace)
	fp, err := m.Fingerprint()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "definition %s: its containers carry it (%s) and refuse to run under a definition that differs\n", fp.Sum, spec.EnvSpecHash)
	if len(phases) == 0 {
		fmt.Fprintln(out, "\nno startup gates: the deployment gets no gate init containers")
		writeCRDs(out, m)
		if err := writeConfig(out, m); err != nil {
			return err
		}
		if err := writeCapabilities(out, m); err != nil {
			return err
		}
		writeTrust(out, m)
		if err := writeWatcher(out, m); err != nil {
			return err
		}
		return writeRBAC(out, m)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, p := range phases {
		fmt.Fprintf(tw, "\nphase %d\tinit container %s: gate --phase %d\n", p.Phase, p.InitContainer, p.Phase)
		for _, g := range p.Gates {
			var how []string
			if g.Optional {
				how = append(how, "optional")
			} else {
				how = append(how, "required")
			}
			if g.Timeout > 0 {
				how = append(how, "timeout "+g.Timeout.String())
			} else {
				how = append(how, "no timeout")
			}
			if g.Fallback {
				how = append(how, "fallback on timeout")
			}
			waits := g.WaitsFor
			if w := g.Waits; w != nil && w.Kind == "CustomResourceDefinition" {
				if _, own := m.OwnCRD(w.Name); own {
					waits += " (the module's own CRD: its install applies it)"
				}
			}
			fmt.Fprintf(tw, "  %s\t%s\t[%s]\t%s\n", g.Name, waits, strings.Join(how, ", "), g.Site)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out, "\ninit containers, in order:")
	for _, p := range phases {
		fmt.Fprintf(out, "  %s\n", p.InitContainer)
	}
	writeCRDs(out, m)
	if err := writeConfig(out, m); err != nil {
		return err
	}
	if err := writeCapabilities(out, m); err != nil {
		return err
	}
	writeTrust(out, m)
	if err := writeWatcher(out, m); err != nil {
		return err
	}
	return writeRBAC(out, m)
}

// writeConfig prints the author's variables and volumes, the containers
// that get each, and the startup dependencies among them.
// writeCRDs lists the CustomResourceDefinitions the module ships, and its
// declared settings.
func writeCRDs(out io.Writer, m *spec.Module) {
	if len(m.Settings) > 0 {
		fmt.Fprintln(out, "\nsettings (vigil.Setting; every container gets them as resolved here):")
		for _, s := range m.Settings {
			fmt.Fprintf(out, "  %s=%q (default %q; %s)\n", s.Name, s.Value, s.Default, s.Site)
		}
	}
	if len(m.CRDs) == 0 {
		return
	}
	fmt.Fprintln(out, "\nits own kinds (CRDs shipped with the install, before its pods; the chart's crds/):")
	for _, c := range m.CRDs {
		fmt.Fprintf(out, "  %s: %s (%s, %s; %s)\n", c.Name, c.Kind, strings.Join(c.Versions, ", "), c.Scope, c.Site)
	}
}

func writeConfig(out io.Writer, m *spec.Module) error {
	if len(m.Env) == 0 && len(m.Mounts) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	if len(m.Env) > 0 {
		fmt.Fprintln(tw, "\nenvironment (the author's):")
		for _, e := range m.Env {
			value := fmt.Sprintf("%q", e.Value)
			if f := e.From; f != nil {
				value = fmt.Sprintf("key %s of %s %s/%s, %s", f.Key, f.Kind, m.Namespace, f.Name, requiredOrOptional(f.Optional))
			}
			fmt.Fprintf(tw, "  %s\t%s\t→ %s\t%s\n", e.Name, value, strings.Join(e.Containers, ", "), e.Site)
		}
	}
	if len(m.Mounts) > 0 {
		fmt.Fprintln(tw, "\nvolumes (the author's, read-only):")
		for _, mt := range m.Mounts {
			keys := "every key"
			if len(mt.Keys) > 0 {
				keys = "keys " + strings.Join(mt.Keys, ", ")
			}
			fmt.Fprintf(tw, "  %s\t%s %s/%s (%s), %s\tat %s → %s\t%s\n", mt.Volume, mt.Kind, m.Namespace, mt.Name, keys, requiredOrOptional(mt.Optional), mt.Path, strings.Join(mt.Containers, ", "), mt.Site)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var containers []string
	for _, p := range m.Phases {
		containers = append(containers, p.InitContainer)
	}
	if m.HasAdmission() {
		containers = append(containers, spec.AdmissionContainer)
	}
	if m.HasWatcher() {
		containers = append(containers, spec.WatcherContainer)
	}
	first := true
	for _, c := range containers {
		for _, r := range m.Requirements(c) {
			if first {
				fmt.Fprintln(out, "\nstartup dependencies: these containers do not start until the object exists:")
				first = false
			}
			fmt.Fprintf(out, "  %s needs %s %s/%s: %s\n", c, r.Kind, m.Namespace, r.Name, r.Why)
		}
	}
	return nil
}

func requiredOrOptional(optional bool) string {
	if optional {
		return "optional"
	}
	return "required"
}

// writeRBAC prints every rule the module's ServiceAccount gets, and why.
func writeRBAC(out io.Writer, d *spec.Module) error {
	rules := manifests.Rules(d)
	if len(rules) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\nRBAC, derived (`manifests` renders it) for the ServiceAccounts of namespace %s:\n", d.Namespace)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SERVICEACCOUNT\tSCOPE\tVERBS\tRESOURCE\tNAMES\tWHY")
	for _, r := range rules {
		scope := "cluster"
		if r.Namespace != "" {
			scope = r.Namespace
		}
		res := ruleResources(r.Resources, r.APIGroups)
		names := strings.Join(r.ResourceNames, ",")
		if names == "" {
			names = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", manifests.ServiceAccount(d.Name, r.Role), scope, strings.Join(r.Verbs, ","), res, names, r.Why)
	}
	return tw.Flush()
}

// ruleResources names a rule's resources as kubectl does: resource.group,
// and a subresource after it (tenants.example.dev/status).
func ruleResources(resources, groups []string) string {
	group := strings.Join(groups, ",")
	out := make([]string, len(resources))
	for i, r := range resources {
		base, sub, found := strings.Cut(r, "/")
		if group != "" {
			base += "." + group
		}
		if found {
			base += "/" + sub
		}
		out[i] = base
	}
	return strings.Join(out, ",")
}

func writeWatcher(out io.Writer, m *spec.Module) error {
	w := watching(m)
	if len(w.bindings) == 0 && len(w.schedules) == 0 && len(w.informers) == 0 && !m.Audited() {
		return nil
	}
	fmt.Fprintln(out, "\nwatcher (one active replica, by leader election):")
	for _, b := range w.bindings {
		fmt.Fprintf(out, "  %s\n", b)
	}
	if m.Audited() {
		what := "the validations over the existing objects"
		if m.AuditsMutations() {
			what += ", and the mutations with an outage bound over what got in while they were failed open"
		}
		fmt.Fprintf(out, "  audit: %s, once the webhooks enforce and every --audit-interval; findings as Events, log lines, metrics, each capability's Store key vigil.audit and PolicyReports (wgpolicyk8s.io) where the cluster serves them\n", what)
	}
	for _, s := range w.schedules {
		fmt.Fprintf(out, "  schedule %s\n", s)
	}
	if len(w.informers) > 0 {
		fmt.Fprintln(out, "  shared informers (one per type, for watches and listers):")
		for _, i := range w.informers {
			fmt.Fprintf(out, "    %s\n", i)
		}
	}
	return nil
}

// watched is what `plan` says of the watcher role.
type watched struct{ bindings, schedules, informers []string }

func watching(m *spec.Module) watched {
	var w watched
	users := append([]spec.Lister(nil), m.Listers...)
	atAdmission := map[string]bool{} // the Finalize bindings' policies, by name
	for _, st := range registration.FinalizerStamps(m) {
		atAdmission[st.Policy.Name] = true
	}
	for _, b := range m.Watches {
		line := fmt.Sprintf("%s %s %s", b.ID(), b.Role, b.GVK.Kind)
		if b.Role == spec.RoleFinalize {
			line += " (finalizer " + b.Finalizer
			if name := spec.FinalizerPolicyName(m.Name, b.Finalizer); atAdmission[name] {
				line += fmt.Sprintf(", put on as objects are created by MutatingAdmissionPolicy %s where the cluster serves it by default (Kubernetes 1.%d on), else by the watcher once it sees them",
					name, served.MutatingAdmissionPolicy.Versions[0].Since)
			} else {
				line += ", put on by the watcher once it sees an object: a filter has no CEL form for admission"
			}
			line += ")"
		}
		if b.Role == spec.RoleOrdered {
			line += " (every event in order, one queue per " + string(b.Queue) + ")"
		}
		w.bindings = append(w.bindings, line+filtersOf(b.Filters)+" ("+b.Site+")")
		users = append(users, b.Lister())
	}
	for _, s := range m.Schedules {
		var how []string
		if !s.StartAt.IsZero() {
			how = append(how, "from "+s.StartAt.Format(time.RFC3339))
		}
		if s.Completions > 0 {
			how = append(how, fmt.Sprintf("%d completions", s.Completions))
		}
		if s.SkipMissed {
			how = append(how, "missed ticks skipped")
		} else {
			how = append(how, "a missed tick made up once")
		}
		w.schedules = append(w.schedules, fmt.Sprintf("%s %s, %s; state in the Store as %s (%s)", s.Name, s.When, strings.Join(how, ", "), s.StateKey(), s.Site))
	}
	for _, ag := range spec.Agree(users) {
		holds := "whole objects, managed fields dropped"
		if ag.Metadata {
			holds = "metadata only (vigil.Metadata)"
		}
		w.informers = append(w.informers, fmt.Sprintf("%s: %s; holds %s", ag.GVK.Kind, ag.Selects(), holds))
	}
	return w
}

func writeCapabilities(out io.Writer, m *spec.Module) error {
	if len(m.Capabilities) == 0 {
		return nil
	}
	fmt.Fprintln(out, "\ncapabilities:")
	for _, c := range m.Capabilities {
		where := "cluster-wide"
		if len(c.Namespaces) > 0 {
			where = "in " + strings.Join(c.Namespaces, ", ")
		}
		if c.FailClosed {
			fmt.Fprintf(out, "  %s (%s): fail-closed: static webhooks with failurePolicy Fail from install on; only what they never see passes unchecked\n", c.Name, where)
		} else {
			fmt.Fprintf(out, "  %s (%s): registered when ready (failurePolicy Ignore until the canary proves the API server reaches the module, then %s); until then these pass unchecked (the audit after registration reports them):\n", c.Name, where, m.FailurePolicy)
		}
		fmt.Fprintf(out, "    mode %s: %s\n", modeOf(c), modeMeaning[modeOf(c)])
		for _, np := range c.NamespacePolicies {
			fmt.Fprintf(out, "    failurePolicy %s in namespaces %s (FailurePolicyIn, %s): a webhook of their own answers their requests with %s when the module fails or cannot be reached; the capability's other webhook leaves them out\n",
				np.Policy, strings.Join(np.Namespaces, ", "), np.Site, np.Policy)
		}
		if c.JoinDenials {
			fmt.Fprintf(out, "    denials joined (JoinDenials): every validation runs, and the denials are answered together, joined with \"; \"\n")
		}
		for _, b := range m.BindingsOf(c.Name) {
			what, ops := target(b.GVK.Kind, b.Subresource, b.Resource(), b.Operations)
			served := ""
			if b.IfServed {
				served = "; registered only while its kind is served (IfServed)"
			}
			if b.StatusMetadata() {
				served += "; also " + b.Resource() + "/" + spec.StatusSubresource + " writes that change labels or annotations, which the API server lets through that subresource"
			}
			fmt.Fprintf(out, "    %s %s %s %s%s (%s%s)\n", b.Name, b.Action, what, ops, filtersOf(b.Filters), b.Site, served)
		}
		if f := c.FailOpen; f != nil {
			guard := ""
			if c.OptOut != nil || c.OptIn != nil {
				guard = "; the label's guard never fails open"
			}
			fmt.Fprintf(out, "    fails open after %s of outage (FailOpenAfter, %s): once no admission replica has served for %s, the watcher sets these webhooks to failurePolicy Ignore and the bindings above pass unchecked until a replica serves again%s\n", f.After, f.Site, f.After, guard)
		}
		for _, ck := range m.ChecksOf(c.Name) {
			what, ops := target(ck.GVK.Kind, ck.Subresource, ck.Resource(), ck.Operations)
			if ck.StatusMetadata() {
				ops += " (and " + ck.Resource() + "/" + spec.StatusSubresource + " writes that change labels or annotations)"
			}
			fmt.Fprintf(out, "    %s require %s %s (%s): %s — checked by the API server itself (ValidatingAdmissionPolicy %s), from install on, whether the module runs or not\n",
				ck.Name, what, ops, ck.Site, ck.Expression, spec.CheckName(m.Name, c.Name, ck.Name))
		}
		fmt.Fprintln(out, "    never sent to its webhooks, so these pass unchecked even while it enforces:")
		for _, e := range m.ExclusionPolicy().Of(m.Name, c).Lines() {
			fmt.Fprintf(out, "      %s\n", e)
		}
	}
	return nil
}

// target is what a binding or check admits, as plan prints it: its kind, or
// kubectl's form of its subresource (deployments/scale), and its operations.
func target(kind, subresource, resource string, operations []admissionv1.Operation) (what, ops string) {
	names := make([]string, len(operations))
	for i, op := range operations {
		names[i] = string(op)
	}
	if subresource != "" {
		kind = resource
	}
	return kind, strings.Join(names, ",")
}

// modeOf is a capability's mode; Enforce in a plan written before modes.
func modeOf(c spec.Capability) spec.Mode {
	if c.Mode == "" {
		return spec.Enforce
	}
	return c.Mode
}

// modeMeaning says what `plan` says of each mode.
var modeMeaning = map[spec.Mode]string{
	spec.Enforce: "its validations' denials are enforced",
	spec.Warn:    "its validations' denials are not enforced: answered as allows, with the denial as a warning to the client; mutations apply as ever",
	spec.Audit:   "its validations' denials are not enforced: answered as allows, silently, and recorded as findings (log event audit-finding, vigil_admission_unenforced_denials_total); mutations apply as ever",
}

// WritePlanJSON writes the module's resolved definition as JSON
// (spec.SchemaVersion), for tools: vigil dev, another module's plan --with.
func WritePlanJSON(out io.Writer, m *spec.Module) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(m)
}

func planCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "plan",
		Short: "Print the module's phases, init containers, webhooks, RBAC, and any startup deadlock",
		Long: `Print what the module will do: its gate phases and the init containers that
run them, its capabilities and how their webhooks are registered, its watcher,
the RBAC its manifests derive (each rule with why), and a deadlock analysis: a
gate waiting for an object one of the module's own fail-closed webhooks must
admit, a phase waiting for what only a later phase creates, or — with --with,
given other modules' ` + "`plan -o json`" + ` — modules whose gates wait on each other.
With --cluster it also reads the cluster's mutating and validating webhook
configurations (a cluster viewer's rights) and reports each fail-closed webhook
of another component (istiod's sidecar injector, for instance) that intercepts
the module's pods while one of the module's fail-closed webhooks intercepts
that component's pods: once both are down, neither comes back.
With --cluster it also counts the objects each informer of each role selects
there, measures what one takes as the informer holds it, and says whether the
role fits its memory limit (--admission-memory-limit, --watcher-memory-limit:
what the install will set), during a relist too.
A deadlock, or a role that would not fit, makes plan exit 1 and says why.`,
	}
}

// PlanFlags are the flags of `<module> plan`.
type PlanFlags struct {
	Output     string
	With       []string
	Cluster    bool
	Kubeconfig string
	Context    string
	// AdmissionMemory and WatcherMemory are the roles' memory limits the
	// install will set, for --cluster's sizing.
	AdmissionMemory, WatcherMemory string
}

// NewPlanFlags returns the flags.
func NewPlanFlags() *PlanFlags { return &PlanFlags{} }

// AddFlags declares the flags.
func (f *PlanFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&f.Output, "output", "o", "text", "text, or json for tools (vigil dev) and for another module's --with")
	fs.StringSliceVar(&f.With, "with", nil, "other modules' `plan -o json` files: find deadlocks across the modules")
	fs.BoolVar(&f.Cluster, "cluster", false, "also find deadlocks with the fail-closed webhooks of the cluster the kubeconfig names")
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "with --cluster: kubeconfig file; KUBECONFIG or ~/.kube/config otherwise")
	fs.StringVar(&f.Context, "context", "", "with --cluster: kubeconfig context")
	fs.StringVar(&f.AdmissionMemory, "admission-memory-limit", manifests.AdmissionMemoryLimit, "with --cluster: the admission pods' memory limit the install sets (the chart's admission.resources.limits.memory)")
	fs.StringVar(&f.WatcherMemory, "watcher-memory-limit", manifests.WatcherMemoryLimit, "with --cluster: the watcher pods' memory limit the install sets (the chart's watcher.resources.limits.memory)")
}

// ToOptions reads the other modules and checks the output format.
func (f *PlanFlags) ToOptions(m *spec.Module, out io.Writer) (*PlanOptions, error) {
	others, err := readOtherModules(f.With)
	if err != nil {
		return nil, err
	}
	o := &PlanOptions{Module: m, Out: out, Others: others, Limits: map[string]int64{}}
	for role, limit := range map[string]string{spec.PodAdmission: f.AdmissionMemory, spec.PodWatcher: f.WatcherMemory} {
		q, err := resource.ParseQuantity(limit)
		if err != nil || q.Value() <= 0 {
			return nil, fmt.Errorf("--%s-memory-limit %q: expected a memory quantity, as in 512Mi or 2Gi", role, limit)
		}
		o.Limits[role] = q.Value()
	}
	if f.Cluster {
		if o.Cluster, err = cmdutil.LoadConfig(f.Kubeconfig, f.Context); err != nil {
			return nil, fmt.Errorf("--cluster: %w", err)
		}
	} else if f.Kubeconfig != "" || f.Context != "" {
		return nil, errors.New("--kubeconfig, --context: it reads a cluster with --cluster only: add --cluster to find deadlocks with the cluster's webhooks")
	}
	switch f.Output {
	case "", "text":
	case "json":
		o.JSON = true
	default:
		return nil, fmt.Errorf("-o %q: expected text or json", f.Output)
	}
	return o, nil
}

// PlanOptions are a printing of the module's plan.
type PlanOptions struct {
	Module *spec.Module
	Out    io.Writer
	// Others are the modules the deadlock analysis spans besides this one.
	Others []deadlock.Module
	// JSON prints the resolved definition for tools instead of words.
	JSON bool
	// Cluster, when set, is the cluster whose other webhooks the analysis
	// spans too, and whose objects the roles' informers are sized by.
	Cluster *rest.Config
	// Limits are the roles' memory limits, in bytes, by role.
	Limits map[string]int64
}

// Run prints the plan; in words, it ends with the deadlock analysis and
// returns ErrDeadlock when it found any.
func (o *PlanOptions) Run(ctx context.Context) error {
	if o.JSON {
		return WritePlanJSON(o.Out, o.Module)
	}
	if err := WritePlan(o.Out, o.Module); err != nil {
		return err
	}
	own := writeDeadlocks(o.Out, findDeadlocks(o.Module, o.Others), o.Others)
	if o.Cluster == nil {
		return own
	}
	if err := writeServed(ctx, o.Out, o.Cluster, o.Module); err != nil {
		return err
	}
	cycles, read, missing, err := clusterDeadlocks(ctx, o.Cluster, o.Module)
	if err != nil {
		return err
	}
	if err := writeClusterDeadlocks(o.Out, cycles, read, missing); err != nil && own == nil {
		own = err
	}
	infs, err := sizing.Measure(ctx, o.Cluster, o.Module)
	if err != nil {
		return fmt.Errorf("--cluster: size the informers: %w", err)
	}
	if err := writeSizing(o.Out, infs, o.Limits); err != nil && own == nil {
		own = err
	}
	return own
}

// filtersOf says what a binding's filters select, as ", in namespaces
// [apps], named web"; "" when it has none.
func filtersOf(filters []spec.Filter) string {
	var out string
	for _, f := range filters {
		out += ", " + f.Describe
	}
	return out
}

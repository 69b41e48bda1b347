package status

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteJSON writes the report as one JSON document (SchemaVersion).
func WriteJSON(out io.Writer, r *Report) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Write prints the report for people; now dates the ages it prints.
func Write(out io.Writer, r *Report, now time.Time) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	if r.Kubernetes != "" {
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(r.Served)) {
			kinds = append(kinds, k+" "+orValue(r.Served[k], "not served"))
		}
		fmt.Fprintf(tw, "cluster: Kubernetes %s (%s)\n\n", r.Kubernetes, strings.Join(kinds, ", "))
	}
	if len(r.Modules) == 0 {
		fmt.Fprintln(tw, "no vigil module found (Deployments labelled app.kubernetes.io/part-of and component admission or watcher, whose pods carry vigil.dev/spec-hash)")
	}
	for i, m := range r.Modules {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		writeModule(tw, &m, now)
	}
	for i, nb := range r.NotBelieved {
		if i == 0 {
			fmt.Fprintln(tw, "\nnot taken for a module, though labelled as one's (anyone who may create Deployments there may label them so):")
		}
		fmt.Fprintf(tw, "  module %s in namespace %s (Deployments %s): %s\n", nb.Module, nb.Namespace, strings.Join(nb.Deployments, ", "), nb.Why)
	}
	for i, mi := range r.Missing {
		if i == 0 {
			fmt.Fprintln(tw, "\nnot shown, for lack of a right (grant it, or ask someone who has it):")
		}
		fmt.Fprintf(tw, "  %s\n", mi)
	}
	return tw.Flush()
}

func writeModule(w io.Writer, m *Module, now time.Time) {
	fmt.Fprintf(w, "module %s (namespace %s)\tversion %s\tdefinition %s\n", m.Name, m.Namespace, m.Version, orNone(m.Spec))
	if m.Unconfirmed != "" {
		fmt.Fprintf(w, "  namespace %s not confirmed as the module's, only its Deployments' labels say so: %s\n", m.Namespace, m.Unconfirmed)
	}
	if len(m.Candidates) > 1 {
		believed := "believed: " + m.Located
		if m.Unconfirmed != "" {
			believed = "none confirmed, each shown"
		}
		fmt.Fprintf(w, "  Deployments labelled as module %s are in %d namespaces (%s); this one is %s\n", m.Name, len(m.Candidates), strings.Join(m.Candidates, ", "), believed)
	}
	for _, r := range m.Roles {
		fmt.Fprintf(w, "  %s\t%d/%d ready\t%d updated\n", r.Name, r.Ready, r.Desired, r.Updated)
	}
	for _, e := range m.Exited {
		fmt.Fprintf(w, "  admission %s\n", e)
	}
	for _, r := range m.Roles {
		if r.CreateRefused != "" {
			fmt.Fprintf(w, "  %s pods cannot be created, for %s: %s\n", r.Name, age(now, *r.RefusedSince), r.CreateRefused)
		}
	}
	for _, p := range m.Starting {
		what := "waiting to start its first init container"
		if p.InitContainer != "" {
			what = fmt.Sprintf("in phase %d (%s)", p.Phase, p.InitContainer)
		}
		if p.Since != nil {
			what += " for " + age(now, *p.Since)
		}
		if p.Restarts > 0 {
			what += fmt.Sprintf(", restarted %d times", p.Restarts)
		}
		fmt.Fprintf(w, "  starting pod %s: %s\n", p.Pod, what)
		if p.Waiting != "" {
			fmt.Fprintf(w, "    the kubelet: %s\n", p.Waiting)
		}
		if g := p.Gate; g != nil {
			fmt.Fprintf(w, "    gate %s %s ago: %s\n", strings.ToLower(g.Reason), age(now, g.At), g.Message)
		}
		for _, gw := range p.Waits {
			fmt.Fprintf(w, "    gate %s waits for %s, for %s; last saw: %s\n", gw.Gate, gw.WaitsFor, gw.For, gw.LastSeen)
		}
	}
	if len(m.Registration) > 0 {
		fmt.Fprintln(w, "  webhooks:")
	}
	for _, c := range m.Registration {
		state := c.State
		if c.RegisteredBy != "" {
			state += " by version " + c.RegisteredBy
		}
		if c.Enforced != "" {
			state += ", enforced since " + c.Enforced
		}
		if c.FailedOpenSince != "" {
			state += fmt.Sprintf(", failed open since %s: %s", c.FailedOpenSince, strings.Join(c.FailedOpen, ", "))
		}
		fmt.Fprintf(w, "    %s %s\t%s\n", c.Kind, c.Name, state)
		if c.Problem != "" {
			fmt.Fprintf(w, "      problem since %s: %s\n", c.ProblemSince, c.Problem)
		}
		for _, h := range c.Webhooks {
			fmt.Fprintf(w, "      %s\tfailurePolicy %s\n", h.Name, h.FailurePolicy)
		}
		for _, rp := range c.Repairs {
			fmt.Fprintf(w, "      drifted and repaired at %s: %s\n", rp.At, rp.Drift)
		}
	}
	for i, rp := range m.Events {
		if i == 0 {
			fmt.Fprintln(w, "  registration events (newest first):")
		}
		count := ""
		if rp.Count > 1 {
			count = fmt.Sprintf(" (%d times)", rp.Count)
		}
		fmt.Fprintf(w, "    %s %s%s: %s\n", rp.At.Format(time.RFC3339), rp.Reason, count, rp.Message)
	}
	for i, o := range m.Outages {
		if i == 0 {
			fmt.Fprintln(w, "  outages (webhooks failed open):")
		}
		to := o.To
		if to == "" {
			to = "now, still open"
		}
		fmt.Fprintf(w, "    %s to %s: %s\n", o.From, to, strings.Join(o.Webhooks, ", "))
	}
	switch {
	case !m.Audit.Served:
		fmt.Fprintln(w, "  audit: the cluster serves no PolicyReports; findings are in the module's Store (vigil.audit) and Events")
	case len(m.Audit.Reports) == 0:
		fmt.Fprintln(w, "  audit: no findings")
	default:
		fmt.Fprintf(w, "  audit: %d failing, %d warning in %d PolicyReports\n", m.Audit.Fail, m.Audit.Warn, len(m.Audit.Reports))
		for _, pr := range m.Audit.Reports {
			fmt.Fprintf(w, "    %s\tfail %d\twarn %d\tpass %d\n", join(pr.Namespace, pr.Name), pr.Fail, pr.Warn, pr.Pass)
		}
	}
	if len(m.Interceptors) == 0 {
		fmt.Fprintln(w, "  other webhooks on its pods: none")
	} else {
		fmt.Fprintln(w, "  other webhooks called when its pods are created:")
	}
	for _, in := range m.Interceptors {
		by := ""
		if in.Service != "" {
			by = ", served by " + in.Service
		}
		fmt.Fprintf(w, "    %s %s/%s\tfailurePolicy %s%s\n", in.Kind, in.Configuration, in.Webhook, in.FailurePolicy, by)
	}
	for i, d := range m.Deadlocks {
		if i == 0 {
			fmt.Fprintln(w, "  DEADLOCKS with other webhooks (once both are down, neither comes back):")
		}
		fmt.Fprintf(w, "    %d. %s\n", i+1, d)
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func join(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func age(now, t time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	return d.Round(time.Second).String()
}

// orValue is v, or otherwise when v is empty.
func orValue(v, otherwise string) string {
	if v == "" {
		return otherwise
	}
	return v
}

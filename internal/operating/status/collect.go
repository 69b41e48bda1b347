package status

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/operating/deadlock"
	"github.com/vigilkit/vigil/internal/operating/locate"
	"github.com/vigilkit/vigil/internal/runtime/events"
	"github.com/vigilkit/vigil/internal/runtime/served"
	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/internal/shipping/manifests"
)

// Clients are what Collect reads with.
type Clients struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
}

// Options narrow a report.
type Options struct {
	// Module is the one module to report; every module when empty.
	Module string
	// Namespace limits the search for modules to one namespace (a reader
	// who may list Deployments there only); every namespace when empty.
	Namespace string
}

// vigilSelector selects the objects of modules: labelled with the module
// they are part of and named after it (managed-by says vigil, or Helm for a
// chart's). A module's Deployments carry the definition's fingerprint on
// their pod template besides (manifests.SpecAnnotation).
const vigilSelector = "app.kubernetes.io/part-of,app.kubernetes.io/name"

// Collect reads the report. Only an error other than a missing right (the
// API server unreachable) fails it.
func Collect(ctx context.Context, c Clients, o Options) (*Report, error) {
	r := &collector{Clients: c, report: &Report{SchemaVersion: SchemaVersion, Modules: []Module{}}}
	if cluster, err := served.Discover(ctx, c.Kube.Discovery()); err == nil {
		r.report.Kubernetes = cluster.GitVersion
		r.report.Served = map[string]string{}
		for _, k := range served.Kinds {
			r.report.Served[k.Name] = cluster.APIVersion(k)
		}
	}
	sel := vigilSelector + ",app.kubernetes.io/component in (admission,watcher)"
	if o.Module != "" {
		sel += ",app.kubernetes.io/part-of=" + o.Module
	}
	deps, err := c.Kube.AppsV1().Deployments(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		if !apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("list the modules' Deployments: %w", err)
		}
		r.missing("list", "deployments.apps", o.Namespace, err)
		deps = &appsv1.DeploymentList{}
	}
	// A module's Deployments are grouped by namespace: labels anyone who
	// may create a Deployment writes do not say which namespace is the
	// module's; its cluster-scoped objects do (internal/operating/locate).
	type home struct{ module, namespace string }
	byModule := map[home]*Module{}
	podLabels := map[home]map[string]string{}
	deployments := map[home][]string{}
	candidates := map[string][]string{}
	for _, d := range deps.Items {
		name := d.Labels["app.kubernetes.io/part-of"]
		if _, ok := d.Spec.Template.Annotations[manifests.SpecAnnotation]; !ok || d.Labels["app.kubernetes.io/name"] != name {
			continue // not a vigil module's
		}
		key := home{name, d.Namespace}
		deployments[key] = append(deployments[key], d.Name)
		m, ok := byModule[key]
		if !ok {
			m = &Module{Name: name, Namespace: d.Namespace, Version: d.Labels["app.kubernetes.io/version"], Roles: []Role{}}
			byModule[key] = m
			candidates[name] = append(candidates[name], d.Namespace)
		}
		role := d.Labels["app.kubernetes.io/component"]
		if role == "admission" || m.Spec == "" {
			m.Spec = d.Spec.Template.Annotations[manifests.SpecAnnotation]
		}
		if role == "admission" {
			podLabels[key] = d.Spec.Template.Labels
		}
		rr := Role{Name: role, Desired: ptr.Deref(d.Spec.Replicas, 1), Ready: d.Status.ReadyReplicas, Updated: d.Status.UpdatedReplicas}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
				rr.CreateRefused, rr.RefusedSince = c.Message, ptr.To(c.LastTransitionTime.Time)
			}
		}
		m.Roles = append(m.Roles, rr)
	}
	var names []string
	for name := range candidates {
		names = append(names, name)
	}
	sort.Strings(names)
	homes, err := locate.Read(ctx, c.Kube, names)
	if err != nil {
		return nil, fmt.Errorf("find where the modules are installed: %w", err)
	}
	r.report.Missing = append(r.report.Missing, homes.Missing...)
	hooks, missing, err := deadlock.ReadHooks(ctx, c.Kube)
	if err != nil {
		return nil, err
	}
	r.report.Missing = append(r.report.Missing, missing...)
	for _, name := range names {
		sort.Strings(candidates[name])
		sorted := homes.Sort(name, candidates[name])
		for _, nb := range sorted.NotBelieved {
			r.report.NotBelieved = append(r.report.NotBelieved, NotBelieved{Module: name, Namespace: nb.Name, Deployments: deployments[home{name, nb.Name}], Why: nb.Why})
		}
		for _, b := range sorted.Believed {
			key := home{name, b.Name}
			m := byModule[key]
			if sorted.Unconfirmed != "" {
				m.Unconfirmed = sorted.Unconfirmed
			} else {
				m.Located = b.Why
			}
			if len(candidates[name]) > 1 {
				m.Candidates = candidates[name]
			}
			sort.Slice(m.Roles, func(i, j int) bool { return m.Roles[i].Name < m.Roles[j].Name })
			r.pods(ctx, m)
			r.registration(ctx, m)
			r.audit(ctx, m)
			r.interceptors(ctx, m, podLabels[key], hooks)
			r.report.Modules = append(r.report.Modules, *m)
		}
	}
	sort.Strings(r.report.Missing)
	r.report.Missing = compact(r.report.Missing)
	return r.report, nil
}

type collector struct {
	Clients
	report *Report
	// events are the pod Events of each namespace read so far.
	events map[string][]corev1.Event
}

// podEvents lists the Events on pods in ns, once a report: a starting pod's
// gate and the drifts its admission pods repaired are read from them.
func (r *collector) podEvents(ctx context.Context, ns string) []corev1.Event {
	if evs, ok := r.events[ns]; ok {
		return evs
	}
	var evs []corev1.Event
	list, err := r.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod"})
	if err != nil {
		r.missing("list", "events", ns, err)
	} else {
		evs = list.Items
	}
	if r.events == nil {
		r.events = map[string][]corev1.Event{}
	}
	r.events[ns] = evs
	return evs
}

func (r *collector) missing(verb, resource, namespace string, err error) {
	where := "cluster-wide"
	if namespace != "" {
		where = "in namespace " + namespace
	}
	r.report.Missing = append(r.report.Missing, fmt.Sprintf("%s %s (%s): %v", verb, resource, where, err))
}

// maxLogReads bounds the init container logs status reads a module, each a
// request through the API server and the kubelet: a rollout of many
// replicas shows the rest by their gate Events only.
const maxLogReads = 10

// pods reads the module's admission pods still running their gate phases,
// each one's last gate Event and, for the first maxLogReads, what its
// waiting gates last logged.
func (r *collector) pods(ctx context.Context, m *Module) {
	pods, err := r.Kube.CoreV1().Pods(m.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: vigilSelector + ",app.kubernetes.io/part-of=" + m.Name + ",app.kubernetes.io/component=admission"})
	if err != nil {
		r.missing("list", "pods", m.Namespace, err)
		return
	}
	logsRead := 0
	for _, p := range pods.Items {
		m.Exited = append(m.Exited, exited(&p)...)
		sp, starting := startingPod(&p)
		if !starting {
			continue
		}
		sp.Gate = lastGateEvent(r.podEvents(ctx, m.Namespace), p.Name, sp.InitContainer)
		if sp.Since != nil && logsRead < maxLogReads {
			logsRead++
			sp.Waits = r.gateWaits(ctx, m.Namespace, p.Name, sp.InitContainer)
		}
		m.Starting = append(m.Starting, sp)
	}
}

// exited reports p's main containers whose last run ended with an error,
// and the message each left (the tail of its log, as the manifests'
// terminationMessagePolicy keeps it).
func exited(p *corev1.Pod) []string {
	var out []string
	for _, s := range p.Status.ContainerStatuses {
		t := s.LastTerminationState.Terminated
		if s.State.Terminated != nil {
			t = s.State.Terminated
		}
		if t == nil || t.ExitCode == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("pod %s container %s exited %d (%d restarts): %s", p.Name, s.Name, t.ExitCode, s.RestartCount, strings.TrimSpace(t.Message)))
	}
	return out
}

// startingPod reports which init container of p runs, if one still does.
func startingPod(p *corev1.Pod) (StartingPod, bool) {
	sp := StartingPod{Pod: p.Name, Phase: -1}
	if p.DeletionTimestamp != nil || len(p.Spec.InitContainers) == 0 {
		return sp, false
	}
	statuses := map[string]corev1.ContainerStatus{}
	for _, s := range p.Status.InitContainerStatuses {
		statuses[s.Name] = s
	}
	for _, c := range p.Spec.InitContainers {
		s, ok := statuses[c.Name]
		if ok && s.State.Terminated != nil && s.State.Terminated.ExitCode == 0 {
			continue
		}
		sp.InitContainer = c.Name
		if n, ok := strings.CutPrefix(c.Name, "gate-phase-"); ok {
			if v, err := strconv.Atoi(n); err == nil {
				sp.Phase = v
			}
		}
		sp.Restarts = s.RestartCount
		switch {
		case s.State.Running != nil:
			sp.Since = ptr.To(s.State.Running.StartedAt.Time.UTC())
		case s.State.Waiting != nil:
			sp.Waiting = strings.TrimSpace(s.State.Waiting.Reason + ": " + s.State.Waiting.Message)
		case s.State.Terminated != nil:
			sp.Waiting = fmt.Sprintf("exited %d: %s", s.State.Terminated.ExitCode, strings.TrimSpace(s.State.Terminated.Message))
		}
		return sp, true
	}
	return sp, false
}

// gateWaits reads the last progress line of each gate still waiting from
// the tail of its init container's log.
func (r *collector) gateWaits(ctx context.Context, ns, pod, container string) []GateWait {
	raw, err := r.Kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: ptr.To[int64](100), LimitBytes: ptr.To[int64](256 << 10)}).DoRaw(ctx)
	if err != nil {
		if apierrors.IsForbidden(err) {
			r.missing("get", "pods/log", ns, err)
		}
		return nil
	}
	last := map[string]GateWait{}
	var order []string
	for _, line := range strings.Split(string(raw), "\n") {
		f, ok := events.ParseLine(line)
		if !ok {
			continue
		}
		switch events.Name(f[events.Key]) {
		case events.GateWaiting, events.GateCallbackRunning:
			seen := f["lastSeen"]
			if seen == "" {
				seen = "its callback runs, for " + f["callbackFor"]
			}
			if _, ok := last[f["gate"]]; !ok {
				order = append(order, f["gate"])
			}
			last[f["gate"]] = GateWait{Gate: f["gate"], WaitsFor: f["waitsFor"], For: f["for"], LastSeen: seen, At: f["time"]}
		case events.GateDone, events.GateFallback, events.GateSkipped:
			delete(last, f["gate"])
		}
	}
	var out []GateWait
	for _, g := range order {
		if w, ok := last[g]; ok {
			out = append(out, w)
		}
	}
	return out
}

// lastGateEvent is the newest gate Event recorded on pod's container.
func lastGateEvent(evs []corev1.Event, pod, container string) *GateReport {
	var last *GateReport
	path := fmt.Sprintf("spec.initContainers{%s}", container)
	for _, e := range evs {
		if e.InvolvedObject.Name != pod || e.InvolvedObject.FieldPath != path || !strings.HasPrefix(e.Reason, "Gate") {
			continue
		}
		at := eventTime(&e)
		if last == nil || !at.Before(last.At) {
			last = &GateReport{Reason: strings.TrimPrefix(e.Reason, "Gate"), Message: e.Message, At: at}
		}
	}
	return last
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.UTC()
	case !e.EventTime.IsZero():
		return e.EventTime.UTC()
	default:
		return e.CreationTimestamp.UTC()
	}
}

// registration reads the module's webhook configurations, their records,
// and the drifts its admission pods repaired.
func (r *collector) registration(ctx context.Context, m *Module) {
	sel := metav1.ListOptions{LabelSelector: vigilSelector + ",app.kubernetes.io/part-of=" + m.Name}
	var outages []registration.Outage
	add := func(name, kind string, labels, annotations map[string]string, hooks []Webhook) {
		c := Configuration{Name: name, Kind: kind, Webhooks: hooks}
		var rec registration.Record
		if v := annotations[registration.Annotation]; v != "" {
			_ = json.Unmarshal([]byte(v), &rec)
		}
		switch {
		case name == spec.StaticName(m.Name):
			c.State = "static"
		case rec.State == "":
			c.State = "not registered"
		default:
			c.State = rec.State
		}
		c.RegisteredBy, c.Enforced, c.Problem, c.ProblemSince = rec.Version, rec.Enforced, rec.Problem, rec.ProblemSince
		c.FailedOpen, c.FailedOpenSince = rec.FailedOpen, rec.FailedOpenSince
		for _, rp := range rec.Repairs {
			c.Repairs = append(c.Repairs, Repair{At: rp.At, Drift: rp.Drift})
		}
		if len(rec.Windows()) > len(outages) {
			outages = rec.Windows()
		}
		m.Registration = append(m.Registration, c)
	}
	if muts, err := r.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, sel); err == nil {
		for _, c := range muts.Items {
			var hooks []Webhook
			for _, w := range c.Webhooks {
				hooks = append(hooks, Webhook{Name: w.Name, FailurePolicy: policy(w.FailurePolicy)})
			}
			add(c.Name, "mutating", c.Labels, c.Annotations, hooks)
		}
	}
	if vals, err := r.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, sel); err == nil {
		for _, c := range vals.Items {
			var hooks []Webhook
			for _, w := range c.Webhooks {
				hooks = append(hooks, Webhook{Name: w.Name, FailurePolicy: policy(w.FailurePolicy)})
			}
			add(c.Name, "validating", c.Labels, c.Annotations, hooks)
		}
	}
	for _, o := range outages {
		m.Outages = append(m.Outages, Outage{From: o.From, To: o.To, Webhooks: o.Webhooks})
	}
	for _, e := range r.podEvents(ctx, m.Namespace) {
		switch e.Reason {
		case "WebhookConfigurationDrifted", "WebhookConfigurationRepaired", "WebhookConfigurationMissing", "RegistrationStuck":
			if !strings.HasPrefix(e.InvolvedObject.Name, m.Name+"-") {
				continue
			}
			m.Events = append(m.Events, RegistrationEvent{Reason: e.Reason, Message: e.Message, At: eventTime(&e), Count: e.Count})
		}
	}
	sort.Slice(m.Events, func(i, j int) bool { return m.Events[i].At.After(m.Events[j].At) })
}

func policy(p *admissionregistrationv1.FailurePolicyType) string {
	if p == nil {
		return string(admissionregistrationv1.Fail)
	}
	return string(*p)
}

// audit sums the module's PolicyReports, when the cluster serves them.
func (r *collector) audit(ctx context.Context, m *Module) {
	if r.Dynamic == nil {
		return
	}
	sel := metav1.ListOptions{LabelSelector: "vigil.dev/module=" + m.Name}
	for _, gvr := range []schema.GroupVersionResource{spec.PolicyReports, spec.ClusterPolicyReports} {
		list, err := r.Dynamic.Resource(gvr).List(ctx, sel)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case apierrors.IsForbidden(err):
			r.missing("list", gvr.GroupResource().String(), "", err)
			continue
		case err != nil:
			continue
		}
		m.Audit.Served = true
		for _, item := range list.Items {
			pr := PolicyReport{Name: item.GetName(), Namespace: item.GetNamespace()}
			if s, ok := item.Object["summary"].(map[string]any); ok {
				pr.Pass, pr.Fail, pr.Warn = num(s["pass"]), num(s["fail"]), num(s["warn"])
			}
			m.Audit.Fail += pr.Fail
			m.Audit.Warn += pr.Warn
			m.Audit.Reports = append(m.Audit.Reports, pr)
		}
	}
}

func num(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return 0
}

// interceptors are the cluster's other webhooks called when the module's
// admission pods are created, and the deadlocks among them.
func (r *collector) interceptors(ctx context.Context, m *Module, podLabels map[string]string, hooks []deadlock.Hook) {
	if podLabels == nil {
		return // no admission pods
	}
	own := &deadlock.Backend{Service: m.Namespace + "/" + m.Name, Namespace: m.Namespace, PodLabels: podLabels}
	if ns, err := r.Kube.CoreV1().Namespaces().Get(ctx, m.Namespace, metav1.GetOptions{}); err == nil {
		own.NamespaceLabels = ns.Labels
	} else if apierrors.IsForbidden(err) {
		r.missing("get", "namespaces", "", err)
	}
	for _, h := range hooks {
		if h.Module == m.Name || !h.InterceptsPods(own) {
			continue
		}
		kind := "validating"
		if h.Mutating {
			kind = "mutating"
		}
		in := Interceptor{Configuration: h.Configuration, Kind: kind, Webhook: h.Name, FailurePolicy: string(h.FailurePolicy)}
		if h.Backend != nil {
			in.Service = h.Backend.Service
		}
		m.Interceptors = append(m.Interceptors, in)
	}
	for _, c := range deadlock.Between(m.Name, hooks) {
		m.Deadlocks = append(m.Deadlocks, c.String()+"; break it: "+c.Break)
	}
}

func compact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

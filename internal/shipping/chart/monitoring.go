package chart

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// The APIs of the Prometheus Operator's kinds: the chart renders a kind only
// where the cluster serves it (.Capabilities.APIVersions), as a values
// switch alone would fail the install of a cluster without the operator.
const (
	ServiceMonitorAPI = "monitoring.coreos.com/v1/ServiceMonitor"
	PrometheusRuleAPI = "monitoring.coreos.com/v1/PrometheusRule"
)

// MetricsPort names the port of the module's metrics Services.
const MetricsPort = "metrics"

// DashboardLabel is the label Grafana's dashboard sidecar looks for by
// default (its label and labelValue), the default of
// monitoring.dashboard.labels.
const DashboardLabel = "grafana_dashboard"

// metricsServices are the rendered Services that have a port named
// MetricsPort: <module>-metrics (the admission pods) and
// <module>-watcher-metrics (the watcher's), those of the roles the module has.
func metricsServices(objs []client.Object) []*corev1.Service {
	var out []*corev1.Service
	for _, o := range objs {
		s, ok := o.(*corev1.Service)
		if !ok {
			continue
		}
		for _, p := range s.Spec.Ports {
			if p.Name == MetricsPort {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// monitoringTemplates are the ServiceMonitor, the PrometheusRule and the
// dashboard's ConfigMap, by file name; none for a module without a metrics
// Service.
func monitoringTemplates(m *spec.Module, objs []client.Object, nsLabels map[string]string) (map[string][]byte, error) {
	services := metricsServices(objs)
	if len(services) == 0 {
		return nil, nil
	}
	labels := maps.Clone(nsLabels)
	labels["app.kubernetes.io/component"] = "monitoring"
	dash, err := dashboardJSON(m)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		"templates/servicemonitor.yaml": []byte(serviceMonitorTemplate(m, services, labels)),
		"templates/prometheusrule.yaml": []byte(prometheusRuleTemplate(m, labels)),
		"templates/dashboard.yaml":      []byte(dashboardTemplate(m, labels, dash)),
	}, nil
}

// mergedLabels is a template expression: the object's own labels, and those
// of the values at path that it does not set.
func mergedLabels(own map[string]string, path, indent string) string {
	keys := slices.Sorted(maps.Keys(own))
	var d strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&d, " %q %q", k, own[k])
	}
	return "{{- toYaml (merge (dict" + d.String() + ") (" + path + " | default dict)) | nindent " + fmt.Sprint(len(indent)) + " }}"
}

// operatorObject opens the template of one of the Prometheus operator's
// objects, up to its spec: rendered when .Values.monitoring.<value>.enabled
// and the cluster serves api (apiVersion/Kind), labelled with labels and
// the value's own.
func operatorObject(m *spec.Module, api, value string, labels map[string]string) string {
	return `{{- if and .Values.monitoring.` + value + `.enabled (.Capabilities.APIVersions.Has "` + api + `") }}
apiVersion: ` + path.Dir(api) + `
kind: ` + path.Base(api) + `
metadata:
  name: ` + scalar(m.Name) + `
  namespace: ` + scalar(m.Namespace) + `
  labels: ` + mergedLabels(labels, ".Values.monitoring."+value+".labels", "    ") + `
spec:`
}

// serviceMonitorTemplate scrapes the port MetricsPort of the Services given,
// selected by the labels they share and their components.
func serviceMonitorTemplate(m *spec.Module, services []*corev1.Service, labels map[string]string) string {
	var common map[string]string
	var components []string
	for _, s := range services {
		l := maps.Clone(s.Labels)
		if c, ok := l["app.kubernetes.io/component"]; ok {
			components = append(components, c)
		}
		delete(l, "app.kubernetes.io/component")
		delete(l, "app.kubernetes.io/version") // an upgrade changes it
		if common == nil {
			common = l
			continue
		}
		maps.DeleteFunc(common, func(k, v string) bool { return l[k] != v })
	}
	sort.Strings(components)
	selector := map[string]any{"matchLabels": common}
	if len(components) > 0 {
		selector["matchExpressions"] = []any{map[string]any{"key": "app.kubernetes.io/component", "operator": "In", "values": components}}
	}
	return operatorObject(m, ServiceMonitorAPI, "serviceMonitor", labels) + `
  selector:
` + yamlAt(selector, "    ") + `  endpoints:
  - port: ` + MetricsPort + `
    path: /metrics
    scheme: http
    {{- with .Values.monitoring.serviceMonitor.interval }}
    interval: {{ . | quote }}
    {{- end }}
    {{- with .Values.monitoring.serviceMonitor.scrapeTimeout }}
    scrapeTimeout: {{ . | quote }}
    {{- end }}
{{- end }}
`
}

// alert is one alert of the chart's PrometheusRule.
type alert struct {
	name, expr, forDuration, severity, summary, description string
}

// promSelector is a PromQL selector of metric, scoped to module m.
func promSelector(m *spec.Module, metric string, matchers ...string) string {
	return metric + "{" + strings.Join(append([]string{fmt.Sprintf("module=%q", m.Name)}, matchers...), ", ") + "}"
}

// alerts are the module's alerts: those of the roles and features it has,
// every expression scoped to the module by its label.
func alerts(m *spec.Module) []alert {
	sel := func(metric string, matchers ...string) string { return promSelector(m, metric, matchers...) }
	mod := m.Name
	var out []alert
	if m.HasAdmission() {
		req := "vigil_admission_binding_requests_total"
		denied := "sum by (capability) (rate(" + sel(req, `verdict="denied"`) + "[5m]))"
		out = append(out,
			alert{"VigilAdmissionErrors",
				"sum by (capability, binding, verdict) (rate(" + sel(req, `verdict=~"error|timeout"`) + "[5m]))\n" +
					"  / ignoring (verdict) group_left\n" +
					"sum by (capability, binding) (rate(" + sel(req) + "[5m])) > 0.01",
				"10m", "warning",
				"Binding {{ $labels.binding }} of module " + mod + " answers {{ $labels.verdict }} to {{ $value | humanizePercentage }} of its requests.",
				"The binding's handler returned an error or panicked (error), or did not answer within the module's binding timeout (timeout): the capability's failure policy answered instead of the handler — refused under Fail, admitted unchecked under Ignore. The admission pods' logs name the error."},
			alert{"VigilAdmissionDenialsSurge",
				denied + "\n  > 3 * (sum by (capability) (rate(" + sel(req, `verdict="denied"`) + "[1h] offset 1h)) or " + denied + " * 0)\nand " + denied + " > 0.05",
				"10m", "warning",
				"Capability {{ $labels.capability }} of module " + mod + " denies {{ $value | humanize }} requests a second, over three times as many as an hour before.",
				"Denials jumped: a client or controller retrying what the module refuses, a rollout the policy blocks, or a change of the policy. The denied requests' reasons are in the API server's audit log and the clients' errors."},
			alert{"VigilAdmissionUnattributed",
				"sum by (reason) (rate(" + sel("vigil_admission_unattributed_total", `answer="failure_policy"`) + "[10m])) > 0",
				"15m", "warning",
				"Module " + mod + " receives admission requests it does not serve ({{ $labels.reason }}).",
				"The API server sends the module requests for a path, or a kind and operation, that this version serves no binding for, and no newer version is registered: the failure policy answers them. The webhook configurations were edited, or registered by another version of the module."},
			alert{"VigilAdmissionRefused",
				"sum by (reason) (rate(" + sel("vigil_admission_refused_total", `reason!~"metrics_.*|evicted_idle|silent"`) + "[5m])) > 0",
				"10m", "warning",
				"The admission server of module " + mod + " refuses requests at its limits ({{ $labels.reason }}).",
				"Requests or connections exceed the admission server's limits (in flight, body size and budget, timeouts and the least body rate, connections per source and each source's fair share): the API server applies the failure policy to them. More admission replicas, a client flooding the API server, or Pods flooding the webhook port (body_timeout, evicted_reading, per_source; networkPolicy.controlPlaneCIDRs keeps them off it) are the usual answers."},
			alert{"VigilWebhookConfigurationMissing",
				"max(" + sel("vigil_registration_configuration_missing") + ") > 0",
				"5m", "critical",
				"A webhook configuration of module " + mod + " is missing.",
				"One of the module's webhook configurations was deleted and is not re-created: the API server sends it nothing, and what it governs passes unchecked. The admission pods' logs and /readyz say why."},
			alert{"VigilRegistrationStuck",
				"max(" + sel("vigil_registration_stuck") + ") > 0",
				"10m", "critical",
				"The registration of module " + mod + " cannot finish.",
				"The registration canary does not reach the module: another admission control refuses it before it does, or the API server cannot call the webhook (network policy, Service, certificate). Until it does, the module's webhooks do not enforce this version. The RegistrationStuck Event and /readyz name the refusal."},
			alert{"VigilRegistrationDrifted",
				"max(" + sel("vigil_registration_drifted") + ") > 0",
				"10m", "warning",
				"The webhook configurations of module " + mod + " differ from its definition and are not repaired.",
				"The configurations were edited (rules, failure policy, caBundle) and the admission replicas have not written them back: the webhooks may not enforce what the module defines."},
			alert{"VigilRegistrationRepairsRepeated",
				"sum(increase(" + sel("vigil_registration_repairs_total") + "[15m])) > 3",
				"5m", "warning",
				"The webhook configurations of module " + mod + " were repaired {{ $value | humanize }} times in 15 minutes.",
				"Something keeps changing the module's webhook configurations and the module keeps writing them back: another controller (a GitOps tool applying old manifests, a mutating policy) is fighting it. Between edit and repair the webhooks enforce what the other writer set."},
		)
	}
	if m.FailsOpen() {
		out = append(out, alert{"VigilWebhookFailedOpen",
			"max(" + sel("vigil_outage_failed_open_webhooks") + ") > 0",
			"1m", "critical",
			"{{ $value }} webhooks of module " + mod + " are failed open.",
			"No admission replica answered within a capability's FailOpenAfter bound: the watcher set its webhooks to failurePolicy Ignore, and what they match is admitted unchecked until a replica serves again. Bring the admission pods back; the audit reports what got in."})
	}
	if len(m.Watches) > 0 {
		out = append(out, alert{"VigilWatchHandlerPanics",
			"sum by (binding) (increase(" + sel("vigil_watch_handler_panics_total") + "[15m])) > 0",
			"1m", "warning",
			"Watch binding {{ $labels.binding }} of module " + mod + " panicked.",
			"A Watch, Reconcile or Finalize handler panicked; the event is retried with backoff. The watcher's logs carry the stack."})
	}
	if len(m.Schedules) > 0 {
		out = append(out, alert{"VigilScheduleFailing",
			"sum by (schedule) (increase(" + sel("vigil_schedule_runs_total", `result="error"`) + "[1h])) > 0",
			"1m", "warning",
			"Schedule {{ $labels.schedule }} of module " + mod + " failed.",
			"A run of the schedule returned an error in the last hour. The watcher's logs name it."})
	}
	if m.Audited() {
		out = append(out, alert{"VigilAuditFindings",
			"max by (admitted) (" + sel("vigil_audit_findings", `admitted!="before-enforcement"`) + ") > 0",
			"30m", "info",
			"{{ $value }} existing objects fail the audit of module " + mod + " (admitted {{ $labels.admitted }}).",
			"The last audit found objects the module's validations deny, or that missed a mutation: admitted during an outage while failed open, or while a capability was in Warn or Audit mode. Each has a Warning Event naming the denial."})
	}
	out = append(out, alert{"VigilInformerStale",
		sel("vigil_informer_staleness_seconds") + "\n  > " + sel("vigil_informer_stale_bound_seconds"),
		"5m", "warning",
		"The {{ $labels.kind }} informer of module " + mod + "'s {{ $labels.role }} has heard nothing from the API server for {{ $value | humanizeDuration }}.",
		"The informer stays silent past its stale bound although its watch is restarted: its listers serve old data, and the role is not ready. The API server, its watch cache, or the network to it is failing (throttling shows in vigil_informer_throttled_total)."})
	return out
}

// prometheusRuleTemplate is the PrometheusRule of the module's alerts.
func prometheusRuleTemplate(m *spec.Module, labels map[string]string) string {
	var rules strings.Builder
	for _, a := range alerts(m) {
		rules.WriteString("    - alert: " + a.name + "\n      expr: |-\n")
		for _, l := range strings.Split(a.expr, "\n") {
			rules.WriteString("        " + l + "\n")
		}
		rules.WriteString("      for: " + a.forDuration + "\n")
		rules.WriteString("      labels: " + mergedLabels(map[string]string{"severity": a.severity}, "$.Values.monitoring.prometheusRule.alertLabels", "        ") + "\n")
		// The alerts' own templates stay literal.
		literal := func(s string) string { return strings.ReplaceAll(strconv.Quote(s), "{{", `{{ "{{" }}`) }
		rules.WriteString("      annotations:\n        summary: " + literal(a.summary) + "\n        description: " + literal(a.description) + "\n")
	}
	return operatorObject(m, PrometheusRuleAPI, "prometheusRule", labels) + `
  groups:
  - name: ` + scalar("vigil-"+m.Name) + `
    rules:
` + rules.String() + `{{- end }}
`
}

// DashboardUID is the uid of the module's Grafana dashboard: vigil-<module>,
// or within Grafana's 40 characters a prefix of it and a hash.
func DashboardUID(module string) string {
	uid := "vigil-" + module
	if len(uid) <= 40 {
		return uid
	}
	sum := sha256.Sum256([]byte(module))
	return uid[:31] + "-" + hex.EncodeToString(sum[:4])
}

// DashboardFile is the dashboard's key in its ConfigMap.
func DashboardFile(module string) string { return "vigil-" + module + ".json" }

type target struct{ expr, legend string }

type panel struct {
	title, description, unit string
	targets                  []target
}

type dashboardRow struct {
	title  string
	panels []panel
}

// dashboardRows are the dashboard's panels, by row: those of the roles and
// features the module has, every query scoped to the module.
func dashboardRows(m *spec.Module) []dashboardRow {
	sel := func(metric string, matchers ...string) string { return promSelector(m, metric, matchers...) }
	rate := func(metric string, matchers ...string) string {
		return "rate(" + sel(metric, matchers...) + "[$__rate_interval])"
	}
	incr := func(metric string, matchers ...string) string {
		return "increase(" + sel(metric, matchers...) + "[$__rate_interval])"
	}
	quantile := func(q, metric, by string) string {
		return "histogram_quantile(" + q + ", sum by (le" + by + ") (" + rate(metric+"_bucket") + "))"
	}
	req := "vigil_admission_binding_requests_total"
	var rows []dashboardRow
	if m.HasAdmission() {
		rows = append(rows,
			dashboardRow{"Admission", []panel{
				{"Requests by verdict", "Admission requests the bindings answered, by verdict.", "reqps",
					[]target{{"sum by (verdict) (" + rate(req) + ")", "{{verdict}}"}}},
				{"Binding latency", "How long bindings take to answer, p50 and p99, by binding.", "s",
					[]target{
						{quantile("0.5", "vigil_admission_binding_duration_seconds", ", binding"), "p50 {{binding}}"},
						{quantile("0.99", "vigil_admission_binding_duration_seconds", ", binding"), "p99 {{binding}}"},
					}},
				{"Denials", "Requests denied, by capability and binding; and denials answered as allows because the capability is in Warn or Audit mode.", "reqps",
					[]target{
						{"sum by (capability, binding) (" + rate(req, `verdict="denied"`) + ")", "denied {{capability}}/{{binding}}"},
						{"sum by (capability, binding, mode) (" + rate("vigil_admission_unenforced_denials_total") + ")", "unenforced ({{mode}}) {{capability}}/{{binding}}"},
					}},
				{"Errors and timeouts", "Requests the failure policy answered because the binding failed (error, a panic included) or did not answer in time (timeout).", "reqps",
					[]target{{"sum by (binding, verdict) (" + rate(req, `verdict=~"error|timeout"`) + ")", "{{verdict}} {{binding}}"}}},
				{"Unattributed and refused", "Requests for what this version serves no binding for, by reason and answer; and requests and connections the server's limits refused, by reason.", "reqps",
					[]target{
						{"sum by (reason, answer) (" + rate("vigil_admission_unattributed_total") + ")", "unattributed {{reason}} ({{answer}})"},
						{"sum by (reason) (" + rate("vigil_admission_refused_total") + ")", "refused {{reason}}"},
					}},
				{"Connections", "Connections the webhook server accepted, each a TLS handshake, beside the bindings' requests: the API server keeps its connections alive, so the first stays far below the second; when they draw near, handshakes take much of the server's CPU.", "ops",
					[]target{
						{"sum(" + rate("vigil_admission_connections_total") + ")", "connections"},
						{"sum(" + rate(req) + ")", "binding requests"},
					}},
				{"Rechecks on fresh data", "Decisions made again once the listers a binding read caught up with the API server, by outcome.", "ops",
					[]target{{"sum by (outcome) (" + rate("vigil_admission_rechecks_total") + ")", "{{outcome}}"}}},
				{"Freshness wait", "How long rechecks waited for the listers to catch up, p50 and p99.", "s",
					[]target{
						{quantile("0.5", "vigil_admission_freshness_wait_seconds", ""), "p50"},
						{quantile("0.99", "vigil_admission_freshness_wait_seconds", ""), "p99"},
					}},
			}},
			dashboardRow{"Registration", []panel{
				{"Webhook configurations", "1 while the configurations drifted from the definition, while one is missing, while the registration cannot finish.", "short",
					[]target{
						{"max(" + sel("vigil_registration_drifted") + ")", "drifted"},
						{"max(" + sel("vigil_registration_configuration_missing") + ")", "configuration missing"},
						{"max(" + sel("vigil_registration_stuck") + ")", "stuck"},
					}},
				{"Drift repairs", "Repairs of the webhook configurations after they drifted.", "short",
					[]target{{"sum(" + incr("vigil_registration_repairs_total") + ")", "repairs"}}},
			}},
		)
	}
	if m.FailsOpen() {
		rows = append(rows, dashboardRow{"Outages", []panel{
			{"Failed-open webhooks", "Webhooks failed open now (failurePolicy Ignore during an outage of the admission replicas).", "short",
				[]target{{"max(" + sel("vigil_outage_failed_open_webhooks") + ")", "failed open"}}},
			{"Fail-opens", "Webhooks the watcher set to Ignore, by webhook.", "short",
				[]target{{"sum by (webhook) (" + incr("vigil_outage_fail_opens_total") + ")", "{{webhook}}"}}},
		}})
	}
	var watcher []panel
	if len(m.Watches) > 0 {
		watcher = append(watcher,
			panel{"Watch events", "Events delivered to Watch bindings, by binding and event.", "ops",
				[]target{{"sum by (binding, event) (" + rate("vigil_watch_events_total") + ")", "{{binding}} {{event}}"}}},
			panel{"Handler panics and watch errors", "Watch, Reconcile and Finalize handlers that panicked; watches of the shared informers that ended in error, by reason.", "short",
				[]target{
					{"sum by (binding) (" + incr("vigil_watch_handler_panics_total") + ")", "panics {{binding}}"},
					{"sum by (reason) (" + incr("vigil_watch_errors_total") + ")", "watch errors {{reason}}"},
				}},
		)
	}
	if len(m.Schedules) > 0 {
		watcher = append(watcher,
			panel{"Schedule runs", "Runs of schedules by result, and ticks skipped.", "short",
				[]target{
					{"sum by (schedule, result) (" + incr("vigil_schedule_runs_total") + ")", "{{schedule}} {{result}}"},
					{"sum by (schedule) (" + incr("vigil_schedule_skipped_total") + ")", "{{schedule}} skipped"},
				}},
			panel{"Schedule run time", "p99 of how long schedule runs take.", "s",
				[]target{{quantile("0.99", "vigil_schedule_run_seconds", ", schedule"), "p99 {{schedule}}"}}},
		)
	}
	if m.Audited() {
		watcher = append(watcher,
			panel{"Audit findings", "Existing objects the validations deny, or that missed a mutation, as the last audit found them, by when they were admitted.", "short",
				[]target{{"max by (admitted) (" + sel("vigil_audit_findings") + ")", "{{admitted}}"}}},
			panel{"Audit runs", "Runs of the audit of existing objects, by result.", "short",
				[]target{{"sum by (result) (" + incr("vigil_audit_runs_total") + ")", "{{result}}"}}},
		)
	}
	if len(watcher) > 0 {
		rows = append(rows, dashboardRow{"Watcher", watcher})
	}
	rows = append(rows, dashboardRow{"Informers", []panel{
		{"Staleness and bound", "How long each informer has heard nothing from the API server, against its stale bound.", "s",
			[]target{
				{"max by (role, kind, namespace) (" + sel("vigil_informer_staleness_seconds") + ")", "{{role}} {{kind}} {{namespace}}"},
				{"max by (role) (" + sel("vigil_informer_stale_bound_seconds") + ")", "bound {{role}}"},
			}},
		{"Relists, reconnects, stalls, throttling", "Lists after the first, watches started again, silences past the bound, and 429 answers, by role and kind.", "short",
			[]target{
				{"sum by (role, kind) (" + incr("vigil_informer_relists_total") + ")", "relists {{role}} {{kind}}"},
				{"sum by (role, kind) (" + incr("vigil_informer_reconnects_total") + ")", "reconnects {{role}} {{kind}}"},
				{"sum by (role, kind) (" + incr("vigil_informer_stalls_total") + ")", "stalls {{role}} {{kind}}"},
				{"sum by (role, kind) (" + incr("vigil_informer_throttled_total") + ")", "throttled {{role}} {{kind}}"},
			}},
	}})
	return rows
}

// dashboardJSON is the module's Grafana dashboard: a row per part of the
// module, two panels a line, queries through the dashboard's datasource
// variable.
func dashboardJSON(m *spec.Module) ([]byte, error) {
	ds := map[string]any{"type": "prometheus", "uid": "${datasource}"}
	var panels []any
	id, y := 0, 0
	for _, r := range dashboardRows(m) {
		id++
		panels = append(panels, map[string]any{"id": id, "type": "row", "title": r.title, "collapsed": false,
			"gridPos": map[string]any{"h": 1, "w": 24, "x": 0, "y": y}, "panels": []any{}})
		y++
		for i, p := range r.panels {
			id++
			var targets []any
			for j, t := range p.targets {
				targets = append(targets, map[string]any{"refId": string(rune('A' + j)), "datasource": ds, "expr": t.expr, "legendFormat": t.legend})
			}
			panels = append(panels, map[string]any{
				"id": id, "type": "timeseries", "title": p.title, "description": p.description, "datasource": ds,
				"gridPos":     map[string]any{"h": 8, "w": 12, "x": 12 * (i % 2), "y": y + 8*(i/2)},
				"fieldConfig": map[string]any{"defaults": map[string]any{"unit": p.unit, "min": 0}, "overrides": []any{}},
				"options": map[string]any{
					"legend":  map[string]any{"displayMode": "list", "placement": "bottom", "showLegend": true},
					"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
				},
				"targets": targets,
			})
		}
		y += 8 * ((len(r.panels) + 1) / 2)
	}
	d := map[string]any{
		"uid":           DashboardUID(m.Name),
		"title":         "vigil module " + m.Name,
		"description":   "Admission, registration, watcher and informer metrics of the vigil module " + m.Name + ".",
		"tags":          []string{"vigil", m.Name},
		"editable":      true,
		"schemaVersion": 39,
		"version":       1,
		"refresh":       "30s",
		"time":          map[string]any{"from": "now-6h", "to": "now"},
		"annotations":   map[string]any{"list": []any{}},
		"templating": map[string]any{"list": []any{map[string]any{
			"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
			"current": map[string]any{}, "hide": 0, "refresh": 1, "regex": "", "options": []any{},
		}}},
		"panels": panels,
	}
	return json.MarshalIndent(d, "", "  ")
}

// dashboardTemplate is the ConfigMap that carries the dashboard to Grafana's
// sidecar.
func dashboardTemplate(m *spec.Module, labels map[string]string, dash []byte) string {
	var body strings.Builder
	for _, l := range strings.Split(string(dash), "\n") {
		body.WriteString("    " + l + "\n")
	}
	return `{{- if .Values.monitoring.dashboard.enabled }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: ` + scalar(m.Name+"-dashboard") + `
  namespace: {{ .Values.monitoring.dashboard.namespace | default ` + fmt.Sprintf("%q", m.Namespace) + ` }}
  labels: ` + mergedLabels(labels, ".Values.monitoring.dashboard.labels", "    ") + `
  {{- with .Values.monitoring.dashboard.annotations }}
  annotations: {{- toYaml . | nindent 4 }}
  {{- end }}
data:
  ` + DashboardFile(m.Name) + `: |-
` + strings.ReplaceAll(body.String(), "{{", `{{ "{{" }}`) + `{{- end }}
`
}

// monitoringValues is the monitoring section of values.yaml.
func monitoringValues(m *spec.Module, services []*corev1.Service) string {
	if len(services) == 0 {
		return ""
	}
	var names []string
	for _, s := range services {
		names = append(names, s.Name)
	}
	return `# Monitoring of the module by the Prometheus Operator and Grafana.
monitoring:
  # A ServiceMonitor scraping /metrics of ` + strings.Join(names, " and ") + `.
  # Rendered only where the cluster serves
  # ` + ServiceMonitorAPI + ` (helm template:
  # --api-versions ` + ServiceMonitorAPI + `). The admission
  # pods' NetworkPolicy lets only networkPolicy.metricsFrom scrape them.
  serviceMonitor:
    enabled: true
    # Labels added to it, as a Prometheus's serviceMonitorSelector asks
    # (kube-prometheus-stack: release: <its release>).
    labels: {}
    # The scrape interval and timeout, as in 30s; empty: the Prometheus's own.
    interval: ""
    scrapeTimeout: ""
  # A PrometheusRule of the module's alerts (failed-open webhooks, stuck or
  # drifting registration, stale informers, binding errors and timeouts,
  # denial surges, ...). Rendered only where the cluster serves
  # ` + PrometheusRuleAPI + `.
  prometheusRule:
    enabled: true
    # Labels added to it, as a Prometheus's ruleSelector asks.
    labels: {}
    # Labels added to every alert, for Alertmanager's routes (team: platform).
    alertLabels: {}
  # A Grafana dashboard of the module's metrics, in a ConfigMap for Grafana's
  # dashboard sidecar. Off by default: a ConfigMap does not tell whether a
  # Grafana reads it, and with it off the chart renders exactly what
  # ` + "`" + m.Name + " manifests`" + ` prints.
  dashboard:
    enabled: false
    # The ConfigMap's namespace; empty: the module's (` + m.Namespace + `). The
    # sidecar must search it (its searchNamespace).
    namespace: ""
    # The label the sidecar loads dashboards by (its label and labelValue).
    labels:
      ` + DashboardLabel + `: "1"
    # Annotations, as in grafana_folder: vigil where the sidecar's
    # folderAnnotation is grafana_folder.
    annotations: {}

`
}

// monitoringSchema is the schema of the monitoring values.
func monitoringSchema() map[string]any {
	obj := func(props map[string]any) map[string]any {
		return map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	}
	boolean := map[string]any{"type": "boolean"}
	labels := map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}}
	duration := map[string]any{"type": "string", "pattern": `^(([0-9]+(ms|s|m|h|d|w|y))+)?$`}
	return obj(map[string]any{
		"serviceMonitor": obj(map[string]any{"enabled": boolean, "labels": labels, "interval": duration, "scrapeTimeout": duration}),
		"prometheusRule": obj(map[string]any{"enabled": boolean, "labels": labels, "alertLabels": labels}),
		"dashboard": obj(map[string]any{"enabled": boolean, "namespace": map[string]any{"type": "string"},
			"labels": labels, "annotations": labels}),
	})
}

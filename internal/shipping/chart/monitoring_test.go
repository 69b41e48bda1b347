package chart_test

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/definition/define"
	"github.com/vigilkit/vigil/internal/runtime/watchhealth"
	"github.com/vigilkit/vigil/internal/serving/admit"
	"github.com/vigilkit/vigil/internal/shipping/chart"
)

var monitoringAPIs = []string{chart.ServiceMonitorAPI, chart.PrometheusRuleAPI}

func mustRenderWithAPIs(t *testing.T, ch *chartv2.Chart, vals map[string]any, apis ...string) map[string]map[string]any {
	t.Helper()
	rel, err := renderWithAPIs(t, ch, vals, apis...)
	if err != nil {
		t.Fatalf("render with values %v and APIs %v: %v", vals, apis, err)
	}
	return objects(t, rel.Manifest)
}

func ofKind(objs map[string]map[string]any, kind string) []string {
	var keys []string
	for k := range objs {
		if strings.HasPrefix(k, kind+" ") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

func dashboards(objs map[string]map[string]any) []string {
	var keys []string
	for _, k := range ofKind(objs, "ConfigMap") {
		if strings.HasSuffix(k, "-dashboard") {
			keys = append(keys, k)
		}
	}
	return keys
}

const (
	smKey   = "ServiceMonitor quota-system/quota"
	ruleKey = "PrometheusRule quota-system/quota"
	dashKey = "ConfigMap quota-system/quota-dashboard"
)

// The ServiceMonitor and the PrometheusRule are rendered only where the
// cluster serves their kinds, each unless its value turns it off; the
// dashboard only when monitoring.dashboard.enabled turns it on. The
// ServiceMonitor scrapes the port named metrics of exactly the module's
// metrics Services, and the values' labels, interval and namespace reach
// the objects.
func TestChartMonitoringObjects(t *testing.T) {
	_, ch := writeChart(t)
	for _, c := range []struct {
		name string
		vals map[string]any
		apis []string
		want []string
	}{
		{"no Prometheus Operator", nil, nil, nil},
		{"no Prometheus Operator, everything on", monitoringOn(true, true, true), nil, []string{dashKey}},
		{"Prometheus Operator", nil, monitoringAPIs, []string{ruleKey, smKey}},
		{"ServiceMonitor only served", nil, []string{chart.ServiceMonitorAPI}, []string{smKey}},
		{"PrometheusRule only served", nil, []string{chart.PrometheusRuleAPI}, []string{ruleKey}},
		{"serviceMonitor off", monitoringOn(false, true, false), monitoringAPIs, []string{ruleKey}},
		{"prometheusRule off", monitoringOn(true, false, false), monitoringAPIs, []string{smKey}},
		{"dashboard on", monitoringOn(true, true, true), monitoringAPIs, []string{dashKey, ruleKey, smKey}},
		{"all off", monitoringOn(false, false, false), monitoringAPIs, nil},
	} {
		objs := mustRenderWithAPIs(t, ch, c.vals, c.apis...)
		got := append(append(ofKind(objs, "PrometheusRule"), ofKind(objs, "ServiceMonitor")...), dashboards(objs)...)
		sort.Strings(got)
		want := slices.Clone(c.want)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: rendered %v, want %v", c.name, got, want)
		}
	}

	// The ServiceMonitor selects the Services that have a metrics port,
	// and those are the admission's and the watcher's.
	objs := mustRenderWithAPIs(t, ch, nil, monitoringAPIs...)
	sm := objs[smKey]
	raw, _, _ := unstructured.NestedMap(sm, "spec", "selector")
	var ls metav1.LabelSelector
	if err := convert(raw, &ls); err != nil {
		t.Fatal(err)
	}
	selector, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		t.Fatalf("the ServiceMonitor's selector %v: %v", raw, err)
	}
	endpoints, _, _ := unstructured.NestedSlice(sm, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != chart.MetricsPort || endpoints[0].(map[string]any)["path"] != "/metrics" {
		t.Errorf("the ServiceMonitor's endpoints %v: want the port named %s, /metrics", endpoints, chart.MetricsPort)
	}
	var scraped []string
	for _, key := range ofKind(objs, "Service") {
		var s corev1.Service
		if err := convert(objs[key], &s); err != nil {
			t.Fatal(err)
		}
		hasPort := slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == chart.MetricsPort })
		if selector.Matches(labels.Set(s.Labels)) && hasPort && s.Namespace == moduleNS {
			scraped = append(scraped, s.Name)
		} else if hasPort {
			t.Errorf("Service %s has a metrics port the ServiceMonitor does not scrape", key)
		}
	}
	if want := []string{module + "-metrics", module + "-watcher-metrics"}; !slices.Equal(scraped, want) {
		t.Errorf("the ServiceMonitor scrapes %v, want %v", scraped, want)
	}

	// The values reach the objects.
	objs = mustRenderWithAPIs(t, ch, map[string]any{"monitoring": map[string]any{
		"serviceMonitor": map[string]any{"labels": map[string]any{"release": "kps"}, "interval": "15s", "scrapeTimeout": "10s"},
		"prometheusRule": map[string]any{"labels": map[string]any{"release": "kps"}, "alertLabels": map[string]any{"team": "platform"}},
		"dashboard": map[string]any{"enabled": true, "namespace": "monitoring",
			"labels": map[string]any{"grafana_dashboard": "vigil"}, "annotations": map[string]any{"grafana_folder": "vigil"}},
	}}, monitoringAPIs...)
	sm = objs[smKey]
	if l, _, _ := unstructured.NestedString(sm, "metadata", "labels", "release"); l != "kps" {
		t.Errorf("ServiceMonitor labels %v: want release=kps from the values", (&unstructured.Unstructured{Object: sm}).GetLabels())
	}
	if l, _, _ := unstructured.NestedString(sm, "metadata", "labels", "app.kubernetes.io/name"); l != module {
		t.Errorf("ServiceMonitor labels %v: want the module's besides the values'", (&unstructured.Unstructured{Object: sm}).GetLabels())
	}
	endpoints, _, _ = unstructured.NestedSlice(sm, "spec", "endpoints")
	if e := endpoints[0].(map[string]any); e["interval"] != "15s" || e["scrapeTimeout"] != "10s" {
		t.Errorf("ServiceMonitor endpoint %v: want interval 15s, scrapeTimeout 10s", e)
	}
	rule := objs[ruleKey]
	if l, _, _ := unstructured.NestedString(rule, "metadata", "labels", "release"); l != "kps" {
		t.Errorf("PrometheusRule labels %v: want release=kps", (&unstructured.Unstructured{Object: rule}).GetLabels())
	}
	for _, r := range rules(t, rule) {
		l, _ := r["labels"].(map[string]any)
		if l["team"] != "platform" || l["severity"] == nil {
			t.Errorf("alert %v labels %v: want team=platform from alertLabels and its severity", r["alert"], l)
		}
	}
	cm, ok := objs["ConfigMap monitoring/quota-dashboard"]
	if !ok {
		t.Fatalf("no dashboard ConfigMap in monitoring.dashboard.namespace: %v", dashboards(objs))
	}
	u := unstructured.Unstructured{Object: cm}
	if u.GetLabels()["grafana_dashboard"] != "vigil" || u.GetAnnotations()["grafana_folder"] != "vigil" {
		t.Errorf("dashboard labels %v, annotations %v: want grafana_dashboard=vigil, grafana_folder=vigil", u.GetLabels(), u.GetAnnotations())
	}
	// By default the sidecar's own label.
	objs = mustRenderWithAPIs(t, ch, monitoringOn(true, true, true))
	if l := (&unstructured.Unstructured{Object: objs[dashKey]}).GetLabels(); l[chart.DashboardLabel] != "1" || l["app.kubernetes.io/name"] != module {
		t.Errorf("dashboard labels %v: want %s=1 and the module's", l, chart.DashboardLabel)
	}

	for _, c := range []struct {
		vals map[string]any
		want string
	}{
		{map[string]any{"monitoring": map[string]any{"dashboard": map[string]any{"enabled": "yes"}}}, "/monitoring/dashboard/enabled"},
		{map[string]any{"monitoring": map[string]any{"serviceMonitor": map[string]any{"interval": "soon"}}}, "/monitoring/serviceMonitor/interval"},
		{map[string]any{"monitoring": map[string]any{"prometheusRule": map[string]any{"alertLabels": map[string]any{"team": 3}}}}, "/monitoring/prometheusRule/alertLabels/team"},
		{map[string]any{"monitoring": map[string]any{"grafana": true}}, "grafana"},
	} {
		if _, err := renderWithAPIs(t, ch, c.vals, monitoringAPIs...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("values %v: error %v, want the schema to refuse them naming %s", c.vals, err, c.want)
		}
	}
}

func monitoringOn(serviceMonitor, prometheusRule, dashboard bool) map[string]any {
	return map[string]any{"monitoring": map[string]any{
		"serviceMonitor": map[string]any{"enabled": serviceMonitor},
		"prometheusRule": map[string]any{"enabled": prometheusRule},
		"dashboard":      map[string]any{"enabled": dashboard},
	}}
}

func convert(from map[string]any, to any) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, to)
}

func rules(t *testing.T, rule map[string]any) []map[string]any {
	t.Helper()
	groups, _, _ := unstructured.NestedSlice(rule, "spec", "groups")
	var out []map[string]any
	for _, g := range groups {
		rs, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rs {
			out = append(out, r.(map[string]any))
		}
	}
	if len(out) == 0 {
		t.Fatalf("the PrometheusRule has no rules: %v", rule)
	}
	return out
}

// allFeatures is a module with every part that has metrics: admission, a
// capability that fails open, an audited validation, a Watch and a
// schedule.
func allFeatures(t *testing.T) *chartv2.Chart {
	t.Helper()
	m := vigil.NewModule("sentry", vigil.Options{Namespace: "sentry-system", Version: "1.2.0"})
	c := m.Capability("labels", vigil.FailOpenAfter(time.Minute))
	vigil.When(c, &corev1.ConfigMap{}).IsCreated().Named("needs-app").
		Validate(func(context.Context, *vigil.Request[*corev1.ConfigMap]) vigil.Verdict { return admission.Allow() })
	vigil.Watch(c, &corev1.ConfigMap{}).Named("seen").OnEvent(func(context.Context, *corev1.ConfigMap, vigil.WatchEvent) {})
	m.OnSchedule("tidy", vigil.Every(time.Hour), func(context.Context) error { return nil })
	s, mistakes, ok := define.Resolved(m)
	if !ok || mistakes != nil {
		t.Fatalf("the module's definition: resolved %v, mistakes %v", ok, mistakes)
	}
	files, err := chart.Files(s, chart.Options{Image: image})
	if err != nil {
		t.Fatal(err)
	}
	var buffered []*archive.BufferedFile
	for name, data := range files {
		buffered = append(buffered, &archive.BufferedFile{Name: name, Data: data})
	}
	ch, err := loader.LoadFiles(buffered)
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	return ch
}

// query is one PromQL expression of the chart, and where it is.
type query struct{ where, expr string }

// Every PromQL expression of the PrometheusRule's alerts and of the
// dashboard's panels — for examples/quota's chart and for a module with
// every part that has metrics — reads only metrics the module registers
// (as its code registers them: see registeredMetrics), every selector
// scoped to the module by its label; every alert has a duration, a
// severity, a summary and a description; the dashboard is valid JSON with
// panels, and shows every metric the module registers.
func TestChartMonitoringQueriesUseRegisteredMetrics(t *testing.T) {
	registered := registeredMetrics(t)
	_, quotaChart := writeChart(t)
	all := allFeatures(t)
	var allAlerts []string
	for _, c := range []struct {
		module, namespace string
		ch                *chartv2.Chart
		alerts            []string // some alerts it must have
		not               []string // and some it must not
	}{
		{module, moduleNS, quotaChart, []string{"VigilAdmissionErrors", "VigilInformerStale", "VigilRegistrationStuck", "VigilAuditFindings"}, []string{"VigilWebhookFailedOpen", "VigilScheduleFailing", "VigilWatchHandlerPanics"}},
		{"sentry", "sentry-system", all, []string{"VigilWebhookFailedOpen", "VigilScheduleFailing", "VigilWatchHandlerPanics", "VigilAuditFindings", "VigilAdmissionDenialsSurge"}, nil},
	} {
		objs := mustRenderWithAPIs(t, c.ch, monitoringOn(true, true, true), monitoringAPIs...)
		var queries []query
		rule, ok := objs["PrometheusRule "+c.namespace+"/"+c.module]
		if !ok {
			t.Fatalf("%s: no PrometheusRule rendered", c.module)
		}
		var names []string
		templated := 0
		for _, r := range rules(t, rule) {
			name, _ := r["alert"].(string)
			names = append(names, name)
			queries = append(queries, query{c.module + " alert " + name, fmt.Sprint(r["expr"])})
			ann, _ := r["annotations"].(map[string]any)
			if text := fmt.Sprint(ann); strings.Contains(text, `"{{"`) {
				t.Errorf("%s alert %s: annotations %v: want Prometheus's own templates, as written", c.module, name, ann)
			} else if strings.Contains(text, "{{ $labels.") {
				templated++
			}
			l, _ := r["labels"].(map[string]any)
			if ann["summary"] == nil || ann["description"] == nil || !slices.Contains([]any{"critical", "warning", "info"}, l["severity"]) || r["for"] == nil {
				t.Errorf("%s alert %s: annotations %v, labels %v, for %v: want a summary, a description, a severity and a duration", c.module, name, ann, l, r["for"])
			}
		}
		if templated == 0 {
			t.Errorf("%s: no alert's annotations name its series' labels ({{ $labels.… }})", c.module)
		}
		allAlerts = append(allAlerts, names...)
		for _, want := range c.alerts {
			if !slices.Contains(names, want) {
				t.Errorf("%s: alerts %v lack %s", c.module, names, want)
			}
		}
		for _, not := range c.not {
			if slices.Contains(names, not) {
				t.Errorf("%s: alert %s, for a part the module does not have", c.module, not)
			}
		}

		cm, ok := objs["ConfigMap "+c.namespace+"/"+c.module+"-dashboard"]
		if !ok {
			t.Fatalf("%s: no dashboard ConfigMap rendered", c.module)
		}
		data, _, _ := unstructured.NestedString(cm, "data", chart.DashboardFile(c.module))
		var dash struct {
			UID        string
			Templating struct{ List []struct{ Name, Type string } }
			Panels     []struct {
				ID         int
				Type       string
				Title      string
				Datasource struct{ UID string }
				Targets    []struct{ RefID, Expr, LegendFormat string }
			}
		}
		if err := json.Unmarshal([]byte(data), &dash); err != nil {
			t.Fatalf("%s: the dashboard is not JSON: %v\n%s", c.module, err, data)
		}
		if dash.UID != chart.DashboardUID(c.module) || len(dash.Templating.List) != 1 || dash.Templating.List[0].Type != "datasource" {
			t.Errorf("%s: dashboard uid %q, templating %v: want uid %s and a datasource variable", c.module, dash.UID, dash.Templating.List, chart.DashboardUID(c.module))
		}
		ids := map[int]bool{}
		n := 0
		for _, p := range dash.Panels {
			if ids[p.ID] {
				t.Errorf("%s: panel id %d twice", c.module, p.ID)
			}
			ids[p.ID] = true
			if p.Type == "row" {
				continue
			}
			n++
			if len(p.Targets) == 0 || p.Datasource.UID != "${datasource}" {
				t.Errorf("%s: panel %q has targets %v, datasource %q: want queries through ${datasource}", c.module, p.Title, p.Targets, p.Datasource.UID)
			}
			for _, tg := range p.Targets {
				if strings.Contains(tg.LegendFormat, `"{{"`) {
					t.Errorf("%s: panel %q legend %q: want Grafana's own {{label}}, as written", c.module, p.Title, tg.LegendFormat)
				}
				queries = append(queries, query{fmt.Sprintf("%s panel %q %s", c.module, p.Title, tg.RefID), tg.Expr})
			}
		}
		if n < 8 {
			t.Errorf("%s: %d panels, want the admission, registration, watcher and informer panels", c.module, n)
		}

		shown := map[string]bool{}
		for _, q := range queries {
			sels, err := selectors(q.expr)
			if err != nil || len(sels) == 0 {
				t.Errorf("%s: %q: selectors %v, %v: want at least one metric", q.where, q.expr, sels, err)
				continue
			}
			for _, s := range sels {
				base, ok := registered.has(s.name)
				if !ok {
					t.Errorf("%s reads %s, which no vigil code registers (%q)", q.where, s.name, q.expr)
				}
				if !moduleMatcher(c.module).MatchString(s.matchers) {
					t.Errorf("%s: the selector %s{%s} is not scoped to the module (module=%q)", q.where, s.name, s.matchers, c.module)
				}
				if strings.Contains(q.where, " panel ") {
					shown[base] = true
				}
			}
		}
		if c.module == "sentry" {
			for name := range registered {
				if strings.HasPrefix(name, "vigil_") && !shown[name] {
					t.Errorf("the dashboard of a module with every part shows no panel of %s", name)
				}
			}
		}
	}
	t.Logf("%d registered metrics; alerts %v", len(registered), allAlerts)
}

func moduleMatcher(module string) *regexp.Regexp {
	return regexp.MustCompile(`(^|,)\s*module\s*=\s*"` + regexp.QuoteMeta(module) + `"\s*(,|$)`)
}

// selector is a PromQL vector selector: a metric name and its matchers.
type selector struct{ name, matchers string }

// groupings take a parenthesized list of labels, not an expression.
var groupings = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// keywords are PromQL's words that are not metric names.
var keywords = map[string]bool{"and": true, "or": true, "unless": true, "offset": true, "bool": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true, "atan2": true, "start": true, "end": true}

func isIdent(c byte, first bool) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || (!first && c >= '0' && c <= '9')
}

// aggregatedBy reports whether rest starts with an aggregation's grouping,
// by (…) or without (…).
func aggregatedBy(rest string) bool {
	for _, g := range []string{"by", "without"} {
		if after, ok := strings.CutPrefix(rest, g); ok && strings.HasPrefix(strings.TrimLeft(after, " \n\t"), "(") {
			return true
		}
	}
	return false
}

// selectors reads the vector selectors of a PromQL expression: a word
// followed by ( or by a grouping is a function or an aggregation, and a
// grouping's labels are skipped, as are strings, ranges and numbers; any
// other word, not a keyword, is a metric name, with its matchers when {
// follows.
func selectors(expr string) ([]selector, error) {
	var out []selector
	depth := 0
	skipString := func(i int) (int, error) {
		q := expr[i]
		for j := i + 1; j < len(expr); j++ {
			if expr[j] == '\\' && q != '`' {
				j++
				continue
			}
			if expr[j] == q {
				return j + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated string at %d", i)
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j, err := skipString(i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '[':
			j := strings.IndexByte(expr[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("unterminated range at %d", i)
			}
			i += j + 1
		case c == '{':
			return nil, fmt.Errorf("a selector without a metric name at %d", i)
		case c == '(':
			depth++
			i++
		case c == ')':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("unbalanced ) at %d", i)
			}
			i++
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.') {
				i++
			}
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && (expr[k] == ' ' || expr[k] == '\n' || expr[k] == '\t') {
				k++
			}
			if k < len(expr) && expr[k] == '(' {
				if groupings[word] {
					end := strings.IndexByte(expr[k:], ')')
					if end < 0 {
						return nil, fmt.Errorf("unterminated %s at %d", word, i)
					}
					i = k + end + 1
					continue
				}
				i = j // a function or an aggregation
				continue
			}
			i = j
			if keywords[word] || aggregatedBy(expr[k:]) {
				continue // an aggregation's grouping comes next: sum by (le) (…)
			}
			s := selector{name: word}
			if k < len(expr) && expr[k] == '{' {
				end := k + 1
				for end < len(expr) && expr[end] != '}' {
					if expr[end] == '"' || expr[end] == '\'' || expr[end] == '`' {
						e, err := skipString(end)
						if err != nil {
							return nil, err
						}
						end = e
						continue
					}
					end++
				}
				if end == len(expr) {
					return nil, fmt.Errorf("unterminated matchers at %d", k)
				}
				s.matchers = expr[k+1 : end]
				i = end + 1
			}
			out = append(out, s)
		default:
			i++
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced parentheses")
	}
	return out, nil
}

// The PromQL reader finds the metric names, and only them.
func TestPromQLSelectors(t *testing.T) {
	for expr, want := range map[string]string{
		`sum by (le, binding) (rate(a_bucket{module="q", verdict=~"x|y"}[5m]))`:                                    `a_bucket{module="q", verdict=~"x|y"}`,
		`histogram_quantile(0.99, sum(rate(a_bucket{module="q"}[$__rate_interval]))) > 0.5`:                        `a_bucket{module="q"}`,
		"b{module=\"q\"}\n  > 3 * (sum by (c) (rate(b{module=\"q\"}[1h] offset 1h)) or c * 0)\nand d{e=\"}\"} > 1": `b{module="q"} b{module="q"} c{} d{e="}"}`,
		`x / ignoring (verdict) group_left sum without (a) (y{module="q"}) unless on(z) w`:                         `x{} y{module="q"} w{}`,
	} {
		sels, err := selectors(expr)
		if err != nil {
			t.Errorf("%q: %v", expr, err)
			continue
		}
		var got []string
		for _, s := range sels {
			got = append(got, s.name+"{"+s.matchers+"}")
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%q: selectors %v, want %s", expr, got, want)
		}
	}
	for _, bad := range []string{`{__name__="x"}`, `sum(x`, `x{a="b"`} {
		if _, err := selectors(bad); err == nil {
			t.Errorf("%q read without error", bad)
		}
	}
}

// metricSet is metric names by what the code declares them as: counter,
// gauge, histogram, summary, or desc (prometheus.NewDesc, whose type the
// collector decides).
type metricSet map[string]string

// has reports whether a series name is one of the set's: itself, or a
// histogram's or summary's _bucket, _sum or _count; and its metric's name.
func (s metricSet) has(series string) (string, bool) {
	if _, ok := s[series]; ok {
		return series, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, found := strings.CutSuffix(series, suffix)
		if !found {
			continue
		}
		if k := s[base]; k == "histogram" || (k == "summary" && suffix != "_bucket") {
			return base, true
		}
	}
	return "", false
}

// registeredMetrics are the metrics the code of a module's binary registers:
// every prometheus.NewDesc and every prometheus.{Counter,Gauge,Histogram,
// Summary}Opts literal in the vigil packages examples/quota links, read
// from their source — those of the admission and watcher roles' own
// registries, controller-runtime's, and the process-wide collectors. A
// name not written as literals there fails: the reading would miss it.
// Those the test can construct (admit.NewMetrics, watchhealth.Collector)
// are constructed and described too, and must be among them.
func registeredMetrics(t *testing.T) metricSet {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}", exampleDir).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", exampleDir, err)
	}
	set := metricSet{}
	fset := token.NewFileSet()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 || !strings.HasPrefix(f[0], "github.com/vigilkit/vigil") {
			continue
		}
		for _, name := range strings.Fields(f[2]) {
			file, err := parser.ParseFile(fset, filepath.Join(f[1], name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			scanMetrics(t, fset, file, set)
		}
	}

	reg := prometheus.NewRegistry()
	if _, err := admit.NewMetrics(reg, module); err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(watchhealth.Collector())
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	n := 0
	for d := range ch {
		mt := fqName.FindStringSubmatch(d.String())
		if mt == nil {
			t.Fatalf("no fqName in %s", d)
		}
		n++
		if _, ok := set[mt[1]]; !ok {
			t.Errorf("%s, registered by the admission metrics or the informers' collector, is not among the metrics read from the source: the reading misses some", mt[1])
		}
	}
	if n < 10 || len(set) < 25 {
		t.Fatalf("%d metrics constructed, %d read from the source: expected the module's whole set", n, len(set))
	}
	return set
}

// scanMetrics adds the metrics file declares to set.
func scanMetrics(t *testing.T, fset *token.FileSet, file *ast.File, set metricSet) {
	t.Helper()
	prom := ""
	for _, imp := range file.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/prometheus/client_golang/prometheus" {
			prom = "prometheus"
			if imp.Name != nil {
				prom = imp.Name.Name
			}
		}
	}
	if prom == "" {
		return
	}
	promSel := func(e ast.Expr) string {
		if s, ok := e.(*ast.SelectorExpr); ok {
			if x, ok := s.X.(*ast.Ident); ok && x.Name == prom {
				return s.Sel.Name
			}
		}
		return ""
	}
	literal := func(e ast.Expr) (string, bool) {
		if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
			s, err := strconv.Unquote(b.Value)
			return s, err == nil
		}
		return "", false
	}
	kinds := map[string]string{"CounterOpts": "counter", "GaugeOpts": "gauge", "HistogramOpts": "histogram", "SummaryOpts": "summary", "Opts": "untyped"}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if promSel(n.Fun) != "NewDesc" || len(n.Args) == 0 {
				return true
			}
			name, ok := literal(n.Args[0])
			if !ok {
				t.Errorf("%s: prometheus.NewDesc with a name that is not a string literal: the test cannot read it", fset.Position(n.Pos()))
				return true
			}
			set[name] = "desc"
		case *ast.CompositeLit:
			kind, ok := kinds[promSel(n.Type)]
			if !ok {
				return true
			}
			parts := map[string]string{}
			for _, e := range n.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, _ := kv.Key.(*ast.Ident)
				if key == nil || (key.Name != "Namespace" && key.Name != "Subsystem" && key.Name != "Name") {
					continue
				}
				v, ok := literal(kv.Value)
				if !ok {
					t.Errorf("%s: a metric's %s that is not a string literal: the test cannot read it", fset.Position(kv.Pos()), key.Name)
					return true
				}
				parts[key.Name] = v
			}
			if parts["Name"] == "" {
				t.Errorf("%s: metric options without a literal Name: the test cannot read it", fset.Position(n.Pos()))
				return true
			}
			set[prometheus.BuildFQName(parts["Namespace"], parts["Subsystem"], parts["Name"])] = kind
		}
		return true
	})
}

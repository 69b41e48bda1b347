package gate

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestJSONPath(t *testing.T) {
	pod := func(status map[string]any) map[string]any {
		return map[string]any{
			"spec":   map[string]any{"containers": []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}},
			"status": status,
		}
	}
	running := u("v1", "Pod", "p", pod(map[string]any{
		"phase":      "Running",
		"ready":      true,
		"restarts":   int64(3),
		"ratio":      0.5,
		"nothing":    nil,
		"hostIP":     " 10.0.0.1 ",
		"podIPs":     []any{map[string]any{"ip": "10.1.0.4"}},
		"conditions": conds("Initialized", "True", "", "Ready", "False", "ContainersNotReady"),
	}))
	runChecks(t, []checkCase{
		{"nil", JSONPath("{.status.phase}", "Running"), nil, false, "not found"},
		{"match", JSONPath("{.status.phase}", "Running"), running, true, "{.status.phase}=Running"},
		{"mismatch", JSONPath("{.status.phase}", "Succeeded"), running, false, "{.status.phase}=Running, want Succeeded"},
		{"missing field", JSONPath("{.status.message}", "x"), running, false, "{.status.message} not set"},
		{"missing parent", JSONPath("{.status.loadBalancer.ingress}", ""), running, false, "{.status.loadBalancer.ingress} not set"},
		{"null is not set", JSONPath("{.status.nothing}", ""), running, false, "{.status.nothing} not set"},
		{"no status at all", JSONPath("{.status.phase}", "Running"), u("v1", "Pod", "p", nil), false, "{.status.phase} not set"},
		{"bare path with dot", JSONPath(".status.phase", "Running"), running, true, "{.status.phase}=Running"},
		{"bare path without dot", JSONPath("status.phase", "Running"), running, true, "{.status.phase}=Running"},
		{"braces without dot", JSONPath("{status.phase}", "Running"), running, true, "{.status.phase}=Running"},
		{"bool", JSONPath("{.status.ready}", "true"), running, true, "{.status.ready}=true"},
		{"int", JSONPath("{.status.restarts}", "3"), running, true, "{.status.restarts}=3"},
		{"float", JSONPath("{.status.ratio}", "0.5"), running, true, "{.status.ratio}=0.5"},
		{"spaces trimmed like kubectl", JSONPath("{.status.hostIP}", "10.0.0.1"), running, true, "{.status.hostIP}= 10.0.0.1 "},
		{"any value", JSONPath("{.status.phase}", ""), running, true, "{.status.phase} is set"},
		{"any value of an object", JSONPath("{.status.podIPs}", ""), running, true, "{.status.podIPs} is set"},
		{"filter", JSONPath(`{.status.conditions[?(@.type=="Ready")].status}`, "True"), running, false, `{.status.conditions[?(@.type=="Ready")].status}=False, want True`},
		{"filter match", JSONPath(`{.status.conditions[?(@.type=="Initialized")].status}`, "True"), running, true, `{.status.conditions[?(@.type=="Initialized")].status}=True`},
		{"filter no match", JSONPath(`{.status.conditions[?(@.type=="Other")].status}`, "True"), running, false, `{.status.conditions[?(@.type=="Other")].status} not set`},
		{"index", JSONPath("{.status.podIPs[0].ip}", "10.1.0.4"), running, true, "{.status.podIPs[0].ip}=10.1.0.4"},
		{"index out of range", JSONPath("{.status.podIPs[3].ip}", "10.1.0.4"), running, false, "{.status.podIPs[3].ip}: array index out of bounds: index 3, length 1"},
		{"several values", JSONPath("{.spec.containers[*].name}", "a"), running, false, "{.spec.containers[*].name} matches 2 values, want exactly one"},
		{"object with value", JSONPath("{.status}", "Running"), running, false, "{.status} is an object, want Running: point the path at a single field"},
		{"list with value", JSONPath("{.status.podIPs}", "x"), running, false, "{.status.podIPs} is a list, want x: point the path at a single field"},
		{"invalid", JSONPath("{.status.phase", "Running"), running, false, "invalid jsonpath {.status.phase: unclosed action"},
		{"invalid on nil", JSONPath("{.status.phase", "Running"), nil, false, "invalid jsonpath {.status.phase: unclosed action"},
		{"range reused", JSONPath("{range .spec.containers[*]}{.name}{end}", ""), running, false, "{range .spec.containers[*]}{.name}{end} matches 2 values, want exactly one"},
	})
}

// TestJSONPathRangeRepeats guards against reusing one parsed JSONPath: its
// FindResults rewrites the parse tree for {range}, so a second evaluation of
// the same instance would see a different expression.
func TestJSONPathRangeRepeats(t *testing.T) {
	c := JSONPath("{range .items[*]}{.name}{end}", "")
	obj := u("v1", "List", "l", map[string]any{"items": []any{map[string]any{"name": "only"}}})
	for i := range 3 {
		if ok, why := c.Check(obj); !ok || why != "{range .items[*]}{.name}{end} is set" {
			t.Fatalf("evaluation %d: Check() = (%v, %q), want (true, %q)", i+1, ok, why, "{range .items[*]}{.name}{end} is set")
		}
	}
}

func TestJSONPathConcurrent(t *testing.T) {
	c := JSONPath("{.status.phase}", "Running")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			phase := "Running"
			if i%2 == 1 {
				phase = "Pending"
			}
			obj := u("v1", "Pod", "p", map[string]any{"status": map[string]any{"phase": phase}})
			for range 200 {
				if ok, _ := c.Check(obj); ok != (phase == "Running") {
					t.Errorf("Check(phase=%s) = %v", phase, ok)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestJSONPathString(t *testing.T) {
	for _, tc := range []struct {
		expr, value, want string
	}{
		{"{.status.phase}", "Ready", "jsonpath {.status.phase}=Ready"},
		{".status.phase", "Ready", "jsonpath {.status.phase}=Ready"},
		{" status.phase ", "Ready", "jsonpath {.status.phase}=Ready"},
		{"{.status.loadBalancer.ingress}", "", "jsonpath {.status.loadBalancer.ingress}"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := JSONPath(tc.expr, tc.value).String(); got != tc.want {
				t.Errorf("JSONPath(%q, %q).String() = %q, want %q", tc.expr, tc.value, got, tc.want)
			}
		})
	}
}

func TestJSONPathValidate(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		wantErr string
	}{
		{"{.status.phase}", ""},
		{".status.phase", ""},
		{`{.status.conditions[?(@.type=="Ready")].status}`, ""},
		{"{range .items[*]}{.name}{end}", ""},
		{"{.status.phase", `gate.JSONPath("{.status.phase", "Ready"): expected a kubectl-style JSONPath such as {.status.phase}: unclosed action: fix the expression`},
		{"", `gate.JSONPath("", "Ready"): expected a kubectl-style JSONPath such as {.status.phase}: empty expression`},
		{"{{}}", "unrecognized character in action"},
		{"{.items[}", "unterminated array"},
		{"{.a}{bogus}", "unrecognized identifier bogus"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			err := JSONPath(tc.expr, "Ready").(Validator).Validate(configMapGVK)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// FuzzJSONPath checks that no expression, however malformed, makes the
// constructor, Validate or Check panic, and that an expression Validate
// rejects is never satisfied.
func FuzzJSONPath(f *testing.F) {
	for _, s := range []string{
		"{.status.phase}", ".status.phase", "status.phase", "{[}", "{{", "}", "{range .a[*]}{.b}{end}",
		`{.status.conditions[?(@.type=="Ready")].status}`, "{.a[-1:]}", "{..name}", "{.a[*]['b','c']}", "{@}", "{$}",
	} {
		f.Add(s, "x")
	}
	obj := u("v1", "Pod", "p", map[string]any{
		"status": map[string]any{
			"phase":      "x",
			"conditions": conds("Ready", "True", ""),
			"list":       []any{int64(1), "x", map[string]any{"b": "x"}},
		},
	})
	f.Fuzz(func(t *testing.T, expr, value string) {
		c := JSONPath(expr, value)
		err := c.(Validator).Validate(configMapGVK)
		_ = c.String()
		ok, why := c.Check(obj)
		if err != nil && ok {
			t.Errorf("JSONPath(%q, %q): Validate failed (%v) but Check was ok (%q)", expr, value, err, why)
		}
		if !ok && why == "" {
			t.Errorf("JSONPath(%q, %q): not ok without a why", expr, value)
		}
		c.Check(nil)
		_ = fmt.Sprint(c)
	})
}

package gate

import (
	"strings"
	"sync"
	"testing"
)

func TestCEL(t *testing.T) {
	widget := u("example.com/v1", "Widget", "w", map[string]any{
		"metadata": map[string]any{"namespace": "ns", "labels": map[string]any{"tier": "db"}},
		"spec":     map[string]any{"replicas": int64(3), "size": 2, "ratio": 0.75, "name": "Big Widget", "enabled": true},
		"status": map[string]any{
			"phase":      "Ready",
			"conditions": conds("Ready", "True", ""),
			"items":      []any{int64(1), int64(2), int64(3)},
		},
	})
	fresh := u("example.com/v1", "Widget", "w", map[string]any{"spec": map[string]any{"replicas": int64(3)}})
	runChecks(t, []checkCase{
		{"nil object is null", CEL("object == null"), nil, true, ""},
		{"null check false when present", CEL("object == null"), widget, false, "evaluated to false"},
		{"field access on nil", CEL("object.spec.replicas > 1"), nil, false, "not found"},
		{"false on nil", CEL("object != null"), nil, false, "not found"},
		{"int comparison", CEL("object.spec.replicas > 1"), widget, true, ""},
		{"go int from hand-built object", CEL("object.spec.size == 2"), widget, true, ""},
		{"float", CEL("object.spec.ratio < 1.0"), widget, true, ""},
		{"false", CEL("object.spec.replicas > 5"), widget, false, "evaluated to false"},
		{"string", CEL(`object.status.phase == "Ready"`), widget, true, ""},
		{"bool field", CEL("object.spec.enabled == true"), widget, true, ""},
		{"metadata", CEL(`object.metadata.labels.tier == "db" && object.metadata.namespace == "ns"`), widget, true, ""},
		{"conditions", CEL(`object.status.conditions.exists(c, c.type == "Ready" && c.status == "True")`), widget, true, ""},
		{"list macro", CEL("object.status.items.all(i, i > 0) && size(object.status.items) == 3"), widget, true, ""},
		{"strings extension", CEL(`object.spec.name.lowerAscii() == "big widget"`), widget, true, ""},
		{"status missing", CEL(`object.status.phase == "Ready"`), fresh, false, "cel: no such key: status"},
		{"has guards missing status", CEL(`has(object.status) && object.status.phase == "Ready"`), fresh, false, "evaluated to false"},
		{"optional guards missing status", CEL(`object.?status.?phase.orValue("") == "Ready"`), fresh, false, "evaluated to false"},
		{"optional present", CEL(`object.?status.?phase.orValue("") == "Ready"`), widget, true, ""},
		{"type mismatch at runtime", CEL(`object.spec.replicas == "3"`), widget, false, "evaluated to false"},
		{"invalid never ok", CEL("object.x >"), widget, false, "cel: invalid expression: ERROR: <input>:1:11: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | object.x >\n | ..........^"},
	})
	if got := CEL("object.spec.x > 1").String(); got != "cel object.spec.x > 1" {
		t.Errorf("String() = %q, want %q", got, "cel object.spec.x > 1")
	}
}

func TestCELCostLimit(t *testing.T) {
	// Three nested comprehensions over 200 items cost about 8 million steps.
	items := make([]any, 200)
	for i := range items {
		items[i] = int64(i)
	}
	obj := u("v1", "ConfigMap", "c", map[string]any{"data": map[string]any{"items": items}})
	c := CEL("object.data.items.all(a, object.data.items.all(b, object.data.items.all(c, a + b + c >= 0)))")
	ok, why := c.Check(obj)
	if ok || !strings.Contains(why, "cost limit exceeded") {
		t.Errorf("Check() = (%v, %q), want (false, a cost limit error)", ok, why)
	}
}

func TestCELValidate(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		wantErr string
	}{
		{"object.spec.x > 1", ""},
		{"object == null", ""},
		{`has(object.status) && object.status.phase == "Ready"`, ""},
		{"object.x >", `gate.CEL("object.x >"): expected a CEL expression of type bool: ERROR: <input>:1:11: Syntax error`},
		{"object.spec.enabled", `gate.CEL("object.spec.enabled"): expected a CEL expression of type bool: got type dyn: compare the value, e.g. (object.spec.enabled) == true`},
		{"object.spec.replicas + 1", `gate.CEL("object.spec.replicas + 1"): expected a CEL expression of type bool: got type int: make it a comparison`},
		{`"Ready"`, "got type string"},
		{"obj.spec.x > 1", "undeclared reference to 'obj'"},
		{"", "Syntax error"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			err := CEL(tc.expr).(Validator).Validate(configMapGVK)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestCELConcurrent(t *testing.T) {
	c := CEL("object.spec.n % 2 == 0")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			obj := u("v1", "X", "x", map[string]any{"spec": map[string]any{"n": int64(i)}})
			for range 200 {
				if ok, _ := c.Check(obj); ok != (i%2 == 0) {
					t.Errorf("Check(n=%d) = %v", i, ok)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// FuzzCEL checks that no expression makes CEL, Validate or Check panic, and
// that one Validate rejects is never satisfied.
func FuzzCEL(f *testing.F) {
	for _, s := range []string{
		"object == null", "object.spec.x > 1", "object.x >", `object.?status.?phase.orValue("") == "Ready"`,
		"object.status.items.all(i, i > 0)", "1 / 0 == 1", `"a".matches("[")`, "object.spec",
	} {
		f.Add(s)
	}
	obj := u("v1", "X", "x", map[string]any{
		"spec":   map[string]any{"x": int64(2)},
		"status": map[string]any{"phase": "Ready", "items": []any{int64(1)}},
	})
	f.Fuzz(func(t *testing.T, expr string) {
		c := CEL(expr)
		err := c.(Validator).Validate(configMapGVK)
		ok, why := c.Check(obj)
		if err != nil && ok {
			t.Errorf("CEL(%q): Validate failed (%v) but Check was ok", expr, err)
		}
		if !ok && why == "" {
			t.Errorf("CEL(%q): not ok without a why", expr)
		}
		c.Check(nil)
	})
}

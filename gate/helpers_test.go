package gate

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// u builds an object by hand from apiVersion, kind, name and any further
// top-level fields, as the engine would hand it over from a watch.
func u(apiVersion, kind, name string, fields map[string]any) *unstructured.Unstructured {
	o := map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
	}
	for k, v := range fields {
		if k == "metadata" {
			md := o["metadata"].(map[string]any)
			for mk, mv := range v.(map[string]any) {
				md[mk] = mv
			}
			continue
		}
		o[k] = v
	}
	return &unstructured.Unstructured{Object: o}
}

// conds builds a status.conditions list from type/status/reason triples.
func conds(tsr ...string) []any {
	var out []any
	for i := 0; i+2 < len(tsr); i += 3 {
		c := map[string]any{"type": tsr[i], "status": tsr[i+1]}
		if tsr[i+2] != "" {
			c["reason"] = tsr[i+2]
		}
		out = append(out, c)
	}
	return out
}

type checkCase struct {
	name    string
	cond    Cond
	obj     *unstructured.Unstructured
	wantOK  bool
	wantWhy string
}

func runChecks(t *testing.T, cases []checkCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := tc.cond.Check(tc.obj)
			if ok != tc.wantOK || why != tc.wantWhy {
				t.Errorf("%s.Check() = (%v, %q), want (%v, %q)", tc.cond, ok, why, tc.wantOK, tc.wantWhy)
			}
		})
	}
}

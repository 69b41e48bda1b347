package chart_test

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const netpolKey = "NetworkPolicy quota-system/quota-admission"

// The chart ships the admission pods' NetworkPolicy (with default values,
// the manifests' own: TestChartWithDefaultValuesRendersTheManifests), none
// with networkPolicy.enabled false, and its peers from the values: the
// webhook port narrowed to ipBlocks, and no metricsFrom closing the
// metrics port rather than opening it to all. The API server accepts what
// it renders.
func TestChartNetworkPolicyValues(t *testing.T) {
	_, ch := writeChart(t)
	rel, err := render(t, ch, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	if _, ok := objects(t, rel.Manifest)[netpolKey]; !ok {
		t.Fatalf("%s not rendered with default values", netpolKey)
	}
	rel, err = render(t, ch, map[string]any{"networkPolicy": map[string]any{"enabled": false}})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	for key := range objects(t, rel.Manifest) {
		if strings.HasPrefix(key, "NetworkPolicy ") {
			t.Errorf("%s rendered with networkPolicy.enabled false", key)
		}
	}

	rel, err = render(t, ch, map[string]any{"networkPolicy": map[string]any{
		"webhookFrom": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/24"}}, map[string]any{"ipBlock": map[string]any{"cidr": "192.168.1.0/24"}}},
		"metricsFrom": []any{},
	}})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	np, ok := objects(t, rel.Manifest)[netpolKey]
	if !ok {
		t.Fatalf("%s not rendered", netpolKey)
	}
	rules, _, _ := unstructured.NestedSlice(np, "spec", "ingress")
	got, _ := json.Marshal(rules)
	want := `[{"from":[{"ipBlock":{"cidr":"10.0.0.0/24"}},{"ipBlock":{"cidr":"192.168.1.0/24"}}],"ports":[{"port":9443,"protocol":"TCP"}]}]`
	if string(got) != want {
		t.Errorf("ingress %s:\nwant %s (the webhook port from the ipBlocks, no rule for the metrics port)", got, want)
	}
	// The API server takes it, as a dry run in a namespace of the test's.
	u := &unstructured.Unstructured{Object: np}
	u.SetNamespace(env.Namespace(t))
	if err := env.Client.Create(t.Context(), u, client.DryRunAll); err != nil {
		t.Errorf("the API server refused the rendered NetworkPolicy: %v", err)
	}

	// The control plane's CIDRs narrow the webhook port, beside webhookFrom's
	// peers; alone, they are its only peers.
	for _, c := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"controlPlaneCIDRs": []any{"172.16.0.0/28", "10.0.1.10/32"}},
			`[{"from":[{"ipBlock":{"cidr":"172.16.0.0/28"}},{"ipBlock":{"cidr":"10.0.1.10/32"}}],"ports":[{"port":9443,"protocol":"TCP"}]}`},
		{map[string]any{"controlPlaneCIDRs": []any{"172.16.0.0/28"}, "webhookFrom": []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "kube-system"}}}}},
			`[{"from":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"kube-system"}}},{"ipBlock":{"cidr":"172.16.0.0/28"}}],"ports":[{"port":9443,"protocol":"TCP"}]}`},
	} {
		rel, err := render(t, ch, map[string]any{"networkPolicy": c.values})
		if err != nil {
			t.Fatalf("render with %v: %v", c.values, err)
		}
		np := objects(t, rel.Manifest)[netpolKey]
		rules, _, _ := unstructured.NestedSlice(np, "spec", "ingress")
		got, _ := json.Marshal(rules)
		if !strings.HasPrefix(string(got), c.want) {
			t.Errorf("networkPolicy %v: ingress %s:\nwant the webhook port's rule %s", c.values, got, c.want)
		}
		u := &unstructured.Unstructured{Object: np}
		u.SetNamespace(env.Namespace(t))
		if err := env.Client.Create(t.Context(), u, client.DryRunAll); err != nil {
			t.Errorf("the API server refused the NetworkPolicy rendered with %v: %v", c.values, err)
		}
	}
	if _, err := render(t, ch, map[string]any{"networkPolicy": map[string]any{"controlPlaneCIDRs": []any{"control-plane"}}}); err == nil || !strings.Contains(err.Error(), "/networkPolicy/controlPlaneCIDRs/0") {
		t.Errorf("networkPolicy.controlPlaneCIDRs [control-plane]: error %v, want the schema to refuse it naming /networkPolicy/controlPlaneCIDRs/0", err)
	}

	if _, err := render(t, ch, map[string]any{"networkPolicy": map[string]any{"enabled": "yes"}}); err == nil || !strings.Contains(err.Error(), "/networkPolicy/enabled") {
		t.Errorf("networkPolicy.enabled \"yes\": error %v, want the schema to refuse it naming /networkPolicy/enabled", err)
	}
	if _, err := render(t, ch, map[string]any{"networkPolicy": map[string]any{"metricsFrom": map[string]any{"namespaceSelector": map[string]any{}}}}); err == nil || !strings.Contains(err.Error(), "/networkPolicy/metricsFrom") {
		t.Errorf("networkPolicy.metricsFrom as an object: error %v, want the schema to refuse it", err)
	}
}

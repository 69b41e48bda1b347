package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A matcher.name is a JavaScript expression that must match the whole pod
// name; UDS Core's own Exemptions, lookaheads included, still match.
func TestExemptionNamesMatchTheWholeName(t *testing.T) {
	for _, c := range []struct {
		expr, pod string
		want      bool
	}{
		{"debug", "debug", true},
		{"debug", "totally-not-debug-but-root", false},
		{"debug", "debug-but-root", false},
		{"^node-exporter-.*", "node-exporter-x7k2p", true},
		{"^node-exporter-.*", "evil-node-exporter-x", false},
		{"istio-cni-node.*", "istio-cni-node-abcde", true},                // UDS Core's istio exemption
		{"falco-(?!falcosidekick-).*", "falco-x8k2p", true},               // UDS Core's falco exemption
		{"falco-(?!falcosidekick-).*", "falco-falcosidekick-ui-1", false}, // ... which leaves falcosidekick out
		{"^keycloak-[0-9]+$", "keycloak-0", true},                         // UDS Core's keycloak exemption
		{"^prometheus-kube-prometheus-stack-prometheus-.*", "prometheus-kube-prometheus-stack-prometheus-0", true},
		{"", "anything", true}, // an empty name matches every pod, as the CRD says
	} {
		if err := checkName(c.expr); err != nil {
			t.Errorf("compile %q: %v", c.expr, err)
			continue
		}
		if got, err := matchName(names.Matcher(t.Context()), c.expr, c.pod); err != nil || got != c.want {
			t.Errorf("%q matches %q: %v (%v), want %v", c.expr, c.pod, got, err, c.want)
		}
	}
	for _, bad := range []string{"([a-z", "/^debug$/", "*x"} {
		if err := checkName(bad); err == nil {
			t.Errorf("compile %q: no error, want it refused", bad)
		}
	}
}

// A requester holds at most one read of every namespace's Exemptions: her
// second waits for her first, while another requester's goes ahead; no
// more than scanSlots run at once; and a wait ends with its context.
func TestScanSlotsPerRequester(t *testing.T) {
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	release, err := takeScan(t.Context(), "tenant in apps")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := takeScan(short(), "tenant in apps"); err == nil || !strings.Contains(err.Error(), "on behalf of tenant in apps") {
		t.Errorf("the same requester's second read, while her first runs: %v, want it to wait for hers", err)
	}
	var others []func()
	for i := range scanSlots - 1 {
		r, err := takeScan(short(), fmt.Sprint("admin ", i))
		if err != nil {
			t.Fatalf("another requester's read %d, while the tenant's runs: %v", i, err)
		}
		others = append(others, r)
	}
	if _, err := takeScan(short(), "one more"); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("one of the %d reads", scanSlots)) {
		t.Errorf("a read past the %d slots: %v, want it to wait", scanSlots, err)
	}
	release()
	for _, r := range others {
		r()
	}
	if r, err := takeScan(short(), "tenant in apps"); err != nil {
		t.Errorf("the tenant's read once hers ended: %v", err)
	} else {
		r()
	}
	scans.mu.Lock()
	left := len(scans.mine)
	scans.mu.Unlock()
	if left != 0 {
		t.Errorf("%d requesters still counted after every read ended", left)
	}
}

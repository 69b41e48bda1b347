package chart

import "fmt"

// networkPolicy replaces the admission pods' NetworkPolicy's rules by the
// values networkPolicy.webhookFrom and networkPolicy.metricsFrom, their
// defaults the rendered ones. The webhook port's rule is always there: no
// peers (the default) admit anyone, as the API server must reach it. The
// metrics port's rule is there only with peers: none closes the port,
// rather than open it to all as a rule without peers would.
func (g *gen) networkPolicy(u map[string]any) {
	spec := u["spec"].(map[string]any)
	rules := spec["ingress"].([]any)
	webhook, metrics := rules[0].(map[string]any), rules[1].(map[string]any)
	webhookFrom, _ := webhook["from"].([]any)
	if webhookFrom == nil {
		webhookFrom = []any{}
	}
	g.netpol = map[string]any{"webhookFrom": webhookFrom, "metricsFrom": metrics["from"]}
	spec["ingress"] = g.sentinel(func(in string) string {
		item := in + "  "
		peers := item + "from: {{- toYaml . | nindent " + fmt.Sprint(len(item)) + " }}\n"
		return in + "ingress:\n" +
			in + "- ports:\n" + yamlAt(webhook["ports"], item) +
			in + "{{- with $.Values.networkPolicy.webhookFrom }}\n" + peers + in + "{{- end }}\n" +
			in + "{{- with $.Values.networkPolicy.metricsFrom }}\n" +
			in + "- ports:\n" + yamlAt(metrics["ports"], item) + peers +
			in + "{{- end }}\n"
	})
}

// networkPolicyValues is the networkPolicy section of values.yaml.
func (g *gen) networkPolicyValues() string {
	if g.netpol == nil {
		return ""
	}
	return `# The admission pods' NetworkPolicy. false where the cluster enforces none
# (or governs the module's pods with policies of its own).
networkPolicy:
  enabled: true
  # Who may reach the webhook port, as NetworkPolicy peers. None: anyone, as
  # the API server must, and its address is rarely one a selector can name
  # (host network, or outside the cluster). Narrow it with ipBlocks of the
  # control plane's addresses, and of the nodes' where the CNI applies
  # policies to the kubelet's probes.
` + yamlAt(map[string]any{"webhookFrom": g.netpol["webhookFrom"]}, "  ") +
		`  # Who may scrape /metrics, as NetworkPolicy peers. None: no one.
` + yamlAt(map[string]any{"metricsFrom": g.netpol["metricsFrom"]}, "  ") + "\n"
}

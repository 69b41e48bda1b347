package chart

import "fmt"

// networkPolicy replaces the admission pods' NetworkPolicy's rules by the
// values networkPolicy.webhookFrom, networkPolicy.controlPlaneCIDRs and
// networkPolicy.metricsFrom, their defaults the rendered ones. The webhook
// port's rule is always there: its peers are webhookFrom's and an ipBlock
// for each of controlPlaneCIDRs; none (the default) admit anyone, as the API
// server must reach it. The metrics port's rule is there only with peers:
// none closes the port, rather than open it to all as a rule without peers
// would.
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
		nindent := "nindent " + fmt.Sprint(len(item))
		peers := item + "from: {{- toYaml . | " + nindent + " }}\n"
		return in + "ingress:\n" +
			in + "- ports:\n" + yamlAt(webhook["ports"], item) +
			in + "{{- if or $.Values.networkPolicy.webhookFrom $.Values.networkPolicy.controlPlaneCIDRs }}\n" +
			item + "from:\n" +
			in + "{{- with $.Values.networkPolicy.webhookFrom }}\n" + item + "{{- toYaml . | " + nindent + " }}\n" + in + "{{- end }}\n" +
			in + "{{- range $.Values.networkPolicy.controlPlaneCIDRs }}\n" +
			item + "- ipBlock:\n" + item + "    cidr: {{ . | quote }}\n" +
			in + "{{- end }}\n" +
			in + "{{- end }}\n" +
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
  # Where the API server's calls to the webhook come from, as CIDRs: the
  # webhook port is then open to them (and to webhookFrom) alone. Empty:
  # anyone may reach it, as the API server must and its address is one only
  # you know; the server's connection limits then keep any number of
  # flooding Pods from taking the API server's connections, but narrowing
  # the port keeps them off it altogether. What to set per distribution
  # (EKS, GKE, AKS, k3s, RKE2, kubeadm, OpenShift): docs/shipping.md.
  controlPlaneCIDRs: []
  # Who else may reach the webhook port, as NetworkPolicy peers: a
  # namespaceSelector or podSelector where the API server's calls come
  # through a tunnel's pods (konnectivity-agent), or ipBlocks of the nodes
  # where the CNI applies policies to the kubelet's probes. Neither this nor
  # controlPlaneCIDRs: anyone.
` + yamlAt(map[string]any{"webhookFrom": g.netpol["webhookFrom"]}, "  ") +
		`  # Who may scrape /metrics, as NetworkPolicy peers. None: no one.
` + yamlAt(map[string]any{"metricsFrom": g.netpol["metricsFrom"]}, "  ") + "\n"
}

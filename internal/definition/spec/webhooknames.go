package spec

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/vigilkit/vigil/admission"
)

// The names of what a module registers with the API server for admission:
// its webhook configurations and their webhooks, the canary, its policies
// and their bindings, and its admission replicas' Lease. Registration, the
// manifests, the audit and plan read them here.

// ConfigurationName names a module's two webhook configurations, mutating
// and validating, which its manifests ship empty and its admission replicas
// fill: the module's name.
func ConfigurationName(module string) string { return module }

// StaticName names the webhook configurations of a module's fail-closed
// capabilities.
func StaticName(module string) string { return module + "-fail-closed" }

// WebhookName names the webhook of a module's capability and action.
func WebhookName(module, capability string, action Action) string {
	return fmt.Sprintf("%s.%s.%s.vigil.dev", capability, action, module)
}

// NamespaceWebhookName names the webhook of a module's capability and
// action in the namespaces its failure policy policy is given for
// (FailurePolicyIn): ignore.<capability>.<action>.<module>.vigil.dev.
func NamespaceWebhookName(module, capability string, action Action, policy admission.FailurePolicy) string {
	return fmt.Sprintf("%s.%s.%s.%s.vigil.dev", strings.ToLower(string(policy)), capability, action, module)
}

// CanaryName names a module's canary webhook.
func CanaryName(module string) string { return "canary." + module + ".vigil.dev" }

// IsCanary reports whether a webhook is a module's canary.
func IsCanary(name string) bool { return strings.HasPrefix(name, "canary.") }

// CanaryConfigMapName names the ConfigMap whose dry-run create is a
// module's canary.
func CanaryConfigMapName(module string) string { return module + "-canary" }

// CheckName names the policy and the binding of a capability's check.
func CheckName(module, capability, check string) string {
	return PolicyName(module, capability, check)
}

// GuardName names the policy and the binding guarding a capability's opt-out
// label.
func GuardName(module, capability string) string {
	return PolicyName(module, capability, OptOutGuard)
}

// OptInGuardName names the guard of a capability's opt-in label:
// <module>-<capability>-opt-in.
func OptInGuardName(module, capability string) string {
	return PolicyName(module, capability, OptInGuard)
}

var unsafeName = regexp.MustCompile(`[^a-z0-9.-]+`)

// LeaseName names the Lease the admission replicas of a module's version
// renew: <module>-admission-v<version>, the version lowercased and anything
// a name may not hold turned into "-".
func LeaseName(module, version string) string {
	return module + "-admission-v" + strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(version), "-"), "-.")
}

// BindingGuardName names the guard of the RoleBindings the module's roles
// create themselves: <module>-rolebindings.
func BindingGuardName(module string) string { return module + "-rolebindings" }

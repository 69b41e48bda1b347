package main

import (
	"bytes"
	"context"
	"encoding/json"
	"iter"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
)

// Policy is a UDS Core policy, as an Exemption entry names it.
type Policy string

// UDS Core's policies, as its Exemption CRD enumerates them.
const (
	DisallowHostNamespaces        Policy = "DisallowHostNamespaces"
	DisallowNodePortServices      Policy = "DisallowNodePortServices"
	DisallowPrivileged            Policy = "DisallowPrivileged"
	DisallowSELinuxOptions        Policy = "DisallowSELinuxOptions"
	DropAllCapabilities           Policy = "DropAllCapabilities"
	RequireNonRootUser            Policy = "RequireNonRootUser"
	RestrictCapabilities          Policy = "RestrictCapabilities"
	RestrictExternalNames         Policy = "RestrictExternalNames"
	RestrictHostPathWrite         Policy = "RestrictHostPathWrite"
	RestrictHostPorts             Policy = "RestrictHostPorts"
	RestrictIstioAmbientOverrides Policy = "RestrictIstioAmbientOverrides"
	RestrictIstioSidecarOverrides Policy = "RestrictIstioSidecarOverrides"
	RestrictIstioTrafficOverrides Policy = "RestrictIstioTrafficOverrides"
	RestrictIstioUser             Policy = "RestrictIstioUser"
	RestrictProcMount             Policy = "RestrictProcMount"
	RestrictSeccomp               Policy = "RestrictSeccomp"
	RestrictSELinuxType           Policy = "RestrictSELinuxType"
	RestrictVolumeTypes           Policy = "RestrictVolumeTypes"
)

// AllPolicies are the policies, in the Exemption CRD's order.
var AllPolicies = []Policy{
	DisallowHostNamespaces, DisallowNodePortServices, DisallowPrivileged, DisallowSELinuxOptions,
	DropAllCapabilities, RequireNonRootUser, RestrictCapabilities, RestrictExternalNames,
	RestrictHostPathWrite, RestrictHostPorts, RestrictIstioAmbientOverrides, RestrictIstioSidecarOverrides,
	RestrictIstioTrafficOverrides, RestrictIstioUser, RestrictProcMount, RestrictSeccomp,
	RestrictSELinuxType, RestrictVolumeTypes,
}

// ServicePolicies are the policies an Exemption applies to Services; every
// other one applies to Pods.
var ServicePolicies = []Policy{RestrictExternalNames, DisallowNodePortServices}

// Annotations UDS Core's mutations set: a policy an object is exempt from,
// and the policies that changed it.
const (
	ExemptionAnnotationPrefix = "uds-core.pepr.dev/uds-core-policies"
	MutatedAnnotation         = "uds-core.pepr.dev/mutated"
)

var upper = regexp.MustCompile(`[A-Z]`)

// kebab is the policy's name in kebab case, as UDS Core writes it in the
// mutated annotation and vigil names its bindings: disallow-privileged.
func (p Policy) kebab() string {
	return strings.TrimPrefix(strings.ToLower(upper.ReplaceAllString(string(p), "-$0")), "-")
}

// policies declares UDS Core's policies as bindings of one capability.
type policies struct {
	capability *vigil.Capability
	exemptions *exemptions
	istio      istioImages
	// podMutations and serviceMarks are the policies' mutations, in the
	// order they were declared: declareMutations runs them.
	podMutations []podStep
	serviceMarks []Policy
}

// podMutation changes a Pod that is not exempt from its policy; it reports
// whether the policy is to be recorded in the mutated annotation.
type podMutation func(r *vigil.Request[*corev1.Pod]) (annotate bool)

// podValidation judges a Pod that is not exempt from its policy: the denial
// message, or "" to admit it.
type podValidation func(r *vigil.Request[*corev1.Pod]) string

// pod declares a Pod policy as UDS Core declares one, on CREATE and UPDATE:
// a mutation that marks a Pod exempt from the policy (the annotation
// uds-core.pepr.dev/uds-core-policies.<Policy>: exempted) and otherwise runs
// mutate, when there is one; and a validation that admits an exempt Pod
// and otherwise runs validate. The mutations of every policy run in one
// binding (see declareMutations), in the order they were declared; each
// validation is a binding of its own, named after its policy. Ephemeral
// containers, added through the pods/ephemeralcontainers subresource
// (kubectl debug), which UDS Core's webhooks are never sent, are judged by
// the same bindings.
func (p *policies) pod(policy Policy, mutate podMutation, validate podValidation) {
	p.podMutations = append(p.podMutations, podStep{policy, policy.kebab(), mutate})
	// The policy first, the Exemptions only for what it would deny: the
	// verdict is UDS Core's (exempt, or else the policy's), and a Pod the
	// policy admits costs no read of the Exemptions. A denial read them, so
	// it is made again on fresh data when they may have changed.
	v := func(ctx context.Context, r *vigil.Request[*corev1.Pod]) vigil.Verdict {
		msg := validate(r)
		if msg == "" || p.exemptions.exempt(ctx, policy, r.Namespace, podName(r.Object)) {
			return admission.Allow()
		}
		return admission.Deny(msg)
	}
	name := policy.kebab()
	vigil.When(p.capability, &corev1.Pod{}).IsCreatedOrUpdated().Named(name).Validate(v)
	vigil.When(p.capability, &corev1.Pod{}).Subresource("ephemeralcontainers").IsUpdated().Named(name + "-debug").Validate(v)
}

// podStep is one policy's part of the Pods' mutation; name is the policy's
// in kebab case, as the mutated annotation lists it.
type podStep struct {
	policy Policy
	name   string
	mutate podMutation
}

// declareMutations declares the one binding that runs every policy's
// mutation of a Pod (and the marks of a Service's), in UDS Core's order: an
// object exempt from a policy is marked and left as it is, else the
// policy's mutation runs. Declared after the policies: the mutating webhook
// runs it before any validation, as the API server calls them.
func (p *policies) declareMutations() {
	pods := func(ctx context.Context, r *vigil.Request[*corev1.Pod]) error {
		exempt := p.exemptions.exemptFrom(ctx, r.Namespace, podName(r.Object))
		var mutated []string
		for _, step := range p.podMutations {
			if exempt[step.policy] {
				r.SetAnnotation(ExemptionAnnotationPrefix+"."+string(step.policy), "exempted")
				continue
			}
			if step.mutate != nil && step.mutate(r) {
				mutated = append(mutated, step.name)
			}
		}
		annotateMutations(r, mutated)
		return nil
	}
	vigil.When(p.capability, &corev1.Pod{}).IsCreatedOrUpdated().Named("pod-mutations").Mutate(pods)
	vigil.When(p.capability, &corev1.Pod{}).Subresource("ephemeralcontainers").IsUpdated().Named("pod-debug-mutations").Mutate(pods)
	vigil.When(p.capability, &corev1.Service{}).IsCreatedOrUpdated().Named("service-mutations").
		Mutate(func(ctx context.Context, r *vigil.Request[*corev1.Service]) error {
			exempt := p.exemptions.exemptFrom(ctx, r.Namespace, serviceName(r.Object))
			for _, policy := range p.serviceMarks {
				if exempt[policy] {
					r.SetAnnotation(ExemptionAnnotationPrefix+"."+string(policy), "exempted")
				}
			}
			return nil
		})
}

// serviceValidation judges a Service that is not exempt from its policy.
type serviceValidation func(r *vigil.Request[*corev1.Service]) string

// service declares a Service policy as pod declares a Pod one; its
// mutation only marks an exempt Service.
func (p *policies) service(policy Policy, validate serviceValidation) {
	p.serviceMarks = append(p.serviceMarks, policy)
	vigil.When(p.capability, &corev1.Service{}).IsCreatedOrUpdated().Named(policy.kebab()).
		Validate(func(ctx context.Context, r *vigil.Request[*corev1.Service]) vigil.Verdict {
			msg := validate(r)
			if msg == "" || p.exemptions.exempt(ctx, policy, r.Namespace, serviceName(r.Object)) {
				return admission.Allow()
			}
			return admission.Deny(msg)
		})
}

// podName is the name an Exemption's matcher is matched against: the Pod's
// name, or its generateName while it has none, as UDS Core matches it.
func podName(p *corev1.Pod) string {
	if p.Name != "" {
		return p.Name
	}
	return p.GenerateName
}

func serviceName(s *corev1.Service) string {
	if s.Name != "" {
		return s.Name
	}
	return s.GenerateName
}

// annotateMutations records the policies in the mutated annotation, a JSON
// list of the policies (kebab case) that changed the object, after those
// it lists already.
func annotateMutations[T client.Object](r *vigil.Request[T], policies []string) {
	if len(policies) == 0 {
		return
	}
	var list []string
	if v, ok := r.Object.GetAnnotations()[MutatedAnnotation]; ok {
		_ = json.Unmarshal([]byte(v), &list)
	}
	for _, p := range policies {
		if !slices.Contains(list, p) {
			list = append(list, p)
		}
	}
	data, _ := json.Marshal(list)
	r.SetAnnotation(MutatedAnnotation, string(data))
}

// container is one of a Pod's containers, init containers or ephemeral
// containers, in that order, as UDS Core's policies see them: what they
// read, and the security context they may set.
type container struct {
	Name, Image     string
	Command, Args   []string
	Ports           []corev1.ContainerPort
	SecurityContext **corev1.SecurityContext
	// Init is true for an init container.
	Init bool
}

// containers yields the Pod's containers, init containers and ephemeral
// containers, in that order, with their index in that order. Every policy
// walks them, so they are yielded rather than gathered into a slice.
func containers(p *corev1.Pod) iter.Seq2[int, container] {
	return func(yield func(int, container) bool) {
		i := 0
		for j := range p.Spec.Containers {
			c := &p.Spec.Containers[j]
			if !yield(i, container{Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args, Ports: c.Ports, SecurityContext: &c.SecurityContext}) {
				return
			}
			i++
		}
		for j := range p.Spec.InitContainers {
			c := &p.Spec.InitContainers[j]
			if !yield(i, container{Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args, Ports: c.Ports, SecurityContext: &c.SecurityContext, Init: true}) {
				return
			}
			i++
		}
		for j := range p.Spec.EphemeralContainers {
			c := &p.Spec.EphemeralContainers[j]
			if !yield(i, container{Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args, Ports: c.Ports, SecurityContext: &c.SecurityContext}) {
				return
			}
			i++
		}
	}
}

// violation is a container's name and security context, as a denial names
// them: {"name":"test","ctx":{...}}.
type violation struct {
	Name string `json:"name"`
	Ctx  any    `json:"ctx"`
}

// securityContextContainers are the containers that have a security
// context, istio-init containers left out when excludeIstioInit is set.
func (p *policies) securityContextContainers(pod *corev1.Pod, excludeIstioInit bool) iter.Seq[violation] {
	return func(yield func(violation) bool) {
		for _, c := range containers(pod) {
			if *c.SecurityContext == nil {
				continue
			}
			if excludeIstioInit && p.istio.isInitContainer(pod, c) {
				continue
			}
			if !yield(violation{Name: c.Name, Ctx: *c.SecurityContext}) {
				return
			}
		}
	}
}

// securityContextMessage is UDS Core's denial: the message, what is
// authorized (empty entries left out) and each violation as JSON, joined
// with " | ".
func securityContextMessage(msg string, authorized []string, violations []violation) string {
	var auth []string
	for _, a := range authorized {
		if a != "" {
			auth = append(auth, a)
		}
	}
	found := make([]string, len(violations))
	for i, v := range violations {
		found[i] = jsonString(v)
	}
	return msg + ". Authorized: [" + strings.Join(auth, " | ") + "] Found: " + strings.Join(found, " | ")
}

// jsonString is v as JavaScript's JSON.stringify writes it: compact, and
// <, > and & as themselves.
func jsonString(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "{}"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

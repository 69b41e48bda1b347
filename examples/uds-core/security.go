package main

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil"
)

// declareSecurity declares UDS Core's security policies (its
// policies/security.ts), in its order.
func (p *policies) declareSecurity() {
	// Privilege escalation: set to false where nothing asks for it, denied
	// where allowed (or left unset) and for privileged containers.
	p.pod(DisallowPrivileged, func(r *vigil.Request[*corev1.Pod]) bool {
		mutated := false
		for _, c := range containers(r.Object) {
			sc := ensureSecurityContext(c)
			if sc.AllowPrivilegeEscalation == nil && !ptr.Deref(sc.Privileged, false) &&
				(sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Add, "CAP_SYS_ADMIN")) {
				sc.AllowPrivilegeEscalation = ptr.To(false)
				mutated = true
			}
		}
		return mutated
	}, func(r *vigil.Request[*corev1.Pod]) string {
		var violations []violation
		for v := range p.securityContextContainers(r.Object, false) {
			sc := v.Ctx.(*corev1.SecurityContext)
			if ptr.Deref(sc.AllowPrivilegeEscalation, true) || ptr.Deref(sc.Privileged, false) {
				violations = append(violations, v)
			}
		}
		if len(violations) == 0 {
			return ""
		}
		return securityContextMessage("Privilege escalation is disallowed",
			[]string{"allowPrivilegeEscalation = false", "privileged = false"}, violations)
	})

	// A non-root user: the Pod's security context defaults to runAsNonRoot,
	// user and group 1000 (or the uds/user, uds/group and uds/fsgroup
	// labels'); root at the Pod or in a container is denied.
	p.pod(RequireNonRootUser, func(r *vigil.Request[*corev1.Pod]) bool {
		setNonRootUser(r.Object)
		return true
	}, func(r *vigil.Request[*corev1.Pod]) string {
		if psc := r.Object.Spec.SecurityContext; psc != nil && (!ptr.Deref(psc.RunAsNonRoot, true) || ptr.Deref(psc.RunAsUser, -1) == 0 ||
			slices.Contains(psc.SupplementalGroups, 0)) {
			return "Pod level securityContext does not meet the non-root user requirement."
		}
		var violations []violation
		for v := range p.securityContextContainers(r.Object, true) {
			sc := v.Ctx.(*corev1.SecurityContext)
			if !ptr.Deref(sc.RunAsNonRoot, true) || ptr.Deref(sc.RunAsUser, -1) == 0 {
				violations = append(violations, v)
			}
		}
		if len(violations) == 0 {
			return ""
		}
		return securityContextMessage("Unauthorized container securityContext. Containers must not run as root or have root-level supplemental groups",
			[]string{"runAsNonRoot = true", "runAsUser > 0", "supplementalGroups must not include 0"}, violations)
	})

	// procMount: Default only.
	p.pod(RestrictProcMount, nil, func(r *vigil.Request[*corev1.Pod]) string {
		authorized := []string{"", "Default"}
		var violations []violation
		for v := range p.securityContextContainers(r.Object, false) {
			if pm := v.Ctx.(*corev1.SecurityContext).ProcMount; pm != nil && *pm != "" && !slices.Contains(authorized, string(*pm)) {
				violations = append(violations, v)
			}
		}
		if len(violations) == 0 {
			return ""
		}
		return securityContextMessage("Unauthorized procMount type", authorized, violations)
	})

	// Seccomp: RuntimeDefault, Localhost or unset, at the Pod and in each
	// container.
	p.pod(RestrictSeccomp, nil, func(r *vigil.Request[*corev1.Pod]) string {
		authorized := []string{"", "RuntimeDefault", "Localhost"}
		seccomp := func(sp *corev1.SeccompProfile) string {
			if sp == nil {
				return ""
			}
			return string(sp.Type)
		}
		return p.podOrContainers(r.Object, authorized, "Unauthorized pod seccomp profile type", "Unauthorized container seccomp profile type",
			func(psc *corev1.PodSecurityContext) bool {
				return slices.Contains(authorized, seccomp(psc.SeccompProfile))
			},
			func(sc *corev1.SecurityContext) bool { return slices.Contains(authorized, seccomp(sc.SeccompProfile)) })
	})

	// SELinux options: no user and no role.
	p.pod(DisallowSELinuxOptions, nil, func(r *vigil.Request[*corev1.Pod]) string {
		ok := func(o *corev1.SELinuxOptions) bool { return o == nil || (o.User == "" && o.Role == "") }
		return p.podOrContainers(r.Object, []string{"user: undefined", "role: undefined"},
			"Unauthorized pod SELinux Options", "Unauthorized container SELinux Options",
			func(psc *corev1.PodSecurityContext) bool { return ok(psc.SELinuxOptions) },
			func(sc *corev1.SecurityContext) bool { return ok(sc.SELinuxOptions) })
	})

	// SELinux type: container_t, container_init_t, container_kvm_t or unset.
	p.pod(RestrictSELinuxType, nil, func(r *vigil.Request[*corev1.Pod]) string {
		authorized := []string{"", "container_t", "container_init_t", "container_kvm_t"}
		typ := func(o *corev1.SELinuxOptions) string {
			if o == nil {
				return ""
			}
			return o.Type
		}
		return p.podOrContainers(r.Object, authorized, "Unauthorized pod SELinux type", "Unauthorized container SELinux type",
			func(psc *corev1.PodSecurityContext) bool { return slices.Contains(authorized, typ(psc.SELinuxOptions)) },
			func(sc *corev1.SecurityContext) bool { return slices.Contains(authorized, typ(sc.SELinuxOptions)) })
	})

	// Capabilities: every container drops ALL.
	p.pod(DropAllCapabilities, func(r *vigil.Request[*corev1.Pod]) bool {
		for _, c := range containers(r.Object) {
			sc := ensureSecurityContext(c)
			if sc.Capabilities == nil {
				sc.Capabilities = &corev1.Capabilities{}
			}
			sc.Capabilities.Drop = []corev1.Capability{"ALL"}
		}
		return true
	}, func(r *vigil.Request[*corev1.Pod]) string {
		var violations []violation
		for v := range p.securityContextContainers(r.Object, false) {
			if caps := v.Ctx.(*corev1.SecurityContext).Capabilities; caps == nil || !slices.Contains(caps.Drop, "ALL") {
				violations = append(violations, v)
			}
		}
		if len(violations) == 0 {
			return ""
		}
		return securityContextMessage("Unauthorized container DROP capabilities in securityContext.capabilities.drop", []string{"ALL"}, violations)
	})

	// Capabilities: none added but NET_BIND_SERVICE (istio-init, which
	// needs NET_ADMIN and NET_RAW, aside).
	p.pod(RestrictCapabilities, nil, func(r *vigil.Request[*corev1.Pod]) string {
		authorized := []string{"NET_BIND_SERVICE"}
		var violations []violation
		for v := range p.securityContextContainers(r.Object, true) {
			caps := v.Ctx.(*corev1.SecurityContext).Capabilities
			if caps == nil || len(caps.Add) == 0 {
				continue
			}
			if !allIn(caps.Add, authorized) {
				name := v.Name
				if name == "" {
					name = "unnamed"
				}
				violations = append(violations, violation{Name: name, Ctx: map[string]any{"capabilities": map[string]any{"add": caps.Add}}})
			}
		}
		if len(violations) == 0 {
			return ""
		}
		return securityContextMessage("Unauthorized container capabilities in securityContext.capabilities.add", authorized, violations)
	})
}

// podOrContainers judges the Pod's security context, then (when it passes)
// each container's: a Pod that fails is denied with podMsg and the Pod's
// context (named "pod"), containers that fail with containerMsg and theirs.
func (p *policies) podOrContainers(pod *corev1.Pod, authorized []string, podMsg, containerMsg string,
	podOK func(*corev1.PodSecurityContext) bool, containerOK func(*corev1.SecurityContext) bool) string {
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if !podOK(psc) {
		return securityContextMessage(podMsg, authorized, []violation{{Name: "pod", Ctx: psc}})
	}
	var violations []violation
	for v := range p.securityContextContainers(pod, false) {
		if !containerOK(v.Ctx.(*corev1.SecurityContext)) {
			violations = append(violations, v)
		}
	}
	if len(violations) == 0 {
		return ""
	}
	return securityContextMessage(containerMsg, authorized, violations)
}

// setNonRootUser sets the Pod's security context as UDS Core's
// setNonRootUserSettings does: user, group and fsGroup from the uds/user,
// uds/group and uds/fsgroup labels, then runAsNonRoot true, runAsUser and
// runAsGroup 1000 where unset.
func setNonRootUser(pod *corev1.Pod) {
	if pod.Spec.SecurityContext == nil {
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	psc := pod.Spec.SecurityContext
	if v, ok := parseInt(pod.Labels["uds/user"]); ok {
		psc.RunAsUser = &v
	}
	if v, ok := parseInt(pod.Labels["uds/group"]); ok {
		psc.RunAsGroup = &v
	}
	if v, ok := parseInt(pod.Labels["uds/fsgroup"]); ok {
		psc.FSGroup = &v
	}
	if psc.RunAsNonRoot == nil {
		psc.RunAsNonRoot = ptr.To(true)
	}
	if psc.RunAsUser == nil {
		psc.RunAsUser = ptr.To[int64](1000)
	}
	if psc.RunAsGroup == nil {
		psc.RunAsGroup = ptr.To[int64](1000)
	}
}

// ensureSecurityContext is the container's security context, created empty
// when it has none, as UDS Core's mutations create it.
func ensureSecurityContext(c container) *corev1.SecurityContext {
	if *c.SecurityContext == nil {
		*c.SecurityContext = &corev1.SecurityContext{}
	}
	return *c.SecurityContext
}

// parseInt reads an integer as JavaScript's parseInt does: leading spaces,
// a sign, then the digits up to the first other character. ok is false
// where parseInt gives NaN (the label is then ignored).
func parseInt(s string) (int64, bool) {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		neg = s[i] == '-'
		i++
	}
	var n int64
	digits := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9' && digits < 18; i++ {
		n = n*10 + int64(s[i]-'0')
		digits++
	}
	if digits == 0 {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// allIn reports whether every capability is one of the authorized.
func allIn(caps []corev1.Capability, authorized []string) bool {
	for _, c := range caps {
		if !slices.Contains(authorized, string(c)) {
			return false
		}
	}
	return true
}

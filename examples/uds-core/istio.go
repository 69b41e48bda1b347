package main

import (
	"slices"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/vigilkit/vigil"
)

// istioSidecarAnnotations are the annotations that can override the
// sidecar's secure configuration, as UDS Core's checkIstioSidecarOverrides
// lists them.
var istioSidecarAnnotations = []string{
	"sidecar.istio.io/bootstrapOverride", // overrides the whole Envoy bootstrap config
	"sidecar.istio.io/discoveryAddress",  // can redirect the sidecar to an untrusted control plane
	"sidecar.istio.io/proxyImage",        // allows arbitrary proxy images
	"proxy.istio.io/config",              // fully overrides the proxy configuration
	"sidecar.istio.io/userVolume",        // adds volumes to the sidecar container
	"sidecar.istio.io/userVolumeMount",   // adds volume mounts to the sidecar container
}

// istioTrafficAnnotations are the annotations that can override traffic
// interception, as UDS Core's checkIstioTrafficInterceptionOverrides lists
// them.
var istioTrafficAnnotations = []string{
	"sidecar.istio.io/inject",
	"traffic.sidecar.istio.io/excludeInboundPorts",
	"traffic.sidecar.istio.io/excludeInterfaces",
	"traffic.sidecar.istio.io/excludeOutboundIPRanges",
	"traffic.sidecar.istio.io/excludeOutboundPorts",
	"traffic.sidecar.istio.io/includeInboundPorts",
	"traffic.sidecar.istio.io/includeOutboundIPRanges",
	"traffic.sidecar.istio.io/includeOutboundPorts",
	"sidecar.istio.io/interceptionMode",
	"traffic.sidecar.istio.io/kubevirtInterfaces",
	"istio.io/redirect-virtual-interfaces",
}

// istioTrafficLabels are the labels that can override traffic
// interception.
var istioTrafficLabels = []string{"sidecar.istio.io/inject"}

// istioAmbientAnnotations are the annotations that can override the
// ambient mesh's secure behavior.
var istioAmbientAnnotations = []string{"ambient.istio.io/bypass-inbound-capture"}

// istioUserID is the Istio proxy's user and group.
const istioUserID = 1337

// declareIstio declares UDS Core's istio policies (its policies/istio.ts), in its
// order.
func (p *policies) declareIstio() {
	// Sidecar overrides: no annotation that can change the sidecar's
	// secure configuration.
	p.pod(RestrictIstioSidecarOverrides, nil, func(r *vigil.Request[*corev1.Pod]) string {
		if v := istioSidecarOverrides(r.Object); len(v) > 0 {
			return "The following istio annotations can modify secure sidecar configuration and are not allowed: " + strings.Join(v, ", ")
		}
		return ""
	})

	// Traffic overrides: no annotation or label that can change traffic
	// interception (sidecar injection left on, in istio-system and on
	// waypoints, aside).
	p.pod(RestrictIstioTrafficOverrides, nil, func(r *vigil.Request[*corev1.Pod]) string {
		if v := p.istioTrafficOverrides(r.Object); len(v) > 0 {
			return "The following istio annotations or labels can modify secure traffic interception are not allowed: " + strings.Join(v, ", ")
		}
		return ""
	})

	// Ambient overrides: no annotation that can change the ambient mesh's
	// secure behavior.
	p.pod(RestrictIstioAmbientOverrides, nil, func(r *vigil.Request[*corev1.Pod]) string {
		if v := istioAmbientOverrides(r.Object); len(v) > 0 {
			return "The following istio ambient annotations that can modify secure mesh behavior are not allowed: " + strings.Join(v, ", ")
		}
		return ""
	})

	// The Istio user: UID/GID 1337 nowhere in the Pod's security context,
	// and only in Istio proxy containers'.
	p.pod(RestrictIstioUser, nil, func(r *vigil.Request[*corev1.Pod]) string {
		if istioPodUsesUserID(r.Object) {
			return "Pods cannot use UID/GID 1337 (Istio proxy) unless they are trusted Istio components"
		}
		if name := p.istioContainerUsingUserID(r.Object); name != "" {
			return "Container '" + name + "' cannot use UID/GID 1337 (Istio proxy) as it is not a trusted Istio component"
		}
		return ""
	})
}

// istioSidecarOverrides are the Pod's blocked sidecar annotations, sorted.
func istioSidecarOverrides(pod *corev1.Pod) []string {
	return istioBlocked(pod.Annotations, istioSidecarAnnotations)
}

// istioAmbientOverrides are the Pod's blocked ambient annotations, sorted.
func istioAmbientOverrides(pod *corev1.Pod) []string {
	return istioBlocked(pod.Annotations, istioAmbientAnnotations)
}

// istioBlocked are the keys of m that are blocked, sorted. UDS Core sorts
// with localeCompare; on the few keys that can be blocked, that order is
// the byte order.
func istioBlocked(m map[string]string, blocked []string) []string {
	var out []string
	for k := range m {
		if slices.Contains(blocked, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// istioTrafficOverrides are the Pod's blocked traffic annotations and
// labels ("annotation <key>", "label <key>"), sorted, as UDS Core's
// checkIstioTrafficInterceptionOverrides finds them: sidecar.istio.io/inject
// is allowed in istio-system, when it is "true", and (the label) on a
// waypoint Pod. The sort is UDS Core's localeCompare, which is the byte
// order on the strings it can see.
func (p *policies) istioTrafficOverrides(pod *corev1.Pod) []string {
	namespace := pod.Namespace
	if namespace == "" {
		namespace = "default"
	}
	var out []string
	for k, v := range pod.Annotations {
		if k == "sidecar.istio.io/inject" && (namespace == "istio-system" || istioTrim(v) == "true") {
			continue
		}
		if slices.Contains(istioTrafficAnnotations, k) {
			out = append(out, "annotation "+k)
		}
	}
	waypoint := false
	for _, c := range containers(pod) {
		if p.istio.isProxyContainer(c) && slices.Contains(c.Args, "waypoint") {
			waypoint = true
			break
		}
	}
	for k, v := range pod.Labels {
		if k == "sidecar.istio.io/inject" && (namespace == "istio-system" || istioTrim(v) == "true" || waypoint) {
			continue
		}
		if slices.Contains(istioTrafficLabels, k) {
			out = append(out, "label "+k)
		}
	}
	slices.Sort(out)
	return out
}

// istioPodUsesUserID reports whether the Pod's security context uses the
// Istio user or group: runAsUser, runAsGroup, fsGroup or a supplemental
// group.
func istioPodUsesUserID(pod *corev1.Pod) bool {
	psc := pod.Spec.SecurityContext
	if psc == nil {
		return false
	}
	return ptr.Deref(psc.RunAsUser, 0) == istioUserID || ptr.Deref(psc.RunAsGroup, 0) == istioUserID ||
		ptr.Deref(psc.FSGroup, 0) == istioUserID || slices.Contains(psc.SupplementalGroups, istioUserID)
}

// istioContainerUsingUserID is the name of the first container, init
// container or ephemeral container that is not an Istio proxy and runs as
// the Istio user or group, or "" when there is none (UDS Core's
// findContainerUsingIstioUserID, whose empty name admits as none does).
func (p *policies) istioContainerUsingUserID(pod *corev1.Pod) string {
	for _, c := range containers(pod) {
		if p.istio.isProxyContainer(c) {
			continue
		}
		if sc := *c.SecurityContext; sc != nil && (ptr.Deref(sc.RunAsUser, 0) == istioUserID || ptr.Deref(sc.RunAsGroup, 0) == istioUserID) {
			return c.Name
		}
	}
	return ""
}

// istioTrim trims s as JavaScript's String.prototype.trim does: white
// space (Unicode Zs, tab, vertical tab, form feed, no-break space, the
// byte order mark) and line terminators (LF, CR, U+2028, U+2029). Go's
// strings.TrimSpace differs on U+0085 and U+FEFF.
func istioTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		switch r {
		case '\t', '\n', '\v', '\f', '\r', '\u00a0', '\ufeff', '\u2028', '\u2029':
			return true
		}
		return unicode.Is(unicode.Zs, r)
	})
}

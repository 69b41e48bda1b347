package main

import (
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// istioFlavors are the registry and repository of each flavor of Istio's
// proxy image, as UDS Core knows them.
var istioFlavors = []struct{ registry, repository string }{
	{"docker.io", "istio/proxyv2"},
	{"registry1.dso.mil", "ironbank/tetrate/istio/proxyv2"},
	{"cgr.dev", "defenseunicorns.com/istio-proxy-fips"},
}

// istioImages tells Istio's own containers by their images.
type istioImages struct {
	// zarfRegistry is the registry an Istio image may come from besides its
	// flavor's (an air-gapped cluster's).
	zarfRegistry string
}

var tagOrDigest = regexp.MustCompile(`[@:][^/]+$`)

// parseImageRef splits an image reference into its registry and
// repository, as UDS Core's parseImageRef does: the tag or digest dropped,
// a first part with a "." or ":" (or localhost) taken for a registry, and
// docker.io assumed otherwise. ok is false for a reference it cannot split.
func parseImageRef(ref string) (registry, repository string, ok bool) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return "", "", false
	}
	image := tagOrDigest.ReplaceAllString(ref, "")
	parts := strings.Split(image, "/")
	if first := parts[0]; strings.ContainsAny(first, ".:") || first == "localhost" {
		repository = strings.Join(parts[1:], "/")
		return first, repository, repository != ""
	}
	return "docker.io", image, true
}

// valid reports whether the image is an Istio proxy image of a known
// flavor, from its flavor's registry or the Zarf registry.
func (i istioImages) valid(image string) bool {
	registry, repository, ok := parseImageRef(image)
	if !ok {
		return false
	}
	for _, f := range istioFlavors {
		if f.repository == repository {
			return registry == f.registry || registry == i.zarfRegistry
		}
	}
	return false
}

// isProxyContainer reports whether the container looks like Istio's
// sidecar: named istio-proxy, a port named http-envoy-prom, first arg
// "proxy", no command, and an Istio image.
func (i istioImages) isProxyContainer(c container) bool {
	if c.Image == "" || c.Name != "istio-proxy" || len(c.Command) > 0 || len(c.Args) == 0 || c.Args[0] != "proxy" {
		return false
	}
	prom := false
	for _, p := range c.Ports {
		prom = prom || p.Name == "http-envoy-prom"
	}
	return prom && i.valid(c.Image)
}

// isInitContainer reports whether the container looks like Istio's
// istio-init in a Pod Istio injected (the sidecar.istio.io/status
// annotation, and a native sidecar among its init containers): named
// istio-init, first arg "istio-iptables", no command, an Istio image.
func (i istioImages) isInitContainer(pod *corev1.Pod, c container) bool {
	if _, ok := pod.Annotations["sidecar.istio.io/status"]; !ok {
		return false
	}
	sidecar := false
	for _, ic := range containers(pod) {
		sidecar = sidecar || (ic.Init && i.isProxyContainer(ic))
	}
	if !sidecar || c.Image == "" {
		return false
	}
	return c.Name == "istio-init" && len(c.Args) > 0 && c.Args[0] == "istio-iptables" && len(c.Command) == 0 && i.valid(c.Image)
}

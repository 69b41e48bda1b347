package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// UDS Core's istio policy tests (test/vitest/pepr-policies/istio.spec.ts,
// describe "restrict istio sidecar configuration overrides" and the
// describes nested in it), each subtest named after its it(...).
func TestIstioPolicies(t *testing.T) {
	startUDSCore(t)

	const (
		sidecarMsg = "The following istio annotations can modify secure sidecar configuration and are not allowed: "
		trafficMsg = "The following istio annotations or labels can modify secure traffic interception are not allowed: "
		ambientMsg = "The following istio ambient annotations that can modify secure mesh behavior are not allowed: "
	)
	annotated := func(name string, annotations map[string]string) *corev1.Pod {
		return testPod(name, func(p *corev1.Pod) { p.Annotations = annotations })
	}

	t.Run("should prevent single dangerous istio sidecar configuration annotation", func(t *testing.T) {
		denied(t, "sidecar.istio.io/proxyImage", apply(t, annotated("istio-bad-annotation", map[string]string{
			"sidecar.istio.io/proxyImage": "malicious/image:latest",
		})), sidecarMsg+"sidecar.istio.io/proxyImage")
	})

	t.Run("should prevent multiple dangerous istio sidecar configuration annotations", func(t *testing.T) {
		denied(t, "five sidecar annotations", apply(t, annotated("istio-multiple-bad-annotations", map[string]string{
			"proxy.istio.io/config":              "true",
			"sidecar.istio.io/bootstrapOverride": "true",
			"sidecar.istio.io/discoveryAddress":  "true",
			"sidecar.istio.io/proxyImage":        "true",
			"sidecar.istio.io/userVolume":        "true",
		})), sidecarMsg+"proxy.istio.io/config, sidecar.istio.io/bootstrapOverride, sidecar.istio.io/discoveryAddress, sidecar.istio.io/proxyImage, sidecar.istio.io/userVolume")
	})

	t.Run("should prevent single dangerous traffic interception annotation", func(t *testing.T) {
		denied(t, "traffic.sidecar.istio.io/excludeOutboundPorts", apply(t, annotated("istio-traffic-override", map[string]string{
			"traffic.sidecar.istio.io/excludeOutboundPorts": "443,8443",
		})), trafficMsg+"annotation traffic.sidecar.istio.io/excludeOutboundPorts")
	})

	t.Run("should prevent multiple dangerous traffic interception annotations", func(t *testing.T) {
		denied(t, "three traffic annotations", apply(t, annotated("istio-multiple-traffic-overrides", map[string]string{
			"sidecar.istio.io/interceptionMode":                "true",
			"traffic.sidecar.istio.io/excludeInboundPorts":     "true",
			"traffic.sidecar.istio.io/excludeOutboundIPRanges": "true",
		})), trafficMsg+"annotation sidecar.istio.io/interceptionMode, annotation traffic.sidecar.istio.io/excludeInboundPorts, annotation traffic.sidecar.istio.io/excludeOutboundIPRanges")
	})

	t.Run("should prevent redirect virtual interfaces annotation", func(t *testing.T) {
		denied(t, "istio.io/redirect-virtual-interfaces", apply(t, annotated("istio-redirect-virtual-interfaces", map[string]string{
			"istio.io/redirect-virtual-interfaces": "eth0,eth1",
		})), trafficMsg+"annotation istio.io/redirect-virtual-interfaces")
	})

	t.Run("should prevent ambient override annotation", func(t *testing.T) {
		denied(t, "ambient.istio.io/bypass-inbound-capture", apply(t, annotated("istio-ambient-override", map[string]string{
			"ambient.istio.io/bypass-inbound-capture": "true",
		})), ambientMsg+"ambient.istio.io/bypass-inbound-capture")
	})

	// UDS Core's tests match /use UID\/GID 1337 \(Istio proxy\)/; these
	// match the whole message of the denial that applies.
	const podUserMsg = "Pods cannot use UID/GID 1337 (Istio proxy) unless they are trusted Istio components"

	t.Run("should deny pod with runAsUser 1337", func(t *testing.T) {
		denied(t, "the Pod's runAsUser 1337", apply(t, testPod("istio-user-pod", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1337)}
		})), podUserMsg)
	})

	t.Run("should deny pod with runAsGroup 1337", func(t *testing.T) {
		denied(t, "the Pod's runAsGroup 1337", apply(t, testPod("istio-group-pod", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsGroup: ptr.To[int64](1337)}
		})), podUserMsg)
	})

	t.Run("should deny non-istio container with UID 1337", func(t *testing.T) {
		denied(t, "a container's runAsUser 1337", apply(t, testPod("bad-container", func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{{
				Name: "bad-container", Image: "127.0.0.1/malicious",
				SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1337)},
			}}
		})), "Container 'bad-container' cannot use UID/GID 1337 (Istio proxy) as it is not a trusted Istio component")
	})

	// In UDS Core's test cluster the ztunnel Pod is admitted through the
	// Exemption its Istio chart ships (src/istio/common/chart/templates/
	// exemptions.yaml); it is created here as that chart creates it.
	t.Run("should allow ztunnel pod with UID/GID 1337", func(t *testing.T) {
		namespace(t, "istio-system")
		if err := apply(t, istioExemption()); err != nil {
			t.Fatalf("the Exemption istio of UDS Core's Istio chart: %v", err)
		}
		pod := func() *corev1.Pod {
			p := testPod("ztunnel-test", func(p *corev1.Pod) {
				p.Namespace = "istio-system"
				p.Labels = map[string]string{"app": "ztunnel", "app.kubernetes.io/name": "ztunnel", "app.kubernetes.io/part-of": "istio"}
				p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1337), RunAsGroup: ptr.To[int64](1337)}
				p.Spec.Containers = []corev1.Container{{Name: "ztunnel", Image: "127.0.0.1/ztunnel"}}
			})
			return p
		}
		// The Exemption reaches the module's cache shortly after it is
		// created: until then the Pod is denied as it is without it, or,
		// when the validation's denial is made again on fresh data but the
		// mutation had found no Exemption yet, admitted without the
		// mutation's record of it (created again then).
		var p *corev1.Pod
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
			p = pod()
			err = apply(t, p)
			var status apierrors.APIStatus
			unrecorded := err == nil && p.Annotations[ExemptionAnnotationPrefix+".RestrictIstioUser"] == ""
			if unrecorded && time.Now().Before(deadline) {
				if err := env.Client.Delete(t.Context(), p, client.GracePeriodSeconds(0)); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err == nil || !errors.As(err, &status) || !strings.Contains(status.Status().Message, podUserMsg) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatalf("the ztunnel Pod with UID/GID 1337, exempted from RestrictIstioUser: %v; want it admitted", err)
		}
		if p.Name != "ztunnel-test" || p.Namespace != "istio-system" {
			t.Errorf("the stored Pod is %s/%s; want istio-system/ztunnel-test", p.Namespace, p.Name)
		}
		if got := p.Annotations[ExemptionAnnotationPrefix+".RestrictIstioUser"]; got != "exempted" {
			t.Errorf("the stored Pod's annotation %s.RestrictIstioUser is %q; want exempted", ExemptionAnnotationPrefix, got)
		}
	})

	t.Run("should allow istio-proxy container with UID/GID 1337", func(t *testing.T) {
		pod := testPod("istio-sidecar", func(p *corev1.Pod) {
			p.Labels = map[string]string{"istio-prometheus-ignore": "yes"}
			p.Spec.Containers = []corev1.Container{
				{Name: "app", Image: "127.0.0.1/app", SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}},
				{
					Name:  "istio-proxy",
					Image: "docker.io/istio/proxyv2:1.0.0",
					Ports: []corev1.ContainerPort{{Name: "http-envoy-prom", ContainerPort: 15090, Protocol: corev1.ProtocolTCP}},
					Args:  []string{"proxy", "sidecar"},
					SecurityContext: &corev1.SecurityContext{
						RunAsUser: ptr.To[int64](1337), RunAsGroup: ptr.To[int64](1337),
					},
				},
			}
		})
		if err := apply(t, pod); err != nil {
			t.Fatalf("a Pod whose istio-proxy container runs as UID/GID 1337: %v; want it admitted", err)
		}
		if pod.Name != "istio-sidecar" {
			t.Errorf("the stored Pod is named %q; want istio-sidecar", pod.Name)
		}
	})
}

// istioExemption is the Exemption istio that UDS Core's Istio chart ships
// (src/istio/common/chart/templates/exemptions.yaml): Istio CNI's and
// ztunnel's exemptions in istio-system.
func istioExemption() *unstructured.Unstructured {
	entry := func(title, description, name string, policies ...any) map[string]any {
		return map[string]any{
			"title": title, "description": description, "policies": policies,
			"matcher": map[string]any{"namespace": "istio-system", "kind": "pod", "name": name},
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "uds.dev/v1alpha1", "kind": "Exemption",
		"metadata": map[string]any{"name": "istio", "namespace": ExemptionsNamespace},
		"spec": map[string]any{"exemptions": []any{
			entry("Istio CNI exemptions",
				"Exemptions necessary for Istio CNI to manage network configurations and ensure proper traffic routing",
				"istio-cni-node.*",
				"RequireNonRootUser", "RestrictVolumeTypes", "DisallowHostNamespaces", "RestrictCapabilities",
				"RestrictHostPathWrite", "RestrictHostPorts", "RestrictSELinuxType"),
			entry("Istio ztunnel exemptions",
				"Exemptions necessary for ztunnel to manage network traffic and ensure secure data plane operations",
				"ztunnel.*",
				"RestrictIstioUser", "DisallowPrivileged", "RequireNonRootUser", "RestrictVolumeTypes",
				"RestrictCapabilities", "RestrictHostPathWrite", "RestrictSELinuxType"),
		}},
	}}
}

// Command quota is a replica-quota module: no Deployment in the namespaces it
// guards may ask for more replicas than QUOTA_MAX_REPLICAS (3 by default),
// whichever way the count changes — a create, an update or apply, or `kubectl
// scale` and autoscalers, which go through deployments/scale and carry an
// autoscaling/v1 Scale rather than the Deployment.
//
//	quota admission --cert-dir /etc/vigil/tls
package main

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
)

func main() { vigil.Run(newModule()) }

func newModule() *vigil.Module {
	// Installed elsewhere when rendered with VIGIL_NAMESPACE.
	m := vigil.NewModule("quota", vigil.Options{Namespace: "quota-system"})
	// A setting, declared: the containers get the value the manifests were
	// rendered with (QUOTA_MAX_REPLICAS=5 quota manifests).
	limit := 3
	if v, err := strconv.Atoi(vigil.Setting(m, "QUOTA_MAX_REPLICAS", "3")); err == nil && v > 0 {
		limit = v
	}
	quota := m.Capability("replicas")

	check := func(what string, replicas int32) vigil.Verdict {
		if int(replicas) > limit {
			return admission.Deny(fmt.Sprintf("%s asks for %d replicas; the quota allows %d at most: ask for fewer", what, replicas, limit))
		}
		return admission.Allow()
	}
	vigil.When(quota, &appsv1.Deployment{}).IsCreatedOrUpdated().Named("deployment-replicas").
		Validate(func(_ context.Context, r *vigil.Request[*appsv1.Deployment]) vigil.Verdict {
			replicas := int32(1)
			if r.Object.Spec.Replicas != nil {
				replicas = *r.Object.Spec.Replicas
			}
			return check("Deployment "+r.Namespace+"/"+r.Name, replicas)
		})
	vigil.WhenScaled(quota, &appsv1.Deployment{}).IsUpdated().Named("deployment-scale").
		Validate(func(_ context.Context, r *vigil.Request[*autoscalingv1.Scale]) vigil.Verdict {
			return check("scaling Deployment "+r.Namespace+"/"+r.Name, r.Object.Spec.Replicas)
		})
	return m
}

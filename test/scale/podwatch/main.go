// Command podwatch is the module make bench-scale runs beside UDS Core's
// policy engine: one Reconcile of every Pod of the cluster. For a Pod that
// carries the annotation scale.vigil.dev/changed-at (Unix nanoseconds), it
// prints how long after that time its handler ran, as
// "lag NAMESPACE/NAME CHANGED-AT MILLISECONDS", which the bench reads.
//
// The setting PODWATCH_READS says what its informer holds: "pod" (each Pod
// whole, the default) or "metadata" (vigil.Metadata: each Pod's metadata
// alone, which is all its handler reads). With PODWATCH_GATE_PODS=N it
// also has a gate, in phase 0: at least N of the cluster's Pods labelled
// app are Running, which the bench times from exec to done.
package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vigilkit/vigil"
)

// ChangedAt is the annotation the bench sets to time a change.
const ChangedAt = "scale.vigil.dev/changed-at"

func main() { vigil.Run(newModule()) }

func newModule() *vigil.Module {
	m := vigil.NewModule("podwatch", vigil.Options{Namespace: "podwatch-system"})
	pods := m.Capability("pods")
	if n := vigil.SettingAs(m, "PODWATCH_GATE_PODS", "0", strconv.Atoi); n > 0 {
		vigil.WaitFor(m, &corev1.Pod{}).WithLabel("app").AtLeast(n).Named("running-pods").
			ToMatch(func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	}
	if vigil.SettingAs(m, "PODWATCH_READS", "pod", reads) == "metadata" {
		vigil.Watch(pods, vigil.Metadata("", "v1", "Pod")).Named("every-pod").
			Reconcile(func(_ context.Context, p *metav1.PartialObjectMetadata) error {
				report(p)
				return nil
			})
		return m
	}
	vigil.Watch(pods, &corev1.Pod{}).Named("every-pod").Reconcile(func(_ context.Context, p *corev1.Pod) error {
		report(p)
		return nil
	})
	return m
}

// report prints the lag of a timed change.
func report(p metav1.Object) {
	if at, err := strconv.ParseInt(p.GetAnnotations()[ChangedAt], 10, 64); err == nil {
		fmt.Printf("lag %s/%s %d %.3f\n", p.GetNamespace(), p.GetName(), at, float64(time.Now().UnixNano()-at)/1e6)
	}
}

// reads accepts what the informer holds: pod or metadata.
func reads(v string) (string, error) {
	if v != "pod" && v != "metadata" {
		return v, fmt.Errorf("expected pod or metadata")
	}
	return v, nil
}

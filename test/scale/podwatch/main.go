// Command podwatch is the module make bench-scale runs beside UDS Core's
// policy engine: one Reconcile of every Pod of the cluster. For a Pod that
// carries the annotation scale.vigil.dev/changed-at (Unix nanoseconds), it
// prints how long after that time its handler ran, as
// "lag NAMESPACE/NAME CHANGED-AT MILLISECONDS", which the bench reads.
package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vigilkit/vigil"
)

// ChangedAt is the annotation the bench sets to time a change.
const ChangedAt = "scale.vigil.dev/changed-at"

func main() { vigil.Run(newModule()) }

func newModule() *vigil.Module {
	m := vigil.NewModule("podwatch", vigil.Options{Namespace: "podwatch-system"})
	pods := m.Capability("pods")
	vigil.Watch(pods, &corev1.Pod{}).Named("every-pod").Reconcile(func(_ context.Context, p *corev1.Pod) error {
		if at, err := strconv.ParseInt(p.Annotations[ChangedAt], 10, 64); err == nil {
			fmt.Printf("lag %s/%s %d %.3f\n", p.Namespace, p.Name, at, float64(time.Now().UnixNano()-at)/1e6)
		}
		return nil
	})
	return m
}

package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
)

// A binding that reads only metadata (vigil.Metadata) mutates and judges
// through the API server as one that reads the whole object: its handler
// gets a *metav1.PartialObjectMetadata, its patch edits metadata alone, and
// the stored object keeps everything else it was sent with.
func TestAdmissionOnMetadataAlone(t *testing.T) {
	apps, home := env.Namespace(t), env.Namespace(t)
	m := vigil.NewModule("metaonly", vigil.Options{Namespace: home})
	policies := m.Capability("policies", vigil.InNamespaces(apps))
	var seen []string
	vigil.When(policies, vigil.Metadata("", "v1", "Pod")).IsCreated().Named("stamp").
		Mutate(func(_ context.Context, r *vigil.Request[*metav1.PartialObjectMetadata]) error {
			seen = append(seen, fmt.Sprintf("%T %s", r.Object, r.Object.GroupVersionKind().Kind))
			r.SetLabel("vigil.dev/stamped", "true")
			return nil
		})
	vigil.When(policies, vigil.Metadata("", "v1", "Pod")).IsCreated().Named("need-team").
		Validate(func(_ context.Context, r *vigil.Request[*metav1.PartialObjectMetadata]) vigil.Verdict {
			if r.Object.Labels["team"] == "" {
				return admission.Deny("a Pod needs a team label")
			}
			return admission.Allow()
		})
	serveAdmission(t, m, "metaonly", []string{apps})

	c := newClient(t)
	pod := testkit.TestPod(apps, "stamped", map[string]string{"team": "shop"}, false)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "KEEP", Value: "me"}}
	if err := c.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Pod{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	if got.Labels["vigil.dev/stamped"] != "true" || got.Labels["team"] != "shop" {
		t.Errorf("the stored Pod's labels %v, want team=shop and the mutation's vigil.dev/stamped=true", got.Labels)
	}
	if len(got.Spec.Containers) != 1 || got.Spec.Containers[0].Image != "nginx:1.27" || len(got.Spec.Containers[0].Env) != 1 {
		t.Errorf("the stored Pod's containers %+v, want the one it was sent with, its image and env intact", got.Spec.Containers)
	}
	if len(seen) == 0 || seen[0] != "*v1.PartialObjectMetadata Pod" {
		t.Errorf("the mutation saw %q, want a *v1.PartialObjectMetadata of kind Pod", seen)
	}
	err := c.Create(t.Context(), testkit.TestPod(apps, "no-team", nil, false))
	if err == nil || !strings.Contains(err.Error(), "a Pod needs a team label") {
		t.Errorf("a Pod without a team label: %v, want the metadata validation's denial", err)
	}
}

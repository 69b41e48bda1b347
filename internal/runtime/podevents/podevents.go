package podevents

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Sink records Events on one Pod.
type Sink interface {
	Event(warning bool, reason, message string)
}

// For records Events on the pod named by the downward API, when it is; phase
// is the gate phase whose init container records them, or -1 for the
// admission role. It is nil outside a pod.
func For(cfg *rest.Config, module string, phase int) Sink {
	if phase < 0 {
		return ForRole(cfg, module, "admission")
	}
	return forPod(cfg, module+"-gate", fmt.Sprintf("spec.initContainers{%s}", spec.InitContainerName(phase)))
}

// ForRole records the Events of a role's main container ("admission",
// "watcher") on its pod, named by the downward API; nil outside a pod.
func ForRole(cfg *rest.Config, module, role string) Sink {
	return forPod(cfg, module+"-"+role, "")
}

func forPod(cfg *rest.Config, source, fieldPath string) Sink {
	name, ns := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE")
	if name == "" || ns == "" {
		return nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil
	}
	ref := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Name: name, Namespace: ns, UID: types.UID(os.Getenv("POD_UID")), FieldPath: fieldPath}
	return &sink{cs: cs, pod: ref, source: source}
}

// sink writes each Event synchronously: gates record few (changes of state
// only) and the last one, written just before the process exits, must not be
// lost in an asynchronous queue.
type sink struct {
	cs     kubernetes.Interface
	pod    corev1.ObjectReference
	source string
}

func (e *sink) Event(warning bool, reason, message string) {
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: e.pod.Name + ".", Namespace: e.pod.Namespace},
		InvolvedObject: e.pod,
		Reason:         reason,
		Message:        message,
		Type:           typ,
		Source:         corev1.EventSource{Component: e.source},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = e.cs.CoreV1().Events(e.pod.Namespace).Create(ctx, ev, metav1.CreateOptions{})
}

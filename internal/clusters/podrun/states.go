package podrun

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// States says, for an error, where each pod is: its phase and each
// container's state, with a waiting container's reason and message.
func States(pods []corev1.Pod) string {
	var out []string
	for _, p := range pods {
		s := p.Name + " " + string(p.Status.Phase)
		for _, c := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			switch {
			case c.State.Waiting != nil:
				s += fmt.Sprintf(" %s:waiting(%s %s)", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
			case c.State.Running != nil:
				s += fmt.Sprintf(" %s:running(ready=%t, restarts=%d)", c.Name, c.Ready, c.RestartCount)
			case c.State.Terminated != nil:
				s += fmt.Sprintf(" %s:exited(%d)", c.Name, c.State.Terminated.ExitCode)
			}
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "no pods"
	}
	return "pods: " + strings.Join(out, "; ")
}

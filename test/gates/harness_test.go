package gates

import (
	"testing"
	"time"

	"github.com/vigilkit/vigil/internal/testsupport/testkit"
)

// kubeconfig is an admin's kubeconfig file of the control plane.
func kubeconfig(t *testing.T) string { return env.KubeConfigFile(t) }

// until retries try every 100ms until done says it is done, for at most
// within; fatal with what the last try saw.
func until(t *testing.T, within time.Duration, what string, try func(i int) error, done func(error) bool) {
	t.Helper()
	testkit.Until(t, within, what, try, done)
}

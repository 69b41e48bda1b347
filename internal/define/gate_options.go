package define

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/scheme"
	"github.com/vigilkit/vigil/internal/spec"
	"github.com/vigilkit/vigil/internal/waitfor"
)

// CheckConds checks ToBe's n conditions.
func (g *Gate) CheckConds(n int) error {
	if n == 0 {
		return fmt.Errorf("gate %s: ToBe(): expected at least one condition, got none", g.ID())
	}
	return nil
}

// CheckAtLeast checks AtLeast's n.
func (g *Gate) CheckAtLeast(n int) error {
	if n < 1 {
		return fmt.Errorf("gate %s: AtLeast(%d): expected 1 or more", g.ID(), n)
	}
	return nil
}

// SetMode turns the gate into one over a set of objects (All, Any,
// AtLeast n), which a gate on one named object cannot be.
func (g *Gate) SetMode(mode waitfor.Mode, n int) error {
	g.Wait.Mode, g.Wait.N = mode, n
	if g.Wait.Name != "" {
		return fmt.Errorf("gate %s: All/Any/AtLeast over the single object named %q: select objects with WithLabel or WithField instead", g.ID(), g.Wait.Name)
	}
	return nil
}

// AddCreates records that the gate's callback creates an object of proto's
// kind (name empty for any).
func (g *Gate) AddCreates(s *runtime.Scheme, proto client.Object, namespace, name string) error {
	gvk, err := scheme.GVKOf(s, proto)
	if err != nil {
		return fmt.Errorf("Creates: %v", err)
	}
	g.Creates = append(g.Creates, spec.ObjectOf(gvk, namespace, name))
	return nil
}

// CheckSampleEvery checks Sample's interval, and returns the one to use.
func CheckSampleEvery(every time.Duration) (time.Duration, error) {
	if every <= 0 {
		return time.Second, fmt.Errorf("Sample: Every(%s): expected a positive interval", every)
	}
	return every, nil
}

// SetSampleTimeout bounds each call of a sample gate's function.
func (g *Gate) SetSampleTimeout(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("gate %s: SampleTimeout(%s): expected a positive duration", g.ID(), d)
	}
	g.Sample.SampleTimeout = d
	return nil
}

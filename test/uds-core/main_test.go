package udscore

import (
	"os"
	"testing"
	"time"

	"github.com/vigilkit/vigil/internal/testsupport/bench"
	"github.com/vigilkit/vigil/internal/testsupport/udscore"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) {
	bench.FloorMain() // this binary, run again by BenchmarkUDS, as the floor server
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

// udsCoreDir is the module these benchmarks load: UDS Core's policy engine
// as examples/uds-core ports it. The names below are that module's.
const udsCoreDir = "../../examples/uds-core"

// CapabilityName is the module's policies capability.
const CapabilityName = udscore.Capability

// startUDSCoreWith installs the module as UDS Core's tests meet it (as
// examples/uds-core's tests do): its CRDs, the operator config Secret and
// the ClusterConfig in place, the gates run, the webhooks enforcing, the
// watcher running.
func startUDSCoreWith(t testing.TB, opts vigiltest.ModuleOptions) *vigiltest.Module {
	t.Helper()
	m := udscore.Install(t, env, udsCoreDir, opts)
	m.StartAdmission(time.Minute)
	m.StartWatcher(time.Minute)
	return m
}

package scale

import (
	"os"
	"testing"

	"github.com/vigilkit/vigil/internal/testsupport/bench"
)

func TestMain(m *testing.M) {
	bench.FloorMain() // this binary, run again by BenchmarkScale, as the floor server
	os.Exit(m.Run())
}

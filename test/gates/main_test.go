package gates

import (
	"os"
	"testing"

	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

func TestMain(m *testing.M) { os.Exit(testkit.Main(m, &env, nil)) }

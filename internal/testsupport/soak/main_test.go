package soak_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/serving/certs"
	"github.com/vigilkit/vigil/internal/testsupport/bench"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/vigiltest"
)

var env *vigiltest.Env

// childRoleEnv makes the test binary run as a module process (see TestMain):
// its value names the module, its arguments follow VIGIL_TEST_ARGS.
const childRoleEnv = "VIGIL_TEST_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childRoleEnv); role != "" {
		// The test binary re-run as one of a benchmark's module processes.
		os.Exit(runChild(role))
	}
	// The tests start roles in this process (vigil.Execute) while they use
	// clients themselves: set the process-wide loggers of client-go and
	// controller-runtime once, before either, as a module process does at
	// its start.
	cmdutil.SetGlobalLoggers(cmdutil.Logger(os.Stderr))
	os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
}

func runChild(role string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var m *vigil.Module
	switch role {
	case "bench":
		m = benchModule(os.Getenv("VIGIL_TEST_NAMESPACE"))
	default:
		fmt.Fprintf(os.Stderr, "unknown child role %q\n", role)
		return 2
	}
	return vigil.Execute(ctx, m, strings.Split(os.Getenv("VIGIL_TEST_ARGS"), " "))
}

// startChild re-runs the test binary as a process of one of the modules
// runChild knows, with the role and flags of args.
func startChild(t testing.TB, module string, env map[string]string, args ...string) *vigiltest.Process {
	t.Helper()
	e := []string{childRoleEnv + "=" + module, "VIGIL_TEST_ARGS=" + strings.Join(args, " ")}
	for k, v := range env {
		e = append(e, k+"="+v)
	}
	return vigiltest.StartProcess(t, e, os.Args[0])
}

// The harness shared with the facade's tests (internal/testsupport/testkit).

func bootstrapConfigs(t testing.TB, name string) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	return testkit.BootstrapConfigs(t, env.Client, name)
}

func servingDir(t testing.TB) (*certs.CA, string) { return testkit.ServingDir(t) }

func metricsURL(addr string) string { return testkit.MetricsURL(addr) }

func runAdmission(t testing.TB, m *vigil.Module, addr string, flags ...string) (stop func()) {
	return testkit.RunAdmission(t, m, addr, flags...)
}

func reconciled(url, series string) float64 { return bench.Metric(url, series) }

func waitReady(t testing.TB, url string, exited <-chan struct{}) {
	t.Helper()
	testkit.WaitReady(t, url, exited)
}

func httpGet(c *http.Client, url string) (int, string) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// envCount is the positive count in the environment variable name, or def
// when it is unset.
func envCount(t testing.TB, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive count", name, s)
	}
	return n
}

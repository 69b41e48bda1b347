package vigil

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/internal/cli"
	"github.com/vigilkit/vigil/internal/gaterun"
	"github.com/vigilkit/vigil/internal/scheme"
	"github.com/vigilkit/vigil/internal/waitfor"
	"github.com/vigilkit/vigil/store"
)

// Run runs the module binary in the role its arguments name (`gate --phase N`,
// `plan`, ...; see --help) and exits the process with the role's exit code: 0
// done, 1 failed, 124 timed out. A module whose definition has mistakes exits
// with 1 before anything starts, naming each mistake's call site.
func Run(m *Module) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Execute(ctx, m, os.Args[1:])
	stop()
	os.Exit(code)
}

// Execute is Run without the exit, for tests and embedding: it runs the role
// args name and returns the exit code.
func Execute(ctx context.Context, m *Module, args []string) int {
	if len(args) == 0 || args[0] != "gate" {
		// The other roles hand the scheme to controller-runtime's clients
		// and caches, which may meet any of its types; a gate needs only the
		// groups its definition named.
		scheme.Complete(m.scheme)
	}
	return cli.ExecuteModule(ctx, moduleApp{m}, args, os.Stdout, os.Stderr)
}

// EnvHandoffDir names the folder gates hand their results over in.
const EnvHandoffDir = "VIGIL_HANDOFF_DIR"

// DefaultHandoffDir is the handoff folder in a module's pods: an emptyDir
// shared by its init containers and its main container.
const DefaultHandoffDir = "/var/run/vigil"

// GateResult reads what the gate of this name handed over: the object (or
// objects, or sample) it found, or its fallback's. It reads the handoff folder
// of the running role: its --handoff-dir, else VIGIL_HANDOFF_DIR, else
// DefaultHandoffDir. found is false when the gate has not run in this pod or
// was skipped.
func GateResult[T any](m *Module, name string) (result T, found bool, err error) {
	dir, _ := m.handoffDir.Load().(string) // the running role's --handoff-dir
	if dir == "" {
		dir = os.Getenv(EnvHandoffDir)
	}
	if dir == "" {
		dir = DefaultHandoffDir
	}
	h, err := gaterun.ReadHandoff(dir, name)
	if errors.Is(err, os.ErrNotExist) {
		return result, false, nil
	}
	if err != nil {
		return result, false, err
	}
	if len(h.Result) == 0 {
		return result, false, nil
	}
	if err := json.Unmarshal(h.Result, &result); err != nil {
		return result, false, fmt.Errorf("gate %s handed over %s, which does not decode as %T: %w", name, h.Result, result, err)
	}
	return result, true, nil
}

// moduleApp is what the command line sees of a Module.
type moduleApp struct{ m *Module }

func (a moduleApp) Name() string      { return a.m.name }
func (a moduleApp) Namespace() string { return a.m.namespace }
func (a moduleApp) Validate() error   { return a.m.Validate() }

func (a moduleApp) Plan() []cli.PlanPhase {
	a.m.mu.Lock()
	defer a.m.mu.Unlock()
	byPhase := map[int][]cli.PlanGate{}
	for _, g := range a.m.gates {
		byPhase[g.phase] = append(byPhase[g.phase], cli.PlanGate{
			Name: g.id(), WaitsFor: g.describe(), Timeout: g.timeout,
			Optional: g.optional, Fallback: g.fallback != nil, Site: g.site,
		})
	}
	var phases []cli.PlanPhase
	for n, gates := range byPhase {
		phases = append(phases, cli.PlanPhase{Phase: n, Gates: gates})
	}
	sort.Slice(phases, func(i, j int) bool { return phases[i].Phase < phases[j].Phase })
	return phases
}

func (a moduleApp) Capabilities() []cli.PlanCapability {
	a.m.mu.Lock()
	defer a.m.mu.Unlock()
	var out []cli.PlanCapability
	for _, c := range a.m.capabilities {
		pc := cli.PlanCapability{Name: c.name, FailClosed: c.failClosed, Namespaces: c.namespaces, FailurePolicy: string(a.m.policy)}
		for _, b := range a.m.bindings {
			if b.Capability != c.name {
				continue
			}
			ops := make([]string, len(b.Operations))
			for i, op := range b.Operations {
				ops[i] = string(op)
			}
			pc.Bindings = append(pc.Bindings, fmt.Sprintf("%s %s %s %s (%s)", b.Name, b.Action, b.GVK.Kind, strings.Join(ops, ","), b.site))
		}
		out = append(out, pc)
	}
	return out
}

func (a moduleApp) PhaseGates(ctx context.Context, cfg *rest.Config, log logr.Logger, phase int) ([]gaterun.Gate, error) {
	a.m.mu.Lock()
	defs := append([]*gateDef(nil), a.m.gates...)
	a.m.mu.Unlock()
	waiter, err := waitfor.New(cfg, log)
	if err != nil {
		return nil, err
	}
	st := store.NewLazy(ctx, cfg, store.Options{Namespace: a.m.namespace, Name: a.m.name, Logger: log})
	rc := &roleClients{cfg: cfg, scheme: a.m.scheme}
	var gates []gaterun.Gate
	for _, g := range defs {
		if g.phase != phase {
			continue
		}
		rg := gaterun.Gate{Name: g.id(), Phase: g.phase, WaitsFor: g.describe(), Timeout: g.timeout, Optional: g.optional}
		if g.sample != nil {
			rg.Run = func(ctx context.Context, seen gaterun.Seen) (any, error) {
				return g.sample.run(withModuleStore(withClients(ctx, rc), st), seen, st)
			}
		} else {
			spec := g.waitSpec()
			rg.Run = func(ctx context.Context, seen gaterun.Seen) (any, error) {
				ctx = withModuleStore(withClients(ctx, rc), st)
				objs, err := waiter.Wait(ctx, spec, func(p waitfor.Progress) { seen(p.State == waitfor.StateNotMatching, p.Seen) })
				if err != nil {
					if errors.Is(err, waitfor.ErrForbidden) || errors.Is(err, waitfor.ErrNotServable) {
						return nil, gate.Permanent(err)
					}
					return nil, err
				}
				return g.finish(ctx, objs, st)
			}
		}
		if g.fallback != nil {
			rg.Fallback = func(ctx context.Context) (any, error) {
				return g.fallback(withModuleStore(withClients(ctx, rc), st), st)
			}
		}
		gates = append(gates, rg)
	}
	return gates, nil
}

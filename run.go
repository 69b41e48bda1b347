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
	"sync"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil/internal/scheme"
	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/internal/cli"
	"github.com/vigilkit/vigil/internal/gaterun"
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
	st := newLazyStore(ctx, cfg, store.Options{Namespace: a.m.namespace, Name: a.m.name, Logger: log})
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

// lazyStore connects to the module's Store on first use, so gates and
// handlers that do not use it need neither its CRD nor the RBAC for it. Its
// scopes share the connection.
type lazyStore struct {
	*lazyConn
	scope string
}

type lazyConn struct {
	ctx  context.Context
	cfg  *rest.Config
	opts store.Options

	once sync.Once
	c    *store.Client
	err  error
}

func newLazyStore(ctx context.Context, cfg *rest.Config, opts store.Options) *lazyStore {
	return &lazyStore{lazyConn: &lazyConn{ctx: ctx, cfg: cfg, opts: opts}}
}

// Scope is the lazy Store of one capability.
func (l *lazyStore) Scope(capability string) *lazyStore {
	return &lazyStore{lazyConn: l.lazyConn, scope: capability}
}

var _ Store = (*lazyStore)(nil)

func (l *lazyStore) get(ctx context.Context) (store.Store, error) {
	l.once.Do(func() {
		c, err := store.New(l.cfg, l.opts)
		if err == nil {
			err = c.Start(l.ctx)
		}
		if err == nil {
			err = c.WaitForSync(ctx)
		}
		l.c, l.err = c, err
	})
	if l.err != nil {
		return nil, l.err
	}
	if l.scope == "" {
		return l.c, nil
	}
	return l.c.Scope(l.scope), nil
}

func (l *lazyStore) Get(key string) (string, bool) {
	s, err := l.get(l.ctx)
	if err != nil {
		return "", false
	}
	return s.Get(key)
}

func (l *lazyStore) Keys() []string {
	s, err := l.get(l.ctx)
	if err != nil {
		return nil
	}
	return s.Keys()
}

func (l *lazyStore) Set(ctx context.Context, key, value string) error {
	s, err := l.get(ctx)
	if err != nil {
		return err
	}
	return s.Set(ctx, key, value)
}

func (l *lazyStore) Update(ctx context.Context, key string, fn func(string, bool) (string, error)) error {
	s, err := l.get(ctx)
	if err != nil {
		return err
	}
	return s.Update(ctx, key, fn)
}

func (l *lazyStore) Remove(ctx context.Context, key string) error {
	s, err := l.get(ctx)
	if err != nil {
		return err
	}
	return s.Remove(ctx, key)
}

func (l *lazyStore) SetAndWait(ctx context.Context, key, value string) error {
	s, err := l.get(ctx)
	if err != nil {
		return err
	}
	return s.SetAndWait(ctx, key, value)
}

func (l *lazyStore) RemoveAndWait(ctx context.Context, key string) error {
	s, err := l.get(ctx)
	if err != nil {
		return err
	}
	return s.RemoveAndWait(ctx, key)
}

func (l *lazyStore) Subscribe(fn func(store.Change)) func() {
	s, err := l.get(l.ctx)
	if err != nil {
		return func() {}
	}
	return s.Subscribe(fn)
}

func (l *lazyStore) WaitForSync(ctx context.Context) error {
	_, err := l.get(ctx)
	return err
}

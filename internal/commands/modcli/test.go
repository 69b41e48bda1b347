package modcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
	"github.com/vigilkit/vigil/internal/commands/policytest"
	"github.com/vigilkit/vigil/internal/definition/spec"
)

func testCommand(module string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "test DIR",
		Short: "Run the module's admission on the policy cases in DIR, without a cluster",
		Long: `Run every case in DIR's .yaml files through the module's webhooks, in this
process and without a cluster (or through a real API server with --kubeconfig),
and compare each answer with what the case expects. Exit 0 when every case
passes, 1 otherwise, with how each failing case differs.

A case is one YAML document (a file may hold several, separated by ---):

  name: privileged pods are denied       # optional: the file's name
  operation: CREATE                      # optional: CREATE, UPDATE with oldObject, DELETE with oldObject alone
  object:                                # the object sent
    apiVersion: v1
    kind: Pod
    metadata: {name: web, namespace: apps}
    spec: {containers: [{name: web, image: nginx, securityContext: {privileged: true}}]}
  oldObject: {...}                       # optional: the object before an UPDATE or a DELETE
  user: alice                            # optional: or {username: alice, groups: [team]}
  objects: [...]                         # optional: what the module's listers find, Namespaces (and their labels) too
  store: {key: value, capability/key: value}   # optional: the module's Store, keys as stored
  expect:
    allowed: false                       # required
    message: privileged                  # part of the denial's message
    warnings: [...]                      # each part of one of the warnings
    patch:                               # JSON patch operations the mutations must include
    - {op: add, path: /metadata/labels/checked, value: "true"}

In process, each case is sent as the API server would send it: to the webhooks
of the capabilities whose rules and exclusions (namespaces, opt-out labels)
match it, mutations first and in order, each seeing the object as those before
it patched it; then the module's checks (its ValidatingAdmissionPolicies'
CEL, with Kubernetes' CEL library) and every validation. A handler that fails
or panics is answered by the failure policy. Handlers have no API server
there: ClientFrom returns nil, and a handler that calls the API server is
answered by its failure policy.`,
		Example: `  shop test testdata/policies
  shop test testdata/policies --junit report.xml
  shop test testdata/policies --kubeconfig ~/.kube/config   # through a cluster where shop is installed`,
	}
	cmd.Example = strings.ReplaceAll(cmd.Example, "shop", module)
	return cmd
}

// TestFlags are the flags of `<module> test`.
type TestFlags struct {
	Kube  cmdutil.KubeFlags
	JUnit string
	dir   string
}

// NewTestFlags returns the flags.
func NewTestFlags() *TestFlags { return &TestFlags{} }

// Args is the folder of cases, one.
func (f *TestFlags) Args() cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("expected one argument, the folder of case files, as in `%s test testdata/policies`; got %d", cmd.Root().Name(), len(args))
		}
		return nil
	}
}

// SetArgs takes the folder.
func (f *TestFlags) SetArgs(args []string) { f.dir = args[0] }

// AddFlags declares the flags.
func (f *TestFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Kube.Kubeconfig, "kubeconfig", "", "run the cases through the API server of this kubeconfig, where the module is installed, instead of in process: each object sent with dryRun=All as the case's user (impersonated), its objects created before it and deleted after")
	fs.StringVar(&f.Kube.Context, "context", "", "the kubeconfig's context, with --kubeconfig")
	fs.StringVar(&f.JUnit, "junit", "", "also write the results as JUnit XML to this file")
}

// ToOptions checks the flags.
func (f *TestFlags) ToOptions(m *spec.Module, out io.Writer) (*TestOptions, error) {
	if st, err := os.Stat(f.dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("test %s: expected a folder of case files (.yaml), got %v", f.dir, statProblem(err))
	}
	o := &TestOptions{Module: m, Dir: f.dir, JUnit: f.JUnit, Out: out, Runner: policytest.InProcess(m)}
	if f.Kube.Kubeconfig != "" {
		cfg, err := f.Kube.ToRESTConfig()
		if err != nil {
			return nil, err
		}
		cl, err := policytest.NewCluster(cfg)
		if err != nil {
			return nil, err
		}
		o.Runner, o.Where = cl.Runner(), "through "+cfg.Host
	}
	return o, nil
}

func statProblem(err error) string {
	if err != nil {
		return err.Error()
	}
	return "a file"
}

// TestOptions run the cases of a folder.
type TestOptions struct {
	Module *spec.Module
	Dir    string
	JUnit  string
	Out    io.Writer
	Runner policytest.Runner
	// Where says where the cases run, for the report: in process when empty.
	Where string
}

// ErrCasesFailed is the error of a run where some case failed.
var ErrCasesFailed = errors.New("cases failed")

// Run runs every case, reports each, and writes the JUnit file.
func (o *TestOptions) Run(ctx context.Context) error {
	cases, err := policytest.LoadDir(o.Dir)
	if err != nil {
		return err
	}
	where := o.Where
	if where == "" {
		where = "in process"
	}
	fmt.Fprintf(o.Out, "module %s: %d cases from %s, %s\n", o.Module.Name, len(cases), o.Dir, where)
	outcomes := policytest.RunAll(ctx, cases, o.Runner)
	failed := policytest.Report(o.Out, outcomes)
	if o.JUnit != "" {
		if err := writeJUnit(o.JUnit, o.Module.Name+" "+filepath.Base(o.Dir), outcomes); err != nil {
			return err
		}
	}
	if failed > 0 {
		return cmdutil.Reported(fmt.Errorf("%w: %d of %d", ErrCasesFailed, failed, len(outcomes)))
	}
	return nil
}

func writeJUnit(file, suite string, outcomes []policytest.Outcome) (err error) {
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("--junit: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	return policytest.WriteJUnit(f, suite, outcomes)
}

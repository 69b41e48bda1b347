package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vigilkit/vigil/internal/commands/cmdutil"
)

// The flags of `vigil wait`, as kubectl wait's: cobra fills a WaitFlags,
// ToOptions checks and parses them into WaitOptions, and WaitOptions.Run
// waits.

const waitLong = `Wait until objects satisfy a condition. This is the engine of vigil's startup
gates driven by flags, for use from any container image or script. The forms
are kubectl wait's:

  vigil wait TYPE/NAME [TYPE/NAME...] --for=CONDITION
  vigil wait TYPE NAME [NAME...] --for=CONDITION
  vigil wait TYPE (-l SELECTOR | --field-selector SELECTOR | --all) --for=CONDITION

TYPE is resolved through discovery as kubectl resolves it: plural, singular,
kind or short name (cm, deploy, crd), optionally qualified with its group
(deployments.apps, clusterconfigs.uds.dev) or its version and group
(deployments.v1.apps). TYPE may list several types separated by commas.

Conditions (--for; give it more than once to require all of them):

  create                      the object exists
  delete                      the object is gone, or was replaced (a new UID)
  established                 a CustomResourceDefinition is Established and its
                              names are accepted, so its kind is served
  ready                       kstatus computes Current: a rollout is complete,
                              a Job succeeded, Ready=True, and so on
  condition=TYPE[=STATUS]     the status.conditions entry TYPE has STATUS (True
                              unless given) and was written for the object's
                              current generation
  jsonpath='{.path}'[=VALUE]  the path holds VALUE, or any value without one
  cel='EXPR'                  the CEL expression over object is true, e.g.
                              cel='object.status.phase == "Ready"'

With names, every named object must satisfy the condition. With -l,
--field-selector or --all, every selected object must, and at least one must
exist unless the condition is delete. --any makes one object enough, and
--at-least=N makes N enough (of the selected or of the named objects).

Output: kubectl's line "<kind>.<group>/<name> condition met" per object on
stdout; -o name, -o json and -o yaml print the objects instead. While waiting,
a line on stderr every --progress-interval says what is waited for, for how
long, and what was last seen.

--timeout is 30s by default. 0 checks once without waiting; a negative value
waits without limit.

Exit codes: 0 the condition holds; 1 failed (a bad flag or type, RBAC refused
the watch, or --timeout=0 and the condition does not hold); 124 timed out.

Differences from kubectl wait:

  - On timeout vigil exits 124, as timeout(1) does; kubectl exits 1. Both print
    "error: timed out waiting for the condition on TYPE/NAME" on stderr; vigil
    adds what it last saw.
  - vigil watches (one list, then a watch, relisting after disconnects) and
    evaluates the condition on every change, instead of polling.
  - A type that is not served yet is waited for when it is qualified with its
    group (clusterconfigs.uds.dev/initial, clusterconfig.uds.dev): vigil says
    so on stderr and watches CustomResourceDefinitions until one that serves
    it is established. kubectl fails with "the server doesn't have a resource
    type". A type without a group must already be known to discovery.
  - A named object that does not exist yet is waited for whatever the
    condition (kubectl fails with NotFound unless --for=create), and a
    selector that matches nothing waits for a match (kubectl fails with "no
    matching resources found").
  - Added: --for=ready, --for=established, --for=cel=..., --any, --at-least
    and --progress-interval.
  - condition=TYPE matches the condition type exactly (kubectl ignores case);
    STATUS must be True, False or Unknown, in any case.
  - A negative --timeout waits without limit (kubectl: one week).
  - With several --for, each object is printed once (kubectl prints a line
    per condition). -f/--filename and kubectl's other output formats are not
    supported.`

const waitExample = `  # Wait for a CRD to be established, then for a custom resource to be Ready
  vigil wait crd/clusterconfigs.uds.dev --for=established
  vigil wait clusterconfigs.uds.dev/initial --for=condition=Ready --timeout=5m

  # Wait for a CRD that is not installed yet (kubectl fails at once here)
  vigil wait clusterconfigs.uds.dev/initial --for=create --timeout=-1s

  # Wait until every pod labelled app=web is Ready, or until any one is
  vigil wait pods -l app=web --for=condition=Ready
  vigil wait pods -l app=web --for=condition=Ready --any

  # Field values and CEL
  vigil wait pod/busybox1 --for=jsonpath='{.status.phase}'=Running
  vigil wait deploy/web --for=cel='object.status.readyReplicas >= 2'`

// waitForForms lists what --for accepts, for error messages.
const waitForForms = `create, delete, established, ready, condition=TYPE[=STATUS], jsonpath='{.path}'[=VALUE] or cel='EXPR'`

func newWaitCommand(out, errOut io.Writer) *cobra.Command {
	f := &WaitFlags{ErrOut: errOut}
	cmd := &cobra.Command{
		Use:                   "wait (TYPE/NAME [TYPE/NAME...] | TYPE NAME [NAME...] | TYPE (-l SELECTOR | --field-selector SELECTOR | --all)) --for=CONDITION",
		Short:                 "Wait until objects satisfy a condition, as kubectl wait does, by watching",
		Long:                  waitLong,
		Example:               waitExample,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("at-least") && f.AtLeast < 1 {
				return fmt.Errorf("--at-least: expected 1 or more, got %d", f.AtLeast)
			}
			f.Args = args
			return f.Run(cmd.Context(), out)
		},
	}
	f.AddFlags(cmd)
	return cmd
}

// WaitFlags are the flags and arguments of `vigil wait`, as given.
type WaitFlags struct {
	// Args are TYPE/NAME..., TYPE NAME... or TYPE (with a selector or All).
	Args []string
	// For are the conditions, as --for takes them; all must hold.
	For           []string
	Selector      string
	FieldSelector string
	All           bool
	Any           bool
	// AtLeast, when above 0, is how many objects must satisfy the condition.
	AtLeast int
	// Namespace, when empty, is the kubeconfig context's, else "default".
	Namespace     string
	AllNamespaces bool
	// Timeout: 0 checks once, negative waits without limit.
	Timeout          time.Duration
	Output           string
	Kubeconfig       string
	Context          string
	ProgressInterval time.Duration
	// Config, when set, is used instead of loading Kubeconfig and Context.
	Config *rest.Config
	// ErrOut receives progress and error lines; nil discards them.
	ErrOut io.Writer
}

// AddFlags binds the flags of cmd to f.
func (f *WaitFlags) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringArrayVar(&f.For, "for", nil, "the condition to wait for: "+waitForForms+"; give it more than once to require all")
	fs.StringVarP(&f.Selector, "selector", "l", "", "label selector of the objects to wait for, e.g. app=web")
	fs.StringVar(&f.FieldSelector, "field-selector", "", "field selector of the objects to wait for, e.g. metadata.name=web")
	fs.BoolVar(&f.All, "all", false, "select every object of the type (in the namespace); every one must satisfy the condition")
	fs.BoolVar(&f.Any, "any", false, "one object satisfying the condition is enough (vigil's addition)")
	fs.IntVar(&f.AtLeast, "at-least", 0, "N objects satisfying the condition are enough (vigil's addition)")
	fs.StringVarP(&f.Namespace, "namespace", "n", "", "namespace of the objects; the kubeconfig context's namespace, else default")
	fs.BoolVarP(&f.AllNamespaces, "all-namespaces", "A", false, "select objects in every namespace")
	fs.DurationVar(&f.Timeout, "timeout", 30*time.Second, "how long to wait: 0 checks once, a negative value waits without limit; on timeout the exit code is 124")
	fs.StringVarP(&f.Output, "output", "o", "", "print the objects instead of \"condition met\" lines: name, json or yaml")
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig file; KUBECONFIG, ~/.kube/config or, in a pod, its ServiceAccount otherwise")
	fs.StringVar(&f.Context, "context", "", "kubeconfig context")
	fs.DurationVar(&f.ProgressInterval, "progress-interval", 5*time.Second, "how often to say on stderr what is still waited for; 0 for never")
}

// Run checks and parses the flags, then waits and prints the objects that
// satisfy the condition.
func (f *WaitFlags) Run(ctx context.Context, out io.Writer) error {
	o, err := f.ToOptions()
	if err != nil {
		return err
	}
	return o.Run(ctx, out)
}

// ToOptions checks the flags and arguments and parses them, before any API
// call, and loads the client config.
func (f *WaitFlags) ToOptions() (*WaitOptions, error) {
	o := &WaitOptions{
		anyOne:           f.Any,
		atLeast:          f.AtLeast,
		timeout:          f.Timeout,
		output:           f.Output,
		progressInterval: f.ProgressInterval,
		errOut:           f.ErrOut,
	}
	if o.errOut == nil {
		o.errOut = io.Discard
	}
	var err error
	if o.cond, o.established, err = parseWaitFor(f.For); err != nil {
		return nil, err
	}
	if o.targets, err = parseWaitArgs(f.Args, f.Selector != "" || f.FieldSelector != "", f.All, f.AllNamespaces); err != nil {
		return nil, err
	}
	switch f.Output {
	case "", "name", "json", "yaml":
	default:
		return nil, fmt.Errorf("--output: expected name, json or yaml, got %q", f.Output)
	}
	if f.Any && f.AtLeast > 0 {
		return nil, errors.New("--any and --at-least: expected at most one of them: --any is --at-least=1")
	}
	if f.AtLeast < 0 {
		return nil, fmt.Errorf("--at-least: expected 1 or more, got %d", f.AtLeast)
	}
	if f.Selector != "" {
		if o.labels, err = labels.Parse(f.Selector); err != nil {
			return nil, fmt.Errorf("--selector %q: %w", f.Selector, err)
		}
	}
	if f.FieldSelector != "" {
		if o.fields, err = fields.ParseSelector(f.FieldSelector); err != nil {
			return nil, fmt.Errorf("--field-selector %q: %w", f.FieldSelector, err)
		}
	}
	o.named = len(o.targets[0].names) > 0
	nNamed := 0
	for _, t := range o.targets {
		nNamed += len(t.names)
	}
	if o.named && f.AtLeast > nNamed {
		return nil, fmt.Errorf("--at-least=%d: expected at most the %d named objects", f.AtLeast, nNamed)
	}
	if o.config, o.namespace, err = f.clientConfig(); err != nil {
		return nil, err
	}
	if f.AllNamespaces {
		o.namespace = ""
	}
	return o, nil
}

// clientConfig loads the config and the default namespace as kubectl does.
func (f *WaitFlags) clientConfig() (*rest.Config, string, error) {
	ns := f.Namespace
	if f.Config != nil {
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		return f.Config, ns, nil
	}
	cfg, err := cmdutil.LoadConfig(f.Kubeconfig, f.Context)
	if err != nil {
		return nil, "", err
	}
	if ns == "" {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = f.Kubeconfig
		ns, _, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.Context}).Namespace()
		if err != nil || ns == "" {
			ns = metav1.NamespaceDefault
		}
	}
	return cfg, ns, nil
}

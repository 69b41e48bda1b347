package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/yaml"

	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/internal/cmdutil"
	"github.com/vigilkit/vigil/internal/waitfor"
)

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
	o := &WaitOptions{ErrOut: errOut}
	cmd := &cobra.Command{
		Use:                   "wait (TYPE/NAME [TYPE/NAME...] | TYPE NAME [NAME...] | TYPE (-l SELECTOR | --field-selector SELECTOR | --all)) --for=CONDITION",
		Short:                 "Wait until objects satisfy a condition, as kubectl wait does, by watching",
		Long:                  waitLong,
		Example:               waitExample,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("at-least") && o.AtLeast < 1 {
				return fmt.Errorf("--at-least: expected 1 or more, got %d", o.AtLeast)
			}
			o.Args = args
			return o.Run(cmd.Context(), out)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.For, "for", nil, "the condition to wait for: "+waitForForms+"; give it more than once to require all")
	f.StringVarP(&o.Selector, "selector", "l", "", "label selector of the objects to wait for, e.g. app=web")
	f.StringVar(&o.FieldSelector, "field-selector", "", "field selector of the objects to wait for, e.g. metadata.name=web")
	f.BoolVar(&o.All, "all", false, "select every object of the type (in the namespace); every one must satisfy the condition")
	f.BoolVar(&o.Any, "any", false, "one object satisfying the condition is enough (vigil's addition)")
	f.IntVar(&o.AtLeast, "at-least", 0, "N objects satisfying the condition are enough (vigil's addition)")
	f.StringVarP(&o.Namespace, "namespace", "n", "", "namespace of the objects; the kubeconfig context's namespace, else default")
	f.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "select objects in every namespace")
	f.DurationVar(&o.Timeout, "timeout", 30*time.Second, "how long to wait: 0 checks once, a negative value waits without limit; on timeout the exit code is 124")
	f.StringVarP(&o.Output, "output", "o", "", "print the objects instead of \"condition met\" lines: name, json or yaml")
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; KUBECONFIG, ~/.kube/config or, in a pod, its ServiceAccount otherwise")
	f.StringVar(&o.Context, "context", "", "kubeconfig context")
	f.DurationVar(&o.ProgressInterval, "progress-interval", 5*time.Second, "how often to say on stderr what is still waited for; 0 for never")
	return cmd
}

// WaitOptions are the options of `vigil wait`.
type WaitOptions struct {
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

// waitTarget is one TYPE with the names to wait for (none with a selector).
type waitTarget struct {
	typ   string
	names []string
}

// waitType is what a wait needs of a resolved type.
type waitType struct {
	gvk        schema.GroupVersionKind
	resource   string // plural, as kubectl names the type in its errors
	namespaced bool
}

// nameOf prints an object's type and name as kubectl's -o name does.
func (t waitType) nameOf(name string) string {
	kind := strings.ToLower(t.gvk.Kind)
	if t.gvk.Group != "" {
		kind += "." + t.gvk.Group
	}
	return kind + "/" + name
}

// waitJob is one wait: one named object, or one type with a selector.
type waitJob struct {
	typ   waitType
	spec  waitfor.Spec
	rec   *waitRecorder
	label string // resource/name, or resource alone for a selector
	item  *waitProgressItem

	objs []*unstructured.Unstructured
	err  error
	done bool
}

var (
	errWaitCheckedOnce = errors.New("checked once")
	errWaitEnough      = errors.New("enough waits are done")
	errWaitNotServed   = errors.New("type not served")
)

// waitTimeoutError is a timeout with vigil's own message; exitCode maps it to
// 124 through context.DeadlineExceeded.
type waitTimeoutError struct{ msg string }

func (e *waitTimeoutError) Error() string { return e.msg }
func (e *waitTimeoutError) Unwrap() error { return context.DeadlineExceeded }

// waitCheckOnceLimit bounds a --timeout=0 check, whose list must complete.
const waitCheckOnceLimit = 30 * time.Second

// waitPlan is what the flags ask for, checked before any API call.
type waitPlan struct {
	cond        gate.Cond
	established bool // one of the conditions is established: CRDs only
	targets     []waitTarget
	named       bool
	labels      labels.Selector
	fields      fields.Selector
}

// Run waits and prints the objects that satisfy the condition.
func (o *WaitOptions) Run(ctx context.Context, out io.Writer) error {
	errOut := o.ErrOut
	if errOut == nil {
		errOut = io.Discard
	}
	plan, err := o.plan()
	if err != nil {
		return err
	}
	cfg, ns, err := o.clientConfig()
	if err != nil {
		return err
	}
	if o.AllNamespaces {
		ns = ""
	}
	waiter, err := waitfor.New(cfg, logr.FromContextOrDiscard(ctx))
	if err != nil {
		return err
	}
	res, err := newWaitTypeResolver(cfg, waiter, errOut)
	if err != nil {
		return err
	}

	checkOnce := o.Timeout == 0
	wctx, cancel := ctx, context.CancelFunc(func() {})
	switch {
	case o.Timeout > 0:
		wctx, cancel = context.WithTimeout(ctx, o.Timeout)
	case checkOnce:
		wctx, cancel = context.WithTimeout(ctx, waitCheckOnceLimit)
	}
	defer cancel()

	prog := newWaitProgress(errOut)
	stopProgress := prog.start(o.ProgressInterval)
	defer stopProgress()

	jobs, err := o.jobs(wctx, plan, res, ns, prog, errOut)
	if err != nil {
		return err
	}
	need := len(jobs)
	if plan.named && o.Any {
		need = 1
	} else if plan.named && o.AtLeast > 0 {
		need = o.AtLeast
	}
	ok := runWaitJobs(wctx, waiter, jobs, need, checkOnce, prog)
	stopProgress()
	if ok {
		return o.print(out, jobs)
	}
	return o.failure(ctx, wctx, errOut, jobs)
}

// plan checks the flags and arguments.
func (o *WaitOptions) plan() (*waitPlan, error) {
	p := &waitPlan{}
	var err error
	if p.cond, p.established, err = parseWaitFor(o.For); err != nil {
		return nil, err
	}
	if p.targets, err = o.parseArgs(); err != nil {
		return nil, err
	}
	switch o.Output {
	case "", "name", "json", "yaml":
	default:
		return nil, fmt.Errorf("--output: expected name, json or yaml, got %q", o.Output)
	}
	if o.Any && o.AtLeast > 0 {
		return nil, errors.New("--any and --at-least: expected at most one of them: --any is --at-least=1")
	}
	if o.AtLeast < 0 {
		return nil, fmt.Errorf("--at-least: expected 1 or more, got %d", o.AtLeast)
	}
	if o.Selector != "" {
		if p.labels, err = labels.Parse(o.Selector); err != nil {
			return nil, fmt.Errorf("--selector %q: %w", o.Selector, err)
		}
	}
	if o.FieldSelector != "" {
		if p.fields, err = fields.ParseSelector(o.FieldSelector); err != nil {
			return nil, fmt.Errorf("--field-selector %q: %w", o.FieldSelector, err)
		}
	}
	p.named = len(p.targets[0].names) > 0
	nNamed := 0
	for _, t := range p.targets {
		nNamed += len(t.names)
	}
	if p.named && o.AtLeast > nNamed {
		return nil, fmt.Errorf("--at-least=%d: expected at most the %d named objects", o.AtLeast, nNamed)
	}
	return p, nil
}

// jobs resolves every type, waiting here for a type not served yet, and
// returns one job per named object or per type with a selector.
func (o *WaitOptions) jobs(ctx context.Context, plan *waitPlan, res *waitTypeResolver, ns string, prog *waitProgress, errOut io.Writer) ([]*waitJob, error) {
	var jobs []*waitJob
	for _, t := range plan.targets {
		for _, arg := range strings.Split(t.typ, ",") {
			typ, err := res.resolve(ctx, arg, o.Timeout == 0, prog)
			if err != nil {
				return nil, o.typeError(ctx, errOut, arg, t.names, err)
			}
			if plan.established && typ.gvk.GroupKind() != waitCRDGVK.GroupKind() {
				return nil, fmt.Errorf("--for=established: expected a CustomResourceDefinition (crd/NAME), got %s: established applies only to CRDs; for other kinds use --for=ready or --for=condition=Available", typ.gvk.GroupKind())
			}
			if v, ok := plan.cond.(gate.Validator); ok {
				if err := v.Validate(typ.gvk); err != nil {
					return nil, fmt.Errorf("--for: %w", err)
				}
			}
			base := waitfor.Spec{GVK: typ.gvk, Namespace: ns, Cond: plan.cond, Mode: waitfor.All}
			if !typ.namespaced {
				base.Namespace = ""
			}
			for _, name := range t.names {
				s := base
				s.Name = name
				jobs = append(jobs, &waitJob{typ: typ, spec: s, label: typ.resource + "/" + name})
			}
			if plan.named {
				continue
			}
			s := base
			s.Labels, s.Fields = plan.labels, plan.fields
			if o.Any {
				s.Mode, s.N = waitfor.AtLeast, 1
			} else if o.AtLeast > 0 {
				s.Mode, s.N = waitfor.AtLeast, o.AtLeast
			}
			jobs = append(jobs, &waitJob{typ: typ, spec: s, label: typ.resource})
		}
	}
	for _, j := range jobs {
		j.rec = &waitRecorder{inner: j.spec.Cond}
		j.spec.Cond = j.rec
		j.item = prog.add(j.spec.Describe(), "starting")
	}
	return jobs, nil
}

// runWaitJobs runs the jobs at once until need of them are done, one fails
// for good, or ctx ends; it reports whether need of them are done. With
// checkOnce a job stops after its first evaluation.
func runWaitJobs(ctx context.Context, waiter *waitfor.Waiter, jobs []*waitJob, need int, checkOnce bool, prog *waitProgress) bool {
	gctx, gcancel := context.WithCancelCause(ctx)
	defer gcancel(nil)
	var (
		mu       sync.Mutex
		finished int
		wg       sync.WaitGroup
	)
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jctx, jcancel := context.WithCancelCause(gctx)
			defer jcancel(nil)
			report := func(p waitfor.Progress) {
				seen := p.Seen
				if seen == "" {
					seen = p.State
				}
				prog.update(j.item, seen)
				if checkOnce && p.State != "done" && p.State != "waiting for type" {
					jcancel(errWaitCheckedOnce)
				}
			}
			objs, err := waiter.Wait(jctx, j.spec, report)
			prog.remove(j.item)
			mu.Lock()
			defer mu.Unlock()
			j.objs, j.err, j.done = objs, err, err == nil
			if err == nil {
				finished++
				if finished >= need {
					gcancel(errWaitEnough)
				}
			} else if waitHardError(err) {
				gcancel(err)
			}
		}()
	}
	wg.Wait()
	return finished >= need
}

// print prints the objects of the jobs that are done, in argument order.
func (o *WaitOptions) print(out io.Writer, jobs []*waitJob) error {
	p := &waitPrinter{format: o.Output}
	for _, j := range jobs {
		if !j.done {
			continue
		}
		objs := j.objs
		if len(objs) == 0 {
			// Satisfied by absence (delete): print what was seen, as kubectl
			// does; nothing when the object was gone from the start.
			objs = j.rec.seenObjects()
		}
		for _, obj := range objs {
			if err := p.print(out, j.typ, obj); err != nil {
				return err
			}
		}
	}
	return nil
}

// failure explains why the jobs did not finish: kubectl's line per job on
// errOut, and an error with what was last seen.
func (o *WaitOptions) failure(ctx, wctx context.Context, errOut io.Writer, jobs []*waitJob) error {
	for _, j := range jobs {
		if j.err != nil && waitHardError(j.err) {
			return j.err
		}
	}
	checkOnce := o.Timeout == 0
	timedOut := errors.Is(context.Cause(wctx), context.DeadlineExceeded)
	interrupted := ctx.Err() != nil
	var unmet []string
	for _, j := range jobs {
		if j.done {
			continue
		}
		on := j.label
		if j.spec.Name == "" {
			if n := j.rec.firstUnmet(); n != "" {
				on = j.typ.resource + "/" + n
			}
		}
		switch {
		case interrupted:
		case checkOnce && !timedOut:
			fmt.Fprintf(errOut, "error: condition not met for %s\n", on)
		default:
			fmt.Fprintf(errOut, "error: timed out waiting for the condition on %s\n", on)
		}
		unmet = append(unmet, fmt.Sprintf("%s; last seen: %s", j.spec.Describe(), j.item.lastSeen()))
	}
	what := strings.Join(unmet, "; ")
	switch {
	case interrupted:
		return fmt.Errorf("interrupted: %w: %s", context.Cause(ctx), what)
	case checkOnce && timedOut:
		return &waitTimeoutError{fmt.Sprintf("--timeout=0: the check did not complete within %s: %s", waitCheckOnceLimit, what)}
	case checkOnce:
		return fmt.Errorf("--timeout=0: checked once, not met: %s", what)
	case timedOut:
		return &waitTimeoutError{fmt.Sprintf("after %s: %s", o.Timeout, what)}
	}
	return fmt.Errorf("the wait ended without the condition: %s", what)
}

// typeError reports a type that could not be resolved.
func (o *WaitOptions) typeError(ctx context.Context, errOut io.Writer, typ string, names []string, err error) error {
	on := []string{typ}
	if len(names) > 0 {
		on = on[:0]
		for _, n := range names {
			on = append(on, typ+"/"+n)
		}
	}
	switch {
	case errors.Is(err, errWaitNotServed):
		for _, x := range on {
			fmt.Fprintf(errOut, "error: condition not met for %s\n", x)
		}
		return fmt.Errorf("--timeout=0: checked once, not met: %w", err)
	case errors.Is(err, context.DeadlineExceeded) && errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		for _, x := range on {
			fmt.Fprintf(errOut, "error: timed out waiting for the condition on %s\n", x)
		}
		return &waitTimeoutError{fmt.Sprintf("after %s: type %s is still not served: no CustomResourceDefinition that serves it is established", o.Timeout, typ)}
	}
	return err
}

// waitHardError says whether err ends the whole wait: not a deadline, a check
// done, or a wait stopped because enough others are done.
func waitHardError(err error) bool {
	return !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) &&
		!errors.Is(err, errWaitCheckedOnce) && !errors.Is(err, errWaitEnough)
}

// parseArgs splits the arguments the way kubectl's resource builder does.
func (o *WaitOptions) parseArgs() ([]waitTarget, error) {
	args := o.Args
	if len(args) == 0 {
		return nil, errors.New("expected what to wait for: TYPE/NAME, TYPE NAME... or TYPE with -l, --field-selector or --all, e.g. vigil wait cm/settings --for=create")
	}
	selecting := o.Selector != "" || o.FieldSelector != "" || o.All
	var targets []waitTarget
	if strings.Contains(args[0], "/") {
		for _, a := range args {
			typ, name, ok := strings.Cut(a, "/")
			if !ok {
				return nil, fmt.Errorf("argument %q: expected TYPE/NAME like the arguments before it; there is no need to give a type as a separate argument when giving TYPE/NAME", a)
			}
			if typ == "" || name == "" || strings.Contains(name, "/") {
				return nil, fmt.Errorf("argument %q: expected TYPE/NAME, e.g. configmap/settings", a)
			}
			targets = append(targets, waitTarget{typ: typ, names: []string{name}})
		}
	} else {
		for _, a := range args[1:] {
			if strings.Contains(a, "/") {
				return nil, fmt.Errorf("argument %q: expected a NAME after the TYPE %q, or TYPE/NAME arguments only", a, args[0])
			}
		}
		targets = []waitTarget{{typ: args[0], names: args[1:]}}
	}
	for _, t := range targets {
		for _, typ := range strings.Split(t.typ, ",") {
			if typ == "" {
				return nil, fmt.Errorf("type %q: expected types separated by single commas", t.typ)
			}
		}
	}
	named := len(targets[0].names) > 0
	switch {
	case named && (o.Selector != "" || o.FieldSelector != ""):
		return nil, errors.New("names and a selector: expected one of them: a name cannot be given with -l or --field-selector")
	case named && o.All:
		return nil, errors.New("names and --all: expected one of them: --all selects every object of the type")
	case named && o.AllNamespaces:
		return nil, errors.New("a resource cannot be retrieved by name across all namespaces: drop -A or give the namespace with -n")
	case !named && !selecting:
		return nil, fmt.Errorf("resource(s) were provided, but no name was specified: give TYPE/NAME, TYPE NAME..., or select with -l, --field-selector or --all, e.g. vigil wait %s --all --for=create", args[0])
	}
	return targets, nil
}

// clientConfig loads the config and the default namespace as kubectl does.
func (o *WaitOptions) clientConfig() (*rest.Config, string, error) {
	ns := o.Namespace
	if o.Config != nil {
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		return o.Config, ns, nil
	}
	cfg, err := cmdutil.LoadConfig(o.Kubeconfig, o.Context)
	if err != nil {
		return nil, "", err
	}
	if ns == "" {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = o.Kubeconfig
		ns, _, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context}).Namespace()
		if err != nil || ns == "" {
			ns = metav1.NamespaceDefault
		}
	}
	return cfg, ns, nil
}

// parseWaitFor turns --for values into one condition, and says whether one of
// them is established, which only a CRD can satisfy.
func parseWaitFor(values []string) (cond gate.Cond, established bool, err error) {
	if len(values) == 0 {
		return nil, false, fmt.Errorf("--for: expected a condition to wait for: %s", waitForForms)
	}
	var conds []gate.Cond
	for _, v := range values {
		c, err := parseOneWaitFor(v)
		if err != nil {
			return nil, false, err
		}
		if strings.EqualFold(v, "established") {
			// Established needs the type, known only later.
			established = true
		} else if val, ok := c.(gate.Validator); ok {
			// Bad JSONPath or CEL fails now, before anything is waited for.
			if err := val.Validate(schema.GroupVersionKind{}); err != nil {
				return nil, false, fmt.Errorf("--for=%s: %w", v, err)
			}
		}
		conds = append(conds, c)
	}
	if len(conds) == 1 {
		return conds[0], established, nil
	}
	return gate.And(conds...), established, nil
}

func parseOneWaitFor(v string) (gate.Cond, error) {
	lower := strings.ToLower(v)
	switch {
	case lower == "create":
		return gate.Created(), nil
	case lower == "delete":
		return gate.Deleted(), nil
	case lower == "established":
		return gate.Established(), nil
	case lower == "ready":
		return gate.Ready(), nil
	case strings.HasPrefix(lower, "condition="):
		typ, status, hasStatus := strings.Cut(v[len("condition="):], "=")
		if typ == "" {
			return nil, fmt.Errorf("--for=%s: expected a condition type, as in --for=condition=Ready or --for=condition=Ready=False", v)
		}
		want := metav1.ConditionTrue
		if hasStatus {
			switch {
			case strings.EqualFold(status, "true"):
			case strings.EqualFold(status, "false"):
				want = metav1.ConditionFalse
			case strings.EqualFold(status, "unknown"):
				want = metav1.ConditionUnknown
			default:
				return nil, fmt.Errorf("--for=%s: expected the status True, False or Unknown after %s=, got %q", v, typ, status)
			}
		}
		return gate.Condition(typ, want), nil
	case strings.HasPrefix(lower, "jsonpath="):
		parts := splitWaitJSONPath(v[len("jsonpath="):])
		if len(parts) > 2 {
			return nil, fmt.Errorf("--for=%s: expected --for=jsonpath='{.status.readyReplicas}'=3 or --for=jsonpath='{.status.readyReplicas}': compare with == inside a filter, a single = separates the value", v)
		}
		expr := strings.TrimSpace(trimWaitQuotes(parts[0]))
		if expr == "" {
			return nil, fmt.Errorf("--for=%s: expected a JSONPath expression, as in --for=jsonpath='{.status.phase}'=Running", v)
		}
		value := ""
		if len(parts) == 2 {
			if value = strings.Trim(parts[1], `'"`); value == "" {
				return nil, fmt.Errorf("--for=%s: expected a value after the equal sign, as in --for=jsonpath='{.status.readyReplicas}'=3; leave out the = to accept any value", v)
			}
		}
		return gate.JSONPath(expr, value), nil
	case strings.HasPrefix(lower, "cel="):
		expr := strings.TrimSpace(v[len("cel="):])
		if expr == "" {
			return nil, fmt.Errorf("--for=%s: expected a CEL expression, as in --for=cel='object.status.phase == \"Ready\"'", v)
		}
		return gate.CEL(expr), nil
	}
	return nil, fmt.Errorf("--for=%s: unrecognized condition: expected one of %s", v, waitForForms)
}

// trimWaitQuotes removes one pair of matching quotes, which a shell would have
// removed but a container's args keep.
func trimWaitQuotes(s string) string {
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// splitWaitJSONPath splits on single '=' but not on '==', as kubectl does.
func splitWaitJSONPath(input string) []string {
	var out []string
	var b strings.Builder
	for i := 0; i < len(input); i++ {
		if input[i] == '=' {
			if i < len(input)-1 && input[i+1] == '=' {
				b.WriteString("==")
				i++
				continue
			}
			out = append(out, b.String())
			b.Reset()
			continue
		}
		b.WriteByte(input[i])
	}
	return append(out, b.String())
}

var (
	waitCRDGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	waitCRDGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
)

// waitTypeResolver resolves TYPE arguments as kubectl does, through discovery
// with short names, and waits for CRDs of types not served yet.
type waitTypeResolver struct {
	waiter *waitfor.Waiter
	disco  discovery.CachedDiscoveryInterface
	mapper meta.RESTMapper
	dyn    dynamic.Interface
	errOut io.Writer
}

func newWaitTypeResolver(cfg *rest.Config, w *waitfor.Waiter, errOut io.Writer) (*waitTypeResolver, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	disco := memory.NewMemCacheClient(dc)
	warn := func(msg string) { fmt.Fprintf(errOut, "Warning: %s\n", msg) }
	return &waitTypeResolver{
		waiter: w,
		disco:  disco,
		mapper: restmapper.NewShortcutExpander(w.Mapper(), disco, warn),
		dyn:    dyn,
		errOut: errOut,
	}, nil
}

func (r *waitTypeResolver) reset() {
	r.waiter.Mapper().Reset()
	r.disco.Invalidate()
}

// waitMappingFor is kubectl's resource builder's lookup: resource forms first,
// then kinds.
func waitMappingFor(m meta.RESTMapper, arg string) (*meta.RESTMapping, error) {
	fullGVR, gr := schema.ParseResourceArg(arg)
	var gvk schema.GroupVersionKind
	if fullGVR != nil {
		gvk, _ = m.KindFor(*fullGVR)
	}
	if gvk.Empty() {
		gvk, _ = m.KindFor(gr.WithVersion(""))
	}
	if !gvk.Empty() {
		return m.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	fullGVK, gk := schema.ParseKindArg(arg)
	if fullGVK != nil {
		if mapping, err := m.RESTMapping(fullGVK.GroupKind(), fullGVK.Version); err == nil {
			return mapping, nil
		}
	}
	return m.RESTMapping(gk)
}

func waitTypeOf(m *meta.RESTMapping) waitType {
	return waitType{gvk: m.GroupVersionKind, resource: m.Resource.Resource, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}
}

// waitCRDCandidate is one reading of a TYPE: name.group or name.version.group.
type waitCRDCandidate struct{ name, group, version string }

var waitVersionLike = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)

// resolve finds the type arg names. A type that discovery does not know is
// waited for when arg names its group (plural.group); with checkOnce it is
// reported as errWaitNotServed instead.
func (r *waitTypeResolver) resolve(ctx context.Context, arg string, checkOnce bool, prog *waitProgress) (waitType, error) {
	m, err := waitMappingFor(r.mapper, arg)
	if err == nil {
		return waitTypeOf(m), nil
	}
	if !meta.IsNoMatchError(err) {
		return waitType{}, fmt.Errorf("resolve type %q through discovery: %w", arg, err)
	}
	name, group, _ := strings.Cut(arg, ".")
	if name == "" {
		return waitType{}, fmt.Errorf("type %q: expected a resource name before the group, e.g. clusterconfigs.uds.dev", arg)
	}
	if group == "" {
		return waitType{}, fmt.Errorf("the server doesn't have a resource type %q: check its spelling (kubectl api-resources lists the types); to wait for a CustomResourceDefinition that is not installed yet, qualify the type with its group, e.g. %s.example.com", arg, arg)
	}
	if !strings.Contains(group, ".") {
		return waitType{}, fmt.Errorf("the server doesn't have a resource type %q in group %q, and no CustomResourceDefinition can add one to a group without a dot: check the type and group", name, group)
	}
	cands := []waitCRDCandidate{{name: strings.ToLower(name), group: group}}
	if v, rest, ok := strings.Cut(group, "."); ok && waitVersionLike.MatchString(v) && strings.Contains(rest, ".") {
		cands = append(cands, waitCRDCandidate{name: strings.ToLower(name), group: rest, version: v})
	}
	if checkOnce {
		return waitType{}, fmt.Errorf("%w: the server doesn't serve %s: no CustomResourceDefinition that serves it is established", errWaitNotServed, arg)
	}
	fmt.Fprintf(r.errOut, "vigil: the server doesn't serve %s yet; waiting for a CustomResourceDefinition in group %s that serves it to be established (kubectl wait would fail here)\n", arg, group)
	item := prog.add("type "+arg, fmt.Sprintf("no CustomResourceDefinition in group %s names %s", group, name))
	defer prog.remove(item)
	ti, err := r.waitForCRD(ctx, arg, cands, item, prog)
	if err != nil {
		return waitType{}, err
	}
	// Discovery lags behind the CRD's conditions; the waiter's mapper is
	// reset here and waitfor retries until discovery serves the kind.
	r.reset()
	fmt.Fprintf(r.errOut, "vigil: %s is served now as %s\n", arg, ti.gvk.GroupKind())
	return ti, nil
}

// waitForCRD watches CRDs until one of cands is served by an established CRD.
// Without the right to list CRDs it asks discovery again every 2 seconds.
func (r *waitTypeResolver) waitForCRD(ctx context.Context, arg string, cands []waitCRDCandidate, item *waitProgressItem, prog *waitProgress) (waitType, error) {
	crds := r.dyn.Resource(waitCRDGVR)
	if _, err := crds.List(ctx, metav1.ListOptions{Limit: 1}); apierrors.IsForbidden(err) {
		prog.update(item, "cannot list CustomResourceDefinitions (forbidden); asking discovery every 2s")
		for {
			t := time.NewTimer(2 * time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				return waitType{}, context.Cause(ctx)
			case <-t.C:
			}
			r.reset()
			if m, err := waitMappingFor(r.mapper, arg); err == nil {
				return waitTypeOf(m), nil
			}
		}
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return crds.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return crds.Watch(ctx, o)
		},
	}
	var found waitType
	_, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok || ev.Type == watch.Deleted {
			return false, nil
		}
		ti, ok, why := waitCRDServes(u, cands)
		if why != "" {
			prog.update(item, why)
		}
		if ok {
			found = ti
		}
		return ok, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return waitType{}, context.Cause(ctx)
		}
		return waitType{}, fmt.Errorf("watch CustomResourceDefinitions: %w", err)
	}
	return found, nil
}

// waitCRDServes says whether crd serves one of cands; why says what was seen of
// a CRD that names one but does not serve it yet.
func waitCRDServes(crd *unstructured.Unstructured, cands []waitCRDCandidate) (waitType, bool, string) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	singular, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "singular")
	shorts, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "shortNames")
	scope, _, _ := unstructured.NestedString(crd.Object, "spec", "scope")
	names := append([]string{plural, singular, strings.ToLower(kind)}, shorts...)
	var served []string
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		if vm, ok := v.(map[string]any); ok && vm["served"] == true {
			if n, ok := vm["name"].(string); ok {
				served = append(served, n)
			}
		}
	}
	sort.Slice(served, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(served[i], served[j]) > 0 })
	for _, c := range cands {
		if group != c.group || !slices.Contains(names, c.name) {
			continue
		}
		ver := ""
		switch {
		case c.version != "" && slices.Contains(served, c.version):
			ver = c.version
		case c.version != "":
			return waitType{}, false, fmt.Sprintf("CustomResourceDefinition %s does not serve version %s", crd.GetName(), c.version)
		case len(served) > 0:
			ver = served[0]
		default:
			return waitType{}, false, fmt.Sprintf("CustomResourceDefinition %s serves no version", crd.GetName())
		}
		if ok, why := gate.Established().Check(crd); !ok {
			return waitType{}, false, fmt.Sprintf("CustomResourceDefinition %s is not established yet: %s", crd.GetName(), why)
		}
		return waitType{
			gvk:        schema.GroupVersionKind{Group: group, Version: ver, Kind: kind},
			resource:   plural,
			namespaced: scope == "Namespaced",
		}, true, ""
	}
	return waitType{}, false, ""
}

// waitRecorder passes checks on to the condition and remembers every object it
// saw and whether it satisfied the condition: what a delete wait prints, and
// what a timeout names.
type waitRecorder struct {
	mu    sync.Mutex
	inner gate.Cond
	seen  map[string]waitRecorded
}

type waitRecorded struct {
	obj *unstructured.Unstructured
	ok  bool
}

var (
	_ gate.Cond     = (*waitRecorder)(nil)
	_ gate.Stateful = (*waitRecorder)(nil)
)

func (r *waitRecorder) Check(obj *unstructured.Unstructured) (bool, string) {
	r.mu.Lock()
	inner := r.inner
	r.mu.Unlock()
	ok, why := inner.Check(obj)
	if obj != nil {
		r.mu.Lock()
		if r.seen == nil {
			r.seen = map[string]waitRecorded{}
		}
		r.seen[waitObjectKey(obj)] = waitRecorded{obj: obj, ok: ok}
		r.mu.Unlock()
	}
	return ok, why
}

func (r *waitRecorder) String() string { return r.inner.String() }

// Fresh gives the inner condition a fresh state; one recorder serves one wait.
func (r *waitRecorder) Fresh() gate.Cond {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, ok := r.inner.(gate.Stateful); ok {
		r.inner = st.Fresh()
	}
	return r
}

func waitObjectKey(o *unstructured.Unstructured) string {
	return o.GetNamespace() + "/" + o.GetName()
}

func (r *waitRecorder) sortedKeys() []string {
	keys := make([]string, 0, len(r.seen))
	for k := range r.seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (r *waitRecorder) seenObjects() []*unstructured.Unstructured {
	r.mu.Lock()
	defer r.mu.Unlock()
	var objs []*unstructured.Unstructured
	for _, k := range r.sortedKeys() {
		objs = append(objs, r.seen[k].obj)
	}
	return objs
}

// firstUnmet names the first object seen that did not satisfy the condition.
func (r *waitRecorder) firstUnmet() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.sortedKeys() {
		if !r.seen[k].ok {
			return r.seen[k].obj.GetName()
		}
	}
	return ""
}

// waitPrinter prints objects as kubectl wait does.
type waitPrinter struct {
	format string
	yamls  int
}

func (p *waitPrinter) print(out io.Writer, ti waitType, obj *unstructured.Unstructured) error {
	switch p.format {
	case "":
		_, err := fmt.Fprintf(out, "%s condition met\n", ti.nameOf(obj.GetName()))
		return err
	case "name":
		_, err := fmt.Fprintln(out, ti.nameOf(obj.GetName()))
		return err
	}
	// kubectl leaves managedFields out of json and yaml by default.
	obj = obj.DeepCopy()
	obj.SetManagedFields(nil)
	if p.format == "json" {
		data, err := json.MarshalIndent(obj, "", "    ")
		if err != nil {
			return err
		}
		_, err = out.Write(append(data, '\n'))
		return err
	}
	data, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	if p.yamls++; p.yamls > 1 {
		if _, err := io.WriteString(out, "---\n"); err != nil {
			return err
		}
	}
	_, err = out.Write(data)
	return err
}

// progress says every interval what is still waited for.
type waitProgress struct {
	mu    sync.Mutex
	out   io.Writer
	began time.Time
	items []*waitProgressItem
}

type waitProgressItem struct {
	mu     sync.Mutex
	what   string
	seen   string
	active bool
}

func (i *waitProgressItem) lastSeen() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.seen
}

func newWaitProgress(out io.Writer) *waitProgress { return &waitProgress{out: out, began: time.Now()} }

func (p *waitProgress) add(what, seen string) *waitProgressItem {
	it := &waitProgressItem{what: what, seen: seen, active: true}
	p.mu.Lock()
	p.items = append(p.items, it)
	p.mu.Unlock()
	return it
}

func (p *waitProgress) update(it *waitProgressItem, seen string) {
	it.mu.Lock()
	it.seen = seen
	it.mu.Unlock()
}

func (p *waitProgress) remove(it *waitProgressItem) {
	it.mu.Lock()
	it.active = false
	it.mu.Unlock()
}

// start prints progress every interval until the returned stop is called;
// stop may be called more than once and returns once printing has ended.
func (p *waitProgress) start(interval time.Duration) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	quit, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				p.tick()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-ended
	}
}

func (p *waitProgress) tick() {
	p.mu.Lock()
	items := append([]*waitProgressItem(nil), p.items...)
	p.mu.Unlock()
	elapsed := time.Since(p.began)
	if elapsed >= 10*time.Second {
		elapsed = elapsed.Round(time.Second)
	} else {
		elapsed = elapsed.Round(100 * time.Millisecond)
	}
	for _, it := range items {
		it.mu.Lock()
		what, seen, active := it.what, it.seen, it.active
		it.mu.Unlock()
		if active {
			fmt.Fprintf(p.out, "vigil: waiting %s so far for %s; last seen: %s\n", elapsed, what, seen)
		}
	}
}

package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/vigilkit/vigil/internal/runtime/served"
	"github.com/vigilkit/vigil/internal/serving/registration"
)

// SessionLabel marks what a vigil dev session creates in a cluster — the
// module's webhook configurations and its opt-out guards — with the module's
// name as its value. It tells them apart from those a real install of the
// module owns, which vigil dev never touches: only what carries it is
// removed when a session ends, by the next session of the module after one
// was killed, and by `vigil dev --clean`. By hand:
//
//	kubectl delete mutatingwebhookconfigurations,validatingwebhookconfigurations,validatingadmissionpolicybindings,validatingadmissionpolicies,mutatingadmissionpolicybindings,mutatingadmissionpolicies -l vigil.dev/dev-session=<module>
const SessionLabel = "vigil.dev/dev-session"

// fieldManager is who vigil dev's writes are attributed to.
const fieldManager = "vigil-dev"

// ErrRealInstall is returned when the cluster holds a webhook configuration
// of the module that vigil dev did not create.
var ErrRealInstall = errors.New("the module is installed in this cluster")

// marked says whether vigil dev created an object of module.
func marked(m metav1.Object, module string) bool { return m.GetLabels()[SessionLabel] == module }

func mark(m *metav1.ObjectMeta, module string) {
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[SessionLabel] = module
}

// object names one object vigil dev created, for reports.
type object struct{ kind, name string }

func (o object) String() string { return o.kind + " " + o.name }

// kinds are the kinds of what vigil dev creates, in the order they are
// removed: the webhook configurations first, so the API server stops
// calling the module, and a guard's binding before its policy.
var kinds = []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy",
	"MutatingAdmissionPolicyBinding", "MutatingAdmissionPolicy"}

// stampAPI is the cluster's MutatingAdmissionPolicy API; nil when it
// serves none.
func stampAPI(ctx context.Context, cs kubernetes.Interface) (*registration.StampAPI, error) {
	cluster, err := served.Discover(ctx, cs.Discovery())
	if err != nil {
		return nil, err
	}
	if cluster.Version(served.MutatingAdmissionPolicy) == "" {
		return nil, nil
	}
	return registration.NewStampAPI(cs, cluster, "")
}

// checkNotInstalled refuses a cluster where the module's webhook
// configurations exist without vigil dev's mark: a real install owns them,
// and a session would register its loopback URL in them, then remove them.
func checkNotInstalled(ctx context.Context, cs kubernetes.Interface, module string) error {
	api := cs.AdmissionregistrationV1()
	var metas []metav1.Object
	var urls []*string
	if m, err := api.MutatingWebhookConfigurations().Get(ctx, module, metav1.GetOptions{}); err == nil {
		metas = append(metas, m)
		for _, w := range m.Webhooks {
			urls = append(urls, w.ClientConfig.URL)
		}
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get MutatingWebhookConfiguration %s: %w", module, err)
	}
	if v, err := api.ValidatingWebhookConfigurations().Get(ctx, module, metav1.GetOptions{}); err == nil {
		metas = append(metas, v)
		for _, w := range v.Webhooks {
			urls = append(urls, w.ClientConfig.URL)
		}
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get ValidatingWebhookConfiguration %s: %w", module, err)
	}
	for _, m := range metas {
		if marked(m, module) {
			continue
		}
		hint := ""
		if len(urls) > 0 && !slices.ContainsFunc(urls, func(u *string) bool { return !loopback(u) }) {
			hint = fmt.Sprintf(" (their webhooks call a loopback URL: if a vigil dev from before the label left them, delete them: "+
				"kubectl delete mutatingwebhookconfigurations,validatingwebhookconfigurations %s)", module)
		}
		return fmt.Errorf("%w: its webhook configurations %s exist and vigil dev did not create them (they lack the label %s=%s); "+
			"vigil dev would take them over and remove them: run it against another cluster, or uninstall the module first%s",
			ErrRealInstall, module, SessionLabel, module, hint)
	}
	return nil
}

// loopback says whether a webhook's URL is on this machine's loopback, as
// vigil dev registers them; a Service reference is not.
func loopback(u *string) bool {
	if u == nil {
		return false
	}
	p, err := url.Parse(*u)
	if err != nil {
		return false
	}
	if p.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(p.Hostname())
	return ip != nil && ip.IsLoopback()
}

// removeSessionObjects deletes what vigil dev created for module — and only
// that: each object is listed by its mark and deleted with its UID as a
// precondition. It returns what it removed.
func removeSessionObjects(ctx context.Context, cs kubernetes.Interface, module string) ([]object, error) {
	api := cs.AdmissionregistrationV1()
	list := metav1.ListOptions{LabelSelector: labels.Set{SessionLabel: module}.String()}
	var removed []object
	var errs []error
	for _, kind := range kinds {
		var items []metav1.Object
		var del func(name string, uid types.UID) error
		opts := func(uid types.UID) metav1.DeleteOptions {
			return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
		}
		var err error
		switch kind {
		case "MutatingWebhookConfiguration":
			var l *admissionregistrationv1.MutatingWebhookConfigurationList
			if l, err = api.MutatingWebhookConfigurations().List(ctx, list); err == nil {
				for i := range l.Items {
					items = append(items, &l.Items[i])
				}
			}
			del = func(n string, uid types.UID) error {
				return api.MutatingWebhookConfigurations().Delete(ctx, n, opts(uid))
			}
		case "ValidatingWebhookConfiguration":
			var l *admissionregistrationv1.ValidatingWebhookConfigurationList
			if l, err = api.ValidatingWebhookConfigurations().List(ctx, list); err == nil {
				for i := range l.Items {
					items = append(items, &l.Items[i])
				}
			}
			del = func(n string, uid types.UID) error {
				return api.ValidatingWebhookConfigurations().Delete(ctx, n, opts(uid))
			}
		case "ValidatingAdmissionPolicyBinding":
			var l *admissionregistrationv1.ValidatingAdmissionPolicyBindingList
			if l, err = api.ValidatingAdmissionPolicyBindings().List(ctx, list); err == nil {
				for i := range l.Items {
					items = append(items, &l.Items[i])
				}
			}
			del = func(n string, uid types.UID) error {
				return api.ValidatingAdmissionPolicyBindings().Delete(ctx, n, opts(uid))
			}
		case "MutatingAdmissionPolicyBinding", "MutatingAdmissionPolicy":
			// Listed in the version the cluster serves; none served, none
			// to remove.
			res := registration.StampPolicies
			if kind == "MutatingAdmissionPolicyBinding" {
				res = registration.StampBindings
			}
			stamps, serr := stampAPI(ctx, cs)
			if stamps == nil || serr != nil {
				err = serr
				break
			}
			var l []metav1.PartialObjectMetadata
			if l, err = stamps.List(ctx, res, list.LabelSelector); err == nil {
				for i := range l {
					items = append(items, &l[i])
				}
			}
			del = func(n string, uid types.UID) error { return stamps.Delete(ctx, res, n, uid) }
		case "ValidatingAdmissionPolicy":
			var l *admissionregistrationv1.ValidatingAdmissionPolicyList
			if l, err = api.ValidatingAdmissionPolicies().List(ctx, list); err == nil {
				for i := range l.Items {
					items = append(items, &l.Items[i])
				}
			}
			del = func(n string, uid types.UID) error {
				return api.ValidatingAdmissionPolicies().Delete(ctx, n, opts(uid))
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("list %ss of vigil dev: %w", kind, err))
			continue
		}
		for _, it := range items {
			if !marked(it, module) {
				continue // the selector said it is; never trust less than the mark
			}
			switch err := del(it.GetName(), it.GetUID()); {
			case err == nil:
				removed = append(removed, object{kind, it.GetName()})
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				// Gone already, or replaced by an object vigil dev did not create.
			default:
				errs = append(errs, fmt.Errorf("delete %s %s: %w", kind, it.GetName(), err))
			}
		}
	}
	return removed, errors.Join(errs...)
}

// createConfigurations creates, marked as vigil dev's, what the module's
// manifests install for its admission role: its empty webhook
// configurations, its opt-out guards and its checks. A configuration that
// exists already carries the mark (checkNotInstalled saw to it); a policy
// that exists without it is left as it is, and never removed.
func (s *Session) createConfigurations(ctx context.Context) error {
	api := s.cs.AdmissionregistrationV1()
	mut, val := registration.Bootstrap(s.Module)
	mark(&mut.ObjectMeta, s.Module)
	mark(&val.ObjectMeta, s.Module)
	create := metav1.CreateOptions{FieldManager: fieldManager}
	if _, err := api.MutatingWebhookConfigurations().Create(ctx, mut, create); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create MutatingWebhookConfiguration %s: %w", s.Module, err)
	}
	if _, err := api.ValidatingWebhookConfigurations().Create(ctx, val, create); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ValidatingWebhookConfiguration %s: %w", s.Module, err)
	}
	if err := checkNotInstalled(ctx, s.cs, s.Module); err != nil {
		return err
	}
	if err := createTrust(ctx, s.cs, s.plan, func(text string) { s.emit(Event{Kind: Log, Role: "dev", Text: text}) }); err != nil {
		return err
	}
	policies := registration.Policies(s.plan)
	for _, g := range policies {
		p, b := g.Policy, g.Binding
		mark(&p.ObjectMeta, s.Module)
		mark(&b.ObjectMeta, s.Module)
		if cur, err := api.ValidatingAdmissionPolicies().Get(ctx, p.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			if _, err := api.ValidatingAdmissionPolicies().Create(ctx, p, create); err != nil {
				return fmt.Errorf("create ValidatingAdmissionPolicy %s: %w", p.Name, err)
			}
		} else if err != nil {
			return fmt.Errorf("get ValidatingAdmissionPolicy %s: %w", p.Name, err)
		} else if !marked(cur, s.Module) {
			s.emit(Event{Kind: Log, Role: "dev", Text: "ValidatingAdmissionPolicy " + p.Name + " exists and is not vigil dev's: left as it is"})
			continue
		} else {
			p.ResourceVersion = cur.ResourceVersion
			if _, err := api.ValidatingAdmissionPolicies().Update(ctx, p, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
				return fmt.Errorf("update ValidatingAdmissionPolicy %s: %w", p.Name, err)
			}
		}
		if cur, err := api.ValidatingAdmissionPolicyBindings().Get(ctx, b.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, b, create); err != nil {
				return fmt.Errorf("create ValidatingAdmissionPolicyBinding %s: %w", b.Name, err)
			}
		} else if err != nil {
			return fmt.Errorf("get ValidatingAdmissionPolicyBinding %s: %w", b.Name, err)
		} else if marked(cur, s.Module) {
			b.ResourceVersion = cur.ResourceVersion
			if _, err := api.ValidatingAdmissionPolicyBindings().Update(ctx, b, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
				return fmt.Errorf("update ValidatingAdmissionPolicyBinding %s: %w", b.Name, err)
			}
		}
	}
	s.emit(Event{Kind: Log, Role: "dev", Text: fmt.Sprintf("webhook configurations %s created empty, as the module's manifests would, and %s (opt-out guards and checks); labelled %s=%s",
		s.Module, policiesOf(len(policies)), SessionLabel, s.Module)})
	return nil
}

func policiesOf(n int) string {
	if n == 1 {
		return "1 ValidatingAdmissionPolicy"
	}
	return fmt.Sprintf("%d ValidatingAdmissionPolicies", n)
}

// removeLeftovers removes what an earlier session of the module left —
// one that was killed, so its configurations point at a proxy that is gone
// and every request they match fails — after making sure that no real
// install of the module owns its configurations.
func (s *Session) removeLeftovers(ctx context.Context) error {
	if err := checkNotInstalled(ctx, s.cs, s.Module); err != nil {
		return err
	}
	removed, err := removeSessionObjects(ctx, s.cs, s.Module)
	for _, o := range removed {
		s.emit(Event{Kind: Log, Role: "dev", Text: "removed " + o.String() + ", left by an earlier vigil dev session that did not stop cleanly"})
	}
	if err != nil {
		return fmt.Errorf("remove what an earlier vigil dev session of %s left: %w", s.Module, err)
	}
	return nil
}

// Clean removes what vigil dev sessions of the module at o.Path left in the
// cluster o.Kubeconfig names — its webhook configurations and opt-out
// guards, recognised by SessionLabel — and nothing else: what a real install
// owns is kept, and reported. It builds the module to learn its name. Each
// removal is an Event; it returns what it removed.
func Clean(ctx context.Context, o Options) (removed []string, err error) {
	if o.Kubeconfig == "" {
		return nil, errors.New("--clean needs the cluster: give --kubeconfig or set KUBECONFIG (an embedded control plane ends with its session, leaving nothing)")
	}
	s, err := prepare(ctx, o)
	if err != nil {
		return nil, err
	}
	defer s.release()
	objs, err := removeSessionObjects(ctx, s.cs, s.Module)
	for _, r := range objs {
		removed = append(removed, r.String())
		s.emit(Event{Kind: Log, Role: "dev", Text: "removed " + r.String() + ", left by vigil dev"})
	}
	if err != nil {
		return removed, err
	}
	if err := checkNotInstalled(ctx, s.cs, s.Module); errors.Is(err, ErrRealInstall) {
		s.emit(Event{Kind: Log, Role: "dev", Text: "kept webhook configurations " + s.Module + ": vigil dev did not create them (a real install owns them)"})
	} else if err != nil {
		return removed, err
	}
	if len(removed) == 0 {
		s.emit(Event{Kind: Log, Role: "dev", Text: "nothing left by vigil dev for module " + s.Module})
	}
	return removed, nil
}

// prepare checks, builds and reads the module, and reaches the cluster.
func prepare(ctx context.Context, o Options) (_ *Session, err error) {
	if o.Path == "" {
		o.Path = "."
	}
	if o.GateProgress <= 0 {
		o.GateProgress = time.Second
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	s := &Session{opts: o, Started: time.Now(), done: make(chan struct{})}
	dir, err := filepath.Abs(o.Path)
	if err != nil {
		return nil, err
	}
	pkg, err := inspect(ctx, dir)
	if err != nil {
		return nil, err
	}
	if s.tmp, err = os.MkdirTemp("", tempPrefix); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.release()
		}
	}()
	if err := os.WriteFile(filepath.Join(s.tmp, pidFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return nil, err
	}
	removeStaleTemp(s.tmp)
	s.bin = filepath.Join(s.tmp, filepath.Base(pkg.Dir))
	s.handoff = filepath.Join(s.tmp, "handoff")
	began := time.Now()
	if err := build(ctx, pkg.Dir, s.bin); err != nil {
		return nil, err
	}
	if s.plan, err = readPlan(ctx, s.bin); err != nil {
		return nil, err
	}
	s.Module, s.Namespace = s.plan.Name, s.plan.Namespace
	s.emit(Event{Kind: Built, Role: "dev", Text: fmt.Sprintf("built module %s from %s in %s: %s, %s, %s, %s",
		s.Module, o.Path, since(began), plural(len(s.plan.Phases), "gate phase"), plural(len(s.plan.Bindings), "admission binding"),
		plural(len(s.plan.Watches), "watcher binding"), plural(len(s.plan.Schedules), "schedule"))})
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// A session keeps the module's binary and its handoff folder in a temporary
// folder named tempPrefix*, which holds its pid in pidFile.
const (
	tempPrefix = "vigil-dev-"
	pidFile    = "vigil-dev.pid"
)

// removeStaleTemp removes the temporary folders of sessions that were killed
// (their pid runs no more), except own. A folder without a pid file is left:
// its session may be writing it.
func removeStaleTemp(own string) {
	dirs, _ := filepath.Glob(filepath.Join(filepath.Dir(own), tempPrefix+"*"))
	for _, d := range dirs {
		if d == own {
			continue
		}
		data, err := os.ReadFile(filepath.Join(d, pidFile))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 0 && !running(pid) {
			_ = os.RemoveAll(d)
		}
	}
}

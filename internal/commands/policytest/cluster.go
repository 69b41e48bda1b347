package policytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	cached "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Cluster runs cases through a real API server, where the module is
// installed and registered: each case's objects are created (and deleted
// after it), then its object is sent with dryRun=All — created, updated
// over its oldObject, or deleted — as the case's user, impersonated, so
// nothing it sends is kept. A case's store keys cannot be given there: the
// module's handlers read the Store in the cluster.
type Cluster struct {
	config *rest.Config
	admin  *dynamic.DynamicClient
	mapper meta.RESTMapper
}

// NewCluster is a Cluster of the API server cfg reaches; cfg's user must
// be allowed to create the cases' objects and to impersonate their users.
func NewCluster(cfg *rest.Config) (*Cluster, error) {
	admin, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{config: cfg, admin: admin, mapper: restmapper.NewDeferredDiscoveryRESTMapper(cached.NewMemCacheClient(dc))}, nil
}

// Runner is the Runner of the cluster.
func (cl *Cluster) Runner() Runner { return cl.Run }

// Run sends the case through the API server.
func (cl *Cluster) Run(ctx context.Context, c Case) (Result, error) {
	if len(c.Store) > 0 {
		return Result{}, errors.New("store keys are given in process only: through an API server the module's handlers read its Store in the cluster; run this case without --kubeconfig, or set the keys with `vigil store`")
	}
	var fixtures []*unstructured.Unstructured
	defer func() {
		for _, f := range slices.Backward(fixtures) {
			_ = cl.resource(f).Delete(context.WithoutCancel(ctx), f.GetName(), metav1.DeleteOptions{})
		}
	}()
	create := func(o map[string]any) (*unstructured.Unstructured, error) {
		u := (&unstructured.Unstructured{Object: o}).DeepCopy()
		if err := cl.namespace(u); err != nil {
			return nil, err
		}
		got, err := cl.resource(u).Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		fixtures = append(fixtures, got)
		return got, nil
	}
	for _, o := range c.Objects {
		if _, err := create(o); err != nil && !apierrors.IsAlreadyExists(errors.Unwrap(err)) {
			return Result{}, fmt.Errorf("objects: %w", err)
		}
	}
	var old *unstructured.Unstructured
	if c.OldObject != nil {
		var err error
		if old, err = create(c.OldObject); err != nil {
			return Result{}, fmt.Errorf("oldObject: %w", err)
		}
	}
	as, warnings := cl.as(c.User)
	client, err := dynamic.NewForConfig(as)
	if err != nil {
		return Result{}, err
	}
	dry := []string{metav1.DryRunAll}
	var sent, got *unstructured.Unstructured
	switch c.operation() {
	case admissionv1.Create:
		sent = &unstructured.Unstructured{Object: c.Object}
		if err := cl.namespace(sent); err != nil {
			return Result{}, err
		}
		got, err = client.Resource(cl.gvr(sent)).Namespace(sent.GetNamespace()).Create(ctx, sent, metav1.CreateOptions{DryRun: dry})
	case admissionv1.Update:
		sent = (&unstructured.Unstructured{Object: c.Object}).DeepCopy()
		if err := cl.namespace(sent); err != nil {
			return Result{}, err
		}
		sent.SetResourceVersion(old.GetResourceVersion())
		got, err = client.Resource(cl.gvr(sent)).Namespace(sent.GetNamespace()).Update(ctx, sent, metav1.UpdateOptions{DryRun: dry})
	case admissionv1.Delete:
		err = client.Resource(cl.gvr(old)).Namespace(old.GetNamespace()).Delete(ctx, old.GetName(), metav1.DeleteOptions{DryRun: dry})
	default:
		return Result{}, fmt.Errorf("operation %s: only CREATE, UPDATE and DELETE are sent through an API server", c.operation())
	}
	res := Result{Allowed: err == nil, Warnings: warnings.list()}
	if err != nil {
		var status apierrors.APIStatus
		if !errors.As(err, &status) {
			return res, err
		}
		res.Message, res.Code = status.Status().Message, status.Status().Code
		if m := deniedBy.FindStringSubmatch(res.Message); m != nil {
			res.Webhook = m[1] + m[2]
		}
		return res, nil
	}
	if got != nil {
		res.Object = got.Object
		res.Patch, err = changes(sent, got)
	}
	return res, err
}

// deniedBy finds the webhook or policy in a denial's message.
var deniedBy = regexp.MustCompile(`admission webhook "([^"]+)" denied|ValidatingAdmissionPolicy '([^']+)'`)

// changes are the JSON patch operations from what was sent to what the API
// server answered: the mutations, among what the server itself fills in.
func changes(sent, got *unstructured.Unstructured) ([]PatchOp, error) {
	a, err := json.Marshal(sent.Object)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(got.Object)
	if err != nil {
		return nil, err
	}
	ops, err := jsonpatch.CreatePatch(a, b)
	if err != nil {
		return nil, err
	}
	out := make([]PatchOp, 0, len(ops))
	for _, op := range ops {
		v, err := json.Marshal(op.Value)
		if err != nil {
			return nil, err
		}
		p := PatchOp{Op: op.Operation, Path: op.Path}
		if op.Operation != "remove" {
			p.Value = v
		}
		out = append(out, p)
	}
	return out, nil
}

// namespace gives a namespaced object without one the default namespace.
func (cl *Cluster) namespace(u *unstructured.Unstructured) error {
	m, err := cl.mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
	if err != nil {
		return fmt.Errorf("%s: the API server does not serve it: %w", u.GetKind(), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace && u.GetNamespace() == "" {
		u.SetNamespace(metav1.NamespaceDefault)
	}
	return nil
}

func (cl *Cluster) gvr(u *unstructured.Unstructured) (gvr schema.GroupVersionResource) {
	m, err := cl.mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
	if err != nil {
		return gvr
	}
	return m.Resource
}

func (cl *Cluster) resource(u *unstructured.Unstructured) dynamic.ResourceInterface {
	r := cl.admin.Resource(cl.gvr(u))
	if u.GetNamespace() != "" {
		return r.Namespace(u.GetNamespace())
	}
	return r
}

// as is the config of the case's user, impersonated (the config's own when
// the case names none), recording the warnings the API server answers.
func (cl *Cluster) as(u *User) (*rest.Config, *warningList) {
	cfg := rest.CopyConfig(cl.config)
	if u != nil {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: u.Username, Groups: u.Groups}
	}
	w := &warningList{}
	cfg.WarningHandler = w
	return cfg, w
}

type warningList struct {
	mu sync.Mutex
	ws []string
}

func (w *warningList) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ws = append(w.ws, text)
}

func (w *warningList) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ws)
}

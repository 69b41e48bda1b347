package policytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/runtime/callctx"
	"github.com/vigilkit/vigil/internal/serving/admit"
	"github.com/vigilkit/vigil/store"
)

// Result is how a module answered a case's request.
type Result struct {
	Allowed bool
	// Message is the denial's; Code its HTTP status.
	Message string
	Code    int32
	// Webhook is the webhook that denied.
	Webhook  string
	Warnings []string
	// Patch are the mutations' operations, in the order their webhooks ran.
	Patch []PatchOp
	// Webhooks are the module's webhooks that saw the request, in order.
	Webhooks []string
	// Object is the object as admitted: the case's with the patch applied.
	Object map[string]any
}

// DefaultUser sends a case's request when it names no user.
var DefaultUser = User{Username: "policy-test", Groups: []string{"system:authenticated"}}

// Run sends the case's request through the module's webhooks in process:
// mutations, capability by capability in declaration order, then the
// validations of every capability, each webhook only if the API server would
// call it. The first denial answers. The module's listers read the case's
// objects; its Store holds the case's keys; handlers have no API server
// (ClientFrom returns nil).
func Run(ctx context.Context, m *spec.Module, c Case) (Result, error) {
	req, err := request(m, c)
	if err != nil {
		return Result{}, err
	}
	res, err := Send(ctx, m, req, c.Objects, c.Store)
	if err != nil {
		return res, fmt.Errorf("case %s: %w", c.Name, err)
	}
	return res, nil
}

// Send is Run of one AdmissionRequest, as the API server would send it to
// the module's webhooks, with objects for its listers and store for its
// Store (keys as stored). The request's object is patched as the mutations
// answer.
func Send(ctx context.Context, m *spec.Module, req *admissionv1.AdmissionRequest, objects []map[string]any, keys map[string]string) (res Result, err error) {
	reader, namespaces, err := listers(m, objects)
	if err != nil {
		return Result{}, fmt.Errorf("objects: %w", err)
	}
	st := newMemory(keys)
	role := &callctx.Role{Scheme: m.Scheme, Module: st.scope(""), Scope: st.scope}
	role.SetCache(reader, nil)
	h := admit.NewHandler(m.Bindings, admit.Options{
		Module:        m.Name,
		FailurePolicy: m.FailurePolicy,
		Policies:      m.Policies(),
		Timeout:       m.BindingTimeout(),
		Store:         st.scope,
		Log:           logr.Discard(),
		Context: func(ctx context.Context, s store.Store) context.Context {
			return callctx.With(ctx, role, s)
		},
	})
	res.Allowed = true
	defer func() { res.Warnings = dedupe(res.Warnings) }()
	if len(req.Object.Raw) > 0 {
		if err := json.Unmarshal(req.Object.Raw, &res.Object); err != nil {
			return res, fmt.Errorf("the request's object: %w", err)
		}
	}
	for _, action := range []spec.Action{spec.Mutate, spec.Validate} {
		if action == spec.Validate {
			// The API server's own policies (the module's checks) come
			// before the validating webhooks.
			denied, err := applyChecks(m, req, namespaces, &res)
			if err != nil || denied {
				return res, err
			}
		}
		for _, cap := range m.Capabilities {
			if !calls(m, cap, action, req, namespaces) {
				continue
			}
			name := spec.WebhookName(m.Name, cap.Name, action)
			res.Webhooks = append(res.Webhooks, name)
			resp, err := send(ctx, h, admit.CapabilityPath(action, m.Name, cap.Name), req)
			if err != nil {
				return res, fmt.Errorf("webhook %s: %w", name, err)
			}
			res.Warnings = append(res.Warnings, resp.Warnings...)
			if !resp.Allowed {
				res.Allowed, res.Webhook = false, name
				if resp.Result != nil {
					res.Message, res.Code = resp.Result.Message, resp.Result.Code
				}
				return res, nil
			}
			if len(resp.Patch) > 0 {
				if err := applyPatch(req, &res, resp.Patch); err != nil {
					return res, fmt.Errorf("webhook %s: %w", name, err)
				}
			}
		}
	}
	return res, nil
}

// calls reports whether the API server calls capability cap's webhook of
// action for req: one of its bindings of that action is for the request's
// kind and operation, and the exclusions the webhook is registered with
// (namespaces, opt-out label, the module's gated objects) let it through.
func calls(m *spec.Module, cap spec.Capability, action spec.Action, req *admissionv1.AdmissionRequest, namespaces map[string]map[string]any) bool {
	served := slices.ContainsFunc(m.Bindings, func(b spec.Binding) bool {
		return b.Capability == cap.Name && b.Action == action && admit.Serves(&b, req)
	})
	if !served {
		return false
	}
	return m.ExclusionPolicy().Of(m.Name, cap).Admits(exclusionRequest(req, namespaceLabels(namespaces[req.Namespace])))
}

// exclusionRequest is req as the exclusion policy sees it, in a namespace
// with these labels.
func exclusionRequest(req *admissionv1.AdmissionRequest, nsLabels map[string]string) spec.AdmissionRequest {
	return spec.AdmissionRequest{
		Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind,
		Namespace: req.Namespace, Name: req.Name,
		Labels: objectMeta(req).GetLabels(), NamespaceLabels: nsLabels,
	}
}

// namespaceLabels are the labels of a Namespace object; nil for none.
func namespaceLabels(ns map[string]any) map[string]string {
	if ns == nil {
		return nil
	}
	return (&unstructured.Unstructured{Object: ns}).GetLabels()
}

// RefusedByChecks is the first of the module's checks that refuses req, as
// the API server evaluates them after the mutating webhooks: its policy's
// name and the API server's message; empty when none refuses. ns is req's
// Namespace object (nil when unknown: then only its name label is seen).
func RefusedByChecks(m *spec.Module, req *admissionv1.AdmissionRequest, ns map[string]any) (policy, message string, err error) {
	var namespaces map[string]map[string]any
	if ns != nil {
		namespaces = map[string]map[string]any{req.Namespace: ns}
	}
	var res Result
	denied, err := applyChecks(m, req, namespaces, &res)
	if err != nil || !denied {
		return "", "", err
	}
	return res.Webhook, res.Message, nil
}

// applyChecks runs the module's checks on req into res: their warnings,
// and the first denial, which answers.
func applyChecks(m *spec.Module, req *admissionv1.AdmissionRequest, namespaces map[string]map[string]any, res *Result) (denied bool, err error) {
	answers, err := runChecks(m, req, namespaces)
	if err != nil {
		return false, err
	}
	for _, a := range answers {
		if a.warn {
			res.Warnings = append(res.Warnings, fmt.Sprintf("Validation failed for ValidatingAdmissionPolicy '%s' with binding '%s': %s", a.policy, a.policy, a.message))
			continue
		}
		res.Allowed, res.Webhook, res.Code = false, a.policy, 422
		res.Message = fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", a.policy, a.policy, a.message)
		return true, nil
	}
	return false, nil
}

// dedupe drops repeated warnings, as the API server does.
func dedupe(ws []string) []string {
	seen := map[string]bool{}
	return slices.DeleteFunc(ws, func(w string) bool {
		if seen[w] {
			return true
		}
		seen[w] = true
		return false
	})
}

// objectMeta is the metadata of the request's object (its old one for a
// DELETE).
func objectMeta(req *admissionv1.AdmissionRequest) *metav1.PartialObjectMetadata {
	raw := req.Object.Raw
	if len(raw) == 0 {
		raw = req.OldObject.Raw
	}
	var meta metav1.PartialObjectMetadata
	_ = json.Unmarshal(raw, &meta)
	return &meta
}

// send posts req as an AdmissionReview to path and reads the answer.
func send(ctx context.Context, h http.Handler, path string, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	}
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		return nil, fmt.Errorf("answered %d: %s", w.Code, strings.TrimSpace(w.Body.String()))
	}
	var answer admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil || answer.Response == nil {
		return nil, fmt.Errorf("answered no AdmissionReview response: %s", w.Body.String())
	}
	return answer.Response, nil
}

// applyPatch applies a mutating webhook's patch to the request's object, as
// the API server does before it calls the next webhook.
func applyPatch(req *admissionv1.AdmissionRequest, res *Result, patch []byte) error {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return fmt.Errorf("its patch does not decode: %w", err)
	}
	patched, err := p.Apply(req.Object.Raw)
	if err != nil {
		return fmt.Errorf("its patch does not apply to the object: %w", err)
	}
	var ops []PatchOp
	if err := json.Unmarshal(patch, &ops); err != nil {
		return err
	}
	res.Patch = append(res.Patch, ops...)
	req.Object.Raw = patched
	res.Object = nil
	return json.Unmarshal(patched, &res.Object)
}

// request is the AdmissionRequest of a case, as the API server would send
// it.
func request(m *spec.Module, c Case) (*admissionv1.AdmissionRequest, error) {
	// The case's objects are the caller's: a namespace filled in goes on
	// copies.
	if c.Object != nil {
		c.Object = runtime.DeepCopyJSON(c.Object)
	}
	if c.OldObject != nil {
		c.OldObject = runtime.DeepCopyJSON(c.OldObject)
	}
	obj := c.Object
	if obj == nil {
		obj = c.OldObject
	}
	u := unstructured.Unstructured{Object: obj}
	gvk := u.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, fmt.Errorf("case %s: the object has no apiVersion and kind: expected them, as in apiVersion: v1 and kind: Pod", c.Name)
	}
	ns := u.GetNamespace()
	scope := spec.ScopeOf(gvk.Group, gvk.Kind)
	switch {
	case gvk.Group == "" && gvk.Kind == "Namespace":
		ns = u.GetName()
	case ns == "" && scope == spec.Namespaced:
		ns = metav1.NamespaceDefault
		for _, o := range []map[string]any{c.Object, c.OldObject} {
			if o != nil {
				unstructured.SetNestedField(o, ns, "metadata", "namespace")
			}
		}
	}
	user := DefaultUser
	if c.User != nil {
		user = *c.User
	}
	dryRun := c.DryRun
	gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resourceOf(m, gvk)}
	req := &admissionv1.AdmissionRequest{
		UID:             types.UID("policy-test-" + c.Name),
		Kind:            metav1.GroupVersionKind(gvk),
		Resource:        metav1.GroupVersionResource(gvr),
		SubResource:     c.SubResource,
		RequestKind:     ptr(metav1.GroupVersionKind(gvk)),
		RequestResource: ptr(metav1.GroupVersionResource(gvr)),
		Name:            u.GetName(),
		Namespace:       ns,
		Operation:       c.operation(),
		UserInfo:        authenticationv1.UserInfo{Username: user.Username, Groups: user.Groups},
		DryRun:          &dryRun,
	}
	var err error
	if c.Object != nil && req.Operation != admissionv1.Delete {
		if req.Object.Raw, err = json.Marshal(c.Object); err != nil {
			return nil, err
		}
	}
	if c.OldObject != nil {
		if req.OldObject.Raw, err = json.Marshal(c.OldObject); err != nil {
			return nil, err
		}
	}
	return req, nil
}

func ptr[T any](v T) *T { return &v }

// resourceOf is the resource of a kind: the one a binding of the module
// names, else Kubernetes' guess.
func resourceOf(m *spec.Module, gvk schema.GroupVersionKind) string {
	for i := range m.Bindings {
		if b := &m.Bindings[i]; b.GVK == gvk && b.Parent.Empty() {
			return strings.SplitN(b.Resource(), "/", 2)[0]
		}
	}
	return m.ResourceOf(gvk)
}

// listers is a reader of the case's objects, for the module's listers, and
// the Namespaces among them, by name, each with the kubernetes.io/metadata.name
// label the API server gives every one.
func listers(m *spec.Module, objects []map[string]any) (client.Reader, map[string]map[string]any, error) {
	namespaces := map[string]map[string]any{}
	var objs []client.Object
	for i, o := range objects {
		u := &unstructured.Unstructured{Object: o}
		gvk := u.GroupVersionKind()
		if gvk.Kind == "" || u.GetName() == "" {
			return nil, nil, fmt.Errorf("objects[%d]: expected apiVersion, kind and metadata.name", i)
		}
		if gvk.Group == "" && gvk.Kind == "Namespace" {
			labels := map[string]string{corev1.LabelMetadataName: u.GetName()}
			for k, v := range u.GetLabels() {
				labels[k] = v
			}
			u.SetLabels(labels)
			namespaces[u.GetName()] = u.Object
		}
		if u.GetNamespace() == "" && spec.ScopeOf(gvk.Group, gvk.Kind) == spec.Namespaced {
			u.SetNamespace(metav1.NamespaceDefault)
		}
		obj, err := typed(m.Scheme, u)
		if err != nil {
			return nil, nil, fmt.Errorf("objects[%d] (%s %s): %w", i, gvk.Kind, u.GetName(), err)
		}
		objs = append(objs, obj)
	}
	s := m.Scheme
	if s == nil {
		s = runtime.NewScheme()
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build(), namespaces, nil
}

// typed is u as the scheme's Go type for its kind, when it has one.
func typed(s *runtime.Scheme, u *unstructured.Unstructured) (client.Object, error) {
	if s == nil || !s.Recognizes(u.GroupVersionKind()) {
		return u, nil
	}
	obj, err := s.New(u.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	if _, isU := obj.(*unstructured.Unstructured); isU {
		return u, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return nil, fmt.Errorf("does not decode as %T: %w", obj, err)
	}
	co, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%T is not an object", obj)
	}
	co.GetObjectKind().SetGroupVersionKind(u.GroupVersionKind())
	return co, nil
}

package registration

import (
	"context"
	"encoding/json"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil/internal/runtime/served"
)

// StampAPI reads and writes MutatingAdmissionPolicies and their bindings in
// the API version the cluster serves (v1, v1beta1 or v1alpha1, whose fields
// are the same), speaking the v1 types to its callers.
type StampAPI struct {
	rest    rest.Interface
	version string
}

// NewStampAPI returns the StampAPI of cluster, or the error that says what
// to enable when it serves no version of MutatingAdmissionPolicy.
func NewStampAPI(cs kubernetes.Interface, cluster served.Cluster, feature string) (*StampAPI, error) {
	if err := cluster.Missing(feature, served.MutatingAdmissionPolicy); err != nil {
		return nil, err
	}
	v := cluster.Version(served.MutatingAdmissionPolicy)
	var rc rest.Interface
	switch v {
	case "v1":
		rc = cs.AdmissionregistrationV1().RESTClient()
	case "v1beta1":
		rc = cs.AdmissionregistrationV1beta1().RESTClient()
	case "v1alpha1":
		rc = cs.AdmissionregistrationV1alpha1().RESTClient()
	default:
		return nil, fmt.Errorf("MutatingAdmissionPolicy: vigil does not speak %s/%s", served.Group, v)
	}
	return &StampAPI{rest: rc, version: v}, nil
}

// APIVersion is the group and version the API writes.
func (a *StampAPI) APIVersion() string { return served.Group + "/" + a.version }

// GetPolicy reads the policy called name; a NotFound error when absent.
func (a *StampAPI) GetPolicy(ctx context.Context, name string) (*admissionregistrationv1.MutatingAdmissionPolicy, error) {
	out := &admissionregistrationv1.MutatingAdmissionPolicy{}
	return out, a.do(ctx, "GET", "mutatingadmissionpolicies", name, nil, out)
}

// GetBinding reads the binding called name; a NotFound error when absent.
func (a *StampAPI) GetBinding(ctx context.Context, name string) (*admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	out := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
	return out, a.do(ctx, "GET", "mutatingadmissionpolicybindings", name, nil, out)
}

// Apply creates p and its binding b, or brings them back in line, with
// fieldManager; keep, when set, is asked before an existing policy is
// changed, and a false answer leaves the pair as it is.
func (a *StampAPI) Apply(ctx context.Context, p *admissionregistrationv1.MutatingAdmissionPolicy, b *admissionregistrationv1.MutatingAdmissionPolicyBinding, fieldManager string, keep func(cur metav1.Object) bool) error {
	if err := a.apply(ctx, "mutatingadmissionpolicies", "MutatingAdmissionPolicy", p, &p.ObjectMeta, fieldManager, keep); err != nil {
		return err
	}
	return a.apply(ctx, "mutatingadmissionpolicybindings", "MutatingAdmissionPolicyBinding", b, &b.ObjectMeta, fieldManager, nil)
}

func (a *StampAPI) apply(ctx context.Context, resource, kind string, obj any, meta *metav1.ObjectMeta, fieldManager string, keep func(metav1.Object) bool) error {
	cur := &metav1.PartialObjectMetadata{}
	switch err := a.do(ctx, "GET", resource, meta.Name, nil, cur); {
	case apierrors.IsNotFound(err):
		if err := a.do(ctx, "POST", resource, "", obj, nil, "fieldManager", fieldManager); err != nil {
			return fmt.Errorf("create %s %s (%s): %w", kind, meta.Name, a.APIVersion(), err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("get %s %s (%s): %w", kind, meta.Name, a.APIVersion(), err)
	}
	if keep != nil && !keep(cur) {
		return nil
	}
	meta.ResourceVersion = cur.ResourceVersion
	if err := a.do(ctx, "PUT", resource, meta.Name, obj, nil, "fieldManager", fieldManager); err != nil {
		return fmt.Errorf("update %s %s (%s): %w", kind, meta.Name, a.APIVersion(), err)
	}
	return nil
}

// do sends body (a v1 object, sent with the API's version) and decodes the
// answer into out.
func (a *StampAPI) do(ctx context.Context, verb, resource, name string, body, out any, params ...string) error {
	req := a.rest.Verb(verb).Resource(resource)
	if name != "" {
		req = req.Name(name)
	}
	for i := 0; i+1 < len(params); i += 2 {
		req = req.Param(params[i], params[i+1])
	}
	if body != nil {
		obj := map[string]any{}
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, &obj); err != nil {
			return err
		}
		obj["apiVersion"] = a.APIVersion()
		if data, err = json.Marshal(obj); err != nil {
			return err
		}
		req = req.SetHeader("Content-Type", "application/json").Body(data)
	}
	raw, err := req.Do(ctx).Raw()
	if err != nil {
		return err
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// StampKind is one of the two kinds StampAPI lists and deletes.
type StampKind string

// The two kinds, by resource.
const (
	StampPolicies StampKind = "mutatingadmissionpolicies"
	StampBindings StampKind = "mutatingadmissionpolicybindings"
)

// List returns the metadata of the objects of kind that selector matches.
func (a *StampAPI) List(ctx context.Context, kind StampKind, selector string) ([]metav1.PartialObjectMetadata, error) {
	out := &metav1.PartialObjectMetadataList{}
	if err := a.do(ctx, "GET", string(kind), "", nil, out, "labelSelector", selector); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// Delete deletes the object of kind called name, if its UID is uid.
func (a *StampAPI) Delete(ctx context.Context, kind StampKind, name string, uid types.UID) error {
	return a.do(ctx, "DELETE", string(kind), name, &metav1.DeleteOptions{
		TypeMeta:      metav1.TypeMeta{Kind: "DeleteOptions"},
		Preconditions: &metav1.Preconditions{UID: &uid},
	}, nil)
}

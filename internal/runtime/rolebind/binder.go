package rolebind

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// Binder binds a role's rights in a namespace other than the module's there,
// once the namespace exists: the manifests ship them as a ClusterRole
// (spec.NamespaceRoleName), because a module is installed before the teams'
// namespaces it governs. The role's clients bind them on the first refusal
// there (Instrument); an informer of such a namespace that the API server
// refuses asks the Binder whether it exists: while it does not, the informer
// holds it empty and waits for it, instead of failing (ListWatch).
type Binder struct {
	c         kubernetes.Interface
	sa, saNS  string
	component string
	log       logr.Logger
}

// NewBinder is the Binder of the role pod (spec.PodAdmission or
// spec.PodWatcher) of module, whose ServiceAccount is in namespace; it logs
// a binding it had to mend to log.
func NewBinder(cfg *rest.Config, module, pod, namespace string, log logr.Logger) (*Binder, error) {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Binder{c: c, sa: spec.ServiceAccount(module, pod), saNS: namespace, component: pod, log: log}, nil
}

// Bind creates the role's RoleBinding in ns when ns exists; exists is false
// while it does not, created true when this call made the binding. An error
// says why it cannot bind: the namespace is not one the module has rights
// in, say.
func (b *Binder) Bind(ctx context.Context, ns string) (exists, created bool, err error) {
	if _, err := b.c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return false, false, nil
	} else if err != nil {
		return true, false, fmt.Errorf("namespace %s: %w", ns, err)
	}
	name := spec.NamespaceRoleName(b.sa, ns)
	cr, err := b.c.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return true, false, fmt.Errorf("the rights of %s in namespace %s, ClusterRole %s: %w", b.sa, ns, name, err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{
			Name: spec.BindingName(b.sa), Namespace: ns,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "vigil", "app.kubernetes.io/component": b.component},
			// Removed with the module's ClusterRole when it is uninstalled.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: cr.Name, UID: cr.UID}},
		},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: b.sa, Namespace: b.saNS}},
	}
	_, err = b.c.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{FieldManager: "vigil"})
	switch {
	case apierrors.IsAlreadyExists(err):
		return b.mend(ctx, rb)
	case err != nil:
		return true, false, fmt.Errorf("bind ClusterRole %s in namespace %s: %w", name, ns, err)
	}
	return true, true, nil
}

// mend: a RoleBinding by the role's binding's name is there already. It is
// the role's own when it binds the namespace's ClusterRole to the role's
// ServiceAccount alone; anything else under that name (a namespace's admin
// may create RoleBindings there, and take the name first) would keep the
// role refused in the namespace for good, so it is replaced by want, and
// the role logs whose it was.
func (b *Binder) mend(ctx context.Context, want *rbacv1.RoleBinding) (exists, created bool, err error) {
	rbs := b.c.RbacV1().RoleBindings(want.Namespace)
	got, err := rbs.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// Deleted since the create: bind again.
		if _, err := rbs.Create(ctx, want, metav1.CreateOptions{FieldManager: "vigil"}); err != nil && !apierrors.IsAlreadyExists(err) {
			return true, false, fmt.Errorf("bind ClusterRole %s in namespace %s: %w", want.RoleRef.Name, want.Namespace, err)
		}
		return true, true, nil
	case err != nil:
		return true, false, fmt.Errorf("read RoleBinding %s in namespace %s: %w", want.Name, want.Namespace, err)
	}
	if binds(got, want) {
		return true, false, nil
	}
	b.log.Info("replacing a RoleBinding under the role's binding's name that does not bind its rights",
		"namespace", got.Namespace, "roleBinding", got.Name, "roleRef", got.RoleRef.Kind+"/"+got.RoleRef.Name,
		"subjects", len(got.Subjects), "createdBy", managers(got), "want", want.RoleRef.Name)
	// The delete is conditional on the binding read: one changed since is
	// judged again on the role's next refusal.
	err = rbs.Delete(ctx, got.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &got.UID, ResourceVersion: &got.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) {
		return true, false, fmt.Errorf("replace RoleBinding %s in namespace %s, which does not bind %s to %s: %w", got.Name, got.Namespace, want.RoleRef.Name, b.sa, err)
	}
	if _, err := rbs.Create(ctx, want, metav1.CreateOptions{FieldManager: "vigil"}); err != nil {
		return true, false, fmt.Errorf("bind ClusterRole %s in namespace %s: %w", want.RoleRef.Name, want.Namespace, err)
	}
	return true, true, nil
}

// binds reports whether got binds what want does: the same role, to the
// same subjects and no other.
func binds(got, want *rbacv1.RoleBinding) bool {
	if got.RoleRef != want.RoleRef || len(got.Subjects) != len(want.Subjects) {
		return false
	}
	for i := range want.Subjects {
		if got.Subjects[i] != want.Subjects[i] {
			return false
		}
	}
	return true
}

// managers are the field managers that wrote rb, for the log.
func managers(rb *rbacv1.RoleBinding) []string {
	var out []string
	for _, f := range rb.ManagedFields {
		out = append(out, f.Manager)
	}
	return out
}

// Instrument is cfg with a request the API server refuses in a namespace
// the role has rights in, before the role has bound them there, tried again
// once the Binder has: the role's clients (its audit's, its handlers') act in a
// team's namespace from the moment it exists. The Binder's own requests do
// not go through it.
func (b *Binder) Instrument(cfg *rest.Config) *rest.Config {
	if b == nil {
		return cfg
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { return &bindingTransport{next: next, b: b} })
	return cfg
}

type bindingTransport struct {
	next http.RoundTripper
	b    *Binder
}

func (t *bindingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusForbidden || (req.Body != nil && req.GetBody == nil) {
		return resp, err
	}
	ns := namespaceOf(req.URL.Path)
	if ns == "" || ns == t.b.saNS {
		return resp, err
	}
	ctx := req.Context()
	if _, created, berr := t.b.Bind(ctx, ns); berr != nil || !created {
		return resp, err // not bound just now: the refusal stands
	}
	deadline := time.Now().Add(bindSettle)
	for {
		retry := req.Clone(ctx)
		if req.GetBody != nil {
			body, berr := req.GetBody()
			if berr != nil {
				return resp, err
			}
			retry.Body = body
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		resp, err = t.next.RoundTrip(retry)
		if err != nil || resp.StatusCode != http.StatusForbidden || !time.Now().Before(deadline) {
			return resp, err
		}
		if sleep(ctx, 100*time.Millisecond) != nil {
			return resp, err
		}
	}
}

// namespaceOf is the namespace of a request on a namespaced resource
// (.../namespaces/<ns>/<resource>...), or "".
func namespaceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i+2 < len(parts); i++ {
		if parts[i] == "namespaces" && (i == 2 && parts[0] == "api" || i == 3 && parts[0] == "apis") {
			return parts[i+1]
		}
	}
	return ""
}

package locate

import (
	"context"
	"fmt"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// partOf is the label a module's objects carry with its name.
const partOf = "app.kubernetes.io/part-of"

// Homes are the namespaces the modules' cluster-scoped objects name.
type Homes struct {
	// Named holds, per module and namespace, the objects that name it.
	Named map[string]map[string][]string
	// Missing says what could not be read, for lack of a right, with the
	// verb and resource to grant.
	Missing []string
}

// Read reads the namespaces the cluster-scoped objects of modules name.
// Only an error other than a missing right fails it.
func Read(ctx context.Context, cs kubernetes.Interface, modules []string) (*Homes, error) {
	h := &Homes{Named: map[string]map[string][]string{}}
	if len(modules) == 0 {
		return h, nil
	}
	sel := metav1.ListOptions{LabelSelector: partOf + " in (" + strings.Join(modules, ",") + ")"}
	name := func(mod, ns, by string) {
		if mod == "" || ns == "" {
			return
		}
		if h.Named[mod] == nil {
			h.Named[mod] = map[string][]string{}
		}
		h.Named[mod][ns] = append(h.Named[mod][ns], by)
	}
	hooked := map[string]bool{}
	muts, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, sel)
	if err := h.refused(err, "list", "mutatingwebhookconfigurations.admissionregistration.k8s.io"); err != nil {
		return nil, err
	}
	if err == nil {
		for _, c := range muts.Items {
			for _, w := range c.Webhooks {
				if s := w.ClientConfig.Service; s != nil {
					name(c.Labels[partOf], s.Namespace, fmt.Sprintf("mutating webhook configuration %s calls Service %s/%s", c.Name, s.Namespace, s.Name))
					hooked[c.Labels[partOf]] = true
				}
			}
		}
	}
	vals, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, sel)
	if err := h.refused(err, "list", "validatingwebhookconfigurations.admissionregistration.k8s.io"); err != nil {
		return nil, err
	}
	if err == nil {
		for _, c := range vals.Items {
			for _, w := range c.Webhooks {
				if s := w.ClientConfig.Service; s != nil {
					name(c.Labels[partOf], s.Namespace, fmt.Sprintf("validating webhook configuration %s calls Service %s/%s", c.Name, s.Namespace, s.Name))
					hooked[c.Labels[partOf]] = true
				}
			}
		}
	}
	unhooked := false
	for _, m := range modules {
		unhooked = unhooked || !hooked[m]
	}
	if !unhooked {
		return h.sorted(), nil
	}
	crbs, err := cs.RbacV1().ClusterRoleBindings().List(ctx, sel)
	if err := h.refused(err, "list", "clusterrolebindings.rbac.authorization.k8s.io"); err != nil {
		return nil, err
	}
	if err == nil {
		for _, b := range crbs.Items {
			mod := b.Labels[partOf]
			if hooked[mod] {
				continue
			}
			for _, s := range b.Subjects {
				if s.Kind == rbacv1.ServiceAccountKind {
					name(mod, s.Namespace, fmt.Sprintf("ClusterRoleBinding %s binds ServiceAccount %s/%s", b.Name, s.Namespace, s.Name))
				}
			}
		}
	}
	return h.sorted(), nil
}

// refused records a missing right; it returns any other error.
func (h *Homes) refused(err error, verb, resource string) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err):
		h.Missing = append(h.Missing, fmt.Sprintf("%s %s (cluster-wide): %v", verb, resource, err))
		return nil
	default:
		return fmt.Errorf("%s %s: %w", verb, resource, err)
	}
}

func (h *Homes) sorted() *Homes {
	for _, byNS := range h.Named {
		for ns := range byNS {
			sort.Strings(byNS[ns])
		}
	}
	return h
}

// Sorted are the namespaces where Deployments labelled as a module's are,
// sorted by what its cluster-scoped objects say.
type Sorted struct {
	// Believed are the candidates its objects name, each with why.
	Believed []Namespace
	// NotBelieved are the candidates its objects do not name, each with
	// why.
	NotBelieved []Namespace
	// Unconfirmed says why no candidate could be confirmed (nothing names
	// a namespace, or the objects could not be read); Believed is then
	// every candidate, none confirmed.
	Unconfirmed string
}

// Namespace is a candidate and why it is, or is not, believed.
type Namespace struct {
	Name string
	Why  string
}

// Sort sorts candidates, the namespaces where Deployments labelled as
// module's are, by the namespaces its cluster-scoped objects name.
func (h *Homes) Sort(module string, candidates []string) Sorted {
	var s Sorted
	named := h.Named[module]
	if len(named) == 0 {
		s.Unconfirmed = fmt.Sprintf("no webhook configuration or ClusterRoleBinding labelled %s=%s names a namespace", partOf, module)
		if len(h.Missing) > 0 {
			s.Unconfirmed = fmt.Sprintf("its webhook configurations and ClusterRoleBindings could not be read (%s)", h.Missing[0])
		}
		for _, c := range candidates {
			s.Believed = append(s.Believed, Namespace{Name: c, Why: "not confirmed: " + s.Unconfirmed})
		}
		return s
	}
	var names []string
	for ns := range named {
		names = append(names, ns)
	}
	sort.Strings(names)
	for _, c := range candidates {
		if by, ok := named[c]; ok {
			s.Believed = append(s.Believed, Namespace{Name: c, Why: strings.Join(by, "; ")})
			continue
		}
		s.NotBelieved = append(s.NotBelieved, Namespace{Name: c, Why: fmt.Sprintf("module %s's cluster-scoped objects, which only its install writes, name namespace %s, not %s: %s",
			module, strings.Join(names, ", "), c, strings.Join(named[names[0]], "; "))})
	}
	return s
}

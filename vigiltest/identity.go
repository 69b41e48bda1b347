package vigiltest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Identities come in pairs: AsX returns a client that acts as X, AsXConfig the
// config under it (for a clientset, a store, a kubeconfig file).

// AsUserConfig returns a copy of the admin config that impersonates the given
// user and groups, so that the API server authorizes each request as theirs.
func (e *Env) AsUserConfig(user string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}

// AsUser returns a client over AsUserConfig, with the Env's scheme.
func (e *Env) AsUser(user string, groups ...string) (client.Client, error) {
	c, err := client.New(e.AsUserConfig(user, groups...), client.Options{Scheme: e.Scheme})
	if err != nil {
		return nil, fmt.Errorf("client as user %s: %w", user, err)
	}
	return c, nil
}

// AsServiceAccountConfig returns a config that acts as the ServiceAccount, with
// the groups the API server gives a ServiceAccount's token.
func (e *Env) AsServiceAccountConfig(namespace, name string) *rest.Config {
	return e.AsUserConfig(serviceaccount.MakeUsername(namespace, name), serviceaccount.MakeGroupNames(namespace)...)
}

// AsServiceAccount returns a client that acts as the ServiceAccount, for tests
// that a module's RBAC grants what it needs and nothing more. The ServiceAccount
// itself need not exist: RBAC binds to its name.
func (e *Env) AsServiceAccount(namespace, name string) (client.Client, error) {
	c, err := client.New(e.AsServiceAccountConfig(namespace, name), client.Options{Scheme: e.Scheme})
	if err != nil {
		return nil, fmt.Errorf("client as serviceaccount %s/%s: %w", namespace, name, err)
	}
	return c, nil
}

// AsTenant returns a client of user, who may do in namespace ns only what
// rules allow — a tenant of a self-service namespace, for tests that a
// policy holds against a user with few rights. It creates a Role and a
// RoleBinding named after the user in ns, removed when the test ends, and
// returns once the API server authorizes the first rule's first verb.
func (e *Env) AsTenant(t testing.TB, ns, user string, rules ...rbacv1.PolicyRule) client.Client {
	t.Helper()
	if len(rules) == 0 || len(rules[0].Verbs) == 0 || len(rules[0].Resources) == 0 {
		t.Fatalf("AsTenant(%s, %s): expected at least one rule with a verb and a resource, as in {APIGroups: [\"\"], Resources: [\"pods\"], Verbs: [\"create\"]}", ns, user)
	}
	ctx := t.Context()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: rules}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatalf("AsTenant: create %T %s/%s: %v", o, ns, user, err)
		}
		t.Cleanup(func() { _ = e.Client.Delete(context.Background(), o) })
	}
	r := rules[0]
	group := ""
	if len(r.APIGroups) > 0 {
		group = r.APIGroups[0]
	}
	resource, sub, _ := strings.Cut(r.Resources[0], "/")
	Eventually(t, 10*time.Second, func() error {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: r.Verbs[0], Group: group, Resource: resource, Subresource: sub}}}
		if err := e.Client.Create(ctx, review); err != nil {
			return err
		}
		if !review.Status.Allowed {
			return fmt.Errorf("user %s may not yet %s %s in %s", user, r.Verbs[0], r.Resources[0], ns)
		}
		return nil
	})
	c, err := e.AsUser(user)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

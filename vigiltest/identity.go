package vigiltest

import (
	"fmt"

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

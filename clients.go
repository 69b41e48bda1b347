package vigil

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// roleClients is the API access a role's process hands its handlers: its
// config, and a client made from it on first use.
type roleClients struct {
	cfg    *rest.Config
	scheme *runtime.Scheme

	once sync.Once
	c    client.Client
}

type clientsKey struct{}

func withClients(ctx context.Context, rc *roleClients) context.Context {
	return context.WithValue(ctx, clientsKey{}, rc)
}

// ClientFrom returns a client of the API server as the role's process reaches
// it (its --kubeconfig, or the pod's ServiceAccount), for what gate callbacks
// and handlers of every role do beyond vigil: patch a status, create an
// object. Reads go to the API server, not a cache (use a Lister for that).
// Declare what it is used for with RBAC. It is nil outside a callback or
// handler.
func ClientFrom(ctx context.Context) client.Client {
	rc, _ := ctx.Value(clientsKey{}).(*roleClients)
	if rc == nil {
		return nil
	}
	rc.once.Do(func() {
		c, err := client.New(rc.cfg, client.Options{Scheme: rc.scheme})
		if err == nil {
			rc.c = c
		}
	})
	return rc.c
}

// ConfigFrom returns the rest config the role's process runs with, for
// clients of other kinds; nil outside a callback or handler.
func ConfigFrom(ctx context.Context) *rest.Config {
	rc, _ := ctx.Value(clientsKey{}).(*roleClients)
	if rc == nil {
		return nil
	}
	return rest.CopyConfig(rc.cfg)
}

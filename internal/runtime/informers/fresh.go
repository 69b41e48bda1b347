package informers

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/serving/fresh"
)

// Barriers returns the freshness barriers of the listers' types in c, the
// cache StartCache made of them: each selects, in its consistent reads of the
// API server, what the type's informer selects, and gives up after within.
func Barriers(cfg *rest.Config, scheme *runtime.Scheme, c cache.Cache, listers []spec.Lister, within time.Duration) (fresh.Set, error) {
	api, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	set := fresh.Set{}
	for _, a := range spec.Agree(listers) {
		set[fresh.Key{GVK: a.GVK, Metadata: a.Metadata}] = fresh.ForCache(api, c, a.GVK, a.New, fresh.Selection{Namespaces: a.Namespaces, Labels: a.Labels, Name: a.Name}, within)
	}
	return set, nil
}

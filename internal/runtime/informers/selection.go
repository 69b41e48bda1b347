package informers

import (
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/definition/spec"
)

// ByObject turns agreed selections into the cache's per-type options.
func ByObject(agreed []spec.Agreed) (map[client.Object]cache.ByObject, error) {
	out := map[client.Object]cache.ByObject{}
	for _, a := range agreed {
		var by cache.ByObject
		if len(a.Namespaces) > 0 {
			by.Namespaces = map[string]cache.Config{}
			for _, ns := range a.Namespaces {
				by.Namespaces[ns] = cache.Config{}
			}
		}
		if a.Labels != "" {
			sel, err := labels.Parse(a.Labels)
			if err != nil {
				return nil, err
			}
			by.Label = sel
		}
		if a.Name != "" {
			by.Field = fields.OneTermEqualSelector("metadata.name", a.Name)
		}
		out[a.New()] = by
	}
	return out, nil
}

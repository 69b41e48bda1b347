package waitfor

import (
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// lazyMapper maps kinds to resources by asking discovery for the one group
// version it is asked about, not for every group the API server serves: a
// gate that waits for one CRD should not pay, in time and memory, for the
// discovery of the whole cluster. Reset starts it afresh.
type lazyMapper struct {
	cfg *rest.Config
	hc  *http.Client

	mu sync.Mutex
	m  meta.RESTMapper
}

var _ meta.ResettableRESTMapper = (*lazyMapper)(nil)

func newLazyMapper(cfg *rest.Config) (*lazyMapper, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	l := &lazyMapper{cfg: cfg, hc: hc}
	if l.m, err = apiutil.NewDynamicRESTMapper(cfg, hc); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *lazyMapper) mapper() meta.RESTMapper {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m
}

// Reset forgets what discovery said, so that kinds added since are found.
func (l *lazyMapper) Reset() {
	m, err := apiutil.NewDynamicRESTMapper(l.cfg, l.hc)
	if err != nil {
		return // keep the old one; its own misses reload its groups
	}
	l.mu.Lock()
	l.m = m
	l.mu.Unlock()
}

func (l *lazyMapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return l.mapper().KindFor(r)
}

func (l *lazyMapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return l.mapper().KindsFor(r)
}

func (l *lazyMapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return l.mapper().ResourceFor(r)
}

func (l *lazyMapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return l.mapper().ResourcesFor(r)
}

func (l *lazyMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return l.mapper().RESTMapping(gk, versions...)
}

func (l *lazyMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return l.mapper().RESTMappings(gk, versions...)
}

func (l *lazyMapper) ResourceSingularizer(resource string) (string, error) {
	return l.mapper().ResourceSingularizer(resource)
}

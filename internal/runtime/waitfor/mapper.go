package waitfor

import (
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// lazyMapper maps kinds to resources by asking discovery for the one group
// version it is asked about, not for every group the API server serves: a
// gate that waits for one CRD should not pay, in time and memory, for the
// discovery of the whole cluster. Reset starts it afresh.
//
// RESTMapping of a kind in a given version, which is all a wait asks, reads
// that group version's resource list alone (/api/v1, /apis/<group>/<version>).
// Every other question (a resource without its group, a kind in any version,
// as the wait command asks) goes to controller-runtime's dynamic mapper,
// made on first use: its first look-up reads the discovery of every group.
type lazyMapper struct {
	cfg   *rest.Config
	hc    *http.Client
	disco discovery.DiscoveryInterface

	mu  sync.Mutex
	m   meta.RESTMapper                         // nil until a question needs it
	gvs map[schema.GroupVersion]meta.RESTMapper // the group versions read alone
}

var _ meta.ResettableRESTMapper = (*lazyMapper)(nil)

func newLazyMapper(cfg *rest.Config) (*lazyMapper, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	disco, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	return &lazyMapper{cfg: cfg, hc: hc, disco: disco, gvs: map[schema.GroupVersion]meta.RESTMapper{}}, nil
}

// mapper is the dynamic mapper over all groups, made on first use.
func (l *lazyMapper) mapper() (meta.RESTMapper, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		m, err := apiutil.NewDynamicRESTMapper(l.cfg, l.hc)
		if err != nil {
			return nil, err
		}
		l.m = m
	}
	return l.m, nil
}

// Reset forgets what discovery said, so that kinds added since are found.
func (l *lazyMapper) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gvs = map[schema.GroupVersion]meta.RESTMapper{}
	if l.m == nil {
		return
	}
	m, err := apiutil.NewDynamicRESTMapper(l.cfg, l.hc)
	if err != nil {
		return // keep the old one; its own misses reload its groups
	}
	l.m = m
}

// groupVersion maps the kinds of one group version from its resource list
// alone, read again when it does not know the kind (as the dynamic mapper
// reloads a group on a miss).
func (l *lazyMapper) groupVersion(gk schema.GroupKind, version string) (*meta.RESTMapping, error) {
	gv := gk.WithVersion(version).GroupVersion()
	l.mu.Lock()
	m, cached := l.gvs[gv]
	l.mu.Unlock()
	if cached {
		mapping, err := m.RESTMapping(gk, version)
		if !meta.IsNoMatchError(err) {
			return mapping, err
		}
	}
	list, err := l.disco.ServerResourcesForGroupVersion(gv.String())
	if apierrors.IsNotFound(err) {
		l.mu.Lock()
		delete(l.gvs, gv)
		l.mu.Unlock()
		return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: []string{version}}
	}
	if err != nil {
		return nil, err
	}
	forDiscovery := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
	m = restmapper.NewDiscoveryRESTMapper([]*restmapper.APIGroupResources{{
		Group:              metav1.APIGroup{Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{forDiscovery}, PreferredVersion: forDiscovery},
		VersionedResources: map[string][]metav1.APIResource{gv.Version: list.APIResources},
	}})
	l.mu.Lock()
	l.gvs[gv] = m
	l.mu.Unlock()
	return m.RESTMapping(gk, version)
}

func (l *lazyMapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	m, err := l.mapper()
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return m.KindFor(r)
}

func (l *lazyMapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	m, err := l.mapper()
	if err != nil {
		return nil, err
	}
	return m.KindsFor(r)
}

func (l *lazyMapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	m, err := l.mapper()
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return m.ResourceFor(r)
}

func (l *lazyMapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	m, err := l.mapper()
	if err != nil {
		return nil, err
	}
	return m.ResourcesFor(r)
}

func (l *lazyMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) == 1 && versions[0] != "" {
		return l.groupVersion(gk, versions[0])
	}
	m, err := l.mapper()
	if err != nil {
		return nil, err
	}
	return m.RESTMapping(gk, versions...)
}

func (l *lazyMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	m, err := l.mapper()
	if err != nil {
		return nil, err
	}
	return m.RESTMappings(gk, versions...)
}

func (l *lazyMapper) ResourceSingularizer(resource string) (string, error) {
	m, err := l.mapper()
	if err != nil {
		return "", err
	}
	return m.ResourceSingularizer(resource)
}

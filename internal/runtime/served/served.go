package served

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
)

// Group is the API group of every kind here.
const Group = "admissionregistration.k8s.io"

// Kind is a kind whose API version vigil chooses by what is served.
type Kind struct {
	Name     string // MutatingAdmissionPolicy
	Resource string // mutatingadmissionpolicies
	// Versions are the API versions vigil speaks, preferred first, with
	// the release that first serves each and whether it is off until
	// enabled there.
	Versions []Version
}

// Version is an API version of a kind.
type Version struct {
	Name  string // v1beta1
	Since int    // the minor release that added it: 34
	// Gated versions are served only with the kind's feature gate on and
	// the version enabled with --runtime-config.
	Gated bool
	// Until is the first minor release that no longer serves it; 0: still
	// served.
	Until int
}

// The kinds.
var (
	MutatingWebhookConfiguration   = Kind{Name: "MutatingWebhookConfiguration", Resource: "mutatingwebhookconfigurations", Versions: []Version{{Name: "v1", Since: 16}}}
	ValidatingWebhookConfiguration = Kind{Name: "ValidatingWebhookConfiguration", Resource: "validatingwebhookconfigurations", Versions: []Version{{Name: "v1", Since: 16}}}
	ValidatingAdmissionPolicy      = Kind{Name: "ValidatingAdmissionPolicy", Resource: "validatingadmissionpolicies", Versions: []Version{{Name: "v1", Since: 30}}}
	MutatingAdmissionPolicy        = Kind{Name: "MutatingAdmissionPolicy", Resource: "mutatingadmissionpolicies", Versions: []Version{
		{Name: "v1", Since: 36},
		{Name: "v1beta1", Since: 34, Gated: true},
		{Name: "v1alpha1", Since: 32, Gated: true},
	}}
)

// Kinds are every kind Discover reads.
var Kinds = []Kind{MutatingWebhookConfiguration, ValidatingWebhookConfiguration, ValidatingAdmissionPolicy, MutatingAdmissionPolicy}

// Cluster is what one API server serves.
type Cluster struct {
	// GitVersion is the server's version, v1.34.4; Minor its minor release.
	GitVersion string
	Minor      int
	// versions maps a kind's resource to the version chosen for it; a
	// kind not served is absent.
	versions map[string]string
}

// Version is the API version chosen for k, the first of its versions the
// cluster serves; "" when it serves none.
func (c Cluster) Version(k Kind) string { return c.versions[k.Resource] }

// APIVersion is Version with the group: admissionregistration.k8s.io/v1beta1.
func (c Cluster) APIVersion(k Kind) string {
	if v := c.Version(k); v != "" {
		return Group + "/" + v
	}
	return ""
}

// Discover reads what the API server serves.
func Discover(ctx context.Context, d discovery.DiscoveryInterface) (Cluster, error) {
	info, err := d.ServerVersion()
	if err != nil {
		return Cluster{}, fmt.Errorf("read the API server's version: %w", err)
	}
	c := Cluster{GitVersion: info.GitVersion, versions: map[string]string{}}
	c.Minor, _ = strconv.Atoi(strings.TrimRight(info.Minor, "+"))
	resources := map[string][]string{} // version → resources
	for _, k := range Kinds {
		for _, v := range k.Versions {
			if _, read := resources[v.Name]; read {
				continue
			}
			if err := ctx.Err(); err != nil {
				return Cluster{}, err
			}
			list, err := d.ServerResourcesForGroupVersion(Group + "/" + v.Name)
			switch {
			case apierrors.IsNotFound(err):
				resources[v.Name] = nil
				continue
			case err != nil:
				return Cluster{}, fmt.Errorf("read what %s/%s serves: %w", Group, v.Name, err)
			}
			var names []string
			for _, r := range list.APIResources {
				names = append(names, r.Name)
			}
			resources[v.Name] = names
		}
		for _, v := range k.Versions {
			if slices.Contains(resources[v.Name], k.Resource) {
				c.versions[k.Resource] = v.Name
				break
			}
		}
	}
	return c, nil
}

// Release is what r serves with every gated kind enabled: the version a
// manifest rendered for r uses.
func Release(r kubeversion.Release) Cluster {
	c := Cluster{GitVersion: r.Kubernetes, Minor: r.Minor, versions: map[string]string{}}
	for _, k := range Kinds {
		if v, ok := k.in(r.Minor); ok {
			c.versions[k.Resource] = v.Name
		}
	}
	return c
}

// Default reports whether the cluster's version of k is one a release
// serves without being enabled.
func (c Cluster) Default(k Kind) bool {
	for _, v := range k.Versions {
		if v.Name == c.Version(k) {
			return !v.Gated
		}
	}
	return false
}

// in is k's preferred version served by minor.
func (k Kind) in(minor int) (Version, bool) {
	for _, v := range k.Versions {
		if minor >= v.Since && (v.Until == 0 || minor < v.Until) {
			return v, true
		}
	}
	return Version{}, false
}

// Enable says what turns k on in a cluster of the given minor release, or
// that no release that old serves it.
func (k Kind) Enable(minor int) string {
	v, ok := k.in(minor)
	switch {
	case !ok:
		return fmt.Sprintf("%s is served from Kubernetes 1.%d: upgrade the cluster", k.Name, k.Versions[len(k.Versions)-1].Since)
	case v.Gated:
		return fmt.Sprintf("start kube-apiserver with --feature-gates=%s=true --runtime-config=%s/%s=true (or upgrade to 1.%d, which serves %s/%s by default)",
			k.Name, Group, v.Name, k.Versions[0].Since, Group, k.Versions[0].Name)
	default:
		return fmt.Sprintf("it is served by default from 1.%d but turned off here: remove --feature-gates=%s=false and any --runtime-config that disables %s/%s from kube-apiserver",
			v.Since, k.Name, Group, v.Name)
	}
}

// Missing is the error for a feature that needs k where the cluster serves
// no version of it: what declared it, the cluster's version and what to
// enable. Nil when k is served.
func (c Cluster) Missing(feature string, k Kind) error {
	if c.Version(k) != "" {
		return nil
	}
	return fmt.Errorf("%s needs %s, which this cluster (Kubernetes %s) does not serve: %s", feature, k.Name, c.GitVersion, k.Enable(c.Minor))
}

// DiscoverConfig is Discover over a new discovery client of cfg.
func DiscoverConfig(ctx context.Context, cfg *rest.Config) (Cluster, error) {
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return Cluster{}, err
	}
	return Discover(ctx, d)
}

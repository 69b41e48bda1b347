package store

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/vigilkit/vigil/store/v1alpha1"
)

// ApplyHint says how a cluster admin installs the Store CRD by hand.
const ApplyHint = "vigil store crd | kubectl apply -f -"

// CRD returns the Store CustomResourceDefinition.
func CRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(v1alpha1.CRDYAML, crd); err != nil {
		return nil, fmt.Errorf("decode the Store CRD: %w", err)
	}
	return crd, nil
}

// ensureCRD checks that Stores are served and installs their CRD when they are
// not and this client may. Transient errors are retried until ctx ends.
func (s *Client) ensureCRD(ctx context.Context) error {
	backoff := wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 1 << 30, Cap: 2 * time.Second}
	installed := false
	for {
		// Listed by name, as the watch does, so that RBAC can narrow the
		// module to its own Store object with resourceNames.
		err := s.c.List(ctx, &v1alpha1.StoreList{}, client.InNamespace(s.ns), client.MatchingFields{"metadata.name": s.obj})
		switch {
		case err == nil:
			return nil
		case apierrors.IsForbidden(err):
			return s.forbidden("list", err)
		case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
			if !installed {
				if err := s.installCRD(ctx); err != nil {
					return err
				}
				installed = true
				s.log.Info("installed the Store CRD", "crd", v1alpha1.CRDName)
			}
			// The CRD is there; discovery and the client's REST mapping
			// follow shortly.
		default:
			s.log.V(1).Info("store: checking the Store CRD failed; retrying", "err", err.Error())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("store: wait for %s to be served: %w (last error: %v)", v1alpha1.CRDName, context.Cause(ctx), err)
		case <-time.After(backoff.Step()):
		}
	}
}

func (s *Client) installCRD(ctx context.Context) error {
	crd, err := CRD()
	if err != nil {
		return err
	}
	err = s.c.Create(ctx, crd)
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w: the CustomResourceDefinition %s is missing and this module may not create it (%v); apply it once as a cluster admin: `%s`, or apply the module's manifests, which include it",
			ErrCRDMissing, v1alpha1.CRDName, err, ApplyHint)
	default:
		return fmt.Errorf("%w: create CustomResourceDefinition %s: %v", ErrCRDMissing, v1alpha1.CRDName, err)
	}
}

package podrun

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Source reads the Secrets and ConfigMaps of the pod's namespace; a missing
// one is an error for which apierrors.IsNotFound holds.
type Source interface {
	Secret(ctx context.Context, name string) (*corev1.Secret, error)
	ConfigMap(ctx context.Context, name string) (*corev1.ConfigMap, error)
}

// Client is the Source of the API server: the objects of one namespace.
func Client(cs kubernetes.Interface, namespace string) Source {
	return client{cs, namespace}
}

type client struct {
	cs kubernetes.Interface
	ns string
}

func (c client) Secret(ctx context.Context, name string) (*corev1.Secret, error) {
	return c.cs.CoreV1().Secrets(c.ns).Get(ctx, name, metav1.GetOptions{})
}

func (c client) ConfigMap(ctx context.Context, name string) (*corev1.ConfigMap, error) {
	return c.cs.CoreV1().ConfigMaps(c.ns).Get(ctx, name, metav1.GetOptions{})
}

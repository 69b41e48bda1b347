package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/provenance"
	"github.com/vigilkit/vigil/vigiltest"
)

// SelfService is the tenant of a self-service cluster, as red teams try
// one: a user who may create namespaces and, in those she creates (Grant),
// the Namespace itself, Pods and the resources governed names — as a
// provisioner's namespace-admin role gives her.
type SelfService struct {
	// User is her name; Client acts as her.
	User   string
	Client client.Client

	t   testing.TB
	env *vigiltest.Env
}

// NewSelfService makes the tenant user in env's API server, with rights to
// the group's resources governed in the namespaces she is granted.
func NewSelfService(t testing.TB, env *vigiltest.Env, user, group string, governed ...string) *SelfService {
	t.Helper()
	create := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "self-service-" + user}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"},
	}}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: create.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: create.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	admin := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "namespace-admin-" + user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "update", "patch"}},
		{APIGroups: []string{group}, Resources: governed, Verbs: []string{"create", "get", "update", "patch"}},
	}}
	for _, o := range []client.Object{create, binding, admin} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	c, err := client.New(env.AsUserConfig(user), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &SelfService{User: user, Client: c, t: t, env: env}
}

// CreateNamespace creates a namespace as the tenant, deleted when the test
// ends, and grants her admin of it, as the provisioner does.
func (s *SelfService) CreateNamespace(name string) *corev1.Namespace {
	s.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := s.Client.Create(s.t.Context(), ns); err != nil {
		s.t.Fatalf("the tenant creates namespace %s: %v", name, err)
	}
	s.t.Cleanup(func() { _ = s.env.Client.Delete(context.Background(), ns) })
	s.Grant(name)
	return ns
}

// Grant binds the tenant's namespace-admin role in ns, until the test
// ends; it returns once the authorizer has it.
func (s *SelfService) Grant(ns string) {
	s.t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "namespace-admin-" + s.User},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "namespace-admin-" + s.User},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: s.User}},
	}
	if err := s.env.Client.Create(s.t.Context(), rb); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = s.env.Client.Delete(context.Background(), rb) })
	vigiltest.Eventually(s.t, 10*time.Second, func() error {
		return s.Client.Get(s.t.Context(), client.ObjectKey{Name: ns}, &corev1.Namespace{})
	})
}

// RandomID is six hex digits, for names no other test run takes.
func RandomID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// AwaitSettled waits until a namespace created now is believed under a
// stamp of namespace creators whose policy was created at stamped
// (provenance.Settle).
func AwaitSettled(t testing.TB, stamped metav1.Time) {
	t.Helper()
	since := stamped.Add(provenance.Settle)
	vigiltest.Eventually(t, provenance.Settle+5*time.Second, func() error {
		if now := time.Now().Truncate(time.Second); !now.After(since) {
			return fmt.Errorf("%s: a namespace created now would be within %s of the stamp's policy", now, provenance.Settle)
		}
		return nil
	})
}

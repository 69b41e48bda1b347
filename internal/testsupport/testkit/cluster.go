package testkit

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vigilkit/vigil/internal/serving/registration"
	"github.com/vigilkit/vigil/vigiltest"
)

// BootstrapConfigs creates a module's empty webhook configurations, as its
// manifests do, and deletes them after the test.
func BootstrapConfigs(t testing.TB, c client.Client, name string) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	mut, val := registration.Bootstrap(name)
	for _, o := range []client.Object{mut, val} {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
	return mut, val
}

// Tenant makes user a tenant who may create, get and delete resource (of
// group) in namespaces, and nothing else; it returns her client.
func Tenant(t testing.TB, env *vigiltest.Env, user, group, resource string, namespaces ...string) client.Client {
	t.Helper()
	ctx := t.Context()
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{group}, Resources: []string{resource}, Verbs: []string{"create", "get", "delete"},
	}}}
	objs := []client.Object{cr}
	for _, ns := range namespaces {
		objs = append(objs, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		})
	}
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	c, err := env.AsUser(user)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Until retries try every 100ms until done says it is done, for at most
// within; fatal with what the last try saw.
func Until(t testing.TB, within time.Duration, what string, try func(i int) error, done func(error) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for i := 0; ; i++ {
		err := try(i)
		if done(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s within %s: last seen %v", what, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitReady polls url until it answers 200, failing the test when the
// server's process exits first or 30s pass.
func WaitReady(t testing.TB, url string, exited <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
			err = fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		select {
		case <-exited:
			t.Fatalf("the process exited before %s was ready", url)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("watcher not ready within 30s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

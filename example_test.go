package vigil_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/admission"
	"github.com/vigilkit/vigil/gate"
	"github.com/vigilkit/vigil/store"
)

// A module waits, in phase 0, for the ClusterConfig CRD to be established;
// in phase 1 for the ClusterConfig named initial, whose spec it keeps in the
// Store for the running module.
func ExampleWaitFor() {
	m := vigil.NewModule("uds-core", vigil.Options{Namespace: "uds-system"})
	vigil.WaitFor(m, &apiextensionsv1.CustomResourceDefinition{}).
		WithName("clusterconfigs.uds.dev").
		ToBe(gate.Established())
	vigil.WaitFor(m, vigil.Kind("uds.dev", "v1alpha1", "ClusterConfig")).
		WithName("initial").
		InPhase(1).
		ToBeCreated(func(ctx context.Context, cc *unstructured.Unstructured, s vigil.Store) error {
			spec, _, err := unstructured.NestedMap(cc.Object, "spec")
			if err != nil {
				return err
			}
			return store.SetJSONAndWait(ctx, s, "clusterConfig", spec)
		})
	fmt.Println(m.Verify())
	// Output: <nil>
}

// A Sample gate polls what is not a Kubernetes object: here, a health
// endpoint that must answer 200 before the module serves. It gives up after
// two minutes and goes on without it.
func ExampleSample() {
	m := vigil.NewModule("uds-core", vigil.Options{})
	vigil.Sample(m, func(ctx context.Context) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://sso.example.com/healthz", nil)
		if err != nil {
			return 0, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}, vigil.Every(10*time.Second)).
		Named("sso").
		ToMatch(func(status int) bool { return status == http.StatusOK }).
		Timeout(2 * time.Minute).
		Optional()
	fmt.Println(m.Verify())
	// Output: <nil>
}

// A capability mutates and validates Pods: it labels each Pod with the
// cluster's name, and refuses privileged containers.
func ExampleWhen() {
	m := vigil.NewModule("uds-core", vigil.Options{})
	policies := m.Capability("policies")
	vigil.When(policies, &corev1.Pod{}).IsCreated().
		Mutate(func(ctx context.Context, req *vigil.Request[*corev1.Pod]) error {
			req.SetLabel("uds.dev/cluster", "prod")
			return nil
		})
	vigil.When(policies, &corev1.Pod{}).IsCreatedOrUpdated().
		Validate(func(ctx context.Context, req *vigil.Request[*corev1.Pod]) vigil.Verdict {
			for _, c := range req.Object.Spec.Containers {
				if sc := c.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
					return admission.Deny("container " + c.Name + " is privileged")
				}
			}
			return admission.Allow()
		})
	fmt.Println(m.Verify())
	// Output: <nil>
}

// A Reconcile keeps each ConfigMap labelled team=shop in line; it asks to
// come back in a minute while the ConfigMap is not complete.
func ExampleWatchBuilder_Reconcile() {
	m := vigil.NewModule("shop", vigil.Options{})
	vigil.Watch(m.Capability("sync"), &corev1.ConfigMap{}).WithLabelValue("team", "shop").
		Reconcile(func(ctx context.Context, cm *corev1.ConfigMap) error {
			if cm.Data["endpoint"] == "" {
				return vigil.RequeueAfter(time.Minute)
			}
			c := vigil.ClientFrom(ctx)
			if c == nil {
				return vigil.Terminal(errors.New("no API client outside a role"))
			}
			cm.Annotations = map[string]string{"shop.example.com/synced": time.Now().Format(time.RFC3339)}
			return c.Update(ctx, cm)
		})
	m.RBAC("the sync annotates the ConfigMaps it reconciles",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"update"}})
	fmt.Println(m.Verify())
	// Output: <nil>
}

// A Lister keeps a live read cache of a kind for handlers of every role: a
// validation consults the current Secrets without calling the API server.
func ExampleNewLister() {
	m := vigil.NewModule("uds-core", vigil.Options{})
	secrets := vigil.NewLister(m, &corev1.Secret{})
	vigil.When(m.Capability("policies"), &corev1.Pod{}).IsCreated().
		Validate(func(ctx context.Context, req *vigil.Request[*corev1.Pod]) vigil.Verdict {
			for _, v := range req.Object.Spec.Volumes {
				if v.Secret == nil {
					continue
				}
				if _, err := secrets.Get(ctx, req.Namespace, v.Secret.SecretName); err != nil {
					return admission.Deny("volume " + v.Name + " names a Secret that does not exist")
				}
			}
			return admission.Allow()
		})
	fmt.Println(m.Verify())
	// Output: <nil>
}

// A schedule runs on the watcher's active replica; its Store is the
// module-wide scope.
func ExampleModule_OnSchedule() {
	m := vigil.NewModule("uds-core", vigil.Options{})
	m.OnSchedule("rotate", vigil.Cron("*/5 * * * *"), func(ctx context.Context) error {
		return vigil.StoreFrom(ctx).Set(ctx, "rotated", time.Now().UTC().Format(time.RFC3339))
	})
	m.OnSchedule("heartbeat", vigil.Every(30*time.Second), func(ctx context.Context) error {
		_, err := fmt.Fprintln(os.Stderr, "alive")
		return err
	})
	fmt.Println(m.Verify())
	// Output: <nil>
}

// A module gives its containers a literal variable, a key of a Secret, and
// the Secret of its defaults as files. The gate of phase 1 and the admission
// container read the defaults at the mount's File: the mount path in a pod,
// the folder vigil dev materialised them in locally.
func ExampleMountSecret() {
	m := vigil.NewModule("uds-core", vigil.Options{Namespace: "uds-system"})
	vigil.WaitFor(m, vigil.Kind("uds.dev", "v1alpha1", "ClusterConfig")).
		WithName("initial").InPhase(1).ToBeCreated(nil)
	vigil.Env(m, "LOG_FORMAT").Value("json").For(vigil.Admission, vigil.Phase(1))
	vigil.Env(m, "API_TOKEN").FromSecret("api", "token").Optional().For(vigil.Admission)
	defaults := vigil.MountSecret(m, "uds-core-defaults", "/etc/uds").Keys("defaults.yaml").
		For(vigil.Phase(1), vigil.Admission)
	fmt.Println(m.Verify())
	fmt.Println(defaults.File("defaults.yaml")) // in a pod
	// Output:
	// <nil>
	// /etc/uds/defaults.yaml
}

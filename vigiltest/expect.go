package vigiltest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Denied creates obj through c and fails the test unless the API server
// refused it with a message that contains want (a webhook's denial reads
// `admission webhook "..." denied the request: <message>`, a check's
// `ValidatingAdmissionPolicy '...' with binding '...' denied request:
// <message>`). It returns the message. A check takes effect once the API
// server has loaded its policy, about a second after it is applied: while
// obj is admitted, Denied tries again as dry runs, for up to 10 s, before
// the create that counts.
func Denied(t testing.TB, c client.Client, obj client.Object, want string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := c.Create(t.Context(), obj.DeepCopyObject().(client.Object), client.DryRunAll); err != nil {
			break
		}
	}
	err := c.Create(t.Context(), obj)
	if err == nil {
		_ = c.Delete(t.Context(), obj)
		t.Fatalf("creating %s %s was admitted; want it denied with %q", kindOf(c, obj), client.ObjectKeyFromObject(obj), want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("creating %s %s failed with %q; want a denial saying %q", kindOf(c, obj), client.ObjectKeyFromObject(obj), err, want)
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
		t.Logf("creating %s %s: the denial came as %s", kindOf(c, obj), client.ObjectKeyFromObject(obj), apierrors.ReasonForError(err))
	}
	return err.Error()
}

// Admitted creates obj through c and fails the test unless it was admitted.
func Admitted(t testing.TB, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatalf("creating %s %s: %v; want it admitted", kindOf(c, obj), client.ObjectKeyFromObject(obj), err)
	}
}

// Patch is what admission changed in an object: JSON patch operations from
// the object as sent to the object as stored.
type Patch []jsonpatch.Operation

// Has reports whether the patch has an operation op ("add", "replace",
// "remove") on path ("/metadata/labels/team"), with value, if given.
func (p Patch) Has(op, path string, value ...any) bool {
	for _, o := range p {
		if o.Operation != op || o.Path != path {
			continue
		}
		if len(value) == 0 || fmt.Sprint(o.Value) == fmt.Sprint(value[0]) {
			return true
		}
	}
	return false
}

// HasLabel reports whether the patch sets the label key to value: added to
// the labels the object had, or with a labels map added whole.
func (p Patch) HasLabel(key, value string) bool {
	for _, o := range p {
		if o.Operation != "add" && o.Operation != "replace" {
			continue
		}
		switch o.Path {
		case "/metadata/labels/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key):
			if fmt.Sprint(o.Value) == value {
				return true
			}
		case "/metadata/labels":
			if m, ok := o.Value.(map[string]any); ok && fmt.Sprint(m[key]) == value {
				return true
			}
		}
	}
	return false
}

func (p Patch) String() string {
	var parts []string
	for _, o := range p {
		if o.Operation == "remove" {
			parts = append(parts, o.Operation+" "+o.Path)
			continue
		}
		v, _ := json.Marshal(o.Value)
		parts = append(parts, fmt.Sprintf("%s %s %s", o.Operation, o.Path, v))
	}
	return strings.Join(parts, "; ")
}

// serverSet are the paths the API server fills in on every create, never a
// mutation's: left out of Mutated's patch.
var serverSet = []string{"/metadata/uid", "/metadata/resourceVersion", "/metadata/creationTimestamp",
	"/metadata/managedFields", "/metadata/generation", "/status"}

// Mutated creates obj through c, fails the test if it was refused, and
// returns what changed between obj as sent and as stored, without what the
// API server sets on every create (uid, resourceVersion, creationTimestamp,
// managedFields, generation, status). The API server's defaulting of
// built-in kinds (a Pod's, say) is part of it: check the paths the module
// mutates with Patch.Has. obj holds the stored object afterwards.
func Mutated(t testing.TB, c client.Client, obj client.Object) Patch {
	t.Helper()
	sent, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatalf("creating %s %s: %v; want it admitted and mutated", kindOf(c, obj), client.ObjectKeyFromObject(obj), err)
	}
	stored, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := jsonpatch.CreatePatch(sent, stored)
	if err != nil {
		t.Fatal(err)
	}
	var out Patch
	for _, o := range ops {
		if !slices.ContainsFunc(serverSet, func(p string) bool { return o.Path == p || strings.HasPrefix(o.Path, p+"/") }) {
			out = append(out, o)
		}
	}
	return out
}

// Get is a condition for Eventually and Consistently: it reads obj through c
// and passes it to cond — for the effect of a Reconcile or a Watch, say:
//
//	vigiltest.Eventually(t, 20*time.Second, vigiltest.Get(env.Client, cm, func(cm *corev1.ConfigMap) error {
//		if cm.Annotations["reconciled"] != "true" {
//			return fmt.Errorf("not reconciled yet")
//		}
//		return nil
//	}))
func Get[T client.Object](c client.Client, obj T, cond func(T) error) func() error {
	key := client.ObjectKeyFromObject(obj)
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Get(ctx, key, obj); err != nil {
			return err
		}
		return cond(obj)
	}
}

func kindOf(c client.Client, obj client.Object) string {
	if gvk, err := c.GroupVersionKindFor(obj); err == nil {
		return gvk.Kind
	}
	return fmt.Sprintf("%T", obj)
}

// httpOK gets url and says why it is not 200.
func httpOK(url string) error { return getOK(http.DefaultClient, url) }

// probeClient is a client of HTTPS probes: as the kubelet's, it does not
// verify the certificate.
var probeClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a probe, as the kubelet's
}}

// httpsOK is httpOK of an HTTPS probe.
func httpsOK(url string) error { return getOK(probeClient, url) }

func getOK(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

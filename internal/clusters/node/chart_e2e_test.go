package node

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// release is a module's chart installed on the node with the Helm SDK, as
// `helm install` would: the release's namespace exists already (the
// platform's Secret is in it), so the chart does not create it.
type release struct {
	t         *testing.T
	cfg       *action.Configuration
	name, ns  string
	manifests string // the objects of the release's last revision
}

// installChart renders the module binary's chart for the image and
// installs it, without waiting for the pods (the test watches them).
func installChart(t *testing.T, n *Node, binary, ref, name, ns string) *release {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = ptr.To(n.Kubeconfig), ptr.To(ns)
	r := &release{t: t, cfg: action.NewConfiguration(), name: name, ns: ns}
	if err := r.cfg.Init(flags, ns, "secret"); err != nil {
		t.Fatalf("helm configuration: %v", err)
	}
	i := action.NewInstall(r.cfg)
	i.ReleaseName, i.Namespace = name, ns
	i.WaitStrategy, i.Timeout = kube.HookOnlyStrategy, 3*time.Minute
	rel, err := i.RunWithContext(t.Context(), r.chart(binary, ref), r.values())
	if err != nil {
		t.Fatalf("helm install %s (%s): %v", name, ref, err)
	}
	r.manifests = rel.(*releasev1.Release).Manifest
	return r
}

// upgrade renders the chart for another image and upgrades the release to it.
func (r *release) upgrade(binary, ref string) {
	r.t.Helper()
	u := action.NewUpgrade(r.cfg)
	u.Namespace = r.ns
	u.WaitStrategy, u.Timeout = kube.HookOnlyStrategy, 3*time.Minute
	rel, err := u.RunWithContext(r.t.Context(), r.name, r.chart(binary, ref), r.values())
	if err != nil {
		r.t.Fatalf("helm upgrade %s to %s: %v", r.name, ref, err)
	}
	r.manifests = rel.(*releasev1.Release).Manifest
}

// uninstall uninstalls the release, its hooks run — the chart's pre-delete
// Job (the module's image, on the node) unregisters the webhooks first —
// and waits until its objects are gone.
func (r *release) uninstall() {
	r.t.Helper()
	un := action.NewUninstall(r.cfg)
	un.WaitStrategy, un.Timeout = kube.StatusWatcherStrategy, 3*time.Minute
	if _, err := un.Run(r.name); err != nil {
		r.t.Fatalf("helm uninstall %s (its pre-delete hook runs the module's unregister): %v", r.name, err)
	}
}

// owned is the release's objects that its uninstall deletes: those the
// chart keeps (helm.sh/resource-policy: keep, such as the Exemptions'
// namespace) left out, and named in the test's log.
func (r *release) owned() []byte {
	r.t.Helper()
	var out bytes.Buffer
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(r.manifests)), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			r.t.Fatalf("the release's manifest: %v", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetAnnotations()["helm.sh/resource-policy"] == "keep" {
			r.t.Logf("kept by the chart at uninstall (helm.sh/resource-policy: keep): %s %s", u.GetKind(), u.GetName())
			continue
		}
		data, err := yaml.Marshal(u.Object)
		if err != nil {
			r.t.Fatal(err)
		}
		out.WriteString("---\n")
		out.Write(data)
	}
	return out.Bytes()
}

// chart renders the module binary's chart for the image.
func (r *release) chart(binary, ref string) *chartv2.Chart {
	r.t.Helper()
	dir := filepath.Join(r.t.TempDir(), "chart")
	ctx, cancel := context.WithTimeout(r.t.Context(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, binary, "chart", "-o", dir, "--image", ref).CombinedOutput(); err != nil {
		r.t.Fatalf("%s chart --image %s: %v\n%s", r.name, ref, err, out)
	}
	ch, err := loader.Load(dir)
	if err != nil {
		r.t.Fatal(err)
	}
	return ch
}

// values are the release's values: the namespace exists already.
func (r *release) values() map[string]any {
	return map[string]any{"namespace": map[string]any{"create": false}}
}

package vigiltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/vigilkit/vigil/internal/clusters/controlplane"
	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
	storev1alpha1 "github.com/vigilkit/vigil/store/v1alpha1"
)

// Options configures Start.
type Options struct {
	// Scheme the client decodes with; client-go's types, apiextensions/v1 and
	// vigil's Store when nil.
	Scheme *runtime.Scheme
	// CRDs and CRDPaths (files or folders of YAML) are installed and waited for
	// before Start returns.
	CRDs     []*apiextensionsv1.CustomResourceDefinition
	CRDPaths []string
	// DisableWatchCache turns the API server's watch cache off; with it,
	// CompactEtcd makes watches resumed from older versions receive 410 Gone.
	DisableWatchCache bool
	// APIServerFlags are extra kube-apiserver flags (name without dashes →
	// value); an empty value removes a flag vigil sets.
	APIServerFlags map[string]string
	// KubernetesVersion is the release of the control plane, as "1.34":
	// one of the supported releases (1.33 to 1.37). When empty,
	// $VIGIL_KUBERNETES_VERSION, and else 1.37. On releases that serve
	// MutatingAdmissionPolicy only once enabled (before 1.36), it is enabled.
	KubernetesVersion string
	// QPS and Burst of the returned config; generous defaults when zero.
	QPS   float32
	Burst int
	// Build compiles the binaries when they are missing instead of failing. A
	// cold build takes 6 to 12 minutes: raise go test's -timeout to match.
	Build bool
	// Output receives the control plane's own logs; nil discards them.
	Output io.Writer
	// Node, when set, runs a real node with the control plane — a kubelet,
	// kube-proxy and a container runtime on this machine, as `vigil node up`
	// does — so that ModuleOptions.OnNode runs a module's own image and
	// pods: set it to node.Start of package vigiltest/node, which the kit
	// links only where a test asks for it. DisableWatchCache and
	// APIServerFlags are not for it.
	Node func(NodeOptions) (Node, error)
}

// NodeOptions are what Options.Node is started with: the release, whether
// to build what is missing, and where the components' logs go.
type NodeOptions struct {
	// KubernetesVersion is the release, as "1.37".
	KubernetesVersion string
	// Build, Output: as Options' own.
	Build  bool
	Output io.Writer
}

// Node is a running node and the control plane that serves it (see
// Options.Node and package vigiltest/node).
type Node interface {
	// Config is an admin config of its API server.
	Config() *rest.Config
	// Kubeconfig is the path of an admin kubeconfig of it.
	Kubeconfig() string
	// BinDir is the folder of the control plane's binaries, kubectl among
	// them.
	BinDir() string
	// LoadModule builds the module in dir as an image, loads it into the
	// node's runtime, and returns its reference and the module binary taken
	// from it; it fails t when it cannot.
	LoadModule(t testing.TB, dir string) (ref, binary string)
	// Check is nil while every component runs and the node is Ready, and
	// otherwise says which failed, with its last lines.
	Check(ctx context.Context) error
	// EmptyDir is the folder on this machine that holds the emptyDir volume
	// of the pod (by its UID).
	EmptyDir(podUID, volume string) string
	// Stop stops the node and its control plane and undoes what they
	// changed on the machine.
	Stop() error
}

// Env is a running control plane and clients for it.
type Env struct {
	// Config is an admin config, with deliberate client-side rate limits.
	Config *rest.Config
	// Client is a controller-runtime client over Config.
	Client client.Client
	// Clientset is a client-go clientset over Config.
	Clientset kubernetes.Interface
	// Scheme is the scheme of Client.
	Scheme *runtime.Scheme
	// BinDir is the folder of the binaries running, kubectl among them.
	BinDir string
	// KubernetesVersion is the release running, as "1.34".
	KubernetesVersion string

	cp   *controlplane.Instance
	node Node
	// unreap stops the reaper that kills the control plane when this
	// process ends without Stop.
	unreap func()

	// stopNamespaces stops finishing the deletion of namespaces.
	stopNamespaces context.CancelFunc

	kubeconfigOnce sync.Once
	kubeconfig     []byte
	kubeconfigErr  error
}

// Start starts a control plane and waits until it serves. Call Stop when done.
func Start(opts Options) (*Env, error) {
	// controller-runtime complains on stderr when its logger is never set; its
	// envtest logs nothing a test needs.
	ctrllog.SetLogger(logr.Discard())

	if opts.Scheme == nil {
		opts.Scheme = runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(opts.Scheme); err != nil {
			return nil, err
		}
		if err := apiextensionsv1.AddToScheme(opts.Scheme); err != nil {
			return nil, err
		}
		if err := storev1alpha1.AddToScheme(opts.Scheme); err != nil {
			return nil, err
		}
	}
	release, err := opts.release()
	if err != nil {
		return nil, err
	}
	if opts.Node != nil {
		return startWithNode(opts, release)
	}
	dir, err := controlplane.FindBinaries(release)
	if err != nil && opts.Build {
		dir, err = controlplane.Ensure(context.Background(), release, os.Stderr)
	}
	if err != nil {
		return nil, fmt.Errorf("vigiltest: %w", err)
	}
	began := time.Now()
	cp, err := controlplane.Start(controlplane.StartOptions{
		Release:           release,
		Dir:               dir,
		DisableWatchCache: opts.DisableWatchCache,
		APIServerFlags:    opts.APIServerFlags,
		CRDs:              opts.CRDs,
		CRDPaths:          opts.CRDPaths,
		QPS:               opts.QPS,
		Burst:             opts.Burst,
		Output:            opts.Output,
	})
	if err != nil {
		return nil, fmt.Errorf("vigiltest: %w", err)
	}
	if os.Getenv("VIGILTEST_VERBOSE") != "" {
		fmt.Fprintf(os.Stderr, "vigiltest: control plane up in %s (%s)\n", time.Since(began).Round(time.Millisecond), cp.Config.Host)
	}
	// kube-apiserver and etcd die with the test binary however it ends: a
	// test that calls os.Exit, a -timeout panic, a SIGKILL.
	unreap, err := cp.ReapOnExit()
	if err != nil {
		fmt.Fprintf(os.Stderr, "vigiltest: warning: the control plane will outlive a test binary that ends without Stop: %v\n", err)
		unreap = func() {}
	}
	e := &Env{Config: cp.Config, Scheme: opts.Scheme, BinDir: dir, KubernetesVersion: release.String(), cp: cp, unreap: unreap}
	if err := e.clients(); err != nil {
		_ = e.Stop()
		return nil, err
	}
	// No controller-manager runs here: the Env finishes deleting
	// namespaces itself, as its namespace controller would.
	ctx, cancel := context.WithCancel(context.Background())
	e.stopNamespaces = cancel
	nsCfg := rest.CopyConfig(e.Config)
	nsCfg.QPS, nsCfg.Burst = 200, 400
	if err := finishNamespaces(ctx, nsCfg); err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("vigiltest: %w", err)
	}
	return e, nil
}

// release is the Kubernetes release the options name.
func (o Options) release() (kubeversion.Release, error) {
	if o.KubernetesVersion != "" {
		r, err := kubeversion.Parse(o.KubernetesVersion)
		if err != nil {
			return r, fmt.Errorf("vigiltest: Options.KubernetesVersion: %w", err)
		}
		return r, nil
	}
	r, err := kubeversion.FromEnv()
	if err != nil {
		return r, fmt.Errorf("vigiltest: %w", err)
	}
	return r, nil
}

// clients makes the Env's clients over its Config.
func (e *Env) clients() (err error) {
	if e.Client, err = client.New(e.Config, client.Options{Scheme: e.Scheme}); err != nil {
		return fmt.Errorf("vigiltest: client: %w", err)
	}
	if e.Clientset, err = kubernetes.NewForConfig(e.Config); err != nil {
		return fmt.Errorf("vigiltest: clientset: %w", err)
	}
	return nil
}

// Stop stops the control plane (and the node, with Options.Node) and removes
// its data.
func (e *Env) Stop() error {
	if e.stopNamespaces != nil {
		e.stopNamespaces()
	}
	if e.node != nil {
		return e.node.Stop()
	}
	if e.unreap != nil {
		e.unreap()
	}
	return e.cp.Stop()
}

// Run starts a control plane, stores it in *env, runs the package's tests and
// stops it; it returns the exit code for os.Exit. Under `go test -short` it
// starts nothing and skips the package's tests (-short means the tests that need
// no control plane), saying so with -v. Otherwise a control plane that cannot
// start fails the package with the reason, never skips it.
func Run(m *testing.M, opts Options, env **Env) int {
	if !flag.Parsed() {
		flag.Parse() // testing.Short reads the parsed -test.short
	}
	if testing.Short() {
		fmt.Printf("SKIP: %s: this package's tests need the control plane (kube-apiserver, etcd): skipped under -short\n", filepath.Base(os.Args[0]))
		return 0
	}
	e, err := Start(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "vigiltest: stop control plane: %v\n", err)
	}
	return code
}

// KubeConfig returns a kubeconfig for an admin user, for tools such as
// kubectl. The user is made once per control plane: safe from parallel tests.
func (e *Env) KubeConfig() ([]byte, error) {
	e.kubeconfigOnce.Do(func() {
		if e.node != nil {
			e.kubeconfig, e.kubeconfigErr = os.ReadFile(e.node.Kubeconfig())
			return
		}
		e.kubeconfig, e.kubeconfigErr = e.cp.KubeConfig("vigiltest-admin", "system:masters")
	})
	return e.kubeconfig, e.kubeconfigErr
}

// InstallCRDs creates the CRDs and waits until the API server serves them.
func (e *Env) InstallCRDs(crds ...*apiextensionsv1.CustomResourceDefinition) error {
	_, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{CRDs: crds, Scheme: e.Scheme})
	if err != nil {
		return fmt.Errorf("install CRDs: %w", err)
	}
	return nil
}

// InstallCRDYAML decodes one or more CRDs from YAML (documents separated by
// ---) and installs them as InstallCRDs does.
func (e *Env) InstallCRDYAML(data []byte) error {
	crds, err := DecodeCRDs(data)
	if err != nil {
		return err
	}
	return e.InstallCRDs(crds...)
}

// DecodeCRDs decodes CustomResourceDefinitions from a YAML or JSON stream.
func DecodeCRDs(data []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096)
	var crds []*apiextensionsv1.CustomResourceDefinition
	for i := 0; ; i++ {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(crd); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode CRD document %d: %w", i+1, err)
		}
		if crd.Kind == "" && crd.Name == "" {
			continue // an empty document
		}
		if crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("decode CRD document %d: expected kind CustomResourceDefinition, got %q (%s)", i+1, crd.Kind, crd.Name)
		}
		crds = append(crds, crd)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("decode CRDs: expected at least one CustomResourceDefinition, found none")
	}
	return crds, nil
}

// TestNamespaceLabel marks the namespaces Namespace creates.
const TestNamespaceLabel = "vigil.dev/test"

var unsafeName = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a namespace for this test alone, named after it, and
// deletes it when the test ends. Its name is never used again, so it is left
// terminating. A namespace a test creates by name the Env finishes deleting,
// as a cluster's namespace controller does, so that the name can be created
// again.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	base := strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 50 {
		base = strings.TrimRight(base[:50], "-")
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   base + "-" + hex.EncodeToString(suffix),
		Labels: map[string]string{TestNamespaceLabel: "true"},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Client.Create(ctx, ns); err != nil {
		t.Fatalf("create test namespace %s: %v", ns.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.Client.Delete(ctx, ns); err != nil && !isNotFound(err) {
			t.Errorf("delete test namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

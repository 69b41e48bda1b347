// Package vigiltest runs a real Kubernetes control plane — kube-apiserver and
// etcd, built from the Go module proxy by vigil's control-plane builder — for the
// tests of vigil and of the modules written with it.
//
// Start one control plane per test package, in TestMain:
//
//	var env *vigiltest.Env
//
//	func TestMain(m *testing.M) {
//		os.Exit(vigiltest.Run(m, vigiltest.Options{}, &env))
//	}
//
// and give each test a namespace of its own with env.Namespace(t). The
// control plane runs no controller-manager; the Env finishes deleting
// namespaces itself, as a cluster's namespace controller does (what a
// namespace holds goes first, objects with finalizers waited for), so a test
// may create a namespace by name, delete it, and a later test create it
// again once the deletion is done.
//
// The package carries what tests of admission, gates and watches need beyond a
// client: InstallCRDs and InstallCRDYAML; CompactEtcd with
// Options.DisableWatchCache, which makes a resumed watch receive 410 Gone; and
// identities in pairs, AsUser and AsServiceAccount (clients) with AsUserConfig
// and AsServiceAccountConfig (their configs), for tests of least-privilege RBAC.
// Eventually and Consistently poll a condition (Get makes one that reads an
// object); under `go test -short`, Run skips the package's tests.
//
// It also runs a module as it ships: InstallModule builds it, applies its
// manifests (or its chart as rendered), checks their pod specs
// (CheckPodSpec), and runs its roles from those pod specs as a kubelet would
// (NewPod: volumes, env, the downward API, init containers in order, a real
// ServiceAccount token from the TokenRequest API), so the module's own RBAC
// is what its tests run with. StartPhase, RunPhase, RunGates,
// StartAdmission and StartWatcher start its roles; Denied, Admitted, Mutated
// and WaitFor are the assertions an author reaches for.
//
// When the binaries are missing, Start fails with the command that builds them.
// It never skips: a test that needs a control plane and has none has not passed.
package vigiltest

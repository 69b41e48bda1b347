// Package node runs a real node for a module's tests: a kubelet, kube-proxy,
// kube-controller-manager, kube-scheduler and a container runtime on this
// machine, beside the control plane, as `vigil node up` does. With it a
// test runs the module's own image and pods, its gate phases as init
// containers:
//
//	func TestMain(m *testing.M) {
//		os.Exit(vigiltest.Run(m, vigiltest.Options{Node: node.Start, Build: true}, &env))
//	}
//
//	mod := env.InstallModule(t, vigiltest.ModuleOptions{Dir: ".", OnNode: true})
//
// It needs root (the runtime's Debian packages are installed when missing,
// iptables rules are written and undone) and runs one node per machine. It
// is apart from vigiltest so that a module's other tests link neither the
// node nor the image builder.
package node

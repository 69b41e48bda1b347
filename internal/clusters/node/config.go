package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The node's network: pods on a bridge of their own, Services in a range
// that only kube-proxy's rules on this machine give meaning to.
const (
	bridgeName = "vigil0"
	// bridgeIP is the bridge's address: the pods' gateway, and the address
	// the API server and the kubelet bind, which pods reach.
	bridgeIP   = "10.203.0.1"
	podCIDR    = "10.203.0.0/24"
	serviceIPs = "10.204.0.0/24"
	// kubernetesServiceIP is the kubernetes Service's ClusterIP: the first
	// of serviceIPs, which the API server's certificate must name.
	kubernetesServiceIP = "10.204.0.1"
	apiServerPort       = 6443
	// sandboxImage is the pause image every pod's sandbox runs, built and
	// imported by the node itself (see pause.go): nothing is pulled.
	sandboxImage = "vigil.local/pause:1"
)

// layout is where a node keeps its files, all under one folder.
type layout struct{ dir string }

func (l layout) path(parts ...string) string {
	return filepath.Join(append([]string{l.dir}, parts...)...)
}
func (l layout) containerdSocket() string { return l.path("containerd", "containerd.sock") }
func (l layout) logs() string             { return l.path("logs") }
func (l layout) bin() string              { return l.path("bin") }

// writeContainerdConfig writes containerd's configuration: its root, state
// and socket in the node's folder, so that it runs beside any containerd
// the machine has, and the CRI plugin set for this machine.
func writeContainerdConfig(l layout) (string, error) {
	// restrict_oom_score_adj: without CAP_SYS_RESOURCE (not even in the
	// bounding set here) runc cannot write a negative oom_score_adj, and
	// every sandbox failed ("can't get final child's PID from pipe: EOF").
	// SystemdCgroup false: the kubelet's cgroupfs driver (no systemd).
	conf := fmt.Sprintf(`version = 2
root = %q
state = %q

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
`, l.path("containerd", "root"), l.path("containerd", "state"), l.containerdSocket(), l.path("containerd", "ttrpc.sock"),
		sandboxImage, cniBinDir, l.path("cni", "net.d"))
	path := l.path("containerd", "config.toml")
	return path, writeFile(path, conf)
}

// writeCNIConfig writes the pods' network: the bridge plugin on bridgeName
// (which Start makes first, as the API server binds its address), its
// addresses from podCIDR, kept in the node's folder. The bridge is the pods'
// default route: Service addresses are outside podCIDR, and kube-proxy's
// rules on the host rewrite them.
func writeCNIConfig(l layout) error {
	conf := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "vigil",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "isDefaultGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q, "gateway": %q}]],
      "dataDir": %q
    }
  }]
}
`, bridgeName, podCIDR, bridgeIP, l.path("cni", "ipam"))
	return writeFile(l.path("cni", "net.d", "10-vigil.conflist"), conf)
}

// writeKubeletConfig writes the kubelet's KubeletConfiguration.
func writeKubeletConfig(l layout, healthzPort int) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://%s
# cgroupfs: no systemd manages this machine's cgroups.
cgroupDriver: cgroupfs
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
podCIDR: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s}
authorization:
  mode: AlwaysAllow
failSwapOn: false
# Pods take what the machine has: no eviction for a few percent of disk.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
resolvConf: /etc/resolv.conf
`, l.containerdSocket(), bridgeIP, healthzPort, podCIDR, l.path("pki", "ca.crt"))
	if cgroupV1() {
		// The machine's own processes sit in v1 cgroups, so a pure v2
		// setup cannot be made; kubelet 1.37 refuses v1 unless told.
		b.WriteString("failCgroupV1: false\n")
	}
	path := l.path("kubelet", "config.yaml")
	return path, writeFile(path, b.String())
}

func writeFile(path, data string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(data), 0o644)
}

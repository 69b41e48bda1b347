package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// kernelSettings are the sysctls the node's components change on the
// host, restored at teardown: the kubelet's "kernel tunables" (it sets them
// unless protectKernelDefaults), ip_forward (the CNI bridge plugin sets it
// for a gateway bridge) and route_localnet (kube-proxy, for localhost
// NodePorts, which the node turns off; kept in case).
var kernelSettings = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
	"net/ipv4/ip_forward", "net/ipv4/conf/all/route_localnet",
}

// teardownScript undoes, in order, what a node did to the machine. It is
// written before anything is changed, with the values to restore, and runs
// from Stop and from the reaper alike; it is safe to run twice. %[1]s is the
// node's folder, %[2]s the node binaries' folder, %[3]s the sysctls to
// restore.
const teardownScript = `#!/bin/sh
# Undoes what vigil node did to this machine (see internal/clusters/node).
dir=%[1]q
nodebin=%[2]q
[ -d "$dir" ] || exit 0
# 1. The components; the pods' processes, found by their cgroups; the
#    containerd shims of this node.
[ -f "$dir/pids" ] && kill -9 $(cat "$dir/pids") 2>/dev/null
for f in $(find /sys/fs/cgroup -path '*/kubepods*' -name cgroup.procs 2>/dev/null); do
  for p in $(cat "$f" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
done
for p in $(pgrep -f -- "-address $dir/containerd/containerd.sock" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
sleep 1
# 2. kube-proxy's rules, and the kubelet's canary chains.
"$nodebin/kube-proxy" --cleanup >/dev/null 2>&1
for ipt in iptables ip6tables; do
  for t in mangle nat filter; do
    for c in KUBE-KUBELET-CANARY KUBE-PROXY-CANARY KUBE-IPTABLES-HINT; do
      $ipt -t $t -F $c 2>/dev/null; $ipt -t $t -X $c 2>/dev/null
    done
  done
done
# 3. What the kubelet and containerd mounted in the folder, deepest first.
awk -v d="$dir" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
  while read -r m; do umount -l "$m" 2>/dev/null; done
# 4. The pods' network namespaces left without a process, and the bridge.
for ns in $(ls /var/run/netns 2>/dev/null | grep '^cni-'); do
  [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && ip netns del "$ns" 2>/dev/null
done
ip link del %[4]s 2>/dev/null
# 5. The kubelet's cgroups, deepest first.
for h in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
  [ -d "$h" ] && find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null
done
# 6. The kernel settings, as they were.
%[3]s
rm -rf "$dir"
exit 0
`

// writeTeardown writes the node's teardown.sh, with the kernel settings as
// they are now.
func writeTeardown(l layout, nodeBin string) error {
	var restore []string
	for _, k := range kernelSettings {
		data, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			continue
		}
		restore = append(restore, fmt.Sprintf("echo %q > %q 2>/dev/null", strings.TrimSpace(string(data)), filepath.Join("/proc/sys", k)))
	}
	script := fmt.Sprintf(teardownScript, l.dir, nodeBin, strings.Join(restore, "\n"), bridgeName)
	return os.WriteFile(l.path("teardown.sh"), []byte(script), 0o755)
}

// startReaper starts the process that runs the teardown when the pipe it
// reads closes: at Stop, which closes it, or when this process dies however
// it dies. It runs in a process group of its own, so that what kills this
// process's group does not take it too.
func startReaper(l layout) (*exec.Cmd, *os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", `while IFS= read -r _; do :; done; exec /bin/sh "$0"`, l.path("teardown.sh"))
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, nil, fmt.Errorf("start the node's reaper: %w", err)
	}
	_ = r.Close()
	return cmd, w, nil
}

// Package node runs a real Kubernetes node on this machine, beside a control
// plane that serves it: the machinery of `vigil node`.
//
// Where internal/clusters/controlplane gives tests an API server alone (envtest: no
// kubelet, no controllers), a node runs what a module's pods meet in a
// cluster: etcd and kube-apiserver bound to an address pods reach,
// kube-controller-manager (ServiceAccount tokens, the root CA ConfigMap,
// Deployments' ReplicaSets), kube-scheduler, and a kubelet with containerd,
// runc and the CNI bridge plugin, plus kube-proxy for Services. Every binary
// comes from the Go module proxy (controlplane.Ensure and EnsureNode) or
// from Debian's packages (containerd, runc, the CNI plugins, iptables,
// conntrack), which Start installs when they are missing and it runs as
// root.
//
// The node lives in one state folder and changes the host only where a node
// must: a bridge (vigil0, 10.203.0.1/24) that pods sit behind and that the
// API server binds, the iptables chains kube-proxy writes for Services
// (10.204.0.0/24) and the kubelet's cgroups. Stop undoes them: it stops the
// pods' containers, the components and containerd, cleans kube-proxy's
// rules (kube-proxy --cleanup), unmounts what the kubelet mounted, deletes
// the pods' network namespaces, the bridge and the kubelet's cgroups, and
// removes the folder. A reaper does the same when the process that started
// the node dies without stopping it.
//
// The settings each component needs on this kind of machine are written
// where they are set, each with the failure it avoids: the kubelet on
// cgroup v1 (failCgroupV1: false, the cgroupfs driver), containerd's
// restrict_oom_score_adj (no CAP_SYS_RESOURCE), the controller-manager's
// per-controller credentials, the API server's InternalIP kubelet addresses
// and aggregator routing.
// Images reach the node without a registry: ImportImage loads an OCI archive
// into containerd's k8s.io namespace and names it by digest too, so that a
// pod's REPO:TAG@sha256:… resolves with IfNotPresent. The sandbox (pause)
// image is built here, from a few lines of Go, the same way.
//
// The runtime's choice lives in one place (runtime.go): containerd 1.6 from
// Debian works with kubelet 1.37, which falls back from the CRI
// RuntimeConfig call that 1.6 lacks; kubelet 1.38 drops that fallback and
// needs containerd 2.x.
package node

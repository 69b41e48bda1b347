// Package dev runs a module locally the way a cluster runs it, for `vigil dev`
// and the demo: it builds the module's binary, reads its plan (`plan -o json`,
// the resolved definition as internal/definition/spec defines it), runs its gate
// phases one after the other as separate processes (as the kubelet runs init
// containers), then — having created the module's empty webhook
// configurations and opt-out guards, as its manifests would — its admission
// role, which registers itself through its own protocol once ready, and its
// watcher role side by side.
//
// The cluster is the one a kubeconfig names, or an embedded control plane
// (kube-apiserver and etcd on loopback) started for the session. The API
// server reaches the admission role through a loopback URL, with the CA the
// role keeps in its Secret; between the two sits a small proxy that plays the
// module's Service and reads each AdmissionReview as it passes, which is how
// the timeline tells which requests were admitted, mutated or denied.
//
// Each process gets what its container gets in a pod: the variables the
// module declares for it (Env), their Secret and ConfigMap keys read from
// the cluster, and its volumes (MountSecret, MountConfigMap) materialised as
// files under the session's folder, <tmp>/mounts/<container>/<mount path>,
// which VIGIL_MOUNT_ROOT names so that the module finds them (MountBuilder.Path).
// They are resolved from the pod spec the module's manifests render, by the
// local pod runner vigiltest's pods use too (internal/clusters/podrun). As the
// kubelet does, a process is held, and says so, while a required Secret or
// ConfigMap is missing: the admission pod's volumes before its first phase,
// a variable's before its own container.
//
// Everything the session sees becomes an Event: what it built, each phase
// starting, what each gate waits for and last saw (the named events of
// internal/runtime/events in the roles' structured logs, never their wording), each phase done, the webhooks registered and
// enforced, the watcher ready, each admission decision. A Printer writes them
// as a readable timeline, coloured on a terminal; a script (the demo) reads
// them to know when to act. When the session's context ends it removes the
// module's webhook configurations first, so the API server stops calling
// it, then stops the roles and the control plane it started.
//
// A session leaves nothing behind even when it is killed. On Linux the
// module's processes die with it (Pdeathsig), and the next session removes
// the temporary folder a killed one kept. What it creates in the cluster
// carries SessionLabel, which tells it apart from what a real install of the
// module owns (never touched: a session refuses to run over it): the next
// session of the module removes what a killed one left before it starts
// anything, and Clean (`vigil dev --clean`) removes it without running the
// module.
package dev

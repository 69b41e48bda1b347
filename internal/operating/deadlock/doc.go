// Package deadlock finds startup deadlocks among modules' gate phases and
// fail-closed webhooks.
//
// A module starts in steps: its admission pods are created, their init
// containers run the gate phases in ascending order, each phase waiting for
// objects (which a gate's callback, or someone outside, creates), and only
// then does the admission container serve the module's webhooks. A
// fail-closed webhook rejects what it matches until its module serves, so a
// module whose startup needs an object that another module — or itself —
// must first admit depends on that module having started.
//
// Of reads what the analysis needs of a module's resolved definition; Find
// builds the graph of those "cannot finish before" dependencies for a
// set of modules and reports every cycle in it that really blocks startup,
// each as readable steps saying why each dependency exists (gate names and
// sites, kinds, names, webhooks).
//
// A module's pods come from its Deployment: the Deployment and ReplicaSet
// controllers create a ReplicaSet and then Pods in the module's namespace,
// and each must pass every other module's fail-closed webhooks.
//
// A container also cannot start before the required Secrets and ConfigMaps
// the author gave it exist: those its pod mounts (the kubelet mounts every
// volume of a pod before its first init container runs, so a volume holds
// every phase of the admission pod) and those its variables read. Such an
// object is needed like a gate's object is waited for: a phase whose init
// container needs it neither finishes nor runs its callbacks before it
// exists, and the admission container does not serve. It exists once one of
// its creators ran (none declared: external), and it passed the fail-closed
// webhooks that match it.
//
// A module's install applies the CRDs it ships (the chart's crds/) before
// its pods, through the other modules' fail-closed webhooks that match
// them: its pods need its install, and a CRD it ships is created by its
// install — met for its own gates, a creator like a gate's callback for
// another module's.
//
// A wait for an object is held up by its creators only when every declared
// creator is itself blocked: one creator that can finish is enough. An object
// nobody declares to create is external. Webhook matching follows what
// package registration installs: the module's exclusion policy
// (spec.ExclusionPolicy), evaluated by its Admits: a module's webhooks never match objects in its own namespace,
// kube-system or kube-node-lease, nor Nodes, Leases and
// CertificateSigningRequests, nor the objects its own gates wait for as
// spec.Module.Exclusions names them (by kind, namespace and name; a name in
// every namespace of a namespaced kind is not excluded);
// a webhook limited to namespaces matches only those (and cluster-scoped
// objects, which namespace selectors do not filter). Opt-out labels play no
// part: fail-closed capabilities cannot have one. What is not known — an
// object waited for in any namespace — is assumed to match.
package deadlock

package deadlock_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vigilkit/vigil/internal/definition/spec"
	"github.com/vigilkit/vigil/internal/operating/deadlock"
)

type (
	Object  = spec.Object
	Gate    = deadlock.Gate
	Webhook = deadlock.Webhook
	Module  = deadlock.Module
)

func cm(ns, name string) Object {
	return Object{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: name}
}

func cmLabelled(ns, labels string) Object {
	return Object{Version: "v1", Kind: "ConfigMap", Namespace: ns, Labels: labels}
}

func cc(name string) Object {
	return Object{Group: "uds.dev", Version: "v1alpha1", Kind: "ClusterConfig", Name: name}
}

func pkg(ns, name string) Object {
	return Object{Group: "uds.dev", Version: "v1alpha1", Kind: "Package", Namespace: ns, Name: name}
}

func crd(name string) Object {
	return Object{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Name: name}
}

func gate(name string, phase int, waits Object, site string, creates ...Object) Gate {
	return Gate{Name: name, Phase: phase, Waits: waits, Creates: creates, Site: site}
}

func hook(name, group, kind, site string, namespaces ...string) Webhook {
	return Webhook{Name: name, Group: group, Kind: kind, Operations: []string{"CREATE", "UPDATE"}, Namespaces: namespaces, Site: site}
}

// policy is a module whose phase 0 gate waits for obj, with one fail-closed
// webhook.
func policy(obj Object, h Webhook) []Module {
	return []Module{{Name: "policy", Namespace: "policy-system",
		Gates:      []Gate{gate("config", 0, obj, "policy.go:10")},
		FailClosed: []Webhook{h},
	}}
}

// pair is module a (namespace a-system), whose phase 0 gate waits for obj and
// whose fail-closed webhook aHook admits, and module b (namespace b-system),
// without gates, whose fail-closed webhook bHook admits; b's gates are added.
func pair(obj Object, aHook, bHook Webhook, bGates ...Gate) []Module {
	return []Module{
		{Name: "a", Namespace: "a-system", Gates: []Gate{gate("shared", 0, obj, "a.go:10")}, FailClosed: []Webhook{aHook}},
		{Name: "b", Namespace: "b-system", Gates: bGates, FailClosed: []Webhook{bHook}},
	}
}

// pairCycle is the deadlock of pair: a waits for what b admits, b's pods
// wait for a to admit them.
func pairCycle(obj, podKind string, bServes ...string) []string {
	steps := []string{
		"a phase 0 (gate shared at a.go:10) waits for " + obj,
		obj + " is admitted only once b serves: it must pass b's fail-closed webhook b/check at b.go:20 on CREATE",
	}
	steps = append(steps, bServes...)
	return append(steps,
		"b's pods in namespace b-system are created only once a serves: they must pass its fail-closed webhook a/pods at a.go:20 on "+podKind+" CREATE",
		"a serves only after its phase 0 finished",
	)
}

var (
	podHook        = hook("a/pods", "", "Pod", "a.go:20")
	configMapHook  = hook("b/check", "", "ConfigMap", "b.go:20")
	bServesNoGates = "b serves only once its pods exist"
)

func TestFind(t *testing.T) {
	tests := []struct {
		name string
		mods []Module
		want [][]string
	}{
		{
			name: "plain three-phase module",
			mods: []Module{{Name: "uds-core", Namespace: "uds-system",
				Gates: []Gate{
					gate("crd", 0, crd("clusterconfigs.uds.dev"), "main.go:30", cm("uds-system", "seed")),
					gate("seed", 1, cm("uds-system", "seed"), "main.go:35", cc("initial")),
					gate("clusterconfig-initial", 2, cc("initial"), "main.go:40"),
				},
				FailClosed: []Webhook{
					hook("policies/pods", "", "Pod", "main.go:60"),
					hook("policies/clusterconfigs", "uds.dev", "ClusterConfig", "main.go:61"),
				},
			}},
		},
		{
			name: "two modules, each admitting what the other needs",
			mods: pair(cm("apps", "shared"), podHook, configMapHook),
			want: [][]string{pairCycle("ConfigMap apps/shared", "Pod", bServesNoGates)},
		},
		{
			// FailurePolicyIn(Ignore, "b-system") on a's pod webhook: b's
			// pods are admitted while a is down, and nothing waits.
			name: "an Ignore namespace policy breaks the cycle",
			mods: pair(cm("apps", "shared"), Webhook{Name: podHook.Name, Kind: podHook.Kind, Operations: podHook.Operations, Site: podHook.Site, Except: []string{"b-system"}}, configMapHook),
		},
		{
			// Its gate waits for the CRD its install applied before its
			// pods: met, not external, and its own webhook on CRDs is not
			// registered yet.
			name: "a module waiting for the CRD it ships",
			mods: []Module{{Name: "widgets", Namespace: "widgets-system",
				Gates:      []Gate{gate("crd", 0, crd("widgets.example.dev"), "w.go:10")},
				FailClosed: []Webhook{hook("crds", "apiextensions.k8s.io", "CustomResourceDefinition", "w.go:20")},
				Ships:      []Object{crd("widgets.example.dev")},
			}},
		},
		{
			// b admits CRDs fail-closed and its pods need a; a's install
			// applies its CRD before a's pods, through b's webhook.
			name: "an install held up by another module's webhook",
			mods: []Module{
				{Name: "a", Namespace: "a-system", FailClosed: []Webhook{podHook},
					Gates: []Gate{gate("crd", 0, crd("widgets.example.dev"), "a.go:10")},
					Ships: []Object{crd("widgets.example.dev")}},
				{Name: "b", Namespace: "b-system", FailClosed: []Webhook{hook("crds", "apiextensions.k8s.io", "CustomResourceDefinition", "b.go:20")}},
			},
			want: [][]string{{
				"a's install applies CustomResourceDefinition widgets.example.dev",
				"CustomResourceDefinition widgets.example.dev is admitted only once b serves: it must pass b's fail-closed webhook crds at b.go:20 on CREATE",
				"b serves only once its pods exist",
				"b's pods in namespace b-system are created only once a serves: they must pass its fail-closed webhook a/pods at a.go:20 on Pod CREATE",
				"a serves only after its phase 0 finished",
				"a phase 0 runs only once a's pods exist",
				"a's pods are created only after its install applied its CRDs (crds/)",
			}},
		},
		{
			// c's gate waits for a's CRD: a's install creates it, so c is
			// held up while a's install is, by b, whose pods need c.
			name: "another module waiting for a module's CRD",
			mods: []Module{
				{Name: "a", Namespace: "a-system", Ships: []Object{crd("widgets.example.dev")}},
				{Name: "b", Namespace: "b-system", FailClosed: []Webhook{hook("crds", "apiextensions.k8s.io", "CustomResourceDefinition", "b.go:20")}},
				{Name: "c", Namespace: "c-system", FailClosed: []Webhook{hook("pods", "", "Pod", "c.go:20", "b-system")},
					Gates: []Gate{gate("widgets", 0, crd("widgets.example.dev"), "c.go:10")}},
			},
			want: [][]string{{
				"a's install applies CustomResourceDefinition widgets.example.dev",
				"CustomResourceDefinition widgets.example.dev is admitted only once b serves: it must pass b's fail-closed webhook crds at b.go:20 on CREATE",
				"b serves only once its pods exist",
				"b's pods in namespace b-system are created only once c serves: they must pass its fail-closed webhook pods at c.go:20 on Pod CREATE",
				"c serves only after its phase 0 finished",
				"c phase 0 (gate widgets at c.go:10) waits for CustomResourceDefinition widgets.example.dev",
				"CustomResourceDefinition widgets.example.dev is created only by a's install (its crds/)",
			}},
		},
		{
			name: "module without gates or webhooks",
			mods: []Module{{Name: "empty", Namespace: "empty"}},
		},
		{
			name: "gate waiting for no Kubernetes object",
			mods: []Module{{Name: "sampler", Namespace: "s", Gates: []Gate{{Name: "http", Phase: 0, Site: "s.go:1"}},
				FailClosed: []Webhook{hook("any", "*", "*", "s.go:2")}}},
		},
		{
			name: "phase waits for a later phase's creation",
			mods: []Module{{Name: "uds-core", Namespace: "uds-system", Gates: []Gate{
				gate("crd", 0, crd("clusterconfigs.uds.dev"), "main.go:30"),
				gate("clusterconfig-initial", 1, cc("initial"), "main.go:40"),
				gate("x", 2, crd("exemptions.uds.dev"), "main.go:52", cc("initial")),
			}}},
			want: [][]string{{
				"uds-core phase 1 (gate clusterconfig-initial at main.go:40) waits for ClusterConfig initial",
				"ClusterConfig initial is created only by uds-core phase 2 (gate x at main.go:52)",
				"uds-core phase 2 runs after phase 1",
			}},
		},
		{
			name: "phase waits for a creation two phases later",
			mods: []Module{{Name: "m", Namespace: "m", Gates: []Gate{
				gate("first", 0, cm("apps", "late"), "m.go:1"),
				gate("middle", 5, cm("apps", "external"), "m.go:2"),
				gate("last", 7, cm("apps", "external"), "m.go:3", cm("apps", "late")),
			}}},
			want: [][]string{{
				"m phase 0 (gate first at m.go:1) waits for ConfigMap apps/late",
				"ConfigMap apps/late is created only by m phase 7 (gate last at m.go:3)",
				"m phase 7 runs after phase 5",
				"m phase 5 runs after phase 0",
			}},
		},
		{
			name: "earlier creator besides a later one",
			mods: []Module{{Name: "m", Namespace: "m", Gates: []Gate{
				gate("seed", 0, cm("apps", "external"), "m.go:1", cm("apps", "x")),
				gate("use", 1, cm("apps", "x"), "m.go:2"),
				gate("refresh", 2, cm("apps", "external"), "m.go:3", cm("apps", "x")),
			}}},
		},
		{
			name: "every creator blocked",
			mods: []Module{{Name: "m", Namespace: "m", Gates: []Gate{
				gate("use", 1, cm("apps", "x"), "m.go:1"),
				gate("make", 2, crd("external"), "m.go:2", Object{Version: "v1", Kind: "ConfigMap"}),
				gate("remake", 3, crd("external"), "m.go:3", cm("", "x")),
			}}},
			want: [][]string{{
				"m phase 1 (gate use at m.go:1) waits for ConfigMap apps/x",
				"ConfigMap apps/x is created only by m phase 2 (gate make at m.go:2) (or by m phase 3 (gate remake at m.go:3), blocked too)",
				"m phase 2 runs after phase 1",
			}, {
				"m phase 1 (gate use at m.go:1) waits for ConfigMap apps/x",
				"ConfigMap apps/x is created only by m phase 3 (gate remake at m.go:3) (or by m phase 2 (gate make at m.go:2), blocked too)",
				"m phase 3 runs after phase 2",
				"m phase 2 runs after phase 1",
			}},
		},
		{
			name: "creator of another name or namespace",
			mods: []Module{{Name: "m", Namespace: "m", Gates: []Gate{
				gate("use", 0, cm("apps", "x"), "m.go:1"),
				gate("make", 1, cm("apps", "external"), "m.go:2", cm("apps", "y"), cm("other", "x"),
					Object{Group: "other.dev", Kind: "ConfigMap", Name: "x"}),
			}}},
		},
		{
			name: "creator in the same phase",
			mods: []Module{{Name: "m", Namespace: "m", Gates: []Gate{
				gate("use", 0, cm("apps", "x"), "m.go:1"),
				gate("make", 0, cm("apps", "external"), "m.go:2", cm("apps", "x")),
			}}},
		},
		{
			name: "gate waits for what only its own callback creates",
			mods: []Module{{Name: "m", Namespace: "m", Gates: []Gate{
				gate("self", 0, cm("apps", "x"), "m.go:1", cm("apps", "x")),
			}}},
			want: [][]string{{
				"m phase 0 (gate self at m.go:1) waits for ConfigMap apps/x",
				"ConfigMap apps/x is created only by m phase 0 (gate self at m.go:1)",
			}},
		},
		{
			name: "gates of one phase wait for each other's creations",
			mods: []Module{{Name: "m", Namespace: "m", Gates: []Gate{
				gate("ping", 0, cm("apps", "pong"), "m.go:1", cm("apps", "ping")),
				gate("pong", 0, cm("apps", "ping"), "m.go:2", cm("apps", "pong")),
			}}},
			want: [][]string{{
				"m phase 0 (gate ping at m.go:1) waits for ConfigMap apps/pong",
				"ConfigMap apps/pong is created only by m phase 0 (gate pong at m.go:2)",
				"m phase 0 (gate pong at m.go:2) waits for ConfigMap apps/ping",
				"ConfigMap apps/ping is created only by m phase 0 (gate ping at m.go:1)",
			}},
		},
		{
			name: "own fail-closed webhook admits an unnamed gate's object",
			mods: policy(cmLabelled("apps", "app=shop"), hook("configs/check", "", "ConfigMap", "policy.go:20")),
			want: [][]string{{
				"policy phase 0 (gate config at policy.go:10) waits for ConfigMap with labels app=shop in namespace apps",
				"ConfigMap with labels app=shop in namespace apps is admitted only once policy serves: it must pass policy's fail-closed webhook configs/check at policy.go:20 on CREATE",
				"policy serves only after its phase 0 finished",
			}},
		},
		{
			name: "own webhook, object in any namespace, webhook limited to namespaces",
			mods: policy(cmLabelled("", ""), hook("configs/check", "", "ConfigMap", "policy.go:20", "apps")),
			want: [][]string{{
				"policy phase 0 (gate config at policy.go:10) waits for any ConfigMap",
				"any ConfigMap is admitted only once policy serves: it must pass policy's fail-closed webhook configs/check at policy.go:20 on CREATE",
				"policy serves only after its phase 0 finished",
			}},
		},
		{
			name: "own webhook, any kind, CREATE among all operations",
			mods: policy(cc("initial"), Webhook{Name: "all", Group: "*", Kind: "*", Operations: []string{"*"}, Site: "policy.go:20"}),
		},
		{
			name: "own webhook, named object excluded",
			mods: policy(cm("apps", "settings"), hook("configs/check", "", "ConfigMap", "policy.go:20")),
		},
		// UDS Core's deadlock (its Pepr module loads uds-cluster-config before
		// it serves, and its Fail webhook governs ClusterConfigs): with the
		// gate naming the object, vigil's exclusion leaves it out of the
		// webhook and there is no cycle; a gate on any ClusterConfig cannot
		// be excluded, and the shape is found.
		{
			name: "UDS Core's shape: a gate on uds-cluster-config, the module's Fail webhook on ClusterConfigs",
			mods: policy(cc("uds-cluster-config"), hook("uds-core/clusterconfig", "uds.dev", "ClusterConfig", "policy.go:20")),
		},
		{
			name: "UDS Core's shape: a gate on any ClusterConfig, the module's Fail webhook on ClusterConfigs",
			mods: policy(cc(""), hook("uds-core/clusterconfig", "uds.dev", "ClusterConfig", "policy.go:20")),
			want: [][]string{{
				"policy phase 0 (gate config at policy.go:10) waits for any ClusterConfig",
				"any ClusterConfig is admitted only once policy serves: it must pass policy's fail-closed webhook uds-core/clusterconfig at policy.go:20 on CREATE",
				"policy serves only after its phase 0 finished",
			}},
		},
		{
			name: "own webhook, named cluster-scoped object excluded",
			mods: policy(cc("initial"), hook("clusterconfigs/check", "uds.dev", "ClusterConfig", "policy.go:20")),
		},
		{
			name: "own webhook, object in the module's namespace",
			mods: policy(cmLabelled("policy-system", "app=shop"), hook("configs/check", "", "ConfigMap", "policy.go:20")),
		},
		{
			name: "own webhook, object in kube-system",
			mods: policy(cmLabelled("kube-system", "app=shop"), hook("configs/check", "", "ConfigMap", "policy.go:20")),
		},
		{
			name: "own webhook, object in kube-node-lease",
			mods: policy(cmLabelled("kube-node-lease", "app=shop"), hook("configs/check", "", "ConfigMap", "policy.go:20")),
		},
		{
			name: "own webhook limited to other namespaces",
			mods: policy(cmLabelled("apps", "app=shop"), hook("configs/check", "", "ConfigMap", "policy.go:20", "web", "db")),
		},
		{
			name: "own webhook limited to the object's namespace",
			mods: policy(cmLabelled("apps", "app=shop"), hook("configs/check", "", "ConfigMap", "policy.go:20", "web", "apps")),
			want: [][]string{{
				"policy phase 0 (gate config at policy.go:10) waits for ConfigMap with labels app=shop in namespace apps",
				"ConfigMap with labels app=shop in namespace apps is admitted only once policy serves: it must pass policy's fail-closed webhook configs/check at policy.go:20 on CREATE",
				"policy serves only after its phase 0 finished",
			}},
		},
		{
			name: "own webhook without CREATE",
			mods: policy(cmLabelled("apps", ""), Webhook{Name: "configs/check", Kind: "ConfigMap", Operations: []string{"UPDATE", "DELETE"}}),
		},
		{
			name: "own webhook for the same kind of another group",
			mods: policy(cmLabelled("apps", ""), hook("configs/check", "other.dev", "ConfigMap", "policy.go:20")),
		},
		{
			name: "own webhook for cluster plumbing",
			mods: policy(Object{Group: "coordination.k8s.io", Kind: "Lease", Namespace: "apps"}, hook("leases/check", "coordination.k8s.io", "Lease", "policy.go:20")),
		},
		{
			name: "two modules wait for each other's creations",
			mods: []Module{
				{Name: "b", Namespace: "b", Gates: []Gate{gate("b-gate", 0, cm("shared", "a-ready"), "b.go:1", cm("shared", "b-ready"))}},
				{Name: "a", Namespace: "a", Gates: []Gate{gate("a-gate", 0, cm("shared", "b-ready"), "a.go:1", cm("shared", "a-ready"))}},
			},
			want: [][]string{{
				"a phase 0 (gate a-gate at a.go:1) waits for ConfigMap shared/b-ready",
				"ConfigMap shared/b-ready is created only by b phase 0 (gate b-gate at b.go:1)",
				"b phase 0 (gate b-gate at b.go:1) waits for ConfigMap shared/a-ready",
				"ConfigMap shared/a-ready is created only by a phase 0 (gate a-gate at a.go:1)",
			}},
		},
		{
			name: "one module waits for the other's later phase",
			mods: []Module{
				{Name: "a", Namespace: "a", Gates: []Gate{
					gate("crd", 0, crd("things.a.dev"), "a.go:1"),
					gate("wait-b", 1, cm("shared", "b-ready"), "a.go:2", cm("shared", "a-ready")),
				}},
				{Name: "b", Namespace: "b", Gates: []Gate{
					gate("wait-a", 0, cm("shared", "a-ready"), "b.go:1"),
					gate("announce", 1, crd("things.a.dev"), "b.go:2", cm("shared", "b-ready")),
				}},
			},
			want: [][]string{{
				"a phase 1 (gate wait-b at a.go:2) waits for ConfigMap shared/b-ready",
				"ConfigMap shared/b-ready is created only by b phase 1 (gate announce at b.go:2)",
				"b phase 1 runs after phase 0",
				"b phase 0 (gate wait-a at b.go:1) waits for ConfigMap shared/a-ready",
				"ConfigMap shared/a-ready is created only by a phase 1 (gate wait-b at a.go:2)",
			}},
		},
		{
			name: "a waits for what b admits, b's pods for a",
			mods: pair(cmLabelled("apps", "app=shop"), podHook, configMapHook),
			want: [][]string{pairCycle("ConfigMap with labels app=shop in namespace apps", "Pod", bServesNoGates)},
		},
		{
			name: "a waits for what b admits, b's pods for a, b has gates",
			mods: pair(cm("apps", "shared"), podHook, configMapHook, gate("crd", 2, crd("things.b.dev"), "b.go:1")),
			want: [][]string{pairCycle("ConfigMap apps/shared", "Pod", "b serves only after its phase 2 finished", "b phase 2 runs only once b's pods exist")},
		},
		{
			name: "b's ReplicaSet must pass a",
			mods: pair(cm("apps", "shared"), hook("a/pods", "apps", "ReplicaSet", "a.go:20"), configMapHook),
			want: [][]string{pairCycle("ConfigMap apps/shared", "ReplicaSet", bServesNoGates)},
		},
		{
			name: "b's gate on the same named object excludes it from b's webhook",
			mods: pair(cm("apps", "shared"), podHook, configMapHook, gate("shared", 0, cm("apps", "shared"), "b.go:1")),
		},
		{
			// Excluding the name in every namespace would exempt a tenant's
			// ConfigMap of that name anywhere: such a gate is a definition
			// mistake (spec.Module.ExclusionProblems), and nothing is excluded.
			name: "b's gate on the name in any namespace of a namespaced kind does not exclude it",
			mods: pair(cm("apps", "shared"), podHook, configMapHook, gate("shared", 0, cm("", "shared"), "b.go:1")),
			want: [][]string{pairCycle("ConfigMap apps/shared", "Pod", "b serves only after its phase 0 finished", "b phase 0 runs only once b's pods exist"), {
				"b phase 0 (gate shared at b.go:1) waits for ConfigMap shared",
				"ConfigMap shared is admitted only once b serves: it must pass b's fail-closed webhook b/check at b.go:20 on CREATE",
				"b serves only after its phase 0 finished",
			}},
		},
		{
			name: "own webhook, a kind of unknown scope by name in any namespace: excluded as cluster-scoped",
			mods: policy(pkg("", "core"), hook("packages/check", "uds.dev", "Package", "policy.go:20")),
		},
		{
			name: "b's gate by name on a kind of unknown scope does not exclude the object of that name in a namespace",
			mods: pair(pkg("apps", "core"), podHook, hook("b/check", "uds.dev", "Package", "b.go:20"), gate("core", 0, pkg("", "core"), "b.go:1")),
			want: [][]string{pairCycle("Package apps/core", "Pod", "b serves only after its phase 0 finished", "b phase 0 runs only once b's pods exist")},
		},
		{
			name: "b's gate on the name in another namespace does not exclude it",
			mods: pair(cm("apps", "shared"), podHook, configMapHook, gate("shared", 0, cm("other", "shared"), "b.go:1")),
			want: [][]string{pairCycle("ConfigMap apps/shared", "Pod", "b serves only after its phase 0 finished", "b phase 0 runs only once b's pods exist")},
		},
		{
			name: "a's pod webhook limited to other namespaces",
			mods: pair(cm("apps", "shared"), hook("a/pods", "", "Pod", "a.go:20", "apps"), configMapHook),
		},
		{
			name: "a's pod webhook limited to b's namespace",
			mods: pair(cm("apps", "shared"), hook("a/pods", "", "Pod", "a.go:20", "apps", "b-system"), configMapHook),
			want: [][]string{pairCycle("ConfigMap apps/shared", "Pod", bServesNoGates)},
		},
		{
			name: "a's webhook for pods of another group",
			mods: pair(cm("apps", "shared"), hook("a/pods", "other.dev", "Pod", "a.go:20"), configMapHook),
		},
		{
			name: "b in a's namespace",
			mods: func() []Module {
				m := pair(cm("apps", "shared"), podHook, configMapHook)
				m[1].Namespace = "a-system"
				return m
			}(),
		},
		{
			name: "b in kube-system",
			mods: func() []Module {
				m := pair(cm("apps", "shared"), podHook, configMapHook)
				m[1].Namespace = "kube-system"
				return m
			}(),
		},
		{
			name: "a waits for a Namespace b admits",
			mods: pair(Object{Version: "v1", Kind: "Namespace", Name: "team"}, podHook, hook("b/check", "", "Namespace", "b.go:20", "team")),
			want: [][]string{pairCycle("Namespace team", "Pod", bServesNoGates)},
		},
		{
			name: "a waits for a Namespace b's webhook does not select",
			mods: pair(Object{Version: "v1", Kind: "Namespace", Name: "team"}, podHook, hook("b/check", "", "Namespace", "b.go:20", "other")),
		},
		{
			name: "a's own webhook needs b, whose pods need a",
			mods: []Module{
				{Name: "b", Namespace: "b-system", Gates: []Gate{gate("a-config", 0, cmLabelled("apps", "team=a"), "b.go:10")},
					FailClosed: []Webhook{hook("b/pods", "", "Pod", "b.go:20")}},
				{Name: "a", Namespace: "a-system", Gates: []Gate{gate("b-config", 0, cmLabelled("apps", "team=b"), "a.go:10")},
					FailClosed: []Webhook{hook("a/configs", "", "ConfigMap", "a.go:20"), hook("a/pods", "", "Pod", "a.go:21")}},
			},
			want: [][]string{{
				// each module's pods need the other
				"a's pods in namespace a-system are created only once b serves: they must pass its fail-closed webhook b/pods at b.go:20 on Pod CREATE",
				"b serves only after its phase 0 finished",
				"b phase 0 runs only once b's pods exist",
				"b's pods in namespace b-system are created only once a serves: they must pass its fail-closed webhook a/pods at a.go:21 on Pod CREATE",
				"a serves only after its phase 0 finished",
				"a phase 0 runs only once a's pods exist",
			}, {
				// b's gate needs a, whose pods need b
				"a's pods in namespace a-system are created only once b serves: they must pass its fail-closed webhook b/pods at b.go:20 on Pod CREATE",
				"b serves only after its phase 0 finished",
				"b phase 0 (gate a-config at b.go:10) waits for ConfigMap with labels team=a in namespace apps",
				"ConfigMap with labels team=a in namespace apps is admitted only once a serves: it must pass a's fail-closed webhook a/configs at a.go:20 on CREATE",
				"a serves only after its phase 0 finished",
				"a phase 0 runs only once a's pods exist",
			}, {
				// a's gate needs a itself
				"a phase 0 (gate b-config at a.go:10) waits for ConfigMap with labels team=b in namespace apps",
				"ConfigMap with labels team=b in namespace apps is admitted only once a serves: it must pass a's fail-closed webhook a/configs at a.go:20 on CREATE",
				"a serves only after its phase 0 finished",
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got [][]string
			for _, c := range deadlock.Find(tt.mods) {
				got = append(got, c.Steps)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Find:\n%s\nwant:\n%s", show(got), show(tt.want))
			}
		})
	}
}

func show(cycles [][]string) string {
	var b strings.Builder
	for _, c := range cycles {
		fmt.Fprintf(&b, "  cycle:\n")
		for _, s := range c {
			fmt.Fprintf(&b, "    %q\n", s)
		}
	}
	if len(cycles) == 0 {
		b.WriteString("  none\n")
	}
	return b.String()
}

func TestFindDeterministic(t *testing.T) {
	// Three modules, each waiting for what the next admits or creates, with
	// several cycles among them.
	mods := []Module{
		{Name: "alpha", Namespace: "alpha", Gates: []Gate{
			gate("z-late", 1, cm("x", "from-beta"), "alpha.go:2"),
			gate("a-early", 0, cmLabelled("x", "for=gamma"), "alpha.go:1", cm("x", "from-alpha")),
		}, FailClosed: []Webhook{hook("alpha/pods", "", "Pod", "alpha.go:9")}},
		{Name: "beta", Namespace: "beta", Gates: []Gate{
			gate("wait", 0, cm("x", "from-alpha"), "beta.go:1", cm("x", "from-beta")),
		}, FailClosed: []Webhook{hook("beta/secrets", "", "Secret", "beta.go:9")}},
		{Name: "gamma", Namespace: "gamma", Gates: []Gate{
			gate("secret", 0, Object{Version: "v1", Kind: "Secret", Namespace: "x"}, "gamma.go:1"),
		}, FailClosed: []Webhook{hook("gamma/configs", "", "ConfigMap", "gamma.go:9")}},
	}
	want := deadlock.Find(mods)
	if len(want) < 2 {
		t.Fatalf("want several cycles, got %d:\n%v", len(want), want)
	}
	seen := map[string]bool{}
	for _, c := range want {
		if len(c.Steps) == 0 {
			t.Fatalf("empty cycle in %v", want)
		}
		// Each cycle once: no other is the same or a rotation of it.
		for i := range c.Steps {
			key := strings.Join(append(slices.Clone(c.Steps[i:]), c.Steps[:i]...), "\n")
			if seen[key] {
				t.Errorf("cycle reported twice: %v", c)
			}
		}
		seen[strings.Join(c.Steps, "\n")] = true
	}
	// The same modules in any order, with gates in any order, give the same.
	perms := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for _, p := range perms {
		var in []Module
		for _, i := range p {
			m := mods[i]
			m.Gates = slices.Clone(m.Gates)
			slices.Reverse(m.Gates)
			in = append(in, m)
		}
		for range 3 {
			if got := deadlock.Find(in); !reflect.DeepEqual(got, want) {
				t.Fatalf("order %v:\n%v\nwant:\n%v", p, got, want)
			}
		}
	}
	// Each starts at its smallest node, and they come in that order: by
	// module name first.
	var firsts []string
	for _, c := range want {
		firsts = append(firsts, strings.FieldsFunc(c.Steps[0], func(r rune) bool { return r == ' ' || r == '\'' })[0])
	}
	if firsts[0] != "alpha" || !slices.IsSorted(firsts) {
		t.Errorf("cycles start at %v, want alpha first and sorted", firsts)
	}
}

func TestFindManyCycles(t *testing.T) {
	// Every module waits for every other's creation, over three phases, and
	// every module's pods pass every other's webhook: far more cycles than
	// anyone reads, found fast and bounded.
	var mods []Module
	const n = 30
	for i := range n {
		var gates []Gate
		for j := range n {
			if j != i {
				gates = append(gates, gate(fmt.Sprintf("from-%d", j), j%3, cm("x", fmt.Sprintf("m%d-ready", j)), ""))
			}
		}
		gates[0].Creates = []Object{cm("x", fmt.Sprintf("m%d-ready", i))}
		mods = append(mods, Module{Name: fmt.Sprintf("m%02d", i), Namespace: fmt.Sprintf("m%d", i), Gates: gates,
			FailClosed: []Webhook{hook("pods", "", "Pod", "")}})
	}
	if got := deadlock.Find(mods); len(got) != 1000 {
		t.Fatalf("got %d cycles, want the 1000 at most", len(got))
	}
}

func TestCycleString(t *testing.T) {
	c := deadlock.Cycle{Steps: []string{"a waits for x", "x is created only by b", "b runs after a"}}
	if got, want := c.String(), "a waits for x → x is created only by b → b runs after a → a waits for x"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (deadlock.Cycle{}).String(); got != "" {
		t.Errorf("empty String() = %q", got)
	}
}

func ExampleFind() {
	mods := []deadlock.Module{{
		Name: "uds-core", Namespace: "uds-system",
		Gates: []deadlock.Gate{
			{Name: "crd", Phase: 0, Waits: crd("clusterconfigs.uds.dev"), Site: "main.go:30"},
			{Name: "clusterconfig-initial", Phase: 1, Waits: cc("initial"), Site: "main.go:40"},
			{Name: "defaults", Phase: 2, Waits: crd("exemptions.uds.dev"), Creates: []spec.Object{cc("initial")}, Site: "main.go:52"},
		},
	}}
	for _, c := range deadlock.Find(mods) {
		for _, s := range c.Steps {
			fmt.Println(s)
		}
	}
	// Output:
	// uds-core phase 1 (gate clusterconfig-initial at main.go:40) waits for ClusterConfig initial
	// ClusterConfig initial is created only by uds-core phase 2 (gate defaults at main.go:52)
	// uds-core phase 2 runs after phase 1
}

// Package waitfor is the engine behind startup gates and `vigil wait`: it waits,
// by watching, until the objects a selector picks satisfy a condition, and
// returns them.
//
// It is level-driven in the way client-go's UntilWithSync is: an informer lists
// and then watches the selected objects, and after every change the condition is
// evaluated against everything the informer holds, so an already-satisfied wait
// returns after the first list, a burst of changes costs one evaluation, and a
// watch broken by an API server restart or ended by 410 Gone resumes by
// relisting without missing the final state. Server-side field and label
// selectors keep the watch to the objects asked for (one object, by name, for a
// named gate).
//
// It owns type resolution and CRD waiting, for gates and `vigil wait` alike.
// Waiter.Resolve resolves a TYPE argument as kubectl does (through discovery:
// plural, singular, kind or short name, TYPE.GROUP or TYPE.VERSION.GROUP, read
// as kubectl's ParseResourceArg reads it); a type not served yet that a
// CustomResourceDefinition could add is a *NotServedError, and
// Waiter.AwaitServed waits for it. A kind whose CustomResourceDefinition is not
// installed yet is a waiting state of Waiter.Wait too, not an error: the
// engine watches CRDs until one serving the kind is Established (resolve.go,
// crd.go), then waits for discovery to catch up (it lags behind the
// condition) before watching the objects. RBAC refusals end the wait with an
// error that names the verb, the resource, the namespace and the rule to add.
package waitfor

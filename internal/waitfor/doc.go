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
// A kind whose CustomResourceDefinition is not installed yet is a waiting state,
// not an error: the engine watches CRDs until one serving the kind is
// Established, then waits for discovery to catch up (it lags behind the
// condition) before watching the objects. RBAC refusals end the wait with an
// error that names the verb, the resource, the namespace and the rule to add.
package waitfor

// Package callctx is what a gate callback or a handler finds in its context,
// in every role: the Store of its capability, the module-wide Store, and the
// API server as the role's process reaches it. Roles put it there; the facade's
// StoreFrom, ClientFrom and ConfigFrom read it. While an
// admission binding runs, it also carries the record of the binding's lister
// reads (internal/serving/fresh), which the listers write and the admission engine
// reads.
//
// It is also how a role hands the module's declarations what they read at
// run time, without calling back into them: the informer cache and freshness
// barriers the listers read (Role.Cache, from the handler's context), and the
// folder gate results are read from (HandoffDir, by module).
package callctx

// Package policytest runs a module's admission on test cases without a
// cluster: each case an object (or an AdmissionReview's parts) sent through
// the module's webhooks in process, as the API server would send it — the
// capabilities whose webhooks match it (kinds, operations, the namespaces
// and labels they exclude), mutations first and in order, each seeing the
// object as those before it patched it, then every validation — with the
// module's listers fed from the case's objects and its Store from the
// case's keys. The verdict, message, warnings and patch are compared with
// what the case expects.
//
// The same cases run through a real API server (RunCluster): the object is
// sent with dryRun=All, as the case's user, after its objects are created.
//
// `<module> test DIR` (internal/commands/modcli) and vigiltest.Review and
// vigiltest.Cases run it.
package policytest

// Package meshtest is the service mesh of vigil's own tests: the webhook
// configuration a sidecar injector such as istiod's registers, fail-closed on
// the Pod creates of the namespaces it injects, against which the tests of
// the deadlock analysis, vigil status and a real node build a deadlock.
package meshtest

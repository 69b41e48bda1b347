// Package testkit holds what vigil's own tests share and a module author
// does not need: the harness that runs a module's admission role in process,
// the API-server proxies that cut or delay a connection, and a recorder of
// the reads and creates a client makes (RecordReads, RecordCreates). The load and measurement harness
// is internal/testsupport/bench. What an author uses is in vigiltest;
// examples use that alone, since an example must build on the public API.
package testkit

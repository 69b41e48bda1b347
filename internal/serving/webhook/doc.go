// Package webhook serves a module's admission handler over HTTPS, with the
// endpoints a Deployment's probes expect, /healthz and /readyz, and /metrics
// over plain HTTP on an address of its own.
//
// Limits bound what clients can make the server hold — requests decided and
// bodies read at once, the bytes of large bodies, the time to send headers
// and a body, open connections — and what exceeds them is answered at once,
// so that the API server applies the webhook's failure policy rather than
// waiting for its timeout. Connections are bounded per client address as
// well as in all; idle ones make room for new ones, and a client address
// below its fair share of the listener takes a connection — idle, or still
// reading a request — of the address holding the most (connLimit), so that
// no number of clients can hold the connections the API server needs.
// Bodies must arrive at a least rate, so that trickling ones are cut within
// a second or so. The metrics listener has the same mechanism with smaller
// limits.
//
// TLS 1.2 is the floor. The serving certificate is read from files and read
// again when they change — Secrets mounted into a pod change by a symlink
// swap, so the folder is watched, not the file (controller-runtime's
// certwatcher). On stop the server first reports itself not ready and keeps
// serving for a while, so that the endpoints controller and the API server's
// webhook clients move away before connections close, then drains the
// requests in flight.
package webhook

// Package certs issues the TLS material vigil's webhook servers present to the
// API server: a private certificate authority, whose certificate becomes a
// webhook's caBundle, and serving certificates it signs for the server's DNS
// names and IP addresses (127.0.0.1 when the API server calls a loopback URL).
//
// Keys are ECDSA P-256: small, fast to generate and accepted by every API server
// since 1.0. Certificates are encoded as PEM, the form Secrets and caBundles use.
package certs

#!/usr/bin/env bash
# Prints the folder holding kube-apiserver, etcd and kubectl on stdout, building
# them from the Go module proxy first when they are missing (progress on stderr).
# The release: $VIGIL_KUBERNETES_VERSION (1.33 to 1.37), else 1.37. With --node,
# the node's binaries instead. The program imports only the builder, so it
# compiles in seconds and the build's progress starts at once.
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./hack/control-plane "$@"

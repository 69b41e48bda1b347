#!/usr/bin/env bash
# Prints the folder holding kube-apiserver, etcd and kubectl on stdout, building
# them from the Go module proxy first when they are missing (progress on stderr).
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./cmd/vigil controlplane env

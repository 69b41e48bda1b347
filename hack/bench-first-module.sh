#!/usr/bin/env bash
# bench-first-module: how long a new module author waits, from `vigil init` to
# a passing scaffold test (the control plane already built):
#   init_s        vigil init: the project written and go mod tidy run
#   first_test_s  the scaffold's `make test` with an empty Go build cache
#                 (a fresh GOCACHE; the module cache is the machine's own)
#   warm_test_s   `make test` again, the build cache now warm
# The scaffold requires vigil through a replace to this checkout, as
# `vigil init --vigil-path` writes it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
assets="$(hack/control-plane.sh)"
work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/vigil" ./cmd/vigil

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

began="$(now)"
"$work/vigil" init first-module --vigil-path "$root" --dir "$work/first-module" >/dev/null
init_s="$(since "$began")"

cd "$work/first-module"
export GOWORK=off GOCACHE="$work/gocache" KUBEBUILDER_ASSETS="$assets"
began="$(now)"
make test >"$work/first.log" 2>&1 || { cat "$work/first.log"; exit 1; }
first_test_s="$(since "$began")"

began="$(now)"
make test >"$work/warm.log" 2>&1 || { cat "$work/warm.log"; exit 1; }
warm_test_s="$(since "$began")"

echo "first-module: init_s=$init_s first_test_s=$first_test_s warm_test_s=$warm_test_s"

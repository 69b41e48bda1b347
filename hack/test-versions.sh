#!/usr/bin/env bash
# Runs the suites that need an API server — every package whose tests start
# one, every example's tests (the uds-core port's UDS Core cases among them)
# and the demo — on each Kubernetes release given (default: every supported
# one), then prints one line:
#   versions: 1.33=pass 1.34=pass ...
# A release that fails names its first failing test. Each release's output
# goes to $VERSIONS_LOG_DIR/<release>.log (a temporary folder by default),
# with a line per package on the terminal as it finishes.
set -uo pipefail
cd "$(dirname "$0")/.."
versions=("$@")
if [ ${#versions[@]} -eq 0 ]; then
	mapfile -t versions < <(go run ./hack/control-plane --list)
fi
logs="${VERSIONS_LOG_DIR:-$(mktemp -d)}"
mkdir -p "$logs"
# The packages whose tests start an API server, read from their imports.
mapfile -t pkgs < <(go list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... |
	grep -E ' [^ ]*(/vigiltest|/internal/testsupport/testenv|/internal/testsupport/testkit|/internal/clusters/controlplane)( |$)' | cut -d' ' -f1)
summary=()
for v in "${versions[@]}"; do
	log="$logs/$v.log"
	start=$(date +%s)
	echo "==> Kubernetes $v: control plane (built from the Go module proxy on first use, then cached)"
	if ! assets="$(hack/control-plane.sh --kubernetes "$v")"; then
		summary+=("$v=fail(build)")
		continue
	fi
	echo "    $assets ($(( $(date +%s) - start ))s); ${#pkgs[@]} packages, log $log"
	# The whole output to the log; a line per package (and a line of
	# progress whenever the tests print nothing for 20 s) to the terminal.
	CI="${CI:-true}" VIGIL_KUBERNETES_VERSION="$v" KUBEBUILDER_ASSETS="$assets" \
		hack/progress.sh "Kubernetes $v: go test" go test -count=1 -timeout 25m "${pkgs[@]}" |
		tee "$log" | { grep --line-buffered -E '^(ok|FAIL|---)' || true; } |
		{ grep --line-buffered -v '^--- PASS' || true; } | sed -u 's/^/    /'
	rc=${PIPESTATUS[0]}
	echo "==> Kubernetes $v: make demo" | tee -a "$log"
	VIGIL_KUBERNETES_VERSION="$v" KUBEBUILDER_ASSETS="$assets" PROGRESS_LOG="$log" \
		hack/progress.sh "Kubernetes $v: make demo" make --no-print-directory demo || rc=$((rc == 0 ? 1 : rc))
	if [ "$rc" -eq 0 ]; then
		summary+=("$v=pass")
	else
		first="$(grep -m1 -E '^\s*--- FAIL: ' "$log" | sed -E 's/^\s*--- FAIL: ([^ ]+).*/\1/')"
		[ -n "$first" ] || first="$(grep -m1 -E '^(FAIL|panic|make: \*\*\*)' "$log" | tr -s ' ' | cut -c1-80)"
		summary+=("$v=fail(${first:-see $log})")
	fi
	echo "    Kubernetes $v: $(( $(date +%s) - start ))s"
done
echo "versions: ${summary[*]}"
for s in "${summary[@]}"; do
	[[ "$s" == *=pass ]] || exit 1
done

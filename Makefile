# vigil's developer commands. `make test` is the one that must pass.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c

# Go 1.27.3, which the go command fetches from the Go module proxy on first
# use (about 76 MB): the Go 1.26 on a fresh machine has standard-library
# vulnerabilities that govulncheck finds in code vigil calls (net/http,
# crypto/tls, crypto/x509). Every recipe, and every go command the tests
# start, runs with it. Set GOTOOLCHAIN yourself to run go commands by hand.
export GOTOOLCHAIN := go1.27.3

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
CONTROLLER_GEN := sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
GOVULNCHECK := golang.org/x/vuln/cmd/govulncheck@v1.9.0
DEADCODE := golang.org/x/tools/cmd/deadcode@v0.52.0
GO_TEST_FLAGS ?= -count=1 -timeout 25m

# KUBERNETES=1.34 runs any target on that Kubernetes release (1.33 to 1.37;
# 1.37 when unset): the control plane and node are built for it and every
# test starts it. It sets VIGIL_KUBERNETES_VERSION, which the tools and the
# test kit read.
ifdef KUBERNETES
export VIGIL_KUBERNETES_VERSION := $(KUBERNETES)
endif
# CONTAINERD=built runs make e2e's node on containerd 2.x built from the Go
# module proxy instead of the machine's package (CONTAINERD=package); unset,
# the package through 1.37 and the built one from 1.38.
ifdef CONTAINERD
export VIGIL_NODE_CONTAINERD := $(CONTAINERD)
endif

.PHONY: api api-check release e2e test test-versions demo control-plane vet staticcheck tidy deadcode vulncheck unit generate bench-store bench-gates bench-admission bench-watch soak-registration soak-fresh bench-recheck soak-watch soak-uds bench-uds bench-scale bench-ship bench-first-module

## test: build the control plane if needed, then vet, staticcheck, the go.mod tidiness check, the public API check, deadcode, govulncheck and every test under the race detector
test:
	@start=$$(date +%s); \
	echo "==> control plane (built from the Go module proxy on first use, then cached)"; \
	assets="$$(hack/control-plane.sh)"; \
	echo "    $$assets ($$(( $$(date +%s) - start ))s)"; \
	echo "==> go vet"; hack/progress.sh "go vet" go vet ./...; \
	echo "==> staticcheck"; hack/progress.sh staticcheck go run $(STATICCHECK) ./...; \
	echo "==> go mod tidy -diff (go.mod and go.sum must be as go mod tidy leaves them)"; \
	if ! go mod tidy -diff; then \
		echo "go.mod or go.sum is not tidy: run 'go mod tidy' and commit the change shown above" >&2; exit 1; \
	fi; \
	echo "==> api-check (api/vigil.txt is the public API the code exports)"; \
	hack/progress.sh api-check go run ./hack/api -check; \
	echo "==> deadcode (nothing unreachable from a main or a test)"; \
	dead="$$(hack/progress.sh deadcode go run $(DEADCODE) -test ./...)"; \
	if [ -n "$$dead" ]; then \
		echo "$$dead"; echo "deadcode: the functions above are reached by no main and no test: delete them, or test what they do" >&2; exit 1; \
	fi; \
	echo "==> govulncheck ($(GOVULNCHECK); database golang.org/x/vulndb from the Go module proxy, converted on first use, then cached)"; \
	if db="$$(hack/vulndb.sh)"; then \
		echo "    $$db ($$(( $$(date +%s) - start ))s)"; dbflag="-db=file://$$db"; \
	else \
		echo "    the local vulnerability database could not be built (above): falling back to https://vuln.go.dev" >&2; dbflag=""; \
	fi; \
	bin="$${XDG_CACHE_HOME:-$$HOME/.cache}/vigil/tools/$(notdir $(GOVULNCHECK))"; GOBIN="$$bin" go install $(GOVULNCHECK); \
	rc=0; hack/progress.sh govulncheck "$$bin/govulncheck" $$dbflag ./... || rc=$$?; \
	if [ "$$rc" -eq 3 ]; then \
		echo "govulncheck: the code calls a vulnerable symbol (above): move the module, or the Go toolchain, to the version 'Fixed in' names" >&2; exit 1; \
	elif [ "$$rc" -ne 0 ]; then \
		echo "govulncheck could not check the code (exit $$rc, above)" >&2; exit 1; \
	fi; \
	echo "==> go test -race ($$(( $$(date +%s) - start ))s of setup)"; \
	KUBEBUILDER_ASSETS="$$assets" hack/progress.sh "go test -race" go test -race $(GO_TEST_FLAGS) ./...; \
	echo "==> fuzz the AdmissionReview decoder briefly (new inputs kept unminimized: minimizing one can outlast the 10s and fail the run)"; \
	hack/progress.sh fuzz go test -run '^$$' -fuzz FuzzDecodeReview -fuzztime 10s -fuzzminimizetime 0 ./internal/serving/admit/

## control-plane: build kube-apiserver, etcd and kubectl into the cache and print their folder (KUBERNETES=1.34 for another release)
control-plane:
	@hack/control-plane.sh

## test-versions: the suites that need an API server, and make demo, on each supported Kubernetes release (VERSIONS="1.33" for some); prints `versions: 1.33=pass ...`
test-versions:
	@hack/test-versions.sh $(VERSIONS)

## api: write api/vigil.txt, the public API (refused when incompatible without a new minor version in CHANGELOG.md)
api:
	go run ./hack/api

## release: cross-build the vigil CLI for linux and darwin, amd64 and arm64, into dist/ with an SPDX SBOM each and SHA256SUMS, reproducibly (VERSION= overrides the changelog's newest)
release:
	go run ./hack/release $(if $(VERSION),-version $(VERSION))

## api-check: fail when api/vigil.txt is not what the code exports
api-check:
	go run ./hack/api -check

vet:
	go vet ./...

staticcheck:
	go run $(STATICCHECK) ./...

## tidy: fail if go mod tidy would change go.mod or go.sum
tidy:
	@go mod tidy -diff || { echo "go.mod or go.sum is not tidy: run 'go mod tidy' and commit the change shown above" >&2; exit 1; }

## deadcode: fail if a function is reached by no main and no test
deadcode:
	@dead="$$(go run $(DEADCODE) -test ./...)"; if [ -n "$$dead" ]; then echo "$$dead"; exit 1; fi

## vulncheck: govulncheck against the local copy of the Go vulnerability database (hack/vulndb.sh)
vulncheck:
	@go run $(GOVULNCHECK) -db "file://$$(hack/vulndb.sh)" ./...

## unit: the tests that need no control plane, in every package (those that need one skip under -short), and every example's policy cases (`<module> test testdata/policies`, in process)
unit:
	go test -count=1 -short ./...
	@for d in examples/*/testdata/policies; do \
		example="$${d%/testdata/policies}"; \
		echo "go run ./$$example test $$d"; \
		go run "./$$example" test "$$d" || exit 1; \
	done

## generate: regenerate deep copies and CRDs from the Go API types
generate:
	go run $(CONTROLLER_GEN) object paths=./store/v1alpha1/...
	go run $(CONTROLLER_GEN) crd:crdVersions=v1 paths=./store/v1alpha1/... output:crd:dir=./store/v1alpha1/crd

## bench-store: Set throughput and SetAndWait latency against the real API server
bench-store:
	@assets="$$(hack/control-plane.sh)"; \
	KUBEBUILDER_ASSETS="$$assets" go test -count=1 -run '^$$' -bench 'BenchmarkStore' -benchtime 2000x ./store/

## bench-gates: gate reaction latency, kubectl wait for comparison, a satisfied gate as a process
bench-gates:
	@assets="$$(hack/control-plane.sh)"; \
	KUBEBUILDER_ASSETS="$$assets" go test -count=1 -run '^$$' -bench 'BenchmarkGates' -benchtime 200x -timeout 30m ./internal/runtime/waitfor/

## bench-admission: the labeler module under load over TLS keep-alive beside a floor server (CPU per request against it), the cost of a create through the API server with its webhooks beside the floor server as the same webhooks and as fewer, and a Lister of 10,000 objects read under load
bench-admission:
	@assets="$$(hack/control-plane.sh)"; \
	KUBEBUILDER_ASSETS="$$assets" go test -count=1 -run '^$$' -bench 'BenchmarkAdmission' -benchtime 1x -timeout 20m ./test/labeler/

## bench-watch: 10,000 ConfigMaps created while a watcher process runs: time until each is reconciled, events/s, peak RSS
bench-watch:
	@assets="$$(hack/control-plane.sh)"; \
	KUBEBUILDER_ASSETS="$$assets" go test -count=1 -run '^$$' -bench 'BenchmarkWatch' -benchtime 1x -timeout 20m ./internal/testsupport/soak/

## bench-first-module: vigil init to a passing scaffold test: init, first test (empty build cache), warm test
bench-first-module:
	@hack/bench-first-module.sh

## soak-registration: creates without pause while a module starts, registers and is replaced: none rejected; then every admission replica gone for 60 s, without and with FailOpenAfter; then an upgrade 1 → 2 applied by the Helm SDK and by kubectl apply: none rejected or unmutated
soak-registration:
	@assets="$$(hack/control-plane.sh)"; \
	KUBEBUILDER_ASSETS="$$assets" VIGIL_SOAK_OUTAGE=60s go test -count=1 -run '^$$' -bench 'BenchmarkSoakRegistration' -benchtime 1x -timeout 15m ./internal/testsupport/soak/

## soak-fresh: Exemptions created and deleted, each at once followed by a Pod, while the module's watch events are held back: no decision on stale data
soak-fresh:
	@assets="$$(hack/control-plane.sh)"; \
	KUBEBUILDER_ASSETS="$$assets" go test -count=1 -run '^$$' -bench 'BenchmarkSoakFresh' -benchtime 1x -timeout 15m ./internal/testsupport/soak/

## bench-recheck: Pods in 1,000 namespaces, grown in steps (RECHECK_PODS=1000,50000 by default): a Pod lister's reads by key and of a namespace, and a recheck's round trip on one Pod, one namespace and the whole type, with the bytes each reads
bench-recheck:
	@assets="$$(hack/control-plane.sh)"; \
	KUBEBUILDER_ASSETS="$$assets" go test -count=1 -run '^$$' -bench 'BenchmarkRecheck$$' -benchtime 1x -timeout 30m ./internal/testsupport/soak/

## soak-watch: a gate, an admission lister and the watcher's OnEvent and Reconcile behind a fault proxy that stalls, blackholes, throttles (429), expires (410) and cuts their connections, 15 rounds, while objects change (one deleted and created again in each blackhole): silences noticed, recovery, no stale decision, every final view equal to the API server's
soak-watch:
	@assets="$$(hack/control-plane.sh)"; \
	KUBEBUILDER_ASSETS="$$assets" go test -count=1 -run '^$$' -bench 'BenchmarkSoakWatch' -benchtime 1x -timeout 20m ./internal/testsupport/soak/

## bench-uds: UDS Core's policy engine (examples/uds-core) under load at c=16 over TLS keep-alive, a compliant Pod through every policy (validate and mutate) and a denied one, beside the floor server in the same run: CPU per request, req/s, p99, RSS
bench-uds:
	@assets="$$(hack/control-plane.sh)"; \
	KUBEBUILDER_ASSETS="$$assets" go test -count=1 -run '^$$' -bench 'BenchmarkUDS$$' -benchtime 1x -timeout 15m ./test/uds-core/

## soak-uds: UDS Core's policy engine (examples/uds-core, driven from test/uds-core): an Exemption and the privileged Pod it exempts in one kubectl apply -f, 300 times, 8 at a time, the module's watch events held back 250 ms: no false denial
soak-uds:
	@assets="$$(hack/control-plane.sh)"; \
	KUBEBUILDER_ASSETS="$$assets" go test -count=1 -run '^$$' -bench 'BenchmarkSoakUDSExemptions' -benchtime 1x -timeout 15m ./test/uds-core/

## bench-scale: 1,000 simulated nodes (kwok) and 1,000 / 10,000 / 50,000 pods (SCALE_PODS=1000,10000 for fewer; SCALE_ADMISSION_REPLICAS, 2 by default): per step and create rate, create latency with UDS Core's engine, without, and through a floor server as the same webhooks, the engine's own review time, its CPU and memory, a Pod reconciler's memory, relist peak and lag, the audit
bench-scale:
	@assets="$$(hack/control-plane.sh)"; \
	KUBEBUILDER_ASSETS="$$assets" go test -count=1 -run '^$$' -bench 'BenchmarkScale$$' -benchtime 1x -timeout 3h ./test/scale/

## bench-ship: build examples/labeler's image (both platforms) twice: seconds, MiB of the host platform's layers, same digest?; then the chart's install time
# The chart's figure comes from a benchmark that prints `ship-chart: chart_install_s=<s>`:
# the quota example's chart installed through the Helm SDK against the test API server.
SHIP_CHART_PKG ?= ./internal/shipping/chart/
SHIP_CHART_BENCH ?= BenchmarkChartInstall$$
bench-ship:
	@image="$$(go test -count=1 -run '^$$' -bench 'BenchmarkShip$$' -benchtime 1x -timeout 30m ./internal/shipping/image/ | tee /dev/stderr | sed -n 's/^ship-image: //p')"; \
	chart="chart_install_s=n/a"; \
	if [ -n "$(SHIP_CHART_PKG)" ]; then \
		assets="$$(hack/control-plane.sh)"; \
		chart="$$(KUBEBUILDER_ASSETS="$$assets" go test -count=1 -run '^$$' -bench '$(SHIP_CHART_BENCH)' -benchtime 3x -timeout 20m $(SHIP_CHART_PKG) | tee /dev/stderr | sed -n 's/^ship-chart: //p')"; \
	fi; \
	echo "ship: $$image $$chart"

## demo: UDS Core's policy engine on vigil (examples/uds-core), from an empty cluster to admission, narrated (builds the control plane on first use)
demo:
	@echo "==> control plane (built from the Go module proxy on first use, then cached)"; \
	hack/control-plane.sh >/dev/null; \
	hack/progress.sh demo go run ./hack/demo

## e2e: a real node on this machine (needs root; installs containerd, runc, the CNI plugins, iptables and conntrack with apt-get when missing): a pod from an image imported by digest, the kubernetes Service from a pod, a killed kubelet reported, nothing left at stop; the clusterconfig module from its own image and chart with its CRDs applied late: phases in order, a gate container killed, admission Ready and registered, a mutation, a denial, an Exemption, an upgrade 1.0.0 → 2.0.0 under load, a Helm uninstall (prints an e2e: line); the kit's module by the runner and by the kubelet, compared
e2e:
	@echo "==> control plane and node binaries (built from the Go module proxy on first use, then cached)"; \
	hack/control-plane.sh >/dev/null; hack/control-plane.sh --node >/dev/null; \
	if [ "$${VIGIL_NODE_CONTAINERD:-}" = built ]; then hack/control-plane.sh --containerd >/dev/null; fi; \
	VIGIL_E2E=1 hack/progress.sh "go test ./internal/clusters/node/" go test -count=1 -v -timeout 20m ./internal/clusters/node/
	@echo "==> the kit's module both ways, by the runner and by the node's kubelet"
	VIGIL_E2E=1 hack/progress.sh "go test ./vigiltest/" go test -count=1 -v -timeout 20m -run 'TestTheRunnerAndANodeAgree' ./vigiltest/
	@echo "==> UDS Core's policy engine from its image on the node, before UDS Core's CRDs"
	VIGIL_E2E=1 hack/progress.sh "go test ./test/uds-core/" go test -count=1 -v -timeout 20m -run 'TestUDSCoreOnANode' ./test/uds-core/

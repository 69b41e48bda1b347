# vigil's developer commands. `make test` is the one that must pass.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GO_TEST_FLAGS ?= -count=1 -timeout 15m

.PHONY: test control-plane vet staticcheck unit

## test: build the control plane if needed, then vet, staticcheck and every test
test:
	@start=$$(date +%s); \
	echo "==> control plane (built from the Go module proxy on first use, then cached)"; \
	assets="$$(hack/control-plane.sh)"; \
	echo "    $$assets ($$(( $$(date +%s) - start ))s)"; \
	echo "==> go vet"; go vet ./...; \
	echo "==> staticcheck"; go run $(STATICCHECK) ./...; \
	echo "==> go test ($$(( $$(date +%s) - start ))s of setup)"; \
	KUBEBUILDER_ASSETS="$$assets" go test $(GO_TEST_FLAGS) ./...

## control-plane: build kube-apiserver, etcd and kubectl into the cache and print their folder
control-plane:
	@hack/control-plane.sh

vet:
	go vet ./...

staticcheck:
	go run $(STATICCHECK) ./...

## unit: the tests that need no control plane
unit:
	go test -count=1 -short ./internal/certs/ ./internal/controlplane/ .

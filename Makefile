# llmprobe — build, test and run.
#
#   make run     the daemon probing the built-in simulator (embedded demo config)
#   make test    everything CI runs: vet, race tests, promtool checks, real Prometheus e2e
#   make bench   benchmarks that print figures (harness capacity, simulator cost, ...)
#   make soak    an hour of the daemon against the simulator; fails on drift (docs/soak.md)

GO        ?= go
BIN       := $(CURDIR)/bin
PROM_VERSION := v0.316.0
PROMETHEUS := $(BIN)/prometheus
PROMTOOL   := $(BIN)/promtool
VEGETA_VERSION := v12.13.0
VEGETA     := $(BIN)/vegeta
# Deployment tooling the tests in deploy/ and alerts/ run (docs/deploy.md).
HELM_VERSION        := v3.22.0
HELM                := $(BIN)/helm
ALERTMANAGER_VERSION := v0.35.0
AMTOOL              := $(BIN)/amtool
KUSTOMIZE_VERSION   := v5.8.2
KUSTOMIZE           := $(BIN)/kustomize
KUBECONFORM_VERSION := v0.8.0
KUBECONFORM         := $(BIN)/kubeconform

VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BRANCH   ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
BUILD_USER ?= $(shell id -un 2>/dev/null || echo unknown)@$(shell hostname 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell date -u -d "@$${SOURCE_DATE_EPOCH:-$$(date +%s)}" +%Y%m%d-%H:%M:%S 2>/dev/null || date -u +%Y%m%d-%H:%M:%S)
LDFLAGS  := -X github.com/prometheus/common/version.Version=$(VERSION) \
            -X github.com/prometheus/common/version.Revision=$(REVISION) \
            -X github.com/prometheus/common/version.Branch=$(BRANCH) \
            -X github.com/prometheus/common/version.BuildUser=$(BUILD_USER) \
            -X github.com/prometheus/common/version.BuildDate=$(BUILD_DATE)

# Tests find the tools through these; with LLMPROBE_REQUIRE_TOOLS=1 a missing
# tool fails the test instead of skipping it.
export PROMTOOL PROMETHEUS VEGETA HELM AMTOOL KUSTOMIZE KUBECONFORM
TEST_ENV := LLMPROBE_REQUIRE_TOOLS=1

.PHONY: all build run test test-short lint tools bench dashboards clean soak

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/llmprobe ./cmd/llmprobe

run: build
	$(BIN)/llmprobe run --demo

tools: $(PROMETHEUS) $(PROMTOOL) $(VEGETA) $(HELM) $(AMTOOL) $(KUSTOMIZE) $(KUBECONFORM)

$(PROMETHEUS) $(PROMTOOL):
	GOBIN=$(BIN) $(GO) install -tags remove_all_sd github.com/prometheus/prometheus/cmd/prometheus@$(PROM_VERSION) \
		github.com/prometheus/prometheus/cmd/promtool@$(PROM_VERSION)

# vegeta: the load generator `make bench` compares llmprobe with.
$(VEGETA):
	GOBIN=$(BIN) $(GO) install github.com/tsenart/vegeta/v12@$(VEGETA_VERSION)

# helm, amtool, kustomize and kubeconform: deploy/deploy_test.go lints and
# renders the chart, builds the kustomize base and overlay and validates
# every object offline; alerts/alerts_test.go runs amtool check-config.
$(HELM):
	GOBIN=$(BIN) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

$(AMTOOL):
	GOBIN=$(BIN) $(GO) install github.com/prometheus/alertmanager/cmd/amtool@$(ALERTMANAGER_VERSION)

# kustomize v5.8.3 and later need Go 1.27.
$(KUSTOMIZE):
	GOBIN=$(BIN) $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)

$(KUBECONFORM):
	GOBIN=$(BIN) $(GO) install github.com/yannh/kubeconform/cmd/kubeconform@$(KUBECONFORM_VERSION)

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1; }
	@missing="$$(grep -L 'SPDX-License-Identifier: Apache-2.0' $$(git ls-files '*.go'))"; \
		test -z "$$missing" || { echo "Go files without the license header (// Copyright The llmprobe Authors, // SPDX-License-Identifier: Apache-2.0):"; echo "$$missing"; exit 1; }
	$(GO) vet ./...

test: tools lint chromium
	$(TEST_ENV) $(GO) test -race -count=1 -timeout 15m ./...

# Headless Chromium renders the status page in e2e's TestStatusPageInChromium:
# Debian's package, installed quietly when /usr/bin/chromium is missing and we
# are root (about 1.5 minutes); otherwise the test skips, or fails under
# LLMPROBE_REQUIRE_TOOLS=1.
.PHONY: chromium
chromium:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo 'installing chromium with apt-get (for the status page test)'; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -qq chromium >/dev/null 2>&1 || \
		{ apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null; }; \
	fi

# Quick loop for development: no race detector, no external tools required.
test-short:
	$(GO) test -short ./...

bench: build $(VEGETA)
	$(GO) test -run '^$$' -bench . -benchtime 1x ./...

dashboards:
	$(GO) run ./dashboards/generate

# Soak: the daemon against the simulator for SOAK_DURATION at SOAK_RATE
# req/s, scraped every SOAK_INTERVAL; fails on memory or goroutine drift,
# failed or dropped requests, or a rate shortfall (docs/soak.md). Not part
# of `make test`. SOAK_TIMEOUT must exceed SOAK_DURATION by 5 minutes.
SOAK_DURATION ?= 1h
SOAK_RATE     ?= 200
SOAK_INTERVAL ?= 30s
SOAK_TIMEOUT  ?= 3h

soak: build
	LLMPROBE_SOAK=1 LLMPROBE_SOAK_BINARY=$(BIN)/llmprobe SOAK_DURATION=$(SOAK_DURATION) \
		SOAK_RATE=$(SOAK_RATE) SOAK_INTERVAL=$(SOAK_INTERVAL) \
		$(GO) test -run '^TestSoak$$' -count=1 -v -timeout $(SOAK_TIMEOUT) ./soak/

clean:
	rm -rf $(BIN)

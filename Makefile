# llmprobe — build, test and run.
#
#   make run     the daemon probing the built-in simulator (embedded demo config)
#   make test    everything CI runs: vet, race tests, promtool checks, real Prometheus e2e
#   make bench   benchmarks that print figures (harness capacity, simulator cost, ...)
#   make soak    an hour of the daemon against the simulator; fails on drift (docs/soak.md)
#   make release-snapshot  every release file, for all platforms, in .release/ (nothing published; docs/deploy.md)

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

.PHONY: all build run test test-short lint tools bench dashboards clean soak release release-snapshot release-build release-test

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
	cd tools/release && $(GO) vet ./...

test: tools lint chromium
	$(TEST_ENV) $(GO) test -race -count=1 -timeout 15m ./...
	$(MAKE) release-test

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
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./...

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
	rm -rf $(BIN) $(RELEASE_DIR)

# Releases (docs/deploy.md, "Releases"). `make release-snapshot` builds every
# release file into $(RELEASE_DIR) and publishes nothing; `make release` is
# the same at the version in VERSION, on a commit tagged v$(VERSION) whose
# CHANGELOG.md has that version's section (the tag's workflow,
# .github/workflows/ci.yml, then pushes). Both are reproducible: the stamp
# is the commit's (revision, branch, its time as SOURCE_DATE_EPOCH and build
# date) plus RELEASE_BUILD_USER, and release.json records all of it.
RELEASE_DIR        ?= $(CURDIR)/.release
RELEASE_PLATFORMS  ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
RELEASE_TOOL       := $(BIN)/llmprobe-release
RELEASE_IMAGE      ?= ghcr.io/llmprobe/llmprobe
RELEASE_SOURCE     ?= https://github.com/llmprobe/llmprobe
RELEASE_CA_BUNDLE  ?= /etc/ssl/certs/ca-certificates.crt
RELEASE_BUILD_USER ?= $(BUILD_USER)
# Recursive (=): evaluated only by the release targets.
REL_VERSION  = $(error REL_VERSION is set by release or release-snapshot)
REL_REVISION = $(shell git rev-parse HEAD)
REL_BRANCH   = $(shell git rev-parse --abbrev-ref HEAD)
REL_EPOCH    = $(or $(SOURCE_DATE_EPOCH),$(shell git log -1 --format=%ct HEAD))
REL_DATE     = $(shell date -u -d @$(REL_EPOCH) +%Y%m%d-%H:%M:%S 2>/dev/null || date -u -r $(REL_EPOCH) +%Y%m%d-%H:%M:%S)
REL_LDFLAGS  = -s -w -X github.com/prometheus/common/version.Version=$(REL_VERSION) \
               -X github.com/prometheus/common/version.Revision=$(REL_REVISION) \
               -X github.com/prometheus/common/version.Branch=$(REL_BRANCH) \
               -X github.com/prometheus/common/version.BuildUser=$(RELEASE_BUILD_USER) \
               -X github.com/prometheus/common/version.BuildDate=$(REL_DATE)

# Our own release tool: a module of its own, so go-containerregistry stays
# out of go.mod; its version is tools/release/go.mod's.
$(RELEASE_TOOL): tools/release/go.mod tools/release/go.sum $(filter-out %_test.go,$(wildcard tools/release/*.go))
	cd tools/release && $(GO) build -trimpath -o $(RELEASE_TOOL) .

# The stamp is read from git once, by the target you run, and handed to
# release-build (which a copy of the tree without .git can run with the
# values of a release.json).
REL_STAMP = REL_REVISION=$$(git rev-parse HEAD) REL_BRANCH=$$(git rev-parse --abbrev-ref HEAD) \
            SOURCE_DATE_EPOCH=$(REL_EPOCH)

release-snapshot:
	$(MAKE) release-build REL_VERSION=$$(cat VERSION)-snapshot.g$$(git rev-parse --short=12 HEAD) $(REL_STAMP)

release: $(RELEASE_TOOL)
	@v=$$(cat VERSION); tag=$$(git describe --exact-match --tags HEAD 2>/dev/null); \
		test "$$tag" = "v$$v" || { echo "release: HEAD must be tagged v$$v (VERSION), is tagged '$$tag'"; exit 1; }; \
		test -z "$$(git status --porcelain)" || { echo 'release: the work tree is not clean'; exit 1; }
	$(RELEASE_TOOL) notes -changelog CHANGELOG.md -version $$(cat VERSION) >/dev/null
	$(MAKE) release-build REL_VERSION=$$(cat VERSION) $(REL_STAMP)
	$(RELEASE_TOOL) notes -changelog CHANGELOG.md -version $$(cat VERSION) > $(RELEASE_DIR)/build/notes.md

# The binaries are cross-compiled here (CGO off, -trimpath, no VCS stamp
# but the ldflags', fixed GOAMD64/GOARM64); the tool makes the rest.
release-build: $(RELEASE_TOOL) $(HELM)
	rm -rf $(RELEASE_DIR)
	@for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; exe=llmprobe; test $$os = windows && exe=llmprobe.exe; \
		echo "build $$os/$$arch"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch GOAMD64=v1 GOARM64=v8.0 GOFLAGS=-mod=readonly \
			$(GO) build -trimpath -buildvcs=false -ldflags '$(REL_LDFLAGS)' \
			-o $(RELEASE_DIR)/build/$$os-$$arch/$$exe ./cmd/llmprobe || exit 1; \
	done
	$(HELM) package deploy/helm/llmprobe --version $(REL_VERSION) --app-version $(REL_VERSION) -d $(RELEASE_DIR) >/dev/null
	$(RELEASE_TOOL) dist -bin-dir $(RELEASE_DIR)/build -out $(RELEASE_DIR) \
		-platforms '$(RELEASE_PLATFORMS)' -version $(REL_VERSION) -revision $(REL_REVISION) \
		-branch $(REL_BRANCH) -build-user '$(RELEASE_BUILD_USER)' -source-date-epoch $(REL_EPOCH) \
		-source $(RELEASE_SOURCE) -image $(RELEASE_IMAGE) -ca-bundle $(RELEASE_CA_BUNDLE) \
		-chart $(RELEASE_DIR)/llmprobe-$(REL_VERSION).tgz \
		-file LICENSE -file README.md -file examples/demo.yml:llmprobe.yml
	@cat $(RELEASE_DIR)/sha256sums.txt

# What `make test` runs of the release: the tool's tests, which build the
# snapshot for the host (linux/amd64 in CI) only, twice, and inspect it
# (tools/release/release_test.go).
release-test: $(RELEASE_TOOL) $(HELM)
	cd tools/release && $(TEST_ENV) RELEASE_TOOL=$(RELEASE_TOOL) $(GO) test -count=1 -timeout 10m ./...

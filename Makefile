# BA-Agent pipeline — build, test and run.
#   make run    start the whole suite in one process (embedded NATS, scripted model, samples)
#   make test   run every test
SHELL := /bin/bash
GO    ?= go
BIN   := $(CURDIR)/bin

# Pinned tool versions (installed into ./bin by `make tools`).
BUF_VERSION                := v1.75.0
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
BENCHSTAT_VERSION          := v0.0.0-20260908200009-22c9c6c9d4da
GRPCURL_VERSION            := v1.9.4
GOLANGCI_LINT_VERSION      := v2.15.0
GOVULNCHECK_VERSION        := v1.9.0

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/baagent/baagent/internal/buildinfo.version=$(VERSION)

# Arguments for `make run`, e.g. make run ARGS='-log-level=debug'.
ARGS ?=
# Benchmarks: which, how many repetitions, which packages.
BENCH      ?= .
BENCHCOUNT ?= 6
BENCHPKGS  ?= ./...

.PHONY: soak all run-split tools lint-tools node-deps benchstat grpcurl generate check-generated lint buf-breaking check-imports check-tidy vulncheck build test run bench clean

all: lint build test

tools: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc

# Each tool is reinstalled when its pinned version changes (the stamp file
# names the version).
$(BIN)/buf: $(BIN)/.buf-$(BUF_VERSION)
$(BIN)/.buf-$(BUF_VERSION):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
	@touch $@
$(BIN)/protoc-gen-go: $(BIN)/.protoc-gen-go-$(PROTOC_GEN_GO_VERSION)
$(BIN)/.protoc-gen-go-$(PROTOC_GEN_GO_VERSION):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	@touch $@
$(BIN)/protoc-gen-go-grpc: $(BIN)/.protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION)
$(BIN)/.protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	@touch $@

# Lint tools (make lint-tools): golangci-lint and govulncheck.
lint-tools: $(BIN)/golangci-lint $(BIN)/govulncheck
$(BIN)/golangci-lint: $(BIN)/.golangci-lint-$(GOLANGCI_LINT_VERSION)
$(BIN)/.golangci-lint-$(GOLANGCI_LINT_VERSION):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	@touch $@
$(BIN)/govulncheck: $(BIN)/.govulncheck-$(GOVULNCHECK_VERSION)
$(BIN)/.govulncheck-$(GOVULNCHECK_VERSION):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)
	@touch $@

# Optional tools for benchmarks and manual checks (make benchstat, make grpcurl).
benchstat: $(BIN)/benchstat
grpcurl: $(BIN)/grpcurl
$(BIN)/benchstat:
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION)
$(BIN)/grpcurl:
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

# Jaeger v2 (an OpenTelemetry Collector distribution, memory storage) is the
# tracing backend of the tracing integration tests (test/tracing). Its module
# has replace directives, which `go install pkg@version` refuses, so it is
# built as a tool of the pinned tools module tools/jaeger (v1.76.0, with
# jaeger's own replace), again whenever that module's go.mod or go.sum changes.
# Cold: ~280 MB of modules and ~5 minutes on 2 cores; a ~120 MB binary.
.PHONY: jaeger
jaeger: $(BIN)/jaeger
bin/jaeger: $(BIN)/jaeger
$(BIN)/jaeger: tools/jaeger/go.mod tools/jaeger/go.sum
	@mkdir -p $(BIN)
	cd tools/jaeger && $(GO) build -o $(BIN)/jaeger github.com/jaegertracing/jaeger/cmd/jaeger

# Regenerate gen/go from proto/ (committed; reproducible byte for byte).
generate: tools
	rm -rf gen/go
	$(BIN)/buf generate

# Fails when the committed generated code differs from what `generate` makes.
check-generated: generate
	@if [ -n "$$(git status --porcelain -- gen/)" ]; then \
		echo "generated code is stale: run 'make generate' and commit gen/"; \
		git status --porcelain -- gen/; git diff --stat -- gen/; exit 1; \
	fi

# Static checks: buf lint and breaking-change detection on proto/, gofmt,
# go vet, golangci-lint (.golangci.yml, gen/ excluded), the import rules on
# transitive dependencies and tidy go.mod files. make vulncheck is separate
# (it needs the vulnerability database built first).
lint: tools $(BIN)/golangci-lint buf-breaking check-imports check-tidy
	$(BIN)/buf lint
	@unformatted="$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(BIN)/golangci-lint run ./...

# Breaking changes to proto/ (buf.yaml's FILE rules) against BUF_AGAINST:
# by default the merge base with main on a branch, the previous commit on
# main. Nothing to compare with (a single commit, a shallow clone): skipped.
BUF_AGAINST ?=
buf-breaking: $(BIN)/buf
	@against='$(BUF_AGAINST)'; \
	if [ -z "$$against" ]; then \
		base=""; \
		if git rev-parse -q --verify main >/dev/null && [ "$$(git rev-parse HEAD)" != "$$(git rev-parse main)" ]; then \
			base="$$(git merge-base HEAD main)"; \
		elif git rev-parse -q --verify HEAD~1 >/dev/null; then \
			base="$$(git rev-parse HEAD~1)"; \
		fi; \
		if [ -z "$$base" ]; then echo "buf breaking: no earlier commit to compare with, skipped"; exit 0; fi; \
		against=".git#ref=$$base"; \
	fi; \
	echo "$(BIN)/buf breaking --against '$$against'"; \
	$(BIN)/buf breaking --against "$$against"

# The import rules of .golangci.yml's depguard, on transitive dependencies.
check-imports:
	scripts/check-imports.sh

# go.mod and go.sum of the root module and of each tools module are tidy.
TOOLS_MODULES := $(patsubst %/go.mod,%,$(wildcard tools/*/go.mod))
check-tidy:
	@for dir in . $(TOOLS_MODULES); do \
		echo "go mod tidy -diff ($$dir)"; \
		(cd $$dir && $(GO) mod tidy -diff) || { echo "$$dir: go.mod/go.sum not tidy: run go mod tidy there"; exit 1; }; \
	done

# Known vulnerabilities in the code's call graph (govulncheck), against a
# local copy of the Go vulnerability database: golang.org/x/vulndb, pinned by
# the tools module tools/vulndb, whose cmd/indexdb turns its OSV reports into
# the database layout that govulncheck reads (-db file://...). Rebuilt when
# that module's go.mod or go.sum changes, i.e. when the pin moves.
VULNDB := $(BIN)/vulndb
vulncheck: $(BIN)/govulncheck $(VULNDB)/index/db.json
	$(BIN)/govulncheck -db file://$(VULNDB) ./...
$(VULNDB)/index/db.json: tools/vulndb/go.mod tools/vulndb/go.sum
	rm -rf $(VULNDB)
	cd tools/vulndb && $(GO) mod download golang.org/x/vulndb && \
		$(GO) tool indexdb -vulns "$$($(GO) list -m -f '{{.Dir}}' golang.org/x/vulndb)/data/osv" -out $(VULNDB)

build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

# Node packages the tests run against: a real MCP server nobody here wrote
# (test/mcp), the Node.js ToolProvider example and Playwright driving Chromium
# for the dashboard test (test/browser). npm ci reinstalls only
# when a lock file changes.
NODE_DIRS := test/mcp examples/toolprovider/node test/browser
node-deps: $(addsuffix /node_modules/.package-lock.json,$(NODE_DIRS))
%/node_modules/.package-lock.json: %/package-lock.json
	npm ci --prefix $* --no-audit --no-fund

# The multi-process fault tests (replicas killed mid-run) run on their own,
# after the rest and without the race detector: they start real processes
# and measure recovery, which two cores shared with every other package's
# race-instrumented tests starve.
FAULT_TESTS := TestFaultKillReplicaMidRun
# Packages of multi-process fault tests, also run alone and without -race.
FAULT_PKGS := test/reliability/faults

test: node-deps
	BAAGENT_REQUIRE_MCP=1 BAAGENT_REQUIRE_NODE_PROVIDER=1 BAAGENT_REQUIRE_BROWSER=1 $(GO) test -race -count=1 -timeout 30m -skip '^$(FAULT_TESTS)$$' $$($(GO) list ./... | grep -v '$(FAULT_PKGS)')
	$(GO) test -count=1 -timeout 10m -run '^$(FAULT_TESTS)$$' ./services/orchestrator
	$(GO) test -count=1 -timeout 10m $(addprefix ./,$(FAULT_PKGS))
	$(GO) test -count=1 -timeout 10m -run '^TestLoad$$' ./test/reliability/load
	npm test --prefix examples/toolprovider/node

run: build
	$(BIN)/baagent -target=all $(ARGS)

# Microservices mode on this machine: NATS and each service as its own
# `baagent -target=<service>` process with the flags of k8s/overlays/dev,
# on loopback; Ctrl-C stops them and checks each exits 0.
# SPLITARGS=-quiet hides the processes' logs.
run-split:
	scripts/run-split.sh $(SPLITARGS)

# The 30-minute soak (not in CI): a steady rate of runs through the whole
# suite; fails on growth of goroutines, heap, RSS or file descriptors between
# the first and last windows after warm-up. SOAK=10m for a shorter one.
SOAK ?= 30m
soak:
	BAAGENT_SOAK=$(SOAK) $(GO) test -count=1 -timeout 4h -run '^TestSoak$$' -v ./test/reliability/load

bench: $(BIN)/benchstat
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(BENCHCOUNT) $(BENCHPKGS) | tee bench.out
	$(BIN)/benchstat bench.out

clean:
	rm -rf $(BIN) data bench.out

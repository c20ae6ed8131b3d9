# RunOS VPN. `make help` lists the targets.

GO      ?= go
BIN     ?= bin
PKG     := github.com/runos/vpn
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
DATE    ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -s -w \
	-X $(PKG)/internal/version.Version=$(VERSION) \
	-X $(PKG)/internal/version.Commit=$(COMMIT) \
	-X $(PKG)/internal/version.Date=$(DATE)

# Programs: every cmd/ directory whose Go files hold a main package
# (runos-desktop joins once cmd/runos-desktop has its main).
PROGRAMS := $(sort $(foreach d,$(wildcard cmd/*),$(if $(shell grep -ls '^package main' $(d)/*.go 2>/dev/null),$(notdir $(d)))))

# What the lab and the end-to-end tests need from Debian (see .ci/run).
DEMO_PACKAGES := iproute2 util-linux mount dnsmasq-base wireguard-tools curl procps

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCH_OUT   := bench/results/bench-$(shell date -u +%Y%m%dT%H%M%SZ).json

.PHONY: all help build test test-unit test-e2e demo lint bench clean

all: build

help:
	@echo 'make build   build $(PROGRAMS) into $(BIN)/ (version $(VERSION))'
	@echo 'make test    the full suite, as root: unit tests with -race, then e2e/ over real labs'
	@echo 'make demo    build, install the Debian packages the lab needs, run bin/runos-lab demo'
	@echo 'make lint    gofmt, go vet, staticcheck'
	@echo 'make bench   every Go benchmark, JSON into bench/results/'
	@echo 'make clean   remove $(BIN)/'

build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(PROGRAMS))

# The full suite. Unit and package tests run with the race detector; e2e/
# builds the programs itself and runs many processes per lab, so it runs
# without -race (the programs under test are not race-built either) and
# with a longer timeout. Tests that need root fail under RUNOS_E2E=1.
# Both halves run even when the first fails, so one run shows everything.
test:
	@status=0; $(MAKE) --no-print-directory test-unit || status=1; \
	$(MAKE) --no-print-directory test-e2e || status=1; exit $$status

test-unit:
	$(GO) test -race -count=1 -timeout 20m $$($(GO) list ./... | grep -vx '$(PKG)/e2e')

test-e2e:
	$(GO) test -count=1 -timeout 25m ./e2e/...

demo: build
	@missing=""; for p in $(DEMO_PACKAGES); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing from Debian:$$missing"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	fi
	$(BIN)/runos-lab demo

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

# Benchmarks print their name and their result in separate writes, so the
# summary joins the JSON's output events before picking the result lines.
bench:
	@mkdir -p bench/results
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 -timeout 60m -json ./... > $(BENCH_OUT); \
	status=$$?; echo "benchmarks: $(BENCH_OUT)"; \
	if command -v jq >/dev/null; then jq -j 'select(.Action=="output") | .Output' $(BENCH_OUT) | grep -E '^(Benchmark|ok|FAIL|---)'; \
	else echo "(install jq to see a summary here)"; fi; exit $$status

clean:
	rm -rf $(BIN)

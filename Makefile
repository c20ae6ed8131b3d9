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

# Programs: every cmd/ directory whose Go files hold a main package,
# runos-desktop among them (its tray needs no cgo on Linux and Windows; on
# a Mac, make desktop-macos wraps it in RunOS Desktop.app).
PROGRAMS := $(sort $(foreach d,$(wildcard cmd/*),$(if $(shell grep -ls '^package main' $(d)/*.go 2>/dev/null),$(notdir $(d)))))

# What the lab and the tests need from Debian is listed once, in
# .ci/packages; .ci/deps checks and installs it (make demo: the lab's,
# make test and .ci/run: all).

# As root, make test runs with RUNOS_E2E=1: a test that would skip for want
# of root or a tool fails instead. RUNOS_E2E=0 is the explicit way to allow
# skips (and to run without root).
RUNOS_E2E ?= $(shell [ "$$(id -u)" = 0 ] && echo 1)
export RUNOS_E2E

# The fuzz targets of the parsers of untrusted input, each run for FUZZTIME
# in make test (their seeds, in the code and in testdata/fuzz, run in every
# plain go test too): control's request bodies, the world file, the local
# API's requests, and control's device map as the daemon reads it.
FUZZTIME ?= 10s
FUZZ := ./api:FuzzEventReader ./control/server:FuzzRequestBodies ./control/seed:FuzzParse \
	./vpnd:FuzzParseSessionRequest ./vpnd:FuzzParseConnectRequest ./vpnd/state:FuzzDeviceMap
FUZZ += ./policy:FuzzParse
FUZZ += ./control/resume:FuzzCheck
# This wave's parsers: cluster DNS from devices and kube-dns' answers, the
# mapped ranges, the last maps kept on disk by the daemon and the gateway.
FUZZ += ./gateway/clusterdns:FuzzHandler ./gateway/clusterdns:FuzzRewrite ./api:FuzzMapping \
	./vpnd/cache:FuzzParse ./gateway:FuzzParseKept
# The device as the WireGuard host reads it in process (wghost/uapi.go).
FUZZ += ./wghost:FuzzParseUAPI

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCH_OUT   := bench/results/bench-$(shell date -u +%Y%m%dT%H%M%SZ).json

.PHONY: desktop-macos all help build test test-deps test-unit test-e2e test-fuzz demo lint bench plots clean
.PHONY: cross release
.PHONY: packages test-packages test-workflows

all: build

help:
	@echo 'make build   build $(PROGRAMS) into $(BIN)/ (version $(VERSION))'
	@echo 'make test    the full suite, as root (installs what it lacks from Debian): unit tests with -race, e2e/ over real labs, $(FUZZTIME) of each fuzz target'
	@echo 'make demo    build, install the Debian packages the lab needs, run bin/runos-lab demo'
	@echo 'make lint    gofmt, go vet, staticcheck'
	@echo 'make bench   every Go benchmark, JSON into bench/results/, SVG plots beside it'
	@echo 'make plots   redraw the SVG plots from bench/results/'
	@echo 'make clean   remove $(BIN)/'
	@echo 'make cross   cross-compile for $(CROSS_TARGETS) into $(CROSS)/'
	@echo 'make desktop-macos  RunOS Desktop.app into $(BIN)/ (on a Mac: needs cgo)'
	@echo 'make release versioned archives of the cross builds and SHA256SUMS in $(DIST)/'
	@echo 'make packages .deb and .rpm of runos, runos-control and runos-gateway for $(PKG_ARCHES) in $(DIST)/'

build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(PROGRAMS))

# The full suite. First what it needs from Debian (.ci/deps ensure: as
# root it installs what is missing, otherwise it stops at once naming the
# packages and the command). Unit and package tests run with the race
# detector; e2e/ builds the programs itself and runs many processes per
# lab, so it runs without -race (the programs under test are not
# race-built either) and with a longer timeout; then each fuzz target for
# FUZZTIME. Tests that need root fail under RUNOS_E2E=1. Every part runs
# even when one fails, so one run shows everything.
test: test-deps
	@status=0; $(MAKE) --no-print-directory test-unit || status=1; \
	$(MAKE) --no-print-directory test-e2e || status=1; \
	$(MAKE) --no-print-directory test-fuzz || status=1; \
	$(MAKE) --no-print-directory test-packages || status=1; \
	$(MAKE) --no-print-directory test-workflows || status=1; exit $$status

test-deps:
	@.ci/deps ensure test

test-unit:
	$(GO) test -race -count=1 -timeout 20m $$($(GO) list ./... | grep -vx '$(PKG)/e2e')

test-e2e:
	$(GO) test -count=1 -timeout 25m ./e2e/...

test-fuzz:
	@status=0; for t in $(FUZZ); do \
		echo "fuzz $${t#*:} in $${t%%:*} for $(FUZZTIME)"; \
		GO="$(GO)" .ci/fuzz-one "$${t%%:*}" "$${t#*:}" $(FUZZTIME) || status=1; \
	done; exit $$status

demo: build
	@.ci/deps install lab
	$(BIN)/runos-lab demo

# lint also type-checks the darwin-only code here (GOOS=darwin, no cgo):
# every package that builds for macOS without cgo, which is all but
# desktop/tray (fyne.io/systray drives AppKit through cgo) and what imports
# it; those are built on a Mac (make desktop-macos).
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	GOOS=darwin CGO_ENABLED=0 $(GO) vet $$(GOOS=darwin CGO_ENABLED=0 $(GO) list -e \
		-f '{{if not .Error}}{{.ImportPath}}{{range .Deps}} {{.}}{{end}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}{{end}}' ./... | \
		awk 'NF { for (i = 1; i <= NF; i++) if ($$i == "$(PKG)/desktop/tray") next; print $$1 }')
	GOOS=windows $(GO) vet ./...
	GOBIN=$(CURDIR)/bin/tools $(GO) install $(STATICCHECK)
	bin/tools/staticcheck ./...
	GOOS=windows bin/tools/staticcheck ./...

# Benchmarks print their name and their result in separate writes, so the
# summary joins the JSON's output events before picking the result lines.
# Then bench/plot draws the SVG plots: one beside each lab result, and the
# summary plots in bench/results/plots/ that docs/performance.md shows.
bench:
	@mkdir -p bench/results
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 -timeout 60m -json ./... > $(BENCH_OUT); \
	status=$$?; echo "benchmarks: $(BENCH_OUT)"; \
	if command -v jq >/dev/null; then jq -j 'select(.Action=="output") | .Output' $(BENCH_OUT) | grep -E '^(Benchmark|ok|FAIL|---)'; \
	else echo "(install jq to see a summary here)"; fi; \
	$(GO) run ./bench/plot -dir bench/results || status=1; exit $$status

# The plots alone, redrawn from the results in bench/results/ (with the
# fan-out re-runs kept in its subdirectory).
plots:
	$(GO) run ./bench/plot -dir bench/results -fanout 'bench/results/fanout-20261203/h1-*/after-*.txt' \
		-streams 'bench/results/streams-20261203/curve/*-h1-*.txt' -streams 'bench/results/streams-20261203/10k/*-h1-*.txt' \
		-replicas 'bench/results/fanout-replicas-20261205/fanout-replicas-*.json'

clean:
	rm -rf $(BIN)

# Cross-compiling: runos, runos-control and runos-gateway for every OS and
# architecture RunOS ships for, pure Go (CGO_ENABLED=0); runos-desktop
# where its tray needs no cgo (Linux talks D-Bus, Windows the Win32 API;
# macOS's menu bar needs cgo, so it is built on a Mac). Into
# $(CROSS)/<os>-<arch>/.
CROSS_TARGETS  := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
CROSS_PROGRAMS := runos runos-control runos-gateway
CROSS_DESKTOP  := linux windows
CROSS          := $(BIN)/cross
DIST           := dist
# The archives' file times and order are the commit's and fixed, so two
# releases of one commit differ only in the build date inside the programs.
SOURCE_DATE    ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)

cross:
	@set -e; for t in $(CROSS_TARGETS); do \
		os=$${t%/*}; arch=$${t#*/}; progs="$(CROSS_PROGRAMS)"; desktop=""; \
		case " $(CROSS_DESKTOP) " in *" $$os "*) desktop=runos-desktop;; esac; \
		echo "cross: $$os/$$arch: $$progs $$desktop"; \
		rm -rf $(CROSS)/$$os-$$arch; mkdir -p $(CROSS)/$$os-$$arch; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' \
			-o $(CROSS)/$$os-$$arch/ $$(for p in $$progs; do echo ./cmd/$$p; done); \
		if [ -n "$$desktop" ]; then \
			gui=""; [ $$os = windows ] && gui="-H windowsgui"; \
			CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS) $$gui" \
				-o $(CROSS)/$$os-$$arch/ ./cmd/runos-desktop; \
		fi; \
	done

# RunOS Desktop.app for macOS: needs cgo and Apple's toolchain, so it runs
# on a Mac (universal binary, Info.plist, icns, ad-hoc or CODESIGN_IDENTITY
# signature); see desktop/README.md.
desktop-macos:
	desktop/macos/build-app.sh $(BIN)

# Versioned archives in $(DIST)/: runos-<version>-<os>-<arch>.tar.gz (zip
# for Windows), each with the programs and the README, and SHA256SUMS.
# The Windows zips also need wintun.dll beside runos.exe (signed by
# WireGuard LLC, from https://www.wintun.net; it cannot be built here):
# WINTUN_DIR is the bin folder of Wintun's zip, with amd64/ and arm64/
# under it (make release WINTUN_DIR=/path/to/wintun/bin). Without it the
# Windows zips lack the DLL, and release says so.
WINTUN_DIR ?=
release: cross
	@command -v zip >/dev/null || { echo "make release needs zip: apt-get install zip" >&2; exit 1; }
	@set -e; rm -rf $(DIST); mkdir -p $(DIST)/.stage; nowintun=""; \
	for d in $(CROSS)/*-*; do \
		t=$$(basename $$d); name=runos-$(VERSION)-$$t; stage=$(DIST)/.stage/$$name; \
		mkdir -p $$stage; cp $$d/* $$stage/; [ ! -f README.md ] || cp README.md $$stage/; \
		case $$t in windows-*) \
			dll="$(WINTUN_DIR)/$${t#windows-}/wintun.dll"; \
			if [ -z "$(WINTUN_DIR)" ]; then nowintun="$$nowintun $$name.zip"; \
			elif [ -f "$$dll" ]; then cp "$$dll" $$stage/; \
			else echo "make release: WINTUN_DIR=$(WINTUN_DIR) has no $${t#windows-}/wintun.dll" >&2; exit 1; fi;; \
		esac; \
		find $$stage -exec touch -h -d @$(SOURCE_DATE) {} +; \
		case $$t in \
		windows-*) (cd $(DIST)/.stage && find $$name | LC_ALL=C sort | zip -q -X -D ../$$name.zip -@);; \
		*) tar -C $(DIST)/.stage --sort=name --owner=0 --group=0 --numeric-owner --mtime=@$(SOURCE_DATE) \
			-cf - $$name | gzip -n -9 > $(DIST)/$$name.tar.gz;; \
		esac; \
		echo "release: $(DIST)/$$(ls $(DIST) | grep -F $$name)"; \
	done; \
	rm -rf $(DIST)/.stage; \
	if [ -n "$$nowintun" ]; then \
		echo "release: NOTE: no wintun.dll in$$nowintun: runos vpn install on Windows needs it beside runos.exe;" \
			"get Wintun's zip from https://www.wintun.net and run make release WINTUN_DIR=/path/to/wintun/bin"; fi; \
	cd $(DIST) && sha256sum *.tar.gz *.zip > SHA256SUMS && echo "release: $(DIST)/SHA256SUMS" && cat SHA256SUMS

# Packages: .deb and .rpm of runos (with its man pages and shell
# completions, generated from its command tree), runos-control and
# runos-gateway, for PKG_ARCHES, into $(DIST)/. packaging/ is a Go module
# of its own that uses nfpm as a library, so nfpm's dependencies stay out
# of the programs' go.mod. Only the Linux programs are built here.
PKG_ARCHES  ?= amd64 arm64
PKG_FORMATS ?= deb,rpm
packages:
	@set -e; for arch in $(PKG_ARCHES); do \
		echo "packages: linux/$$arch"; mkdir -p $(CROSS)/linux-$$arch; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' \
			-o $(CROSS)/linux-$$arch/ $(addprefix ./cmd/,$(CROSS_PROGRAMS)); \
	done
	cd packaging && $(GO) run . -bin $(CURDIR)/$(CROSS) -root $(CURDIR) -out $(CURDIR)/$(DIST) \
		-version $(VERSION) -mtime $(SOURCE_DATE) -format $(PKG_FORMATS) -arch $$(echo $(PKG_ARCHES) | tr ' ' ,)

# The packages' own tests (packaging/ is its own module, outside ./...):
# what each .deb and .rpm holds (dpkg-deb -c, rpm -qlp), their licence
# and third-party notices (read back from the packages), the maintainer
# scripts, the units. The install and purge as a user would is e2e's
# TestPackageInstallPurge.
test-packages:
	cd packaging && $(GO) test -count=1 ./...

# The macOS and Windows workflows (.github/workflows/) run only on GitHub's
# hosted runners; here they are parsed and checked against the workflow
# syntax (a JSON Schema of it in the test).
test-workflows:
	python3 .github/workflows_test.py

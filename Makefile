# agentbox: the two commands are `make demo` and `make test`; everything else
# here is what they stand on.

GO      ?= go
BIN     := bin
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: all build host-deps image demo test test-runsc bench bench-short vet fmt clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# What the host needs to bootstrap the sandbox image when no registry is
# reachable: debootstrap (installed from Debian when missing and we are root).
host-deps:
	@if ! command -v debootstrap >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing debootstrap"; \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null || \
			{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null; }; \
		else \
			echo "note: debootstrap is missing; sandbox-setup needs it (as root) if it must bootstrap a base image"; \
		fi; \
	fi

# Builds the sandbox image if it is missing or stale; a no-op otherwise.
image: build host-deps
	$(BIN)/sandbox-setup

demo: image
	$(GO) run ./examples/quickstart

# -p 2 -parallel 4: most engine tests wait on containers and sleeps, not
# the CPU, so more packages and tests at once than one shorten the run; but
# on a 2-core virtual machine whose forks cost 7 ms (the Docker engine's
# own work, on fuse-overlayfs, is most of the CPU there) -p 4 -parallel 8
# loaded it past 60 and the tests of timeouts (an 8 s TTL, a 2 s idle
# sweep) failed: containers took longer to start than the timeouts they
# test. The packages that take longest are named first, so go test starts
# them first: the session package does not wait for twenty others.
SLOW_TEST_PACKAGES := ./session ./kernel ./cmd/agentbox ./internal/imagesetup ./cmd/sandbox-setup ./server/mcpserver
test: image vet
	$(GO) test -race -count=1 -p 2 -parallel 4 -timeout 25m $(SLOW_TEST_PACKAGES) ./...

# The kernel's tests and the session fault and security suites again, every
# sandbox under gVisor (needs runsc registered with the engine:
# .ci/register-runsc does it). The rest of the session tests exercise the
# host side, which does not depend on the runtime.
RUNSC_TESTS := TestSlowHello|TestCommandStart|TestCommandInRemoved|TestContainerLost|TestLost|TestOutOfMemory|TestForkBomb|TestFullSessionDisk|TestHostileKeys|TestManagerKilled|TestStoppedInit|TestCodeCannotReach|TestArtifactsInPrivate|TestArtifactsFolderLink|TestLockedDown|TestEnvPassthrough|TestSeccomp|TestKilledManager|TestBind|TestMaxOutputBytes|TestDatasetsLocalReadOnly|TestPause|TestRun|TestFiles
test-runsc: image
	AGENTBOX_TEST_RUNTIME=runsc $(GO) test -race -count=1 -timeout 15m ./kernel
	AGENTBOX_TEST_RUNTIME=runsc $(GO) test -race -count=1 -timeout 15m -run '$(RUNSC_TESTS)' ./session

# Runs the benchmarks behind the README's performance tables, one go test
# command per table (go run ./internal/benchreport -list shows them), and
# rewrites the tables in README.md. A table whose benchmarks fail or are
# skipped is left as it was, with a warning (and a non-zero exit). The
# execd table builds OpenSandbox's execd from a checkout of its
# repository's components/execd that AGENTBOX_EXECD_SRC names (make bench
# AGENTBOX_EXECD_SRC=/path/to/OpenSandbox/components/execd); without it
# that table alone is skipped, with the reason, and kept as it was.
bench: image
	$(GO) run ./internal/benchreport

# The same benchmarks once each with the smallest settings (-benchtime 1x
# -short): fails if one breaks or stops reporting a figure its table needs.
# Writes nothing. CI runs it.
bench-short: image
	$(GO) run ./internal/benchreport -short

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)

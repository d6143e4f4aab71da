# The two commands that matter: `make run` and `make test` (see README.md).
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
REPLICAS ?= 3

.PHONY: build run test lint bench chaos release clean

build:
	go build -o bin/scheduler ./cmd/scheduler

run: build
	scripts/run.sh $(REPLICAS)

# make test runs make lint first: a static-check finding fails the suite.
test:
	scripts/test.sh

# go vet, staticcheck and deadcode at pinned versions (installed into bin/tools when missing).
lint:
	scripts/lint.sh

# make bench [QUICK=1]: benchmarks against BENCH_DATABASE_URL/DATABASE_URL or a throwaway cluster.
bench:
	scripts/bench.sh bench $(if $(QUICK),-quick)

# make chaos [DURATION=2m] [FAULTS=kill,term,pg-restart,terminate,blackhole,failover]: 3 replicas,
# the leader struck by a fault drawn from FAULTS every few seconds; checks the invariants. The
# default is every fault but failover, which kills the primary and promotes its asynchronous
# streaming standby (FAULTS=failover: a standby is started beside the throwaway cluster).
chaos:
	FAULTS=$(FAULTS) scripts/bench.sh chaos $(if $(DURATION),-duration $(DURATION))

# make release [VERSION=v1.2.0]: static linux/amd64 and linux/arm64 binaries in dist/, a CycloneDX
# SBOM of each and SHA256SUMS; the version from git describe unless VERSION is given.
release:
	scripts/release.sh

clean:
	rm -rf bin dist .run
	scripts/pg.sh remove .pgdata

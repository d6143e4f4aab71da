# The two commands that matter: `make run` and `make test` (see README.md).
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
REPLICAS ?= 3

.PHONY: build run test bench chaos clean

build:
	go build -o bin/scheduler ./cmd/scheduler

run: build
	scripts/run.sh $(REPLICAS)

test:
	scripts/test.sh

clean:
	rm -rf bin .run
	scripts/pg.sh remove .pgdata

#!/usr/bin/env bash
# test.sh — the static checks (scripts/lint.sh), then the whole suite against a real PostgreSQL:
# TEST_DATABASE_URL when set, otherwise one throwaway cluster for the run (installed when
# missing), removed at the end; then the tools module's tests.
set -euo pipefail
cd "$(dirname "$0")/.."

# A static-check finding fails the suite before any test runs.
scripts/lint.sh

if [ -z "${TEST_DATABASE_URL:-}" ]; then
  dir=$(mktemp -d /tmp/scheduler-test-pg.XXXXXX)
  port=$(( 56000 + RANDOM % 4000 ))
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
  trap 'scripts/pg.sh remove "$dir"' EXIT
  scripts/pg.sh start "$dir" "$port"
  export TEST_DATABASE_URL
  TEST_DATABASE_URL=$(scripts/pg.sh url "$port")
fi

# The dashboard's tests drive Debian's Chromium headless; the partition test puts a replica in
# a network namespace (iproute2's ip). Both skip, saying so, where they cannot run.
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "test.sh: installing ${missing[*]} for the browser and network-partition tests" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ||
    echo "test.sh: ${missing[*]} could not be installed; the tests that need them will skip" >&2
fi

# The dashboard's browser test audits every page with axe-core when it finds it in tmp/axe (a
# test-only install, nothing the binary serves); without npm it checks by DOM assertions only.
if [ ! -f tmp/axe/node_modules/axe-core/axe.min.js ] && command -v npm >/dev/null 2>&1; then
  npm install --silent --no-audit --no-fund --prefix tmp/axe axe-core@4.14 >/dev/null 2>&1 ||
    echo "test.sh: axe-core could not be installed; the dashboard's pages are not audited with it" >&2
fi

# -race everywhere; packages run two at a time on the 2-core machines we have.
go test -race -count=1 -timeout 15m "$@" ./...
# The tools module (tools/, its own go.mod: the bench's, the chaos run's and Helm's dependencies
# stay out of the product's). The bench and chaos commands' tests run real replicas on the same
# PostgreSQL, with -race as above; the Helm chart rendered and decoded into the Kubernetes types
# needs no database and no -race (it renders templates in one goroutine).
(cd tools && go test -race -count=1 -timeout 15m "$@" ./bench/... ./chaos/...)
(cd tools && go test -count=1 -timeout 5m ./helmtest/...)
if [ -d tmp/ui-screenshots ]; then echo "test.sh: the dashboard's screenshots are in $(pwd)/tmp/ui-screenshots"; fi

#!/usr/bin/env bash
# lint.sh — the static checks `make lint` runs and `make test` runs first: go vet, staticcheck
# and deadcode, at pinned versions installed into bin/tools when missing (no global install),
# and a bound of 450 lines on every non-test Go file. Any finding fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK_VERSION=v0.8.2 # honnef.co/go/tools
DEADCODE_VERSION=v0.52.0   # golang.org/x/tools

tools=$(pwd)/bin/tools
install() { # install NAME MODULE@VERSION, once per version
  local name=$1 pkg=$2
  if [ ! -x "$tools/$name" ] || [ "$(cat "$tools/$name.version" 2>/dev/null)" != "$pkg" ]; then
    echo "lint.sh: installing $pkg" >&2
    GOBIN=$tools go install "$pkg"
    echo "$pkg" >"$tools/$name.version"
  fi
}
install staticcheck "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
install deadcode "golang.org/x/tools/cmd/deadcode@$DEADCODE_VERSION"

echo "go vet" >&2
go vet ./...
# ./... stops at a nested module: tools/ (the bench, the chaos run and the Helm chart's test,
# its own go.mod) is checked apart, here and below.
(cd tools && go vet ./...)
echo "gofmt" >&2
unformatted=$(find . \( -path ./bin -o -path ./tmp -o -path './.*' \) -prune -o -name '*.go' -print0 | xargs -0 gofmt -l)
if [ -n "$unformatted" ]; then
  echo "$unformatted"
  echo "lint.sh: files above are not gofmt-formatted: run gofmt -w on them" >&2
  exit 1
fi

echo "staticcheck" >&2
"$tools/staticcheck" ./...
# The bench and chaos commands; tools/helmtest is not held to it yet (an unused helper there).
(cd tools && "$tools/staticcheck" ./bench/... ./chaos/...)

# The engine runs jobs through their contract (internal/jobcontract) alone; the business jobs
# (internal/jobs) are built by the replica. An import of them into the engine, however
# indirect, would make it compile every business job's SQL again.
echo "engine imports" >&2
module=$(go list -m)
if go list -deps ./internal/engine | grep -qx "$module/internal/jobs"; then
  go list -deps -f '{{.ImportPath}}: {{join .Imports " "}}' ./internal/engine | grep -E " $module/internal/jobs( |$)" >&2 || true
  echo "lint.sh: internal/engine depends on internal/jobs (importers above): use internal/jobcontract, and let the replica build the jobs" >&2
  exit 1
fi

# deadcode lists functions no main package reaches. Code that exists only for tests is
# reached from tests alone by design: the test harness packages (testdb, testmetrics, testpace,
# testsignal, jobstest, replicatest, storetest, tracingtest, natstest), the test-signal hooks, and
# Replica.Listen (a test awaits the first term of the replica it started).
echo "deadcode" >&2
# In tools/ the roots are the bench and chaos commands (helmtest is a test alone).
dead=$({ "$tools/deadcode" ./... && (cd tools && "$tools/deadcode" ./bench ./chaos); } | grep -Ev '^internal/(testdb|testmetrics|testpace|testsignal|jobs/jobstest|store/storetest|tracing/tracingtest|targets/natstest)/|^replica/replicatest/|unreachable func: (testSignals\.init|Replica\.Listen)$' || true)
if [ -n "$dead" ]; then
  echo "$dead"
  echo "lint.sh: unreachable code above: delete it, or use it" >&2
  exit 1
fi

# One home per concept (issue 30): a non-test Go file over 450 lines holds more than one; split
# it by concern rather than raise the bound.
echo "file length" >&2
long=$(find . \( -path ./bin -o -path './.*' \) -prune -o -name '*.go' ! -name '*_test.go' -print0 |
  xargs -0 wc -l | awk '$2 != "total" && $1 > 450 {print "  " substr($2, 3) ": " $1 " lines"}')
if [ -n "$long" ]; then
  echo "$long"
  echo "lint.sh: non-test Go files over 450 lines above: split each by concern" >&2
  exit 1
fi

# The console's script is served as written: a syntax error there blanks every page, and only
# the browser tests would notice, slowly. node parses it where node is installed.
if command -v node >/dev/null 2>&1; then
  echo "console script" >&2
  for f in api/ui/static/*.js; do
    node --check "$f" || { echo "lint.sh: $f does not parse" >&2; exit 1; }
  done
fi

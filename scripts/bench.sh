#!/usr/bin/env bash
# bench.sh — run tools/bench (or tools/chaos) against a real PostgreSQL: BENCH_DATABASE_URL or
# DATABASE_URL when set, otherwise a throwaway cluster started for the run and removed at the end.
#
#   scripts/bench.sh bench [flags]   benchmarks: each target's row of BENCHMARKS.md, the report added
#                                    to docs/benchmarks-history.md (-quick: the history only)
#   scripts/bench.sh chaos [flags]   the chaos run (-duration 2m, -faults kill,term,...);
#                                    FAULTS=... sets -faults. On its own throwaway cluster
#                                    the chaos run may restart PostgreSQL (pg-restart), and
#                                    with FAULTS naming failover it gets a streaming standby
#                                    too, to promote; on BENCH_DATABASE_URL/DATABASE_URL it
#                                    does neither.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:?usage: scripts/bench.sh bench|chaos [flags]}
shift
case "$what" in
  bench|chaos) ;;
  *) echo "usage: scripts/bench.sh bench|chaos [flags]" >&2; exit 2 ;;
esac

export BENCH_DATABASE_URL=${BENCH_DATABASE_URL:-${DATABASE_URL:-}}
if [ -z "$BENCH_DATABASE_URL" ]; then
  dir=$(mktemp -d /tmp/scheduler-bench-pg.XXXXXX)
  port=$(( 56000 + RANDOM % 4000 ))
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
  trap 'scripts/pg.sh remove "$dir"; [ -z "${sdir:-}" ] || scripts/pg.sh remove "$sdir"' EXIT
  # Durable commits, as on a production server: with fsync and synchronous_commit off a
  # commit costs nothing, which flatters designs that commit once per row.
  PG_DURABLE=1 scripts/pg.sh start "$dir" "$port"
  BENCH_DATABASE_URL=$(scripts/pg.sh url "$port")
  if [ "$what" = chaos ] && [[ ",${FAULTS:-}," == *,failover,* ]]; then
    sport=$((port + 1))
    while (exec 3<>"/dev/tcp/127.0.0.1/$sport") 2>/dev/null; do sport=$((sport + 1)); done
    sdir=$dir-standby
    scripts/pg.sh standby "$port" "$sdir" "$sport"
  fi
fi

# A built binary, not `go run`: the bench re-executes itself to measure a job's peak RSS. It is
# built in the tools module (tools/, its own go.mod: the bench's and chaos run's dependencies
# stay out of the product's) and run from here: it builds ./cmd/scheduler, runs scripts/pg.sh
# and writes BENCHMARKS.md relative to the repository's root.
bin=$(mktemp -d /tmp/scheduler-bench-bin.XXXXXX)
trap 'rm -rf "$bin"; [ -z "${dir:-}" ] || scripts/pg.sh remove "$dir"; [ -z "${sdir:-}" ] || scripts/pg.sh remove "$sdir"' EXIT
(cd tools && go build -o "$bin/$what" "./$what")
args=()
if [ "$what" = chaos ]; then
  [ -z "${dir:-}" ] || args+=(-pgdata "$dir")
  [ -z "${sdir:-}" ] || args+=(-standby "$sdir" -standby-port "$sport")
  [ -z "${FAULTS:-}" ] || args+=(-faults "$FAULTS")
fi
"$bin/$what" "${args[@]}" "$@"

#!/usr/bin/env bash
# run.sh N — a local cluster of N scheduler replicas on ports HTTP_PORT (8080) and up, against
# $DATABASE_URL or the project's own PostgreSQL in .pgdata (started when not running), with
# demo data. Ctrl-C stops the replicas, and the local PostgreSQL too when this script started
# it (its data stays in .pgdata; make clean deletes it).
set -euo pipefail
cd "$(dirname "$0")/.."
replicas=${1:-3}
base=${HTTP_PORT:-8080}

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for i in $(seq 0 $((replicas - 1))); do
  if port_taken $((base + i)); then
    echo "run.sh: port $((base + i)) is already in use (another make run?); stop it, or pick other ports: make run HTTP_PORT=9080" >&2
    exit 1
  fi
done

external=${DATABASE_URL:+1} own_pg=""
if [ -z "$external" ] && ! scripts/pg.sh status .pgdata; then own_pg=1; fi
DATABASE_URL=$(scripts/pg.sh ensure)
export DATABASE_URL
echo "database: ${DATABASE_URL}"

pids=()
stop() {
  trap - INT TERM EXIT
  echo
  if [ ${#pids[@]} -gt 0 ]; then
    echo "stopping ${#pids[@]} replicas"
    kill -TERM "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
  if [ -n "$own_pg" ]; then
    scripts/pg.sh stop .pgdata
    echo "stopped the local PostgreSQL (data kept in .pgdata; make clean deletes it)"
  elif [ -z "$external" ] && scripts/pg.sh status .pgdata; then
    echo "the local PostgreSQL in .pgdata was running before make run and still is: scripts/pg.sh stop .pgdata stops it"
  fi
}
trap stop INT TERM EXIT

bin/scheduler migrate up
bin/scheduler seed

for i in $(seq 1 "$replicas"); do
  port=$((base + i - 1))
  SCHEDULER_HTTP_ADDR="127.0.0.1:${port}" \
  SCHEDULER_INSTANCE_ID="replica-${i}" \
  SCHEDULER_LOG_FORMAT="${SCHEDULER_LOG_FORMAT:-text}" \
    bin/scheduler serve > >(sed -u "s/^/[replica-${i}] /") 2>&1 &
  pids+=("$!")
done

# Wait until every replica answers /readyz (the binary's own health check: no curl needed).
for i in $(seq 1 "$replicas"); do
  for _ in $(seq 1 100); do
    SCHEDULER_HTTP_ADDR="127.0.0.1:$((base + i - 1))" bin/scheduler healthcheck 2>/dev/null && break
    sleep 0.2
  done
done
echo
echo "replicas:"
for i in $(seq 1 "$replicas"); do echo "  replica-${i}: http://127.0.0.1:$((base + i - 1))"; done
echo "try:  curl -s http://127.0.0.1:${base}/v1/leader; curl -s -XPOST http://127.0.0.1:${base}/v1/jobs/status-sync/runs?wait=30s"
echo "Ctrl-C stops everything."
wait "${pids[@]}"

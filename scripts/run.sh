#!/usr/bin/env bash
# run.sh N — a local cluster of N scheduler replicas on ports 8080.. against a local
# PostgreSQL (started when none is configured), with demo data. Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
replicas=${1:-3}

DATABASE_URL=$(scripts/pg.sh ensure)
export DATABASE_URL
echo "database: ${DATABASE_URL}"
bin/scheduler migrate up
bin/scheduler seed

pids=()
stop() {
  trap - INT TERM EXIT
  echo
  echo "stopping ${#pids[@]} replicas"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
}
trap stop INT TERM EXIT

for i in $(seq 1 "$replicas"); do
  port=$((8079 + i))
  SCHEDULER_HTTP_ADDR="127.0.0.1:${port}" \
  SCHEDULER_INSTANCE_ID="replica-${i}" \
  SCHEDULER_LOG_FORMAT="${SCHEDULER_LOG_FORMAT:-text}" \
    bin/scheduler serve > >(sed -u "s/^/[replica-${i}] /") 2>&1 &
  pids+=("$!")
done

# Wait until every replica answers /readyz (the binary's own health check: no curl needed).
for i in $(seq 1 "$replicas"); do
  for _ in $(seq 1 100); do
    SCHEDULER_HTTP_ADDR="127.0.0.1:$((8079 + i))" bin/scheduler healthcheck 2>/dev/null && break
    sleep 0.2
  done
done
echo
echo "replicas:"
for i in $(seq 1 "$replicas"); do echo "  replica-${i}: http://127.0.0.1:$((8079 + i))"; done
echo "try:  curl -s http://127.0.0.1:8080/v1/leader; curl -s -XPOST http://127.0.0.1:8080/v1/jobs/status-sync/runs?wait=30s"
echo "Ctrl-C stops everything."
wait "${pids[@]}"

#!/usr/bin/env bash
# run.sh N — a local cluster of N scheduler replicas on ports HTTP_PORT (8080) and up, against
# $DATABASE_URL or the project's own PostgreSQL in .pgdata (started when not running), with
# demo data and two demo runtime jobs: an HTTP job calling the example receiver
# (examples/receiver, on RECEIVER_PORT, 8099) and a SQL job. Ctrl-C stops the replicas and the
# receiver, and the local PostgreSQL too when this script started it (its data stays in
# .pgdata; make clean deletes it).
set -euo pipefail
# Started by a script or a CI runner (the background job of a non-interactive shell), this
# shell begins with SIGINT ignored, and a shell cannot trap a signal ignored at its start:
# Ctrl-C would stop the replicas (which restore it) and leave this script, the receiver and
# its sed running. So start again with SIGINT and SIGTERM restored to their defaults.
if [ -z "${RUN_SH_SIGNALS:-}" ] && env --default-signal=INT true 2>/dev/null; then
  RUN_SH_SIGNALS=default exec env --default-signal=INT,TERM "$0" "$@"
fi
cd "$(dirname "$0")/.."
replicas=${1:-3}
base=${HTTP_PORT:-8080}
receiver_port=${RECEIVER_PORT:-8099}

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for port in $(seq "$base" $((base + replicas - 1))) "$receiver_port"; do
  if port_taken "$port"; then
    echo "run.sh: port $port is already in use (another make run?); stop it, or pick other ports: make run HTTP_PORT=9080 RECEIVER_PORT=9099" >&2
    exit 1
  fi
done

external=${DATABASE_URL:+1} own_pg=""
if [ -z "$external" ] && ! scripts/pg.sh status .pgdata; then own_pg=1; fi
DATABASE_URL=$(scripts/pg.sh ensure)
export DATABASE_URL
echo "database: ${DATABASE_URL}"

# Each program runs in the background with its lines prefixed by its name, through a FIFO
# rather than `cmd > >(sed …) &`, so that pids holds the programs' own ids whatever the
# shell makes of $! around a process substitution. Programs started in the background of a
# non-interactive shell ignore SIGINT (the demo receiver does not restore it), so stop
# sends each one TERM; each sed ends when its program's output closes.
pids=()
spawn() { # NAME COMMAND...
  local name=$1 fifo=.run/$1.out
  shift
  rm -f "$fifo"
  mkfifo "$fifo"
  sed -u "s/^/[${name}] /" <"$fifo" &
  "$@" >"$fifo" 2>&1 &
  pids+=("$!")
}
stop() {
  trap - INT TERM EXIT
  echo
  if [ ${#pids[@]} -gt 0 ]; then
    echo "stopping the ${#pids[@]} processes of make run (replicas and receiver)"
    kill -TERM "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true # the programs and their seds
  fi
  if [ -n "$own_pg" ]; then
    scripts/pg.sh stop .pgdata
    echo "stopped the local PostgreSQL (data kept in .pgdata; make clean deletes it)"
  elif [ -z "$external" ] && scripts/pg.sh status .pgdata; then
    echo "the local PostgreSQL in .pgdata was running before make run and still is: scripts/pg.sh stop .pgdata stops it"
  fi
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
trap stop EXIT

bin/scheduler migrate up
bin/scheduler seed

# The key that seals the secrets teams store through the API (SCHEDULER_SECRET_KEY): made
# once and kept in .run/, so the secrets stored in .pgdata open again at the next make run.
mkdir -p .run
if [ ! -s .run/secret-key ]; then
  (umask 077 && head -c 32 /dev/urandom | base64 >.run/secret-key)
fi
SCHEDULER_SECRET_KEY=$(cat .run/secret-key)
export SCHEDULER_SECRET_KEY

# The demo runtime jobs: the HTTP one signs its calls with a secret the receiver checks; the
# SQL one runs in the SQL target DEMO, the scheduler's database reached with a login of its
# own, which needs a user that may create roles (the local cluster's does; another
# DATABASE_URL's may not, and then the SQL demo is left out). The receiver has a key of its
# own (.run/receiver.key, kept too) from which every namespace has a signing secret:
# `bin/receiver secret NS` prints NS's, and a call to /ns/NS/… is checked with it, so a new
# team's signed job is accepted without a restart (README: "A team's first job").
go build -o bin/receiver ./examples/receiver
export RECEIVER_KEY_FILE=.run/receiver.key
signing=$(bin/receiver secret default)
RECEIVER_ADDR="127.0.0.1:${receiver_port}" spawn receiver bin/receiver
sql_target=""
psql=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)/psql
export SCHEDULER_SECRET_DEMO_JOBS_PASSWORD
SCHEDULER_SECRET_DEMO_JOBS_PASSWORD=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
# DATABASE_URL with the demo login as its user; the password comes from the secret by name.
demo_url=$(printf '%s' "$DATABASE_URL" | sed -E 's#^(postgres(ql)?://)([^@/]*@)?#\1scheduler_demo_jobs@#')
case "$demo_url" in *\?*) demo_url="${demo_url}&password_secret=DEMO_JOBS_PASSWORD" ;; *) demo_url="${demo_url}?password_secret=DEMO_JOBS_PASSWORD" ;; esac
if [ -x "$psql" ] && "$psql" -qX -v ON_ERROR_STOP=1 -v password="$SCHEDULER_SECRET_DEMO_JOBS_PASSWORD" \
    "$DATABASE_URL" -f scripts/demo-sql-target.sql >/dev/null 2>.run/sql-target.err &&
  SCHEDULER_SQL_TARGET_DEMO="$demo_url" bin/scheduler sql-target init DEMO --admin-url "$DATABASE_URL" >/dev/null 2>>.run/sql-target.err; then
  sql_target=DEMO
  export SCHEDULER_SQL_TARGET_DEMO="$demo_url"
else
  echo "run.sh: could not prepare the demo SQL job's target ($(head -n 1 .run/sql-target.err)); the demo SQL job is left out" >&2
fi
export SCHEDULER_SECRET_DEMO_SIGNING="$signing" SCHEDULER_HTTP_ALLOW="127.0.0.1/32"

for i in $(seq 1 "$replicas"); do
  port=$((base + i - 1))
  SCHEDULER_HTTP_ADDR="127.0.0.1:${port}" \
  SCHEDULER_INSTANCE_ID="replica-${i}" \
  SCHEDULER_LOG_FORMAT="${SCHEDULER_LOG_FORMAT:-text}" \
    spawn "replica-${i}" bin/scheduler serve
done

# Wait until every replica answers /readyz (the binary's own health check: no curl needed).
for i in $(seq 1 "$replicas"); do
  for _ in $(seq 1 100); do
    SCHEDULER_HTTP_ADDR="127.0.0.1:$((base + i - 1))" bin/scheduler healthcheck 2>/dev/null && break
    sleep 0.2
  done
done
cat > .run/demo-jobs.yaml <<YAML
jobs:
- name: demo-webhook
  description: Calls the example receiver every 30 seconds; it checks the signature and applies each slot once.
  schedule: "@every 30s"
  labels: {team: demo}
  http:
    url: http://127.0.0.1:${receiver_port}/ping
    headers: {Content-Type: application/json}
    body: '{"hello": "from the scheduler"}'
    signing_secret: DEMO_SIGNING
YAML
if [ -n "$sql_target" ]; then
  cat >> .run/demo-jobs.yaml <<'YAML'
- name: demo-member-counts
  description: Counts members by status every minute into demo_member_counts, exactly once per slot.
  schedule: "* * * * *"
  labels: {team: demo}
  sql:
    target: DEMO
    statements: >-
      INSERT INTO demo_member_counts
      SELECT coalesce(nullif(current_setting('scheduler.scheduled_at'), '')::timestamptz, date_trunc('second', now())),
      status, count(*) FROM members GROUP BY status
YAML
fi
SCHEDULER_URL="http://127.0.0.1:${base}" bin/scheduler apply -f .run/demo-jobs.yaml

echo
echo "replicas:"
for i in $(seq 1 "$replicas"); do echo "  replica-${i}: http://127.0.0.1:$((base + i - 1))"; done
echo "try:  curl -s http://127.0.0.1:${base}/v1/leader; curl -s -XPOST http://127.0.0.1:${base}/v1/jobs/status-sync/runs?wait=30s"
echo "runtime jobs: demo-webhook (HTTP, receiver on 127.0.0.1:${receiver_port})${sql_target:+ and demo-member-counts (SQL, target DEMO)}; bin/scheduler get demo-webhook"
echo "a team's first job: README.md, \"A team's first job\" (the receiver accepts http://127.0.0.1:${receiver_port}/ns/NAMESPACE/… signed with \$(bin/receiver secret NAMESPACE))"
echo "Ctrl-C stops everything."
wait "${pids[@]}"

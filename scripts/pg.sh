#!/usr/bin/env bash
# pg.sh — a local PostgreSQL for development and tests, installed when missing.
#
#   scripts/pg.sh start DIR PORT   initdb DIR (once) and start a server on 127.0.0.1:PORT
#                                  (PG_DURABLE=1: keep PostgreSQL's durable commit settings,
#                                  for benchmarks that must reflect a production server)
#   scripts/pg.sh stop DIR         stop the server of DIR
#   scripts/pg.sh restart DIR MODE restart the server of DIR with pg_ctl's shutdown MODE
#                                  (fast: sessions are ended cleanly; immediate: the server
#                                  crashes and recovers), for fault tests on their own cluster
#   scripts/pg.sh standby PPORT DIR PORT
#                                  a streaming (asynchronous) standby of the server on
#                                  127.0.0.1:PPORT, in DIR (emptied first) on PORT
#   scripts/pg.sh kill DIR         stop the server of DIR with -m immediate (a crash)
#   scripts/pg.sh promote DIR      promote the standby of DIR, waiting until it accepts writes
#   scripts/pg.sh remove DIR       stop it and delete DIR
#   scripts/pg.sh url PORT [DB]    print the connection URL
#   scripts/pg.sh status DIR       exit 0 when the server of DIR is running
#   scripts/pg.sh ensure           print a DATABASE_URL that answers: $DATABASE_URL when set,
#                                  else the project's own cluster in .pgdata, started (and
#                                  created) when needed, with database "scheduler". Its port is
#                                  55432, or the next free one when another server holds that
#                                  port; the choice is kept in .pgdata/postgresql.conf.
#
# initdb refuses to run as root, so as root the server runs as the "postgres" user that
# Debian's package creates. Authentication is "trust" on 127.0.0.1 only: these clusters
# are throwaway development databases, never a deployment.
set -euo pipefail

log() { echo "pg.sh: $*" >&2; }

pg_bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$d" ] || [ ! -x "$d/initdb" ]; then
    install_server
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  fi
  echo "$d"
}

install_server() {
  log "PostgreSQL server not found; installing Debian's postgresql package"
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { log "run as root or install the 'postgresql' package"; exit 1; }
    sudo="sudo"
  fi
  $sudo apt-get update -q >&2
  # The package's post-install would create and start a system cluster on 5432; we only
  # want the binaries, so keep it from creating one.
  $sudo mkdir -p /etc/postgresql-common/createcluster.d
  echo "create_main_cluster = false" | $sudo tee /etc/postgresql-common/createcluster.d/scheduler.conf >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q postgresql postgresql-client >&2
}

# as_owner runs a command as the cluster's owner: postgres when we are root, else ourselves.
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

start() {
  local dir=$1 port=$2 bin
  bin=$(pg_bindir)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$dir"; fi
  chmod 700 "$dir"
  if [ ! -f "$dir/PG_VERSION" ]; then
    as_owner "$bin/initdb" -D "$dir" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >/dev/null
    cat >>"$dir/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 400
shared_buffers = 256MB
log_min_messages = warning
# Commit times, which the fault tests and make chaos compare with each epoch's start.
track_commit_timestamp = on
CONF
    if [ "${PG_DURABLE:-}" != 1 ]; then
      # Development and test data only: durability traded for speed.
      printf 'fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n' >>"$dir/postgresql.conf"
    fi
  fi
  if as_owner "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
    return 0
  fi
  as_owner "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start >/dev/null || {
    log "server did not start; last lines of $dir/server.log:"; tail -n 20 "$dir/server.log" >&2; exit 1; }
}

standby() {
  local pport=$1 dir=$2 port=$3 bin
  bin=$(pg_bindir)
  stop "$dir"
  rm -rf "$dir"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$dir"; fi
  chmod 700 "$dir"
  # -R writes standby.signal and primary_conninfo; the primary's settings come with the copy.
  as_owner "$bin/pg_basebackup" -D "$dir" -h 127.0.0.1 -p "$pport" -U postgres -X stream -R -c fast
  printf "port = %s\nunix_socket_directories = '%s'\n" "$port" "$dir" >>"$dir/postgresql.conf"
  as_owner "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start >/dev/null || {
    log "standby did not start; last lines of $dir/server.log:"; tail -n 20 "$dir/server.log" >&2; exit 1; }
}

stop() {
  local dir=$1 bin
  [ -f "$dir/PG_VERSION" ] || return 0
  bin=$(pg_bindir)
  as_owner "$bin/pg_ctl" -D "$dir" -m fast -w stop >/dev/null 2>&1 || true
}

restart() {
  local dir=$1 mode=${2:-fast} bin
  bin=$(pg_bindir)
  as_owner "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -m "$mode" -w -t 60 restart >/dev/null || {
    log "server did not restart; last lines of $dir/server.log:"; tail -n 20 "$dir/server.log" >&2; exit 1; }
}

url() { echo "postgres://postgres@127.0.0.1:$1/${2:-postgres}?sslmode=disable"; }

running() { # running DIR: is the server of DIR up?
  [ -f "$1/PG_VERSION" ] && as_owner "$(pg_bindir)/pg_ctl" -D "$1" status >/dev/null 2>&1
}

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# holder PORT names the process listening on PORT, when ss can tell.
holder() {
  command -v ss >/dev/null || { echo "another process"; return; }
  ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*users:(("\([^"]*\)",pid=\([0-9]*\).*/\1 (pid \2)/p' | head -n 1 | grep . || echo "another process"
}

ensure() {
  if [ -n "${DATABASE_URL:-}" ]; then echo "$DATABASE_URL"; return; fi
  local root dir port=55432
  root=$(cd "$(dirname "$0")/.." && pwd)
  dir=$root/.pgdata
  if [ -f "$dir/postgresql.conf" ]; then
    # The last "port =" line wins in postgresql.conf, as it does for the server.
    port=$(sed -n 's/^port = \([0-9]*\).*/\1/p' "$dir/postgresql.conf" | tail -n 1)
  fi
  if ! running "$dir" && port_taken "$port"; then
    local wanted=$port
    while port_taken "$port"; do port=$((port + 1)); done
    log "port $wanted is held by $(holder "$wanted") (another checkout's cluster?); this checkout's cluster in .pgdata uses port $port from now on"
    if [ -f "$dir/postgresql.conf" ]; then echo "port = $port" >>"$dir/postgresql.conf"; fi
  fi
  start "$dir" "$port"
  local bin; bin=$(pg_bindir)
  if ! "$bin/psql" -qtAX "$(url "$port")" -c "select 1 from pg_database where datname='scheduler'" | grep -q 1; then
    "$bin/psql" -qX "$(url "$port")" -c "create database scheduler" >/dev/null
  fi
  url "$port" scheduler
}

cmd=${1:-}
case "$cmd" in
  start) start "$2" "$3" ;;
  stop) stop "$2" ;;
  restart) restart "$2" "${3:-fast}" ;;
  standby) standby "$2" "$3" "$4" ;;
  kill) as_owner "$(pg_bindir)/pg_ctl" -D "$2" -m immediate -w stop >/dev/null ;;
  promote) as_owner "$(pg_bindir)/pg_ctl" -D "$2" -w -t 60 promote >/dev/null ;;
  remove) stop "$2"; rm -rf "$2" ;;
  url) url "$2" "${3:-}" ;;
  status) running "$2" ;;
  ensure) ensure ;;
  bindir) pg_bindir ;;
  *) echo "usage: $0 start DIR PORT | standby PPORT DIR PORT | kill DIR | promote DIR | stop DIR | restart DIR [fast|immediate] | remove DIR | status DIR | url PORT [DB] | ensure | bindir" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# promtool.sh — print the path of a promtool binary, installing Debian's prometheus package
# when none is found. Tests call it to check the metrics exposition and the alert rules.
#
# The package's post-install would start a Prometheus server on :9090; we only want the
# binary, so a policy-rc.d that answers 101 ("action forbidden") keeps invoke-rc.d from starting
# it, and it is removed again afterwards. A machine without systemd does not start it anyway.
set -euo pipefail

log() { echo "promtool.sh: $*" >&2; }

if p=$(command -v promtool 2>/dev/null); then
  echo "$p"
  exit 0
fi

if ! command -v apt-get >/dev/null; then
  log "promtool not found and apt-get is not available: install Prometheus' promtool (package 'prometheus' on Debian/Ubuntu) and put it on PATH"
  exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null; then
    log "promtool not found: run as root or install the 'prometheus' package (it provides /usr/bin/promtool)"
    exit 1
  fi
  sudo="sudo -n"
fi

# Serialise concurrent installs (several test packages may ask at once): dpkg has its own lock
# but apt-get fails instead of waiting for it.
exec 9>/tmp/scheduler-promtool-install.lock
flock 9
log "promtool not found; installing Debian's prometheus package"
policy=/usr/sbin/policy-rc.d
added_policy=""
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
  added_policy=1
fi
cleanup() { if [ -n "$added_policy" ]; then $sudo rm -f "$policy"; fi; }
trap cleanup EXIT

if ! command -v promtool >/dev/null; then
  $sudo apt-get update -q >&2 || { log "apt-get update failed; install the 'prometheus' package by hand"; exit 1; }
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends prometheus >&2 ||
    { log "apt-get install prometheus failed; install it by hand (it provides /usr/bin/promtool)"; exit 1; }
fi

p=$(command -v promtool 2>/dev/null) || { log "the prometheus package is installed but promtool is not on PATH"; exit 1; }
echo "$p"

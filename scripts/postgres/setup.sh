#!/usr/bin/env bash
# Make sure PostgreSQL's server binaries (Debian's packages) are on this machine, for the
# tests that run the gateway on PostgreSQL (tests/support/postgres.py starts a private
# server per test session: initdb and postgres as an unprivileged user, on a free
# loopback port, with scram-sha-256 password authentication, stopped at the end).
#
#   scripts/postgres/setup.sh        install if absent (apt-get; as root, or with sudo)
#
# Result: initdb and postgres under /usr/lib/postgresql/<major>/bin and, when run as
# root, the unprivileged account gateway-postgres that the tests run them as (created if
# needed: initdb and postgres refuse to run as root). tests/support/postgres.py finds both.
set -euo pipefail

PG_USER_NAME="gateway-postgres"

log() { echo "[postgres setup] $*"; }
die() { echo "[postgres setup] ERROR: $*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else die "need root (or sudo) to run: $*"
  fi
}

find_bin() {
  # Debian installs each major version under /usr/lib/postgresql/<major>/bin; the newest wins.
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

PG_BIN="$(find_bin)"
if [ -z "$PG_BIN" ] || [ ! -x "$PG_BIN/initdb" ] || [ ! -x "$PG_BIN/postgres" ]; then
  log "PostgreSQL is not installed: apt-get install postgresql"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get install -y --no-install-recommends postgresql \
    || { as_root apt-get update && as_root apt-get install -y --no-install-recommends postgresql; }
  PG_BIN="$(find_bin)"
  [ -n "$PG_BIN" ] && [ -x "$PG_BIN/initdb" ] || die "postgresql installed but no initdb under /usr/lib/postgresql"
fi

PG_USER=""
if [ "$(id -u)" -eq 0 ]; then
  if ! id -u "$PG_USER_NAME" >/dev/null 2>&1; then
    log "creating the unprivileged user $PG_USER_NAME (initdb and postgres refuse root)"
    useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$PG_USER_NAME"
  fi
  PG_USER="$PG_USER_NAME"
fi

log "ready: $("$PG_BIN/postgres" --version)${PG_USER:+, runs as $PG_USER}"

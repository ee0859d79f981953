#!/usr/bin/env bash
# Debian's `prometheus` package, unpacked into the project's cache for the tests that
# run a real Prometheus against the gateway (tests/e2e/test_prometheus.py) and for
# scripts/dashboard_picture.py: `prometheus` and `promtool` run from there. The package
# is NOT installed: no service, no user, nothing listening; the tests start and stop
# their own Prometheus on a free loopback port with a temporary data directory.
#
#   scripts/prometheus/setup.sh        download and unpack if absent
#
# Result: .cache/prometheus/usr/bin/{prometheus,promtool} (git-ignored, `make clean`
# removes it). tests/support/prometheus.py finds them there.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
CACHE="$ROOT/.cache/prometheus"
BIN="$CACHE/usr/bin"

log() { echo "[prometheus setup] $*"; }
die() { echo "[prometheus setup] ERROR: $*" >&2; exit 1; }

ready() { [ -x "$BIN/prometheus" ] && [ -x "$BIN/promtool" ] && "$BIN/promtool" --version >/dev/null 2>&1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else return 1
  fi
}

if ! ready; then
  command -v apt-get >/dev/null 2>&1 || die "apt-get is missing: Debian's prometheus package cannot be had here"
  WORK="$(mktemp -d)"
  trap 'rm -rf "$WORK"' EXIT
  # Writable by apt's sandbox user, so apt-get download run as root does not warn.
  if [ "$(id -u)" -eq 0 ] && id -u _apt >/dev/null 2>&1; then chown _apt "$WORK"; fi
  log "downloading Debian's prometheus package (apt-get download; not installed)"
  (cd "$WORK" && apt-get download -q prometheus) \
    || { log "not in the package lists: apt-get update"; as_root apt-get update -q >/dev/null \
         && (cd "$WORK" && apt-get download -q prometheus); } \
    || die "apt-get download prometheus failed"
  rm -rf "$CACHE"
  mkdir -p "$CACHE"
  dpkg -x "$WORK"/prometheus_*.deb "$CACHE"
  ready || die "unpacked the package but $BIN/promtool does not run"
fi

log "ready: $("$BIN/prometheus" --version 2>&1 | head -n 1) in ${BIN#"$ROOT"/}"

#!/usr/bin/env bash
# Install a real Llama Stack 0.7.3 for the end-to-end tests (pytest -m llama_stack).
#
#   scripts/llama-stack/setup.sh              install if needed (no-op when already done)
#   scripts/llama-stack/setup.sh --force      wipe and reinstall
#   scripts/llama-stack/setup.sh --refreeze   reinstall from requirements.txt without pins
#                                             and rewrite constraints.txt from pip freeze
#
# Result (all under <repo>/.cache/llama-stack, git-ignored):
#   venv/                 Python >= 3.12 venv with llama-stack 0.7.3 (`venv/bin/llama`)
#   tiktoken/9b5ad71b...  cl100k_base, for TIKTOKEN_CACHE_DIR (no network at run time)
#   installed.ok          marker; holds the hash of requirements.txt + constraints.txt
#
# Environment: LLAMA_STACK_PYTHON=/path/to/python3.12 forces the interpreter.
# tests/support/llama_stack.py starts the server from this venv.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
CACHE="$ROOT/.cache/llama-stack"
VENV="$CACHE/venv"
TIKTOKEN_DIR="$CACHE/tiktoken"
# sha1 of https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken
TIKTOKEN_FILE="$TIKTOKEN_DIR/9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
MARKER="$CACHE/installed.ok"
REQUIREMENTS="$SCRIPT_DIR/requirements.txt"
CONSTRAINTS="$SCRIPT_DIR/constraints.txt"

log() { echo "[llama-stack setup] $*"; }
die() { echo "[llama-stack setup] ERROR: $*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# The image's pip config lists local indexes that may not exist; drop that noise only.
quiet_pip_noise() { { grep -v "is ignored: it is neither a file nor a directory" || true; }; }

MODE=install
case "${1:-}" in
  "") ;;
  --force) MODE=force ;;
  --refreeze) MODE=refreeze ;;
  -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
  *) die "unknown argument: $1 (try --help)" ;;
esac

T0="$(now)"
mkdir -p "$CACHE"
# Two runs at once (two terminals, parallel CI steps) must not build the same venv.
exec 9>"$CACHE/.setup.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

want_hash() { cat "$REQUIREMENTS" "$CONSTRAINTS" | sha256sum | cut -d' ' -f1; }

installed_ok() {
  [[ -f "$MARKER" && -x "$VENV/bin/llama" && -s "$TIKTOKEN_FILE" ]] || return 1
  grep -qx "hash=$(want_hash)" "$MARKER" || return 1
  "$VENV/bin/python" -c 'pass' >/dev/null 2>&1
}

if [[ "$MODE" == install ]] && installed_ok; then
  log "already installed ($(grep '^llama-stack=' "$MARKER" | cut -d= -f2), $VENV); checked in $(since "$T0") s"
  exit 0
fi

# A Python >= 3.12 that really runs. The pyenv shim `python3.12` on PATH fails when the
# pyenv global version is 3.11, so try the interpreters' full paths first.
python_ok() {
  "$1" -c 'import sys, venv, ensurepip; sys.exit(0 if sys.version_info >= (3, 12) else 1)' \
    >/dev/null 2>&1
}

find_python() {
  local candidates=() root
  if command -v pyenv >/dev/null 2>&1 && root="$(pyenv root 2>/dev/null)" && [[ -n "$root" ]]; then
    candidates+=("$root"/versions/3.12*/bin/python3.12 "$root"/versions/3.13*/bin/python3.13)
  fi
  candidates+=(/root/.pyenv/versions/3.12*/bin/python3.12 /root/.pyenv/versions/3.13*/bin/python3.13)
  candidates+=(python3.12 python3.13 /usr/bin/python3.12 /usr/bin/python3.13 python3)
  local c
  for c in "${candidates[@]}"; do
    if python_ok "$c"; then
      command -v "$c"
      return 0
    fi
  done
  return 1
}

if [[ -n "${LLAMA_STACK_PYTHON:-}" ]]; then
  python_ok "$LLAMA_STACK_PYTHON" \
    || die "LLAMA_STACK_PYTHON=$LLAMA_STACK_PYTHON is not a working Python >= 3.12 with venv"
  PYTHON="$LLAMA_STACK_PYTHON"
else
  PYTHON="$(find_python)" || die "no Python >= 3.12 found. llama-stack 0.7.3 needs Python >= 3.12 \
(on 3.11 pip silently installs the old 0.2.12). Tried: \$(pyenv root)/versions/3.12*/bin/python3.12, \
/root/.pyenv/versions/3.1[23]*/bin/python3.1[23], python3.12, python3.13, python3. \
Install one (e.g. 'pyenv install 3.12' or apt-get install python3.12-venv) or set LLAMA_STACK_PYTHON."
fi
log "using $PYTHON ($("$PYTHON" -c 'import platform; print(platform.python_version())'))"

make_venv() {  # make_venv DIR
  local t
  t="$(now)"
  rm -rf "$1"
  "$PYTHON" -m venv "$1"
  log "venv created in $(since "$t") s"
}

pip_install() {  # pip_install VENV ARGS...
  local venv="$1" t
  shift
  t="$(now)"
  "$venv/bin/python" -m pip install --disable-pip-version-check --no-input --progress-bar off \
    -q "$@" 2>&1 | quiet_pip_noise
  log "pip install in $(since "$t") s"
}

if [[ "$MODE" == refreeze ]]; then
  TMP="$CACHE/venv-refreeze"
  make_venv "$TMP"
  pip_install "$TMP" -r "$REQUIREMENTS"
  {
    echo "# Every package of the Llama Stack test venv, pinned (pip freeze of a venv that passed"
    echo "# tests/support_smoke with Python $("$TMP/bin/python" -c 'import platform; print(platform.python_version())')). Regenerate with:"
    echo "#   scripts/llama-stack/setup.sh --refreeze"
    echo "# Changing this file makes the next setup.sh run rebuild the venv."
    "$TMP/bin/python" -m pip freeze --disable-pip-version-check 2>/dev/null \
      | grep -v -E '^(pip|setuptools|wheel)=='
  } >"$CONSTRAINTS.new"
  mv "$CONSTRAINTS.new" "$CONSTRAINTS"
  rm -rf "$TMP"
  log "wrote $CONSTRAINTS ($(grep -c '==' "$CONSTRAINTS") pins); installing from it"
fi

rm -f "$MARKER"
make_venv "$VENV"
pip_install "$VENV" -r "$REQUIREMENTS" -c "$CONSTRAINTS"

# Check the traps the reference hit: wrong llama-stack version, mcp 2.x, no tiktoken data.
VERSIONS="$("$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
import sys
ls, mcp = md.version("llama_stack"), md.version("mcp")
if ls != "0.7.3" or int(mcp.split(".")[0]) >= 2:
    sys.exit(f"unexpected versions: llama-stack {ls}, mcp {mcp}")
print(f"llama-stack={ls}\nmcp={mcp}\nopenai={md.version('openai')}")
EOF
)" || die "version check failed"
"$VENV/bin/llama" stack --help >/dev/null || die "'llama stack --help' fails in $VENV"

TIKTOKEN_SRC="$("$VENV/bin/python" -c 'import pathlib, tiktoken_ext; print(pathlib.Path(tiktoken_ext.__path__[0], "data", "cl100k_base.tiktoken"))')"
mkdir -p "$TIKTOKEN_DIR"
cp "$TIKTOKEN_SRC" "$TIKTOKEN_FILE.tmp"
mv "$TIKTOKEN_FILE.tmp" "$TIKTOKEN_FILE"

{
  echo "hash=$(want_hash)"
  echo "python=$PYTHON"
  echo "$VERSIONS"
  echo "installed_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$MARKER"
log "installed $(echo "$VERSIONS" | tr '\n' ' ')into $VENV ($(du -sm "$VENV" | cut -f1) MB)"
log "total $(since "$T0") s"

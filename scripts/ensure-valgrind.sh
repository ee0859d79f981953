#!/bin/sh
# valgrind counts the rewriter's instructions for the regression guard
# (tests/streaming/test_instruction_budget.py). Installed from Debian when missing.
command -v valgrind >/dev/null 2>&1 && exit 0
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "valgrind is missing; installing the Debian package (apt-get install -y valgrind)" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y -q valgrind >/dev/null 2>&1 || { $sudo apt-get update -q >/dev/null 2>&1; $sudo apt-get install -y -q valgrind >/dev/null; }
command -v valgrind >/dev/null 2>&1 || { echo "could not install valgrind: the instruction-budget test will fail in CI" >&2; exit 0; }

"""The linter over the code, with the rules `[tool.ruff.lint]` in pyproject.toml selects:
a finding fails the suite, so `make test` and CI run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_ruff_finds_nothing_in_gateway_bench_and_tests():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                             "gateway", "bench", "tests"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr

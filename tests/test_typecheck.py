"""`gateway/` type-checks: mypy (the venv's) runs over the whole package with the
configuration of pyproject.toml ([tool.mypy]: the pydantic plugin, `strict = true`) and
any error fails the suite (issue 40)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_gateway_passes_mypy():
    # The cache lives in the worktree's .mypy_cache (git-ignored) so a re-run checks only
    # what changed; mypy invalidates it itself when a file or the configuration changes.
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                           "--cache-dir", str(ROOT / ".mypy_cache"), "gateway"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr

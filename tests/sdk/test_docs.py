"""docs/sdk.md's example runs as written against `gateway demo`, in both modes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.gateway_proc import GATEWAY_BIN
from tests.support.processes import free_port, spawn, wait_http

DOC = Path(__file__).resolve().parents[2] / "docs" / "sdk.md"


def example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    return blocks[0]


@pytest.mark.parametrize("flags", [(), ("--engine",)], ids=["forward", "engine"])
def test_the_example_runs_against_gateway_demo(tmp_path, flags):
    port = free_port()
    demo = spawn(f"demo-{port}", [str(GATEWAY_BIN), "demo", "--port", str(port),
                                  "--data-dir", str(tmp_path), *flags], tmp_path)
    try:
        wait_http(demo, f"http://127.0.0.1:{port}/liveness")
        script = tmp_path / "example.py"
        script.write_text(example())
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=90,
                              cwd=tmp_path, env={**os.environ, "GATEWAY_URL": f"http://127.0.0.1:{port}/v1"})
    finally:
        demo.stop()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Tool said: 22 degrees celsius and sunny in Paris"
    assert lines[1].startswith("Usage(input_tokens=")
    assert 'calling add {"a": 2, "b": 3}' in lines and "result 5" in lines
    assert "Tool said: 5" in done.stdout
    assert any(line.startswith("Scripted reply (turn 3,") and line.endswith("Thanks!") for line in lines)
    assert lines[-1] == "Tool said: 42"

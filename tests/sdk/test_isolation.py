"""`gateway.sdk` is a client library: importing it loads none of the server's modules
(nor libraries only the server uses), checked in a fresh interpreter. aiohttp is not
on that list: the `openai` package itself imports it."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import gateway

SERVER_ONLY = ("asyncpg", "httptools", "prometheus_client", "jsonpath_ng", "mcp", "yaml")
PROBE = """
import json, sys
import gateway.sdk
print(json.dumps(sorted(sys.modules)))
"""


def test_importing_the_sdk_loads_no_server_module():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    ours = [name for name in loaded if name == "gateway" or name.startswith("gateway.")]
    assert ours and all(name == "gateway" or name.startswith("gateway.sdk") for name in ours), ours
    assert not [name for name in loaded if name.split(".")[0] in SERVER_ONLY]


def test_the_sdk_is_typed_in_the_wheel(tmp_path):
    assert (Path(gateway.__file__).parent / "sdk" / "py.typed").is_file()
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path),
                    str(root)], check=True, timeout=300)
    names = zipfile.ZipFile(next(tmp_path.glob("gateway-*.whl"))).namelist()
    assert "gateway/sdk/py.typed" in names and "gateway/sdk/agent.py" in names


def test_the_sdk_and_the_docs_example_pass_mypy_strict(tmp_path):
    from tests.sdk.test_docs import example

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "example.py").write_text(example())
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                           "--cache-dir", str(tmp_path / ".mypy_cache"),
                           str(root / "gateway" / "sdk"), str(tmp_path / "example.py")],
                          capture_output=True, text=True, timeout=300, cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr

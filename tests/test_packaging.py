"""What the Dockerfile relies on: `pip install .` yields a working `gateway` command
that carries the scripted upstream (for `gateway demo`) and no tests."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_wheel_installs_a_working_gateway_command(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path / "dist"),
                    str(ROOT)], check=True, timeout=300)
    wheel = next((tmp_path / "dist").glob("gateway-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "gateway/devserver/__init__.py" in names and "gateway/__main__.py" in names
    assert not [name for name in names if name.startswith("tests/")]
    prefix = tmp_path / "prefix"
    # --ignore-installed: without it pip would first uninstall the developer's own copy.
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--ignore-installed", "--quiet",
                    "--prefix", str(prefix),
                    str(wheel)], check=True, timeout=300)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(prefix), "platbase": str(prefix)}))
    deps = sysconfig.get_path("purelib")
    config = tmp_path / "c.yaml"
    config.write_text("name: packaged\nllama_stack: {url: 'http://127.0.0.1:9'}\n")
    result = subprocess.run([str(prefix / "bin" / "gateway"), "check-config", "-c", str(config)],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{deps}"})
    assert result.returncode == 0, result.stderr
    assert "OK" in result.stdout

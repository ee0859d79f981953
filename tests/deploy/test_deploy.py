"""deploy/ and the Dockerfile: the Kubernetes manifest is valid against the Kubernetes
schema (kubernetes-validate, offline) and consistent with the gateway it runs (its
configuration passes `gateway check-config`, the probes name the gateway's routes on its
port, the grace periods nest); the image's base is pinned by digest, its dependencies are
the lock, which satisfies pyproject.toml; its HEALTHCHECK tells a live gateway (even one
answering 401) from a dead one; and, where a Docker daemon answers, the image builds."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from packaging.requirements import Requirement

from tests.support.gateway_proc import GATEWAY_BIN
from tests.support.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy" / "kubernetes.yaml"
LOCK = ROOT / "deploy" / "requirements.lock"
DOCKERFILE = ROOT / "Dockerfile"
KUBERNETES = "1.30.0"   # the oldest release with the preStop `sleep` action in beta (on by default)


def documents() -> list[dict]:
    return [doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if doc]


def of_kind(kind: str) -> dict:
    return next(doc for doc in documents() if doc["kind"] == kind)


def gateway_config() -> dict:
    return yaml.safe_load(of_kind("ConfigMap")["data"]["lightspeed-stack.yaml"])


def container() -> dict:
    return of_kind("Deployment")["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("index", range(4))
def test_every_resource_is_valid_against_the_kubernetes_schema(index):
    doc = documents()[index]
    kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def test_the_validator_refuses_a_broken_deployment():
    broken = of_kind("Deployment")
    broken["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "eighty"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES, strict=True)


def test_its_configuration_is_one_the_gateway_accepts(tmp_path):
    path = tmp_path / "lightspeed-stack.yaml"
    path.write_text(of_kind("ConfigMap")["data"]["lightspeed-stack.yaml"])
    result = subprocess.run([str(GATEWAY_BIN), "check-config", "-c", str(path)], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "GATEWAY_API_KEY": "k" * 32, "LLAMA_STACK_API_KEY": "x"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert gateway_config()["service"]["host"] == "0.0.0.0"   # reachable from outside the pod


def test_probes_port_annotations_and_grace_periods_fit_the_gateway():
    config = gateway_config()
    port = config["service"]["port"]
    spec = container()
    assert spec["ports"][0]["containerPort"] == port
    assert spec["livenessProbe"]["httpGet"]["path"] == "/liveness"
    assert spec["readinessProbe"]["httpGet"]["path"] == "/readiness"
    assert config["authentication"]["skip_for_health_probes"] and config["authentication"]["skip_for_metrics"]
    annotations = of_kind("Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"] == str(port)
    assert annotations["prometheus.io/path"] == "/metrics"
    # The kubelet's SIGKILL comes after the preStop sleep, the drain's grace and its 5 s of cancelling.
    pod = of_kind("Deployment")["spec"]["template"]["spec"]
    pre_stop = spec["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pod["terminationGracePeriodSeconds"] >= pre_stop + config["service"]["shutdown_grace_seconds"] + 5
    # Secrets come from the Secret, never the ConfigMap.
    assert spec["envFrom"][0]["secretRef"]["name"]
    text = of_kind("ConfigMap")["data"]["lightspeed-stack.yaml"]
    assert "${env.GATEWAY_API_KEY}" in text and "${env.LLAMA_STACK_API_KEY}" in text


def test_the_image_base_is_pinned_and_its_dependencies_are_the_lock():
    text = DOCKERFILE.read_text()
    base = re.search(r"^FROM (\S+)", text, re.M).group(1)
    assert re.fullmatch(r"python:3\.12-slim@sha256:[0-9a-f]{64}", base), base
    assert "pip install --no-cache-dir --no-deps -r requirements.lock" in text
    assert "pip install --no-cache-dir --no-deps ." in text
    assert re.search(r"^HEALTHCHECK ", text, re.M)


def test_the_lock_satisfies_every_runtime_dependency():
    pins = {}
    for line in LOCK.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"not pinned: {line}"
            pins[name.lower().replace("_", "-")] = version
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for spec in declared:
        requirement = Requirement(spec)
        if requirement.marker is not None and not requirement.marker.evaluate({"sys_platform": "linux"}):
            continue
        name = requirement.name.lower().replace("_", "-")
        assert name in pins, f"{name} is a dependency but not in deploy/requirements.lock (make lock)"
        assert requirement.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} vs {spec}"


def healthcheck(env: dict[str, str]) -> int:
    text = DOCKERFILE.read_text()
    command = json.loads(text[text.index("CMD [", text.index("HEALTHCHECK")) + 4:text.index("]\n", text.index("HEALTHCHECK")) + 1])
    assert command[:2] == ["python", "-c"]
    return subprocess.run([sys.executable, "-c", command[2]], env={**os.environ, **env}, timeout=30).returncode


def test_the_healthcheck_tells_a_live_gateway_from_a_dead_one(gateway_factory, upstream):
    # Authenticated probes: /liveness answers 401, and that is an answer.
    gateway = gateway_factory(upstream.url, authentication={
        "module": "api-key-token", "api_key_config": {"api_key": "a" * 32}})
    assert gateway.get("/liveness").status == 401
    assert healthcheck({"GATEWAY_HEALTHCHECK_URL": f"http://127.0.0.1:{gateway.direct_port}/liveness"}) == 0
    assert healthcheck({"GATEWAY_HEALTHCHECK_URL": f"http://127.0.0.1:{free_port()}/liveness"}) == 1


def docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0


@pytest.mark.skipif(not docker_answers(), reason="no Docker daemon here (the image is built where one answers)")
@pytest.mark.timeout(900)
def test_the_image_builds_and_runs_the_gateway():
    tag = "gateway-test:ci"
    subprocess.run(["docker", "build", "-q", "-t", tag, str(ROOT)], check=True, timeout=840)
    result = subprocess.run(["docker", "run", "--rm", "--entrypoint", "gateway", tag, "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "serve" in result.stdout

"""What the gateway records once at start-up: LCORE's model configuration gauge (each LLM
by provider and name, 1 for the configured default) and whether it started degraded.
(Scraped through `gateway serve`: tests/e2e/test_metrics.py.)"""

from __future__ import annotations

from prometheus_client import generate_latest

from gateway.config import InferenceConfig
from gateway.observability.metrics import Metrics
from gateway.observability.startup import started
from gateway.upstream.catalog import ModelInfo

MODELS = [ModelInfo.from_upstream(raw) for raw in (
    {"identifier": "openai/gpt-4o", "provider_id": "openai", "model_type": "llm"},
    {"identifier": "openai/gpt-4o-mini", "provider_id": "openai", "model_type": "llm"},
    {"identifier": "sentence/all-MiniLM", "provider_id": "sentence", "model_type": "embedding"},
    {"id": "bare-model", "model_type": "llm"},
)]


def samples(metrics: Metrics) -> set[str]:
    return {line for line in generate_latest(metrics.registry).decode().splitlines()
            if line.startswith(("ls_provider_model_configuration{", "ls_started_in_degraded_mode "))}


def test_each_llm_by_provider_and_name_the_default_marked():
    metrics = Metrics()
    started(metrics, MODELS, InferenceConfig(default_provider="openai", default_model="gpt-4o-mini"), degraded=False)
    assert samples(metrics) == {
        'ls_provider_model_configuration{model="gpt-4o",provider="openai"} 0.0',
        'ls_provider_model_configuration{model="gpt-4o-mini",provider="openai"} 1.0',
        'ls_provider_model_configuration{model="bare-model",provider="unknown"} 0.0',
        "ls_started_in_degraded_mode 0.0",
    }   # the embedding model is not an LLM the gauge shows


def test_started_without_the_upstream():
    metrics = Metrics()
    started(metrics, None, InferenceConfig(), degraded=True)
    assert samples(metrics) == {"ls_started_in_degraded_mode 1.0"}

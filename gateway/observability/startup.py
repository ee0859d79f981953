"""What the gateway records once, when it starts: LCORE's model configuration gauge and
whether it started without its upstream (`llama_stack.allow_degraded_mode`)."""

from __future__ import annotations

from typing import Sequence

from gateway.config import InferenceConfig
from gateway.observability.metrics import Metrics
from gateway.upstream.catalog import ModelInfo


def started(metrics: Metrics, models: Sequence[ModelInfo] | None, inference: InferenceConfig,
            degraded: bool) -> None:
    """`models`: the upstream's catalog at start-up (None: the upstream was unreachable)."""
    metrics.metric("ls_started_in_degraded_mode").set(1 if degraded else 0)
    configuration = metrics.metric("ls_provider_model_configuration")
    for model in models or ():
        if model.model_type != "llm":
            continue
        provider = model.provider_id or "unknown"
        name = model.id.removeprefix(f"{model.provider_id}/") if model.provider_id else model.id
        default = (inference.default_model_id == model.id
                   or (provider, name) == (inference.default_provider, inference.default_model))
        configuration.labels(provider, name).set(1 if default else 0)

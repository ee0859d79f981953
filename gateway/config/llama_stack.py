"""The `llama_stack` section: the upstream the gateway forwards to (LCORE's keys, and
ours, each marked "Ours")."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from gateway.config.base import Strict, http_url, not_built


class LlamaStackConfig(Strict):
    url: str
    api_key: str | None = None
    timeout: float = Field(180, gt=0)
    use_as_library_client: bool | None = None
    library_client_config_path: str | None = not_built()
    # Retries of a request that got no connection, a 429 or 503 (any method), or a 502
    # or 504 (idempotent methods only): upstream/retry.py. `retry_delay` is the first
    # backoff, doubling, half of it jittered.
    max_retries: int = Field(2, ge=0)
    retry_delay: float = Field(0.5, ge=0)
    # Ours (issue 42): the seconds from a request's first attempt within which a retry
    # may still start (a `Retry-After` beyond it is not waited for).
    retry_budget_seconds: float = Field(10, ge=0)
    # Ours (issue 42): the longest a turn may run, from its start to its end (every round
    # and stream of it); past it the turn ends failed, charged what it used. 0: none.
    turn_deadline_seconds: float = Field(0, ge=0)
    allow_degraded_mode: bool = False
    config: dict[str, Any] | None = not_built()
    # Ours. Which upstream API serves turns; `auto` probes the upstream on first use.
    api: Literal["auto", "responses", "chat_completions"] = "auto"
    # Ours. Who keeps conversation state: the upstream's Conversations API, the
    # gateway (continuing with previous_response_id), or `auto` (probe on first use).
    conversations: Literal["auto", "upstream", "gateway"] = "auto"
    # Ours. Size of the client connection pool to the upstream: concurrent streams
    # beyond it queue, so it bounds how many turns can run at once.
    max_connections: int = Field(1024, ge=1)
    # Ours. Seconds the model catalog is cached for model selection (`GET /v1/models`
    # always asks the upstream).
    models_cache_seconds: float = Field(60, ge=0)
    # Ours. How errors name the upstream: `Unable to connect to <display_name>` (LCORE
    # 0.6 says `Llama Stack`, LCORE 0.7 `OGX`).
    display_name: str = Field("Llama Stack", min_length=1)
    # Ours (issue 42): the upstream's circuit breaker (docs/resilience.md). After this
    # many requests in a row got no connection, no answer in time or a 502/503/504,
    # turns are refused at once (LCORE's 503) for `circuit_breaker_cooldown_seconds`,
    # then one request probes the upstream. 0: off.
    circuit_breaker_failures: int = Field(5, ge=0)
    circuit_breaker_cooldown_seconds: float = Field(10, gt=0)

    _url_shape = field_validator("url")(lambda cls, value: http_url(value))

    @field_validator("use_as_library_client")
    @classmethod
    def _no_library_mode(cls, value: bool | None) -> bool | None:
        if value:
            raise ValueError("library client mode is not supported: the gateway needs a Llama Stack "
                             "server at llama_stack.url")
        return value

"""The `rlsapi_v1` section: LCORE's keys for `POST /v1/infer`, the RHEL command-line
assistant's stateless endpoint."""

from __future__ import annotations

from typing import Literal

from gateway.config.base import Strict

QuotaSubject = Literal["user_id", "org_id", "system_id"]


class RlsapiV1Config(Strict):
    # A request's `include_metadata` is honoured only when this is set (LCORE's dual opt-in).
    allow_verbose_infer: bool = False
    # Whose balance an inference is admitted against and charged to; None: no quota check
    # at all on this endpoint (as LCORE). `org_id` and `system_id` come from the
    # rh-identity document and fall back to the user id without one.
    quota_subject: QuotaSubject | None = None

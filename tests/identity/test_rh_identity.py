"""`rh-identity`: the base64 JSON of `x-rh-identity` decoded and validated as LCORE does
(401 without it, 400 for anything malformed, 403 for a missing entitlement); the three
identity types and what each names as the user."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from gateway.config.auth import AuthenticationConfig
from gateway.identity.rh_identity import INVALID, RhIdentityAuthenticator, user_of
from gateway.schema.errors import ApiError

USER = {"identity": {"type": "User", "org_id": "42", "user": {"user_id": "u-1", "username": "ann"}},
        "entitlements": {"rhel": {"is_entitled": True}, "ansible": {"is_entitled": False}}}


def header(document: Any) -> dict[str, str]:
    return {"x-rh-identity": base64.b64encode(json.dumps(document).encode()).decode()}


def authenticator(**config: Any) -> RhIdentityAuthenticator:
    return RhIdentityAuthenticator(AuthenticationConfig.model_validate(
        {"module": "rh-identity", "rh_identity_config": config}))


async def refusal(auth: RhIdentityAuthenticator, headers: dict[str, str]) -> ApiError:
    with pytest.raises(ApiError) as refused:
        await auth.authenticate(headers, {})
    return refused.value


async def test_a_user_is_named_by_its_id_and_keeps_its_document():
    caller = await authenticator().authenticate(header(USER), {})
    assert (caller.user_id, caller.username, caller.token) == ("u-1", "ann", "")
    assert caller.document == USER and not caller.skip_userid_check


def test_each_identity_type_names_its_user():
    assert user_of({"identity": {"type": "ServiceAccount",
                                 "service_account": {"client_id": "c-9", "username": "svc"}}}) == ("c-9", "svc")
    system = {"type": "System", "org_id": "42", "system": {"cn": "host-1"}}
    assert user_of({"identity": system}) == ("host-1", "host-1")
    assert user_of({"identity": {**system, "account_number": "77"}}) == ("host-1", "77")


@pytest.mark.parametrize("document", [
    [], {"identity": {}}, {"identity": {"type": "Robot"}},
    {"identity": {"type": "User"}},                                              # no user section
    {"identity": {"type": "User", "user": {"user_id": "", "username": "ann"}}},  # blank
    {"identity": {"type": "User", "user": {"user_id": 7, "username": "ann"}}},   # not a string
    {"identity": {"type": "User", "user": {"user_id": "u\n1", "username": "ann"}}},
    {"identity": {"type": "User", "user": {"user_id": "u" * 257, "username": "ann"}}},
    {"identity": {"type": "System", "system": {"cn": "host-1"}}},                # System needs org_id
    {"identity": {"type": "User", "org_id": "4\x7f2", "user": {"user_id": "u", "username": "a"}}},
])
def test_a_malformed_document_is_400_invalid_identity_data(document):
    with pytest.raises(ApiError) as refused:
        user_of(document)
    assert refused.value.status == 400 and refused.value.detail == INVALID


async def test_the_header_missing_too_large_not_base64_or_not_json():
    auth = authenticator(max_header_size=200)
    missing = await refusal(auth, {})
    assert missing.status == 401 and missing.headers == {"WWW-Authenticate": "Bearer"}
    assert (await refusal(auth, {"x-rh-identity": "x" * 201})).status == 400
    assert (await refusal(auth, {"x-rh-identity": "not base64!"})).detail == \
        "Invalid base64 encoding in x-rh-identity header"
    assert (await refusal(auth, {"x-rh-identity": base64.b64encode(b"{nope").decode()})).detail == \
        "Invalid JSON in x-rh-identity header"


async def test_required_entitlements_must_each_be_entitled():
    assert (await authenticator(required_entitlements=["rhel"]).authenticate(header(USER), {})).user_id == "u-1"
    for required in (["rhel", "ansible"], ["openshift"]):
        refused = await refusal(authenticator(required_entitlements=required), header(USER))
        assert refused.status == 403 and refused.detail == "Insufficient entitlements"
    # Entitlements that are not an object count as none.
    assert (await refusal(authenticator(required_entitlements=["rhel"]),
                          header({**USER, "entitlements": ["rhel"]}))).status == 403

"""What the middleware records per request: why an authentication failed, and LCORE's
authentication and authorization counters from the route checks."""

from __future__ import annotations

from prometheus_client import generate_latest

from gateway.observability.http import HttpObserver, auth_failure_reason
from gateway.observability.metrics import Metrics


def test_auth_failure_reasons():
    assert auth_failure_reason(401, had_credential=False) == "no_credential"
    assert auth_failure_reason(401, had_credential=True) == "invalid_credential"
    assert auth_failure_reason(403, had_credential=True) == "forbidden"
    assert auth_failure_reason(503, had_credential=True) == "provider_unavailable"


def test_successful_authentications_are_the_checks_that_followed_them():
    """`ls_auth_attempts_total{result="success"}` is the sum of the route checks (and of
    the passes to routes with no action) that each successful authentication led to."""
    metrics = Metrics()
    observer = HttpObserver(metrics, "", "noop")
    observer.passed("query", True)
    observer.passed("query", False)
    observer.passed(None, True)
    observer.passed("responses", True)
    observer.authenticated("failure", "no_credential")
    text = generate_latest(metrics.registry).decode()
    assert 'ls_auth_attempts_total{auth_module="noop",reason="ok",result="success"} 4.0' in text
    assert 'ls_auth_attempts_total{auth_module="noop",reason="no_credential",result="failure"} 1.0' in text
    assert 'ls_authorization_checks_total{action="query",result="denied"} 1.0' in text
    assert 'ls_authorization_checks_total{action="query",result="allowed"} 1.0' in text

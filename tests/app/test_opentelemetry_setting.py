"""`NEURULES_OPENTELEMETRY`: FastAPI's per-request OpenTelemetry check only where something would be recorded."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace

from app.observability import TELEMETRY_OFF, fastapi_telemetry, opentelemetry_configured


class _SdkLikeProvider(trace.NoOpTracerProvider):
    """Stands in for a configured SDK provider: not one of the API's deferred defaults."""


def test_auto_is_off_until_a_provider_or_auto_configuration_is_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FASTAPI_OTEL_AUTO_CONFIGURE", raising=False)
    assert not opentelemetry_configured()  # nothing configured in the test process
    assert fastapi_telemetry("auto") == TELEMETRY_OFF
    assert fastapi_telemetry("off") == TELEMETRY_OFF
    assert fastapi_telemetry("on") is None
    monkeypatch.setenv("FASTAPI_OTEL_AUTO_CONFIGURE", "True")
    assert fastapi_telemetry("auto") is None
    assert fastapi_telemetry("off") == TELEMETRY_OFF
    monkeypatch.delenv("FASTAPI_OTEL_AUTO_CONFIGURE")
    monkeypatch.setattr(trace, "get_tracer_provider", _SdkLikeProvider)
    assert fastapi_telemetry("auto") is None


@pytest.mark.parametrize(("mode", "checked"), [("off", False), ("auto", False), ("on", True)])
def test_the_app_asks_per_request_only_when_on(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, mode: str, checked: bool
) -> None:
    from tests.conftest import make_api

    monkeypatch.delenv("FASTAPI_OTEL_AUTO_CONFIGURE", raising=False)
    api_gen = make_api(tmp_path, "sqlite", opentelemetry=mode)
    api = next(api_gen)
    try:
        calls = []
        real = trace.get_tracer_provider
        monkeypatch.setattr(trace, "get_tracer_provider", lambda: calls.append(1) or real())
        assert api.client.get("/v1/models", headers=api.h()).status_code == 200
        assert bool(calls) is checked
    finally:
        api_gen.close()

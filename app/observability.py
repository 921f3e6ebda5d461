"""Structured JSON logs, Prometheus metrics and the request-timing middleware."""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.http.redirects import relative_locations
from app.services.job_states import JobState

if TYPE_CHECKING:  # the worker imports this module for its logs: no FastAPI (nor OpenTelemetry) import there
    from fastapi.telemetry import TelemetryConfig

_rand = random.getrandbits
_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and any `extra=` fields."""

    def format(self, record: logging.LogRecord) -> str:
        """Render the record as JSON."""
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        for k, v in record.__dict__.items():
            if k not in _RESERVED and not k.startswith("_"):
                out[k] = v
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_logging(level: str = "INFO") -> None:
    """Send every log record (ours, uvicorn's, celery's) to stderr as JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "celery"):
        lg = logging.getLogger(name)
        lg.handlers[:] = []
        lg.propagate = True
    logging.getLogger("uvicorn.access").disabled = True  # our middleware logs requests
    for noisy in ("alembic", "kombu.connection"):
        logging.getLogger(noisy).setLevel(logging.WARNING if noisy == "alembic" else logging.ERROR)


class Metrics:
    """The service's Prometheus metrics, in their own registry."""

    def __init__(self, jobs_by_state: Callable[[], Mapping[JobState, int]] | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram(
            "neurules_http_request_duration_seconds",
            "HTTP request latency",
            ["method", "route", "status"],
            registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.predictions = Counter(
            "neurules_predictions_total", "records decided", ["endpoint"], registry=self.registry
        )
        self.prediction_errors = Counter(
            "neurules_prediction_rejections_total",
            "prediction requests refused for their content (reason: invalid_record, invalid_csv, too_many_records, "
            "conflicting_explain); other "
            "refusals (a key, an unknown model, an empty or unreadable body) count in "
            "neurules_http_request_duration_seconds by status",
            ["reason"],
            registry=self.registry,
        )
        self.decisions = Counter(
            "neurules_decisions_total",
            "decisions returned, per tenant, model, version and deciding rule (0 = default rule)",
            ["tenant", "model", "version", "rule"],
            registry=self.registry,
        )
        self._decision_children: dict[str, list[Any]] = {}  # version id -> counter child per rule id
        self._children: dict[tuple[Any, ...], Any] = {}  # labelled children, looked up once (labels() costs ~10 us)
        self.jobs_collector = _JobsCollector(jobs_by_state) if jobs_by_state is not None else None
        if self.jobs_collector is not None:
            self.registry.register(self.jobs_collector)

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def decided(self, endpoint: str) -> Counter:
        """The records-decided counter of an endpoint."""
        child: Counter = self._child(self.predictions, endpoint)
        return child

    def rejection(self, reason: str) -> Counter:
        """The rejected-requests counter of a reason."""
        child: Counter = self._child(self.prediction_errors, reason)
        return child

    def request_latency(self, method: str, route: str, status: str) -> Histogram:
        """The latency histogram of one method, route template and status."""
        child: Histogram = self._child(self.latency, method, route, status)
        return child

    def count_decisions(
        self, version_id: str, labels: tuple[str, str, int], n_rules: int, rule_ids: Sequence[int]
    ) -> None:
        """Add decisions to `neurules_decisions_total`; `labels` = (tenant id, model name, version number).
        The label children are made once per version (the request path only increments)."""
        children = self._decision_children.get(version_id)
        if children is None:
            tenant, model, version = labels
            children = [self.decisions.labels(tenant, model, str(version), str(j)) for j in range(n_rules + 1)]
            self._decision_children[version_id] = children
        if len(rule_ids) == 1:
            children[rule_ids[0]].inc()
            return
        for rule_id, n in Tally(rule_ids).items():
            children[rule_id].inc(n)


class _JobsCollector(Collector):
    def __init__(self, fetch: Callable[[], Mapping[JobState, int]]) -> None:
        self.fetch = fetch

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Read job counts at scrape time; when they cannot be read, no counts (never false zeros) and `_ok` 0."""
        ok = GaugeMetricFamily(
            "neurules_jobs_ok",
            "1 when neurules_jobs was read at this scrape; 0: the database could not be read "
            "and neurules_jobs is left out",
        )
        try:
            counts = self.fetch()
        except Exception as e:  # noqa: BLE001 -- a scrape must not fail because the database blinked
            logging.getLogger("neurules.metrics").warning("job counts unavailable", extra={"error": repr(e)})
            ok.add_metric([], 0)
            yield ok
            return
        g = GaugeMetricFamily("neurules_jobs", "training jobs by state (all tenants)", labels=["state"])
        for s in JobState:
            g.add_metric([s.value], counts.get(s, 0))
        ok.add_metric([], 1)
        yield g
        yield ok

    def describe(self) -> list[GaugeMetricFamily]:
        """Nothing at registration (no database query then)."""
        return []


class AnswerCutShort(Exception):
    """A streamed answer aborted after it started, its cause logged where it happened: the transfer ends without its
    last chunk (the request middleware lets the server close the connection, with no second log of it)."""


# where the key's principal is left in the request's scope state (`app.deps`), for the access line
PRINCIPAL_STATE = "neurules_principal"
REQUEST_ID_STATE = "neurules_request_id"  # and the request id, for a 500 answered inside the app
NOSNIFF = (b"x-content-type-options", b"nosniff")
CLOSE = (b"connection", b"close")
# an API answer is one tenant's data fetched with a key header (not Authorization, which shared caches skip)
NO_STORE = (b"cache-control", b"no-store")


class RequestMetricsMiddleware:
    """Pure ASGI middleware: latency histogram per route template, request id, one access log line."""

    def __init__(self, app: ASGIApp, metrics: Metrics, access_log: bool = True, max_body: int | None = None) -> None:
        self.app, self.metrics, self.access_log, self.max_body = app, metrics, access_log, max_body
        self.log = logging.getLogger("neurules.access")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Time the request and record it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500
        rid = None
        length = 0
        for k, v in scope.get("headers", ()):
            if k == b"x-request-id":
                rid = v.decode("latin-1")[:100]
            elif k == b"content-length" and v.isdigit():
                length = int(v)
        app = self.app
        if self.max_body is not None and length > self.max_body:  # refused before reading the body, answered
            from starlette.responses import JSONResponse  # below like any other (request id, access line, metrics)

            from app.errors import error_body

            message = f"request body of {length} bytes is over the limit of {self.max_body} bytes"
            app = JSONResponse(error_body("payload_too_large", message), status_code=413)
        elif self.max_body is not None and not length and _chunked(scope):  # no length given: count as it arrives
            receive = _limited(receive, self.max_body)
        api = scope["path"].startswith("/v1/")
        rid = rid or f"{_rand(64):016x}"  # not uuid4: os.urandom costs ~150 us per call on some hosts
        scope.setdefault("state", {})[REQUEST_ID_STATE] = rid
        body_done = not (length or _chunked(scope))
        if not body_done:
            read = receive

            async def receive() -> Message:  # notes when the request's body has all arrived
                nonlocal body_done
                message = await read()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    body_done = True
                return message

        started = False
        error_code: str | None = None

        async def _send(message: Message) -> None:
            nonlocal status, started, error_code
            if message["type"] == "http.response.body" and status >= 400 and error_code is None:
                error_code = _error_code(message.get("body", b""))  # for the access line: why it was refused
            elif message["type"] == "http.response.start":
                status, started = message["status"], True
                headers = message.get("headers", [])
                if 300 <= status < 400:  # never a Location on the host the client's own Host header named
                    headers = relative_locations(headers, scope.get("headers", ()))
                message["headers"] = [*headers, (b"x-request-id", rid.encode("latin-1"))]
                if not any(k == b"x-content-type-options" for k, _ in headers):  # the pages set their own
                    message["headers"].append(NOSNIFF)  # a browser must not read an answer as another type
                if api and not any(k == b"cache-control" for k, _ in headers):
                    message["headers"].append(NO_STORE)  # no proxy or browser cache keeps a tenant's answer
                if status >= 400 and not body_done:  # refused before its body was in: the connection is closed
                    message["headers"].append(CLOSE)  # after the answer (the server read on, a GB at a time)
            await send(message)

        try:
            await app(scope, receive, _send)
        except AnswerCutShort:  # logged already (a lost audit store, a key revoked mid-answer): no traceback
            if not started:
                raise
            # returning with the answer incomplete: the server closes the connection, the client sees a cut transfer
        except Exception:  # a bug: answered here, so the 500 carries the request id like any other answer
            if started:  # too late for another answer: the server closes the connection
                raise
            await self._internal_error(scope, receive, _send, rid)
        finally:
            elapsed = time.perf_counter() - start
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.metrics.request_latency(scope["method"], template, str(status)).observe(elapsed)
            if self.access_log:
                extra = {
                    "request_id": rid,
                    "method": scope["method"],
                    "path": scope["path"],
                    "route": template,
                    "status": status,
                    "duration_ms": round(elapsed * 1000, 3),
                }
                principal = scope.get("state", {}).get(PRINCIPAL_STATE)  # who, once the key was read
                if principal is not None:
                    extra["tenant_id"], extra["key_id"] = principal.tenant_id, principal.key_id
                if error_code is not None:
                    extra["error_code"] = error_code
                self.log.log(logging.WARNING if status >= 500 else logging.INFO, "request", extra=extra)

    async def _internal_error(self, scope: Scope, receive: Receive, send: Send, rid: str) -> None:
        """Log the exception being handled with the request id, and answer 500 naming that id."""
        from starlette.responses import JSONResponse

        from app.errors import internal_error_body

        logging.getLogger("neurules.errors").exception(
            "unhandled error on %s %s", scope["method"], scope["path"], extra={"request_id": rid}
        )
        await JSONResponse(internal_error_body(rid), status_code=500)(scope, receive, send)


def _error_code(body: bytes) -> str | None:
    """The `error.code` of an error answer's JSON body (None for any other body)."""
    if not body.startswith(b'{"error"'):
        return None
    try:
        code = json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None
    return code if isinstance(code, str) else None


def _chunked(scope: Scope) -> bool:
    return any(k == b"transfer-encoding" for k, _ in scope.get("headers", ()))


def _limited(receive: Receive, limit: int) -> Receive:
    """A `receive` that refuses a body (sent without Content-Length) once it grows over `limit` bytes."""
    received = 0

    async def _receive() -> Message:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:  # an HTTPException passes through FastAPI's body parsing unchanged
                from starlette.exceptions import HTTPException

                raise HTTPException(413, f"request body is over the limit of {limit} bytes")
        return message

    return _receive


# OpenTelemetry's API has no public "is a provider configured?" query: these are its defaults before one is set
_DEFAULT_PROVIDERS = {
    ("opentelemetry.trace", "ProxyTracerProvider"),
    ("opentelemetry.metrics._internal", "_ProxyMeterProvider"),
    ("opentelemetry._logs._internal", "ProxyLoggerProvider"),
}
TELEMETRY_OFF: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False}


def fastapi_telemetry(mode: str) -> TelemetryConfig | None:
    """FastAPI's `telemetry=` for the `opentelemetry` setting: None (FastAPI's defaults) when on, all off when not."""
    if mode == "on" or (mode == "auto" and opentelemetry_configured()):
        return None
    return TELEMETRY_OFF.copy()  # FastAPI keeps what it is given


def opentelemetry_configured() -> bool:
    """Whether OpenTelemetry would record anything now: a global provider is set, or FastAPI is told to set one."""
    if os.environ.get("FASTAPI_OTEL_AUTO_CONFIGURE", "").strip().lower() == "true":
        return True
    from opentelemetry import _logs, metrics, trace

    providers = (trace.get_tracer_provider(), metrics.get_meter_provider(), _logs.get_logger_provider())
    return any((type(p).__module__, type(p).__name__) not in _DEFAULT_PROVIDERS for p in providers)

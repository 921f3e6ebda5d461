"""A bounded predict load: a few keep-alive clients, each on one connection, counting what the server answered.

Each client sends one record per request to `/v1/models/<ref>/predict` with a short pause, waits a
little longer after a 503, and records per answer: the status, transport errors (a reset or closed
connection), and dropped connections (an answer with `Connection: close`, or the next answer arriving
on a new connection: the server closed the old one).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class Tally:
    """What the clients saw, all of them together."""

    statuses: Counter[int] = field(default_factory=Counter)
    transport_errors: Counter[str] = field(default_factory=Counter)
    dropped: int = 0  # keep-alive connections the server closed
    decisions_2xx: int = 0  # records decided in 200 answers: each must have its audit row
    last_ok: float = 0.0  # time.monotonic() of the latest 200

    def other_5xx(self) -> int:
        """Answers 500-599 other than 503."""
        return sum(n for s, n in self.statuses.items() if s >= 500 and s != 503)

    def snapshot(self) -> Tally:
        """A copy (the clients keep counting)."""
        return Tally(
            Counter(self.statuses), Counter(self.transport_errors), self.dropped, self.decisions_2xx, self.last_ok
        )


def _client_port(r: httpx.Response) -> int | None:
    """The local port of the connection that carried `r` (None when it is closed already)."""
    stream = r.extensions.get("network_stream")
    try:
        addr = stream.get_extra_info("client_addr") if stream is not None else None
    except OSError:  # the server closed it right after the answer
        return None
    return int(addr[1]) if addr else None


class PredictLoad:
    """`clients` keep-alive clients predicting in a background thread until `stop()`."""

    def __init__(self, url: str, key: str, ref: str, records: list[dict[str, Any]], clients: int = 3) -> None:
        self.url, self.key, self.ref, self.records, self.clients = url, key, ref, records, clients
        self.tally = Tally()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="predict-load", daemon=True)

    def start(self) -> PredictLoad:
        """Start the clients."""
        self._thread.start()
        return self

    def stop(self) -> Tally:
        """Stop the clients; what they saw."""
        self._stop.set()
        self._thread.join(60)
        return self.read()

    def read(self) -> Tally:
        """What the clients saw so far."""
        with self._lock:
            return self.tally.snapshot()

    async def _main(self) -> None:
        await asyncio.gather(*(self._client(i) for i in range(self.clients)))

    async def _client(self, i: int) -> None:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        headers = {"X-API-Key": self.key}
        port: list[int | None] = [None]  # the local port of this client's connection
        async with httpx.AsyncClient(base_url=self.url, headers=headers, limits=limits, timeout=30) as client:
            n = i
            while not self._stop.is_set():
                record = self.records[n % len(self.records)]
                n += self.clients
                await asyncio.sleep(await self._one(client, record, port))

    async def _one(self, client: httpx.AsyncClient, record: dict[str, Any], port: list[int | None]) -> float:
        """One request, counted; the pause before the next."""
        try:
            r = await client.post(f"/v1/models/{self.ref}/predict", json={"records": [record]})
        except httpx.TransportError as e:
            with self._lock:
                self.tally.transport_errors[type(e).__name__] += 1
            port[0] = None
            return 0.2
        now = None if r.headers.get("connection", "").lower() == "close" else _client_port(r)
        with self._lock:
            self.tally.statuses[r.status_code] += 1
            if now is None or (port[0] is not None and now != port[0]):  # closed after this answer, or before it
                self.tally.dropped += 1
            if r.status_code == 200:
                self.tally.decisions_2xx += len(r.json()["predictions"])
                self.tally.last_ok = time.monotonic()
        port[0] = now
        return 0.1 if r.status_code == 503 else 0.01

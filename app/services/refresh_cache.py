"""A cache for lookups that must stay fresh within a bound (API keys, aliases) without stalling requests.

An entry is served from memory while younger than `max_age_s`, counted from when the lookup that
produced it started; that is the bound on staleness (a revoked key, a moved alias). Past half of
it, the first request to read the entry starts one refresh in the background and is answered from
memory, so an entry in use is renewed before it expires and no request waits for the database.
Only an entry absent or past its bound makes a request wait, for one load shared by every request
that needs the same key at that moment (no stampede of identical lookups). Loads run in a thread,
never on the event loop. A load returning None (unknown key, revoked key) is not cached.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

V = TypeVar("V")
log = logging.getLogger("neurules.cache")


class RefreshAheadCache(Generic[V]):
    """Key -> value, at most `max_age_s` old, renewed in the background, LRU beyond `maxsize` entries."""

    def __init__(self, maxsize: int, max_age_s: float) -> None:
        self.maxsize, self.max_age_s = maxsize, max_age_s
        self.refresh_after_s = max_age_s / 2
        self._data: OrderedDict[Hashable, tuple[float, V]] = OrderedDict()  # key -> (lookup started at, value)
        self._loading: dict[Hashable, tuple[float, asyncio.Task[V | None]]] = {}  # key -> (started at, load)

    async def get(self, key: Hashable, load: Callable[[], V | None]) -> V | None:
        """The value of `key`: from memory within the bound (renewing it past half), else from `load` (blocking)."""
        entry = self._data.get(key)
        if entry is not None:
            age = time.monotonic() - entry[0]
            if age < self.max_age_s:
                if age >= self.refresh_after_s and key not in self._loading:
                    self._refresh(key, load)
                return entry[1]
        return await self._load(key, load)

    def discard(self, key: Hashable) -> None:
        """Forget one entry (its next read loads it); a load in flight for it will not store what it read."""
        self._data.pop(key, None)
        self._loading.pop(key, None)

    def clear(self) -> None:
        """Forget everything, loads in flight included."""
        self._data.clear()
        self._loading.clear()

    def _refresh(self, key: Hashable, load: Callable[[], V | None]) -> None:
        self._start(key, load).add_done_callback(self._refreshed)

    @staticmethod
    def _refreshed(task: asyncio.Task[V | None]) -> None:
        if not task.cancelled() and task.exception() is not None:  # the entry expires at its bound, then loads fail
            log.warning("background refresh failed", extra={"error": repr(task.exception())})

    async def _load(self, key: Hashable, load: Callable[[], V | None]) -> V | None:
        pending = self._loading.get(key)
        # join a load in flight only if it started within the bound: its answer then shows the database
        # as it was at most max_age_s before this request (a stalled load from before a revocation does not)
        if pending is not None and time.monotonic() - pending[0] < self.max_age_s:
            task = pending[1]
        else:
            task = self._start(key, load)
        # shielded: a waiter's cancellation (its client gone) never cancels the load the others wait on
        return await asyncio.shield(task)

    def _start(self, key: Hashable, load: Callable[[], V | None]) -> asyncio.Task[V | None]:
        started = time.monotonic()
        task = asyncio.ensure_future(self._run(key, load, started))
        task.add_done_callback(_retrieved)  # its waiters may all be gone: the failure is still read
        self._loading[key] = (started, task)  # also the reference that keeps the task alive
        return task

    async def _run(self, key: Hashable, load: Callable[[], V | None], started: float) -> V | None:
        try:
            value = await asyncio.to_thread(load)
        finally:
            current = self._loading.get(key, (0.0, None))[1] is asyncio.current_task()
            if current:
                del self._loading[key]
        if current:  # not discarded meanwhile (an alias moved), nor replaced by a fresher load
            self._store(key, started, value)
        return value

    def _store(self, key: Hashable, started: float, value: V | None) -> None:
        current = self._data.get(key)
        if current is not None and current[0] > started:  # a later lookup already answered: it is fresher
            return
        if value is None:
            self._data.pop(key, None)
            return
        self._data[key] = (started, value)
        self._data.move_to_end(key)
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)


def _retrieved(task: asyncio.Task[Any]) -> None:
    """Mark a load's failure as read (its waiters re-raise it; with none left, asyncio would log it as lost)."""
    if not task.cancelled():
        task.exception()

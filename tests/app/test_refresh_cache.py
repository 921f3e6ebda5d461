"""RefreshAheadCache: within the bound from memory, renewed in the background, one shared load, never stale past it."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from app.services.refresh_cache import RefreshAheadCache


class Source:
    """A blocking lookup that counts its calls and can be slowed, changed or broken."""

    def __init__(self, value: str | None = "v1", delay: float = 0.0) -> None:
        self.value, self.delay, self.calls, self.fail = value, delay, 0, False
        self.threads: set[int] = set()

    def __call__(self) -> str | None:
        self.calls += 1
        self.threads.add(threading.get_ident())
        time.sleep(self.delay)
        if self.fail:
            raise ConnectionError("database down")
        return self.value


def run(coro):
    return asyncio.run(coro)


async def until(condition, timeout: float = 10.0) -> None:
    """Wait (polling) until condition() holds; no assumption on how fast this machine is."""
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "condition not reached"
        await asyncio.sleep(0.005)


def test_fresh_entries_come_from_memory_and_loads_leave_the_loop() -> None:
    async def go() -> None:
        cache: RefreshAheadCache[str] = RefreshAheadCache(10, 10.0)
        src = Source()
        assert await cache.get("k", src) == "v1"
        assert await cache.get("k", src) == "v1"
        assert src.calls == 1
        assert threading.get_ident() not in src.threads  # the load ran in a thread, not on the loop

    run(go())


def test_concurrent_misses_share_one_load() -> None:
    async def go() -> None:
        cache: RefreshAheadCache[str] = RefreshAheadCache(10, 10.0)
        src = Source(delay=0.05)
        got = await asyncio.gather(*[cache.get("k", src) for _ in range(32)])
        assert got == ["v1"] * 32 and src.calls == 1

    run(go())


def test_past_half_the_bound_the_old_value_is_served_while_one_refresh_runs() -> None:
    async def go() -> None:
        cache: RefreshAheadCache[str] = RefreshAheadCache(10, 1.0)
        src = Source()
        await cache.get("k", src)
        gate = threading.Event()
        src.value = "v2"
        slow = Source("v2")
        slow.delay = 0
        blocked = lambda: (gate.wait(10), slow())[1]  # noqa: E731 -- a load held until released
        await asyncio.sleep(0.55)  # past refresh_after (0.5), before the bound (1.0)
        answers = [await cache.get("k", blocked) for _ in range(10)]
        assert answers == ["v1"] * 10  # served from memory while the refresh is held back
        assert slow.calls == 0 and not gate.is_set()
        gate.set()
        await until(lambda: slow.calls == 1)
        await until(lambda: not cache._loading)
        assert await cache.get("k", src) == "v2" and slow.calls == 1  # one background refresh for ten reads

    run(go())


def test_nothing_older_than_the_bound_is_served() -> None:
    async def go() -> None:
        cache: RefreshAheadCache[str] = RefreshAheadCache(10, 0.2)
        src = Source()
        await cache.get("k", src)
        src.value = "v2"
        await asyncio.sleep(0.25)  # past the bound without a read in between: the next read waits for a load
        assert await cache.get("k", src) == "v2"

    run(go())


def test_revoked_is_not_cached_and_a_refresh_that_finds_nothing_drops_the_entry() -> None:
    async def go() -> None:
        cache: RefreshAheadCache[str] = RefreshAheadCache(10, 1.0)
        src = Source(value=None)
        assert await cache.get("k", src) is None and await cache.get("k", src) is None
        assert src.calls == 2
        src.value = "v1"
        await cache.get("k", src)
        src.value = None  # revoked
        await asyncio.sleep(0.55)
        assert await cache.get("k", src) == "v1"  # within the bound, while the refresh runs
        await until(lambda: src.calls == 4 and not cache._loading)
        assert await cache.get("k", src) is None  # the refresh removed it

    run(go())


def test_a_failed_load_raises_for_every_waiter_and_is_not_cached() -> None:
    async def go() -> None:
        cache: RefreshAheadCache[str] = RefreshAheadCache(10, 10.0)
        src = Source(delay=0.05)
        src.fail = True
        results = await asyncio.gather(*[cache.get("k", src) for _ in range(4)], return_exceptions=True)
        assert all(isinstance(r, ConnectionError) for r in results) and src.calls == 1
        src.fail = False
        assert await cache.get("k", src) == "v1"

    run(go())


def test_zero_bound_always_loads() -> None:
    async def go() -> None:
        cache: RefreshAheadCache[str] = RefreshAheadCache(10, 0.0)
        src = Source()
        for _ in range(3):
            await cache.get("k", src)
        assert src.calls == 3

    run(go())


@pytest.mark.parametrize("maxsize", [1, 2])
def test_least_recently_used_entries_are_evicted(maxsize: int) -> None:
    async def go() -> None:
        cache: RefreshAheadCache[str] = RefreshAheadCache(maxsize, 10.0)
        src = Source()
        for k in ("a", "b", "a"):
            await cache.get(k, src)
        assert src.calls == (2 if maxsize == 2 else 3)

    run(go())


def test_a_load_started_before_the_bound_is_not_joined() -> None:
    """A refresh stalled in the database since before a revocation does not answer a request past the bound."""

    async def go() -> None:
        cache: RefreshAheadCache[str] = RefreshAheadCache(10, 0.4)
        db: dict[str, str | None] = {"k": "valid"}

        def slow() -> str | None:
            value = db["k"]  # read now, answered late (a stalled database)
            time.sleep(1.5)
            return value

        assert await cache.get("k", lambda: db["k"]) == "valid"
        await asyncio.sleep(0.25)
        assert await cache.get("k", slow) == "valid"  # past half: the stalled refresh starts in the background
        await asyncio.sleep(0.02)
        db["k"] = None  # revoked
        await asyncio.sleep(0.5)  # the entry and the stalled load are both older than the bound
        assert await cache.get("k", lambda: db["k"]) is None

    run(go())


def test_a_cancelled_waiter_does_not_cancel_the_others() -> None:
    async def go() -> None:
        cache: RefreshAheadCache[str] = RefreshAheadCache(10, 5.0)
        src = Source(delay=0.3)
        first = asyncio.ensure_future(cache.get("k", src))
        await asyncio.sleep(0.05)
        second = asyncio.ensure_future(cache.get("k", src))  # joins the first one's load
        await asyncio.sleep(0.05)
        first.cancel()
        assert await second == "v1" and src.calls == 1
        assert await cache.get("k", src) == "v1" and src.calls == 1  # the load finished and was stored

    run(go())


def test_discard_wins_over_a_load_in_flight() -> None:
    """An alias moved while a refresh that read the old target is in flight: the old target is not stored again."""

    async def go() -> None:
        cache: RefreshAheadCache[str] = RefreshAheadCache(10, 5.0)
        db = {"k": "old"}
        gate = threading.Event()

        def slow() -> str:
            value = db["k"]
            gate.wait(5)
            return value

        pending = asyncio.ensure_future(cache.get("k", slow))
        await asyncio.sleep(0.05)
        db["k"] = "new"
        cache.discard("k")  # what moving an alias does in this process
        gate.set()
        assert await pending == "old"  # that request started before the move
        assert await cache.get("k", lambda: db["k"]) == "new"

    run(go())


def test_a_failed_load_with_no_waiter_left_is_not_reported_lost(caplog: pytest.LogCaptureFixture) -> None:
    import gc

    async def go() -> None:
        cache: RefreshAheadCache[str] = RefreshAheadCache(10, 5.0)
        src = Source(delay=0.1)
        src.fail = True
        waiter = asyncio.ensure_future(cache.get("k", src))
        await asyncio.sleep(0.02)
        waiter.cancel()  # the client went away; the load goes on and fails
        await asyncio.sleep(0.3)

    with caplog.at_level("ERROR", logger="asyncio"):
        run(go())
        gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]

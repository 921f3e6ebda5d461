"""The broker's readiness check and a job refused by a Redis out of memory, on a private redis-server (a fault
probe: PING answered, /readyz said the broker was ok while every job was refused as "unreachable")."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import skip_unless_ci
from tests.e2e.conftest import free_port


@pytest.fixture()
def small_redis(tmp_path: Path) -> Iterator[str]:
    """A redis-server of its own, on a free port; its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        skip_unless_ci("redis-server is not installed")
        return
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.integration
def test_a_redis_refusing_writes_is_not_ready_and_its_refusal_is_named(small_redis: str, tmp_path: Path) -> None:
    import redis

    from app.services.errors import Unavailable
    from app.services.jobs import send_or_undo
    from app.settings import Settings
    from app.tables import Job
    from worker.celery_app import CeleryQueue, make_celery

    settings = Settings(broker_url=small_redis, data_dir=tmp_path, queue="q-oom")
    queue = CeleryQueue(make_celery(settings), "q-oom")
    queue.check()  # room to write: ready
    client = redis.Redis.from_url(small_redis)
    base = int(client.info("memory")["used_memory"])
    client.set("filler", "x" * 2_000_000)
    client.config_set("maxmemory", base + 1_000_000)
    client.config_set("maxmemory-policy", "noeviction")
    with pytest.raises(redis.exceptions.ResponseError, match="maxmemory"):
        queue.check()
    with pytest.raises(Unavailable) as info:
        send_or_undo(_Undo(), queue.send, Job(id="job_oom", tenant_id="tn_1"), "job")  # type: ignore[arg-type]
    assert "refused the message" in info.value.message and "maxmemory" in info.value.message, info.value.message
    client.config_set("maxmemory", 0)  # no bound: writes again, ready again
    queue.check()
    client.close()


class _Undo:
    """A session that deletes nothing (the row is not stored in this test)."""

    def execute(self, *_: object) -> None:
        pass

    def commit(self) -> None:
        pass

"""Which jobs (and background evaluations) have a message in the broker, so the reaper can re-send the queued
ones whose message is gone.

A Redis broker keeps a queue as lists (one per priority step) and the messages workers hold in an
`unacked` hash; the filesystem broker of embedded mode keeps one file per message. A message held
by a worker for longer than `unacked_fresh_s` while its job is still queued belongs to a consumer that
died or lost its connection (a live worker claims a job at once, or within its retry countdown), so
it does not count. Other transports cannot be scanned: `None`, and the reaper falls back to its timer.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from celery import Celery

Scan = Callable[[], set[str] | None]  # ids with a message; None: cannot tell; raises when the broker is down
UNACKED_FRESH_S = 120.0  # four times the longest retry countdown (worker.patience.MAX_COUNTDOWN_S)


def job_id_of(message: Any, *task_names: str) -> str | None:
    """The id a Celery message of one of `task_names` carries (its first argument); None for anything else."""
    try:
        msg = json.loads(message) if isinstance(message, (str, bytes)) else message
        if (msg.get("headers") or {}).get("task") not in task_names:
            return None
        body = msg["body"]
        if (msg.get("properties") or {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]  # task protocol 2: [args, kwargs, embed]
        return str(args[0]) if args else None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):  # not a message we sent
        return None


def _ids(messages: Iterable[Any], task_names: tuple[str, ...]) -> set[str]:
    return {j for j in (job_id_of(m, *task_names) for m in messages) if j is not None}


def scan_redis(app: Celery, queue: str, *task_names: str, unacked_fresh_s: float = UNACKED_FRESH_S) -> set[str]:
    """Ids (of `task_names` messages) waiting in the queue's lists or delivered to a worker less than
    `unacked_fresh_s` ago."""
    with app.connection_for_read() as conn:
        conn.ensure_connection(max_retries=1, timeout=3)
        ch = conn.default_channel
        client = ch.client
        # one list per priority step, named as kombu names them; its client adds any global key prefix
        keys = [queue, *(f"{queue}{ch.sep}{p}" for p in ch.priority_steps if p)]
        waiting = [m for k in keys for m in client.lrange(k, 0, -1)]
        tags = client.zrangebyscore(ch.unacked_index_key, time.time() - unacked_fresh_s, "+inf")
        # the unacked hash is shared by every queue of this Redis database: [message, exchange, routing key]
        entries = [json.loads(v) for v in client.hmget(ch.unacked_key, tags) if v] if tags else []
        held = [e[0] for e in entries if len(e) == 3 and e[2] == queue]
    return _ids(waiting, task_names) | _ids(held, task_names)


def scan_folder(folder: Path, queue: str, *task_names: str) -> set[str]:
    """Ids (of `task_names` messages) in the message files of `queue` in the filesystem broker's folder."""
    out: set[str] = set()
    for path in folder.glob(f"*.{queue}.msg"):
        try:
            raw = path.read_bytes()
        except FileNotFoundError:  # consumed meanwhile
            continue
        job = job_id_of(raw, *task_names)
        if job is not None:
            out.add(job)
    return out


def broker_scan(app: Celery, queue: str, *task_names: str) -> Scan:
    """The scan for this app's broker (Redis, filesystem), or one that answers None (cannot tell)."""
    url = str(app.conf.broker_url)
    if url.startswith(("redis://", "rediss://")):
        return lambda: scan_redis(app, queue, *task_names)
    if url.startswith("filesystem"):
        folder = Path(app.conf.broker_transport_options["data_folder_in"])
        return lambda: scan_folder(folder, queue, *task_names)
    return lambda: None

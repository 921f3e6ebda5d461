"""The embedded broker's messages appear whole: a worker polling the folder never reads a half-written file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from kombu.exceptions import ChannelError

from app.settings import Settings
from worker.celery_app import make_celery
from worker.tasks import TRAIN_TASK


def _channel(tmp_path: Path) -> tuple[Any, Path, Settings]:
    settings = Settings(data_dir=tmp_path)
    conn = make_celery(settings).connection_for_write()
    return conn.default_channel, settings.broker_dir / "queue", settings


def test_a_message_file_is_complete_whenever_a_reader_can_see_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    channel, folder, settings = _channel(tmp_path)
    module = sys.modules[type(channel)._put.__module__]  # the transport the service configures
    seen: list[bytes] = []
    real_dumps = module.dumps

    def dumps_while_a_reader_looks(payload: Any) -> str:
        seen.extend(p.read_bytes() for p in folder.glob(f"*.{settings.queue}.msg"))  # what a polling worker finds
        return real_dumps(payload)

    monkeypatch.setattr(module, "dumps", dumps_while_a_reader_looks)
    channel._put(settings.queue, {"body": "x" * 10_000})
    assert seen == []  # kombu's own transport shows the file, empty, while it writes
    (msg,) = folder.glob(f"*.{settings.queue}.msg")
    assert json.loads(msg.read_bytes()) == {"body": "x" * 10_000}
    assert channel._get(settings.queue) == {"body": "x" * 10_000}
    assert list(folder.iterdir()) == []


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    channel, folder, settings = _channel(tmp_path)
    module = sys.modules[type(channel)._put.__module__]

    def disk_full(*_a: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(module.os, "replace", disk_full)
    with pytest.raises(ChannelError):
        channel._put(settings.queue, {"body": 1})
    assert list(folder.iterdir()) == []


def test_tasks_sent_through_the_app_reach_the_queue(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    app = make_celery(settings)
    app.send_task(TRAIN_TASK, args=["job-1"], queue=settings.queue)
    (msg,) = (settings.broker_dir / "queue").glob(f"*.{settings.queue}.msg")
    assert "job-1" in msg.read_text()


def test_a_message_that_could_not_be_taken_is_taken_at_the_next_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kombu took a message by moving it to the system's temporary folder: across filesystems a copy, then a
    delete. With the broker folder read-only for a moment the delete failed, the copy stayed there, and every
    later move of that message failed on it without a word: the job stayed queued for good (a probe, with a
    read-only bind mount). Here a message is claimed by a rename in its own folder, or left for the next poll."""
    import errno
    import os
    import tempfile

    channel, folder, settings = _channel(tmp_path)
    channel._put(settings.queue, {"body": 1})
    (msg,) = folder.glob(f"*.{settings.queue}.msg")
    real_rename, real_unlink = os.rename, os.unlink
    fail = {"rename": 1, "unlink": 1}

    def rename(src: Any, dst: Any, *a: Any, **k: Any) -> None:  # the first move crosses filesystems
        if fail["rename"]:
            fail["rename"] -= 1
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real_rename(src, dst, *a, **k)

    def unlink(path: Any, *a: Any, **k: Any) -> None:  # ... and the folder is read-only then
        if fail["unlink"] and str(path) == str(msg):
            fail["unlink"] -= 1
            raise OSError(errno.EROFS, "Read-only file system")
        real_unlink(path, *a, **k)

    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(os, "unlink", unlink)
    from queue import Empty

    with pytest.raises(Empty):
        channel._get(settings.queue)
    assert channel._get(settings.queue) == {"body": 1}
    assert list(folder.iterdir()) == []
    assert not (Path(tempfile.gettempdir()) / msg.name).exists()


@pytest.mark.parametrize("content", [b"", b'[["neurules-training", "", "neurules-tr', b"\xff\xfe"])
def test_a_binding_file_left_unreadable_is_bound_again(tmp_path: Path, content: bytes) -> None:
    """kombu writes an exchange's binding file in place without a sync: after a disk fault it was found empty and
    every start of the embedded worker stopped on it ('Unrecoverable error: JSONDecodeError'). It is bound again."""
    channel, _, settings = _channel(tmp_path)
    channel._queue_bind("neurules-training", "", "", settings.queue)
    path = settings.broker_dir / "control" / "neurules-training.exchange"
    good = json.loads(path.read_bytes())
    path.write_bytes(content)
    assert channel.get_table("neurules-training") == []  # read as no binding, not an error
    channel._queue_bind("neurules-training", "", "", settings.queue)
    assert json.loads(path.read_bytes()) == good
    assert [q.queue for q in channel.get_table("neurules-training")] == [settings.queue]


def test_a_full_or_read_only_broker_folder_is_named_in_the_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk-fault probe: with the data disk full (or read-only) a job was a 503 "the job broker is unreachable",
    nothing naming the disk. The refusal, as Celery and kombu raise it, now names the folder and the error."""
    import errno

    from app.services.jobs import _broker_problem
    from worker import broker_files
    from worker.celery_app import CeleryQueue

    settings = Settings(data_dir=tmp_path)
    queue = CeleryQueue(make_celery(settings), settings.queue)
    for code, text in ((errno.ENOSPC, "No space left on device"), (errno.EROFS, "Read-only file system")):

        def fails(*_a: Any, code: int = code, text: str = text) -> None:
            raise OSError(code, text)

        monkeypatch.setattr(broker_files.os, "replace", fails)
        with pytest.raises(Exception) as info:
            queue.send("job-1")
        assert _broker_problem(info.value).startswith(f"the job broker's folder cannot be written ({text})")
    assert _broker_problem(ConnectionRefusedError(errno.ECONNREFUSED, "refused")) == "the job broker is unreachable"
    network = RuntimeError("Error 13 connecting to unix socket")  # redis-py's, wrapped by kombu: a socket, no folder
    network.__context__ = PermissionError(errno.EACCES, "Permission denied")
    assert _broker_problem(network) == "the job broker is unreachable"

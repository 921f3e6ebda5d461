"""The embedded mode's filesystem broker, with messages that appear whole.

kombu's filesystem transport creates a message file under its final name and then writes it; a worker
polling the folder in between moves the empty file away, fails to parse it and stops ("Unrecoverable
error: JSONDecodeError"), the message lost with it (seen in a test run). Here a message is written under a
hidden name that no queue reads (`.<name>.part`) and renamed into place once complete: a rename within a
folder is atomic, so a reader finds either no file or the whole message.

kombu takes a message by moving it to the system's temporary folder, which on another filesystem is a copy
and then a delete: when the delete failed (the broker folder read-only for a moment) the copy stayed behind,
every later move of that message failed on it ("destination exists", skipped without a word) and the job
stayed queued for good, its message still in the folder (so the reaper never sent it again). Here a message
is claimed by renaming it to a hidden name in its own folder (atomic: one consumer wins), then read and
removed; a claim that fails leaves the message where it is, for the next poll.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from queue import Empty
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.json import dumps, loads

log = logging.getLogger("neurules.broker")

TRANSPORT = "worker.broker_files:Transport"  # Celery's `broker_transport` for a filesystem:// broker URL


class FolderError(ChannelError):  # type: ignore[misc]  # kombu is untyped
    """The broker's folder refused a message file (full, read-only, failing): `folder_problem` says how, in words,
    for the service's 503 (a network broker's errors carry no such attribute)."""

    def __init__(self, message: str, error: OSError) -> None:
        super().__init__(message)
        self.folder_problem = error.strerror or type(error).__name__


class Channel(filesystem.Channel):
    """kombu's filesystem channel whose `_put` publishes a message only once it is written."""

    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> Any:  # type: ignore[override]  # as kombu names it
        """Put `payload` onto `queue`: written under a hidden name, then renamed to kombu's message name."""
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"  # kombu's: time orders the queue
        final = os.path.join(self.data_folder_out, name)
        part = os.path.join(self.data_folder_out, f".{name}.part")
        try:
            with open(part, "wb", buffering=0) as f:
                f.write(dumps(payload).encode())  # type: ignore[no-untyped-call]  # kombu's JSON, as its own _put
            os.replace(part, final)
        except OSError as exc:
            with contextlib.suppress(OSError):  # never written, or already gone
                os.remove(part)
            raise FolderError(f"Cannot add file {final!r} to directory", exc) from exc

    def _get(self, queue: Any, timeout: Any = None) -> Any:  # as kombu names it (the filesystem's takes no timeout)
        """The oldest message of `queue`, claimed by an atomic rename within its folder, then read and removed."""
        if self.store_processed:
            return super()._get(queue)  # type: ignore[no-untyped-call]
        wanted = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != wanted:  # kombu's test: `<time>_<uuid>.<queue>.msg`
                continue
            claimed = os.path.join(self.data_folder_in, f".{name}.{uuid.uuid4().hex}.claimed")
            try:
                os.rename(os.path.join(self.data_folder_in, name), claimed)
            except OSError:  # taken by another consumer, or the folder is not writable now: try later
                continue
            try:
                with open(claimed, "rb") as f:
                    payload = f.read()
            except OSError as exc:
                raise ChannelError(f"Cannot read file {claimed!r} from queue.") from exc
            with contextlib.suppress(OSError):  # read: a leftover hidden file is harmless
                os.remove(claimed)
            return loads(payload.decode())  # type: ignore[no-untyped-call]
        raise Empty()

    def _queue_bind(self, exchange: Any, routing_key: Any, pattern: Any, queue: Any) -> Any:  # as kombu names it
        """kombu's, after an unreadable binding file is emptied (`_readable_bindings`)."""
        self._readable_bindings(exchange)
        return super()._queue_bind(exchange, routing_key, pattern, queue)  # type: ignore[no-untyped-call]

    def get_table(self, exchange: Any) -> Any:  # as kombu names it
        """kombu's, after an unreadable binding file is emptied (`_readable_bindings`)."""
        self._readable_bindings(exchange)
        return super().get_table(exchange)  # type: ignore[no-untyped-call]

    def _readable_bindings(self, exchange: Any) -> None:
        """An exchange's binding file that is empty or cut short is made an empty list.

        kombu writes it in place and never syncs it: after a crash or a disk fault it was found empty, and every
        start of the embedded worker stopped on it ("Unrecoverable error: JSONDecodeError") until the file was
        deleted by hand. Emptied, the next bind writes the queue's binding again (a worker binds at start)."""
        path = self._exchange_file(exchange)  # type: ignore[no-untyped-call]  # kombu, untyped
        try:
            if _bindings_readable(path.read_bytes()):
                return
            with path.open("rb+", buffering=0) as f:
                filesystem.lock(f, filesystem.LOCK_EX)  # type: ignore[no-untyped-call]  # a writer may be mid-write
                try:
                    if not _bindings_readable(f.read()):
                        log.warning("broker binding file unreadable: emptied", extra={"path": str(path)})
                        f.seek(0)
                        f.truncate()
                        f.write(b"[]")
                finally:
                    filesystem.unlock(f)  # type: ignore[no-untyped-call]
        except OSError:  # absent (kombu creates it), or unreadable now: kombu's own call reports it
            return


def _bindings_readable(data: bytes) -> bool:
    """Whether a binding file's bytes are the JSON list kombu writes there."""
    try:
        return isinstance(loads(data.decode()), list)  # type: ignore[no-untyped-call]
    except ValueError:  # not UTF-8, not JSON
        return False


class Transport(filesystem.Transport):
    """kombu's filesystem transport with `Channel` above."""

    Channel = Channel

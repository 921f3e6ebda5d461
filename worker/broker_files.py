"""The embedded mode's filesystem broker, with messages that appear whole.

kombu's filesystem transport creates a message file under its final name and then writes it; a worker
polling the folder in between moves the empty file away, fails to parse it and stops ("Unrecoverable
error: JSONDecodeError"), the message lost with it (seen in a test run). Here a message is written under a
hidden name that no queue reads (`.<name>.part`) and renamed into place once complete: a rename within a
folder is atomic, so a reader finds either no file or the whole message.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.json import dumps

TRANSPORT = "worker.broker_files:Transport"  # Celery's `broker_transport` for a filesystem:// broker URL


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
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    """kombu's filesystem transport with `Channel` above."""

    Channel = Channel

"""Celery application factory; `celery -A worker.celery_app worker` uses the module-level `app`.

Messages carry job ids only; the job row is the source of truth. Reliability settings: late
acknowledgement, requeue when the worker process dies, prefetch 1, a broker visibility timeout
above the hard time limit, and soft/hard time limits (also enforced cooperatively per epoch, since
the solo pool used for GPU workers cannot enforce them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import setup_logging

from app.observability import configure_logging
from app.settings import Settings, get_settings
from worker import broker_files
from worker.evaluations import EVALUATE_TASK
from worker.tasks import REAP_TASK, TRAIN_TASK, register_tasks


def _json_logs(**_: Any) -> None:
    """Worker processes log JSON lines like the API (instead of Celery's own format)."""
    configure_logging(get_settings().log_level)


setup_logging.connect(_json_logs)


def celery_config(settings: Settings) -> dict[str, Any]:
    """The Celery configuration for these settings."""
    url = settings.resolved_broker_url
    transport: dict[str, Any] = {"visibility_timeout": settings.visibility_timeout_s}
    if url.startswith("filesystem"):
        folder = settings.broker_dir
        transport.update(
            {
                "data_folder_in": str(folder / "queue"),
                "data_folder_out": str(folder / "queue"),
                "processed_folder": str(folder / "processed"),
                "store_processed": False,
                "control_folder": str(folder / "control"),
                "polling_interval": 0.25,
            }
        )
    if url.startswith("redis"):
        transport.update({"socket_timeout": 5, "socket_connect_timeout": 5})
    return {
        "broker_url": url,
        "broker_transport": broker_files.TRANSPORT if url.startswith("filesystem") else None,
        "broker_transport_options": transport,
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,  # a worker outlives any broker outage (Celery's 100 tries: ~46 min)
        "broker_connection_timeout": 5,
        "task_default_queue": settings.queue,
        "task_routes": {task: {"queue": settings.queue} for task in (TRAIN_TASK, EVALUATE_TASK, REAP_TASK)},
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_ignore_result": True,
        "result_backend": None,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_acks_on_failure_or_timeout": True,
        "worker_prefetch_multiplier": 1,
        "task_soft_time_limit": settings.training_soft_time_limit_s,
        "task_time_limit": settings.training_time_limit_s,
        "worker_hijack_root_logger": False,
        "worker_send_task_events": False,
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "broker_pool_limit": 4,
    }


BROKER_FOLDERS = ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")


def make_broker_folders(app: Celery) -> None:
    """Create the filesystem broker's folders where missing (at start, before each send and each start of the
    embedded worker: a folder deleted under a running service is made again, not an outage for good)."""
    opts = app.conf.broker_transport_options or {}
    for key in BROKER_FOLDERS:
        if opts.get(key):
            folder = Path(opts[key])  # new ones private like the database beside them (jobs' ids, tenants' queues)
            folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            folder.mkdir(mode=0o700, exist_ok=True)


def make_celery(settings: Settings) -> Celery:
    """A Celery app configured from settings, with the training tasks registered."""
    app = Celery("neurules", set_as_current=False)
    app.conf.update(celery_config(settings))
    make_broker_folders(app)
    register_tasks(app, settings)
    return app


READY_KEY = "neurules:readyz"  # the broker check's write (it expires after 10 s)


class CeleryQueue:
    """JobQueue backed by Celery: sends the job or evaluation id only."""

    def __init__(self, app: Celery, queue: str) -> None:
        self.app, self.queue = app, queue

    def send(self, job_id: str) -> None:
        """Enqueue one training job id (fails fast when the broker is down)."""
        self._send(TRAIN_TASK, job_id)

    def send_evaluation(self, evaluation_id: str) -> None:
        """Enqueue one background evaluation id (fails fast when the broker is down)."""
        self._send(EVALUATE_TASK, evaluation_id)

    def _send(self, task: str, ident: str) -> None:
        try:
            make_broker_folders(self.app)  # deleted under the running service: made again (a read-only one fails)
        except OSError as e:
            raise broker_files.FolderError("cannot make the broker's folders", e) from e
        retry_policy = {"max_retries": 2, "interval_start": 0.2, "interval_step": 0.5}
        self.app.send_task(task, args=[ident], queue=self.queue, retry=True, retry_policy=retry_policy)

    def check(self) -> None:
        """Raise when the broker is unreachable or refuses writes (a Redis out of memory answered PING, and the
        check said ok while every job was refused)."""
        with self.app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=3)
            if self.app.conf.broker_url.startswith("filesystem"):
                opts = self.app.conf.broker_transport_options
                if not os.access(opts["data_folder_in"], os.W_OK):
                    raise OSError(f"broker folder {opts['data_folder_in']} is not writable")
            elif self.app.conf.broker_url.startswith("redis"):
                conn.default_channel.client.set(READY_KEY, "1", px=10_000)  # a write, as a job's message is


_app: Celery | None = None


def __getattr__(name: str) -> Any:
    """`app` is built on first use from the environment (so importing this module has no side effects)."""
    global _app  # noqa: PLW0603 -- one app per process, built lazily
    if name in ("app", "celery"):
        if _app is None:
            _app = make_celery(get_settings())
        return _app
    raise AttributeError(name)

"""What runs beside the API in one process: the reaper thread and (embedded mode) the Celery worker thread."""

from __future__ import annotations

import logging
import os
import threading

from celery import Celery

from app.db import Database
from app.services import evaluation_runs
from app.services import jobs as jobsvc
from app.settings import Settings
from worker.embedded import EMBEDDED_HOLDERS, EMBEDDED_HOST, RunningWorker, start_embedded_worker, stop_embedded_worker
from worker.tasks import broker_scan_for, reap_and_requeue

log = logging.getLogger("neurules.app")


class Reaper:
    """A daemon thread that sweeps every `reaper_interval_s` (see `worker.tasks.reap_and_requeue`): stale jobs are
    requeued, and queued jobs whose message the broker no longer holds are sent again (so within one interval
    of the broker's return)."""

    def __init__(self, db: Database, settings: Settings, celery_app: Celery) -> None:
        self.db, self.settings, self.celery_app = db, settings, celery_app
        self.scan = broker_scan_for(celery_app, settings)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start sweeping."""
        self._thread = threading.Thread(target=self._run, name="neurules-reaper", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        failing = False
        while True:
            failing = self.sweep(failing)
            if self._stop.wait(self.settings.reaper_interval_s):
                return

    def sweep(self, failing: bool) -> bool:
        """One sweep; whether it failed. The first failure of an outage is logged with its traceback, later ones
        in one line, and the first sweep that works again says so (an operator probe read an 8 KB traceback
        every 30 s per process through a database outage, and nothing when it ended)."""
        try:
            reap_and_requeue(self.db, self.settings, self.celery_app, scan=self.scan)
        except Exception as e:
            if failing:
                log.warning("reaper sweep failed again", extra={"error": repr(e)[:500]})
            else:
                log.warning("reaper sweep failed", exc_info=True)
            return True
        if failing:
            log.info("reaper sweep works again")
        return False

    def stop(self) -> None:
        """Stop after the current sweep."""
        self._stop.set()


class EmbeddedWorker:
    """The in-process Celery worker of embedded mode; first requeues the jobs its previous incarnation held.

    `sole_worker`: this process holds the database's lock (`worker.database_lock`), so no other embedded worker
    of this host runs on it and every running job held under `embedded@<host>/` is an orphan. Without it (a server
    database) nothing is requeued at start: the reaper requeues orphans once their heartbeats are stale.
    """

    def __init__(self, db: Database, settings: Settings, celery_app: Celery, *, sole_worker: bool) -> None:
        self.db, self.settings, self.celery_app = db, settings, celery_app
        self.sole_worker = sole_worker
        self._worker: RunningWorker | None = None

    def start(self) -> None:
        """Requeue orphans of the previous embedded worker (when it is provably gone), then start consuming."""
        if self.sole_worker:
            try:  # the lock proves the previous incarnation gone: the jobs it held are orphans now
                reap_and_requeue(self.db, self.settings, self.celery_app, dead_worker_prefix=EMBEDDED_HOLDERS)
            except Exception:
                log.warning("could not requeue the previous embedded worker's jobs", exc_info=True)
        self._worker = start_embedded_worker(self.celery_app, self.settings)

    def check(self) -> None:
        """Raise when the worker thread is not running (a readiness check)."""
        if self._worker is None or not self._worker.thread.is_alive():
            raise RuntimeError("the embedded training worker thread has stopped")

    def stop(self) -> None:
        """Put the jobs and evaluations this process's worker holds back in the queue, their attempt not counted (a
        clean stop; after a crash the start-up sweep requeues them, counting it), then stop the worker thread, and
        hand back what it took meanwhile. First, not after the thread's join (up to 10 s): a stop bounded by its
        orchestrator (docker's 10 s) was SIGKILLed before, and the job stayed `running`."""
        self._hand_back()  # the training thread then finds the job no longer its own and stops at its next epoch
        if self._worker is not None:
            stop_embedded_worker(self._worker)
            self._hand_back()

    def _hand_back(self) -> None:
        mine = f"{EMBEDDED_HOST}/{os.getpid()}/"
        try:
            with self.db.session() as s:
                handed = jobsvc.hand_back(s, mine) + evaluation_runs.hand_back(s, mine)
        except Exception:  # a database away at stop: the next start's sweep requeues them instead
            log.warning("could not put the stopped worker's jobs back in the queue", exc_info=True)
            return
        for job_id in handed:
            log.info("queued again at stop", extra={"id": job_id})

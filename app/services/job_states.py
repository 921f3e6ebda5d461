"""The states of a training job, defined once for the table, the schemas, the state machine and the worker."""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    """Where a job is: queued -> running -> succeeded | failed | cancelled (running -> queued on requeue)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINAL_JOB_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
ACTIVE_JOB_STATES = frozenset({JobState.QUEUED, JobState.RUNNING})

__all__ = ["ACTIVE_JOB_STATES", "FINAL_JOB_STATES", "JobState"]

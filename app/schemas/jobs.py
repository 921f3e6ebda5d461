"""Training job schemas."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from app.schemas.training import TrainingParameters
from app.services.job_states import JobState

if TYPE_CHECKING:
    from app.tables import Job


class JobCreate(BaseModel):
    """Start training a rule list on a dataset."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [
                {
                    "dataset_id": "ds_4f1c2a9e0b7d6c5a3e2f1a0b",
                    "target": "target",
                    "model_name": "heart-disease",
                    "parameters": {"n_rules": 10, "epochs": 200, "random_state": 0, "options": {"lr": 0.02}},
                }
            ]
        },
    )

    dataset_id: str
    target: str = Field(description="column to predict")
    model_name: str | None = Field(
        None,
        description="registered model the result is stored under: 1 to 100 letters, digits, '_', '.' or '-', "
        "starting with a letter or digit, taken as sent (an empty name is refused, not replaced); left out: "
        "made from the dataset's name",
    )
    parameters: TrainingParameters = Field(default_factory=TrainingParameters)


class JobProgress(BaseModel):
    """Latest progress the worker wrote."""

    epoch: int
    n_epochs: int
    loss: float | None
    val_score: float | None


class JobPublic(BaseModel):
    """A training job as stored in its row."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "job_0a1b2c3d4e5f60718293a4b5",
                    "dataset_id": "ds_4f1c2a9e0b7d6c5a3e2f1a0b",
                    "dataset_sha256": "3b7f0c6f0e5d4c2b1a0918273645546372819a0b1c2d3e4f5a6b7c8d9e0f1a2b",
                    "target": "target",
                    "model_name": "heart-disease",
                    "parameters": {
                        "n_rules": 10,
                        "epochs": 200,
                        "random_state": 0,
                        "test_size": 0.2,
                        "features": None,
                        "options": {},
                    },
                    "state": "running",
                    "cancel_requested": False,
                    "progress": {"epoch": 40, "n_epochs": 200, "loss": 0.41, "val_score": 0.83},
                    "error": None,
                    "attempts": 1,
                    "device": "cpu",
                    "model_version_id": None,
                    "n_rules_kept": None,
                    "created_at": "2026-11-25T10:00:00Z",
                    "started_at": "2026-11-25T10:00:01Z",
                    "finished_at": None,
                }
            ]
        }
    )

    id: str
    dataset_id: str | None = Field(description="the dataset it trains on (null once that dataset was deleted)")
    dataset_sha256: str | None = Field(
        None,
        description="SHA-256 of the training file, kept when the dataset is deleted (null for a job from before "
        "this was recorded)",
    )
    target: str
    model_name: str
    parameters: dict[str, object]
    state: JobState
    cancel_requested: bool
    progress: JobProgress
    error: str | None
    attempts: int
    device: str | None
    model_version_id: str | None
    api_key_id: str | None = Field(
        None, description="the API key that submitted the job (null for a job from before this was recorded)"
    )
    n_rules_kept: int | None = Field(
        None,
        description="rules the trained list kept, besides the default rule (at most `parameters.n_rules`); "
        "null until the job succeeded",
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def from_row(cls, job: Job, n_rules_kept: int | None = None) -> JobPublic:
        """The response for a job row (with the rule count of the version it produced, when known)."""
        return cls(
            id=job.id,
            dataset_id=job.dataset_id,
            dataset_sha256=job.dataset_sha256,
            target=job.target,
            model_name=job.model_name,
            parameters=job.parameters,
            state=job.state,
            cancel_requested=job.cancel_requested,
            progress=JobProgress(epoch=job.epoch, n_epochs=job.n_epochs, loss=job.loss, val_score=job.val_score),
            error=job.error,
            attempts=job.attempts,
            device=job.device,
            model_version_id=job.model_version_id,
            api_key_id=job.api_key_id,
            n_rules_kept=n_rules_kept,
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
        )


class JobList(BaseModel):
    """A page of jobs, newest first."""

    items: list[JobPublic]
    total: int
    limit: int
    offset: int


class JobHistoryPoint(BaseModel):
    """One progress point the worker wrote."""

    epoch: int
    loss: float | None = Field(description="training loss of the epoch")
    val_score: float | None = Field(
        description="weighted F1 on the held-out split (the `parameters.test_size` share of rows the worker "
        "passes to the learner as eval_set), of the rules evaluated crisply (zero temperature) at this epoch; "
        "null on epochs where it was not measured, or without held-out rows"
    )
    attempt: int = Field(description="the job's attempt that wrote it (a lost worker's job restarts at epoch 0)")
    at: datetime


class JobHistory(BaseModel):
    """Every progress point of a job, oldest first: the loss and validation curves."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "job_id": "job_0a1b2c3d4e5f60718293a4b5",
                    "val_score_name": "weighted F1 on the held-out split",
                    "points": [
                        {"epoch": 5, "loss": 0.61, "val_score": 0.74, "attempt": 1, "at": "2026-11-25T10:00:03Z"}
                    ],
                }
            ]
        }
    )

    job_id: str
    val_score_name: str = Field(description="what `val_score` measures")
    points: list[JobHistoryPoint]


__all__ = ["JobCreate", "JobHistory", "JobHistoryPoint", "JobList", "JobProgress", "JobPublic", "TrainingParameters"]

"""Training job schemas."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.services.job_states import JobState

if TYPE_CHECKING:
    from app.tables import Job

Scalar = int | Annotated[float, Field(allow_inf_nan=False)] | str | bool | None


class TrainingParameters(BaseModel):
    """Hyper-parameters of one training run (anything else goes to `options`)."""

    model_config = ConfigDict(extra="forbid")

    n_rules: int = Field(10, ge=1, description="number of rules in the list (the default rule comes on top)")
    epochs: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto", description="training epochs, or 'auto' (enough for a fixed number of optimiser steps)"
    )
    random_state: int = Field(0, ge=0, le=2**63 - 1, description="seed for the split and the learner")
    test_size: float = Field(0.2, gt=0.0, lt=0.9, description="held-out fraction for the reported metrics")
    features: list[str] | None = Field(None, description="input columns (default: every column but the target)")
    options: dict[str, Scalar] = Field(
        default_factory=dict, description="further NeuRulesClassifier keyword arguments, e.g. lr, batch_size"
    )


class JobCreate(BaseModel):
    """Start training a rule list on a dataset."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "dataset_id": "ds_4f1c2a9e0b7d6c5a3e2f1a0b",
                    "target": "target",
                    "model_name": "heart-disease",
                    "parameters": {"n_rules": 10, "epochs": 200, "random_state": 0},
                }
            ]
        },
    )

    dataset_id: str
    target: str = Field(description="column to predict")
    model_name: str | None = Field(
        None, description="registered model the result is stored under (default: the dataset's name)"
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
                    "created_at": "2026-11-25T10:00:00Z",
                    "started_at": "2026-11-25T10:00:01Z",
                    "finished_at": None,
                }
            ]
        }
    )

    id: str
    dataset_id: str | None
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
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def from_row(cls, job: Job) -> JobPublic:
        """The response for a job row."""
        return cls(
            id=job.id,
            dataset_id=job.dataset_id,
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

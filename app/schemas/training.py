"""Training parameters, typed: the job's top-level parameters and the learner's options, each described.

`TrainingOptions` mirrors `models.estimator.NeuRulesClassifier`'s keyword arguments (all but `n_rules`,
`epochs` and `random_state`, which are top-level parameters, and `device` and `verbose`, which the worker
sets); a test keeps the two lists equal. An option left out takes the learner's default; only the options
sent are stored with the job and passed to the learner. Numbers are strict: `true` is not 1, `"0.1"` is
not a number.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

INT_MAX = 2**31 - 1
RESERVED_OPTIONS = ("n_rules", "epochs", "random_state", "device", "verbose")
MAX_SMOOTHING = 1e9  # counts + smoothing x classes must stay finite: 1e308 ended a job in "must sum to 1"
# the network computes in float32 (largest 3.4e38, smallest normal 1.2e-38): beyond these bounds training overflows
# (1e39 cannot even be stored) or divides by a temperature that is 0 there; well inside them it still runs
MIN_TEMPERATURE, MAX_TEMPERATURE = 1e-6, 1e6
MAX_LR = 10.0  # an Adam step moves a parameter by about lr: beyond 1 training no longer converges
MAX_LAMBDA = 1e6  # the cross-entropy is of order 1: a larger weight leaves only the regulariser
MIN_EPS = 1e-30  # a smaller slack is 0 (or a denormal) in the network's float32 arithmetic
NULL_MEANS_NONE = frozenset({"max_candidates", "n_threads"})  # the learner takes None for these; else null = default


def one_message(message: str) -> WrapValidator:
    """A validator that reports any failure of the wrapped type as one plain message (not one per union member)."""

    def validate(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise PydanticCustomError("invalid_value", message) from None

    return WrapValidator(validate)


PositiveInt = Annotated[int, Field(strict=True, ge=1, le=INT_MAX)]
PositiveIntOrAuto = Annotated[PositiveInt | Literal["auto"], one_message("must be a positive integer or 'auto'")]
PositiveIntOrNone = Annotated[PositiveInt | None, one_message("must be a positive integer or null")]
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]


def _not_one(value: int | str) -> int | str:
    """One fold cannot cross-fit: 0 switches cross-fitting off."""
    if value == 1:
        raise ValueError("one fold cannot cross-fit")
    return value


FoldsOrAuto = Annotated[
    Annotated[int, Field(strict=True, ge=0, le=INT_MAX), AfterValidator(_not_one)] | Literal["auto"],
    one_message("must be 'auto', 0 or an integer >= 2"),
]


def _temperatures(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """One plain message for a bad pair; NaN or Infinity in it is called what it is."""
    try:
        return handler(value)
    except ValidationError as e:
        message = "must be a [start, end] pair of positive numbers"
        kinds = {err["type"] for err in e.errors()}
        if "finite_number" in kinds:
            message += ", each finite (not NaN or Infinity)"
        elif kinds & {"greater_than_equal", "less_than_equal"}:
            message += f", each from {MIN_TEMPERATURE:g} to {MAX_TEMPERATURE:g}"
        raise PydanticCustomError("invalid_value", message) from None


Fraction = Annotated[float, Field(strict=True, ge=0.0, le=1.0, allow_inf_nan=False)]
Temperatures = Annotated[
    list[Annotated[float, Field(strict=True, ge=MIN_TEMPERATURE, le=MAX_TEMPERATURE, allow_inf_nan=False)]],
    Field(min_length=2, max_length=2),
    WrapValidator(_temperatures),
]


class TrainingOptions(BaseModel):
    """The learner's further options (NeuRulesClassifier keyword arguments); any left out keeps its default."""

    model_config = ConfigDict(extra="forbid", strict=True)

    batch_size: PositiveInt | None = Field(
        None, description="mini-batch size (default 1024; smaller for very wide data, so one step's work is bounded)"
    )
    lr: Annotated[Number, Field(gt=0.0, le=MAX_LR)] | None = Field(
        None, description="Adam learning rate, in (0, 10] (beyond 1 training no longer converges) (default 0.02)"
    )
    min_support: Fraction | None = Field(
        None, description="support regulariser: the least share of rows a rule should capture (default 0.05)"
    )
    max_support: Fraction | None = Field(
        None, description="support regulariser: the largest share of rows a rule should capture (default 0.9)"
    )
    lambda_support: Annotated[Number, Field(ge=0.0, le=MAX_LAMBDA)] | None = Field(
        None,
        description="weight of the support regulariser, at most 1e6 (the cross-entropy is of order 1) (default 0.4)",
    )
    t_pi: Temperatures | None = Field(
        None,
        description="[start, end] temperature of the predicates, annealed over the second half of the annealed "
        "stage; fine-tuning runs at the end value; each from 1e-6 to 1e6 (the network computes in float32: far "
        "outside, training overflows) (default [0.2, 0.04])",
    )
    t_rl: Temperatures | None = Field(
        None,
        description="[start, end] temperature of the rule selector, annealed likewise; each from 1e-6 to 1e6 "
        "(default [1.0, 0.2])",
    )
    eps: Annotated[Number, Field(ge=MIN_EPS, le=0.00125)] | None = Field(
        None,
        description="slack of the relaxed conjunction, from 1e-30 (smaller is 0 in float32) to 0.00125 (default 0.001)",
    )
    smoothing: Annotated[Number, Field(ge=0.0, le=MAX_SMOOTHING)] | None = Field(
        None,
        description="additive smoothing of the rule probabilities measured on training rows, at most 1e9 (far "
        "above any row count, every rule's probabilities are uniform; near the float limit they overflow) "
        "(default 1.0)",
    )
    max_conditions: PositiveInt | None = Field(
        None, description="the most conditions (features) one rule may have (default 6)"
    )
    free_weight: Annotated[Number, Field(gt=0.0, le=1.0)] | None = Field(
        None, description="start weight of the predicates that are not a rule's seed, in (0, 1] (default 0.5)"
    )
    max_candidates: PositiveIntOrNone = Field(
        None,
        description="on wide data (over 4 x this many inputs) only this many best-scoring inputs may enter rules; "
        "null: no restriction (default 32)",
    )
    n_restarts: PositiveIntOrAuto | None = Field(
        None,
        description="rule lists trained together (seeded from two greedy trees and random boxes), the best kept; "
        "'auto': as many as fit a fixed compute budget, 4 to max_restarts (default 'auto')",
    )
    max_restarts: PositiveInt | None = Field(None, description="the most restarts 'auto' picks (default 8)")
    target_steps: PositiveInt | None = Field(
        None, description="optimiser steps of the annealed stage epochs='auto' aims at (default 300)"
    )
    min_epochs: PositiveInt | None = Field(None, description="the fewest epochs epochs='auto' picks (default 5)")
    max_epochs: PositiveInt | None = Field(None, description="the most epochs epochs='auto' picks (default 300)")
    tune_fraction: Annotated[Number, Field(ge=0.0, lt=10.0)] | None = Field(
        None, description="fine-tuning steps, as a share of target_steps (default 0.2)"
    )
    refit_fraction: Annotated[Number, Field(ge=0.0, lt=10.0)] | None = Field(
        None, description="refit steps on all rows after a held-out choice, as a share of target_steps (default 0.1)"
    )
    validation_fraction: Annotated[Number, Field(ge=0.0, lt=0.9)] | None = Field(
        None,
        description="share of the training rows held out to choose the restart; 0: choose on training rows "
        "(default 0.0)",
    )
    selection_folds: FoldsOrAuto | None = Field(
        None,
        description="folds of the cross-fitted choice of the seeding kind (without held-out rows); 0: none; "
        "'auto': 4 on training sets of at most 500 rows, else none (default 0)",
    )
    n_threads: PositiveIntOrNone = Field(None, description="CPU threads for torch during training (default: one)")

    @model_validator(mode="before")
    @classmethod
    def _known_names(cls, data: Any) -> Any:
        """Unknown option names answered with the known ones (reserved ones with where they go)."""
        if isinstance(data, dict):
            reserved = sorted(set(data) & set(RESERVED_OPTIONS))
            if reserved:
                raise ValueError(
                    f"{', '.join(reserved)} cannot be set in options (n_rules, epochs and random_state are "
                    "top-level parameters; the worker picks the device)"
                )
            unknown = sorted(set(data) - set(cls.model_fields))
            if unknown:
                raise ValueError(
                    f"unknown option(s) {', '.join(map(repr, unknown))}; known: {', '.join(cls.model_fields)}"
                )
        return data


class TrainingParameters(BaseModel):
    """Hyper-parameters of one training run; the learner's further options go in `options`."""

    model_config = ConfigDict(extra="forbid", strict=True)

    n_rules: PositiveInt = Field(
        10,
        description="the MOST rules the list may have, besides the default rule; training can keep fewer "
        "(the job and the version say how many: `n_rules_kept`, `n_rules`)",
    )
    epochs: PositiveIntOrAuto = Field(
        "auto", description="training epochs, or 'auto' (enough for `options.target_steps` optimiser steps)"
    )
    random_state: Annotated[int, Field(strict=True, ge=0, le=2**63 - 1)] = Field(
        0, description="seed for the split and the learner"
    )
    test_size: Annotated[Number, Field(gt=0.0, lt=0.9)] = Field(
        0.2, description="held-out fraction for the reported metrics"
    )
    features: list[Annotated[str, Field(strict=True)]] | None = Field(
        None, description="input columns (default: every column but the target)"
    )
    options: TrainingOptions = Field(
        default_factory=TrainingOptions, description="the learner's further options, each described below"
    )

    @field_serializer("options")
    def _sent_options_only(self, options: TrainingOptions) -> dict[str, Any]:
        """Only the options the caller sent are stored and passed to the learner (null: the default)."""
        sent = options.model_dump(exclude_unset=True)
        return {k: v for k, v in sent.items() if v is not None or k in NULL_MEANS_NONE}

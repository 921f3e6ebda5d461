"""The stages of `NeuRulesClassifier.fit` after validation: encode, initialise, train.

`train_restarts` runs, for all restarts at once: the paper's annealed training on the inner
training rows; snapping and pruning (`models.structure`); fine-tuning of the pruned structure
at the final temperatures, projected after every step; consolidation; scoring on the held-out
rows; and a refit of the same structure on all training rows, consolidated again.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from models.budget import Budget
from models.encoding import TabularEncoder
from models.metrics import weighted_f1
from models.network import SoftRuleList
from models.seeding import DATA_SEED, Restarts, SeedData, initial_restarts, restart_kinds, split_scores
from models.structure import (
    UnitGrid,
    drop_unused_rules_,
    fit_consequents_,
    prune_predicates_,
    snap_bounds_,
    train_consequents_,
    unit_grids,
)
from models.training import Objective, Progress, Stage, train_stage


@dataclass(frozen=True)
class Encoded:
    """The encoded training data: encoder, filled raw columns, float32 network inputs."""

    encoder: TabularEncoder
    raw: list[np.ndarray]
    Z: np.ndarray

    @property
    def unit_feature(self) -> np.ndarray:
        """Column index of each network input."""
        return np.array([u.feature for u in self.encoder.units], dtype=np.int64)

    def grids(self, rows: np.ndarray) -> list[UnitGrid]:
        """The inputs' distinct values on the given training rows."""
        return unit_grids(self.encoder, [col[rows] for col in self.raw], self.Z[rows])

    def two_valued(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(inputs with exactly two values, their lower, their higher value)."""
        lo, hi = self.Z.min(axis=0), self.Z.max(axis=0)
        two = np.flatnonzero(np.all((lo == self.Z) | (hi == self.Z), axis=0) & (hi > lo))
        return two, lo[two], hi[two]


def encode(frame: pd.DataFrame) -> Encoded:
    """Fit the encoder on the training frame and encode it."""
    return encode_with(TabularEncoder().fit(frame), frame)


def encode_with(encoder: TabularEncoder, frame: pd.DataFrame) -> Encoded:
    """Encode a frame with a fitted encoder."""
    raw = encoder.raw_columns(frame)
    return Encoded(encoder, raw, encoder.transform(frame, raw).astype(np.float32))


@dataclass(frozen=True)
class SeedSettings:
    """The estimator's initialisation settings."""

    n_rules: int
    n_classes: int
    free_weight: float
    max_candidates: int | None
    eps: float


def initialise(
    enc: Encoded, y: np.ndarray, rows: np.ndarray, n_restarts: int, settings: SeedSettings, rng: np.random.Generator
) -> tuple[SoftRuleList, tuple[str, ...]]:
    """The untrained network of n_restarts restarts seeded on the given rows, and their kinds."""
    Z = enc.Z[rows].astype(np.float64)
    n_inputs = Z.shape[1]
    scores = split_scores(Z, y[rows], settings.n_classes, np.random.default_rng(DATA_SEED))
    free = np.full(n_inputs, settings.free_weight)
    if settings.max_candidates is not None and n_inputs > 4 * settings.max_candidates:
        # wide data: only the best-scoring inputs (and each rule's seeds) start with a weight
        top = np.argsort(-scores, kind="stable")[: settings.max_candidates]
        free = np.where(np.isin(np.arange(n_inputs), top), free, 0.0)
    p = scores**2 / (scores**2).sum() if (scores > 0).any() else None
    data = SeedData(Z, y[rows], settings.n_classes, settings.n_rules, free, p)
    init = initial_restarts(data, restart_kinds(n_restarts), rng)
    return _network(init, enc, settings), init.kinds


def _network(init: Restarts, enc: Encoded, settings: SeedSettings) -> SoftRuleList:
    net = SoftRuleList(
        enc.Z.shape[1],
        settings.n_rules,
        settings.n_classes,
        torch.tensor(init.lower),
        torch.tensor(init.upper),
        torch.tensor(init.priority),
        torch.tensor(init.logits),
        eps=settings.eps,
    )
    with torch.no_grad():
        net.weight.copy_(torch.tensor(init.weight, dtype=torch.float32))
    two, low, high = enc.two_valued()
    if len(two):
        net.set_two_valued(torch.tensor(two), torch.tensor(low), torch.tensor(high))
    return net


@dataclass(frozen=True)
class TrainSettings:
    """Optimisation settings of all stages."""

    objective: Objective
    lr: float
    t_pi: tuple[float, float]
    t_rl: tuple[float, float]
    max_conditions: int
    smoothing: float


@dataclass
class Trained:
    """Every restart after training, with its scores and the network after each stage."""

    net: SoftRuleList
    held_out: np.ndarray  # weighted F1 of each restart on the held-out rows (training rows if none)
    training: np.ndarray  # ... on the inner training rows
    snapshots: dict[str, SoftRuleList]
    losses: list[float]


class Rows:
    """Training tensors on the device, sliced by row sets."""

    def __init__(self, enc: Encoded, y: np.ndarray, device: torch.device) -> None:
        self.enc = enc
        self.y_np = y
        self.Z = torch.tensor(enc.Z, device=device)
        self.y = torch.tensor(y, dtype=torch.long, device=device)

    def take(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """(inputs, labels) of the rows."""
        idx = torch.tensor(rows, device=self.Z.device)
        return self.Z[idx], self.y[idx]


def restart_scores(net: SoftRuleList, Z: torch.Tensor, y: np.ndarray) -> np.ndarray:
    """Weighted F1 of every restart's zero-temperature network on (Z, y)."""
    _, cls = net.zero_temperature(Z)
    return np.array([weighted_f1(y, c) for c in cls.cpu().numpy()])


def consolidate_(
    net: SoftRuleList,
    data: Rows,
    rows: np.ndarray,
    settings: TrainSettings,
    snapshots: dict[str, SoftRuleList] | None = None,
) -> np.ndarray:
    """On `rows`: snap, prune what routes nothing, drop unused rules (no row changes route), train
    the consequents on the routes by gradient (snapshot "trained": the network as gradient
    training left it), then set them to that objective's exact optimum; returns each restart's
    weighted F1 on the rows."""
    Z, y = data.take(rows)
    snap_bounds_(net, data.enc.grids(rows), off_grid=True)
    prune_predicates_(net, Z.cpu().numpy(), data.enc.unit_feature, settings.max_conditions, net.eps)
    sel, _ = net.zero_temperature(Z)
    drop_unused_rules_(net, sel, y)
    train_consequents_(net, sel, y, settings.smoothing)
    if snapshots is not None:
        snapshots["trained"] = copy.deepcopy(net)
    fit_consequents_(net, sel, y, settings.smoothing)
    cls = torch.gather(torch.argmax(net.logits, dim=-1), 1, sel).cpu().numpy()
    return np.array([weighted_f1(data.y_np[rows], c) for c in cls])


def _stage(epochs: int, settings: TrainSettings, batch: int, tuned: bool) -> Stage:
    """The annealed stage, or a fine-tuning stage at the end temperatures with projection."""
    if not tuned:
        return Stage(epochs, batch, settings.lr, settings.t_pi, settings.t_rl)
    t_pi, t_rl = (settings.t_pi[1],) * 2, (settings.t_rl[1],) * 2
    return Stage(epochs, batch, settings.lr, t_pi, t_rl, anneal_start=1.0, freeze_consequents=0.0, project=True)


def _prune_(net: SoftRuleList, data: Rows, rows: np.ndarray, settings: TrainSettings) -> None:
    """Snap and prune on `rows`: the network becomes a rule list (the crisp set)."""
    snap_bounds_(net, data.enc.grids(rows))
    Z = data.take(rows)[0].cpu().numpy()
    prune_predicates_(net, Z, data.enc.unit_feature, settings.max_conditions, net.eps)


def train_restarts(
    net: SoftRuleList,
    data: Rows,
    split: tuple[np.ndarray, np.ndarray],
    budget: Budget,
    settings: TrainSettings,
    generators: tuple[torch.Generator, list[torch.Generator]],
    progress: Progress,
) -> Trained:
    """All stages for all restarts (see the module docstring). Snapshots: "annealed" (the
    paper's training), "pruned", "tuned" (fine-tuned, and refit when rows were held out),
    "trained" (consequents trained on the routes: the last optimiser steps), "final"."""
    fit_rows, held_rows = split
    snapshots: dict[str, SoftRuleList] = {}
    Zf, yf = data.take(fit_rows)
    main = _stage(budget.main_epochs, settings, budget.batch_size, False)
    losses = train_stage(net, Zf, yf, main, settings.objective, generators, progress)
    snapshots["annealed"] = copy.deepcopy(net)
    _prune_(net, data, fit_rows, settings)
    snapshots["pruned"] = copy.deepcopy(net)
    tune = _stage(budget.tune_epochs, settings, budget.batch_size, True)
    losses += train_stage(net, Zf, yf, tune, settings.objective, generators, progress)
    if len(held_rows):  # score the crisp lists on the held-out rows, then refit on all rows
        scored = copy.deepcopy(net)
        training = consolidate_(scored, data, fit_rows, settings)
        held_out = restart_scores(scored, data.take(held_rows)[0], data.y_np[held_rows])
        Za, ya = data.take(np.arange(len(data.y_np)))
        refit = _stage(budget.refit_epochs, settings, budget.batch_size, True)
        losses += train_stage(net, Za, ya, refit, settings.objective, generators, progress)
    snapshots["tuned"] = copy.deepcopy(net)
    on_all = consolidate_(net, data, np.arange(len(data.y_np)), settings, snapshots)
    if not len(held_rows):
        training = held_out = on_all
    snapshots["final"] = net
    return Trained(net, held_out, training, snapshots, losses)

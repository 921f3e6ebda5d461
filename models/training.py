"""Training stages: cross-entropy + lambda * support regulariser, Adam, temperature annealing.

One `Stage` is a run of optimiser steps over a fixed set of rows with its temperature schedule.
fit runs two or three of them (see `NeuRulesClassifier`): the paper's annealed training, then a
fine-tuning of the pruned structure at the final temperatures with the network projected after
every step onto the networks that are rule lists at zero temperature (`SoftRuleList.project_`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from models.exceptions import TrainingCancelled
from models.network import SoftRuleList

__all__ = ["Objective", "Progress", "Stage", "TrainingCancelled", "schedule", "support_regulariser", "train_stage"]

ProgressInfo = dict[str, Any]


@dataclass(frozen=True)
class Objective:
    """The loss: cross-entropy + lambda_support * support regulariser(min_support, max_support)."""

    min_support: float
    max_support: float
    lambda_support: float


@dataclass(frozen=True)
class Stage:
    """One training stage: epochs over its rows, Adam settings and temperature schedule.

    Temperatures are held at their start values until `anneal_start` (a fraction of the stage),
    then move linearly to their end values; the consequent logits get no update during the first
    `freeze_consequents` of the stage; `project` projects the network after every step.
    """

    epochs: int
    batch_size: int
    lr: float
    t_pi: tuple[float, float]
    t_rl: tuple[float, float]
    anneal_start: float = 0.5
    freeze_consequents: float = 0.5
    project: bool = False


def schedule(start: float, end: float, progress: float, anneal_start: float) -> float:
    """Constant `start` until `anneal_start`, then linear to `end` at progress 1."""
    if progress <= anneal_start:
        return start
    frac = min(1.0, (progress - anneal_start) / max(1e-12, 1.0 - anneal_start))
    return start + (end - start) * frac


def support_regulariser(selector: torch.Tensor, min_support: float, max_support: float) -> torch.Tensor:
    """mean_j max(0, s_min - c_j)^2 + max(0, c_j - s_max)^2 over the k rules (not the default);
    selector (..., B, k+1) -> (...)."""
    cov = selector[..., :-1].mean(dim=-2)
    return (torch.relu(min_support - cov) ** 2 + torch.relu(cov - max_support) ** 2).mean(dim=-1)


class Progress:
    """Counts epochs over all stages, reports them to the callback and honours cancellation.

    The callback receives {epoch, n_epochs, loss, val_score}; val_score (every `val_every`
    epochs and at the last one, else None) is the weighted F1 of the zero-temperature network on
    the caller's eval_set. A callback returning True cancels training (`TrainingCancelled`).
    """

    def __init__(
        self,
        n_epochs: int,
        callback: Callable[[ProgressInfo], Any] | None = None,
        val_score: Callable[[SoftRuleList], float] | None = None,
        val_every: int = 5,
    ) -> None:
        self.n_epochs = n_epochs
        self.callback = callback
        self.val_score = val_score
        self.val_every = val_every
        self.epoch = 0

    def epoch_done(self, loss: float, net: SoftRuleList) -> None:
        """Report one finished epoch."""
        self.epoch += 1
        if self.callback is None:
            return
        score = None
        if self.val_score is not None and (self.epoch % self.val_every == 0 or self.epoch == self.n_epochs):
            net.eval()
            score = float(self.val_score(net))
            net.train()
        info = {"epoch": self.epoch, "n_epochs": self.n_epochs, "loss": loss, "val_score": score}
        if self.callback(info) is True:
            raise TrainingCancelled(f"training cancelled by the callback at epoch {self.epoch}")


def _adam(net: SoftRuleList, lr: float) -> torch.optim.Optimizer:
    try:  # one fused kernel per step where torch has it (CUDA, recent CPU builds)
        return torch.optim.Adam(net.parameters(), lr=lr, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(net.parameters(), lr=lr)


def _loss(
    net: SoftRuleList,
    x: tuple[torch.Tensor, torch.Tensor],
    y: torch.Tensor,
    temps: tuple[float, float],
    objective: Objective,
    noise: torch.Generator,
) -> torch.Tensor:
    """Sum over restarts of each restart's mean loss (independent gradients per restart)."""
    logits, sel = net(x, temps[0], temps[1], noise)
    m = logits.shape[0]
    loss: torch.Tensor = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.repeat(m)) * m
    if objective.lambda_support > 0:
        reg = support_regulariser(sel, objective.min_support, objective.max_support).sum()
        loss = loss + objective.lambda_support * reg
    return loss


def train_stage(
    net: SoftRuleList,
    X: torch.Tensor,
    y: torch.Tensor,
    stage: Stage,
    objective: Objective,
    generators: tuple[torch.Generator, torch.Generator],
    progress: Progress,
) -> list[float]:
    """Optimise `net` on (X, y) in place for one stage; returns the mean loss per epoch.

    generators: (shuffling on the CPU, Gumbel noise on the network's device).
    """
    n = X.shape[0]
    xd, xb = net.split_inputs(X)
    bs = max(1, min(stage.batch_size, n))
    n_batches = max(1, math.ceil(n / bs))
    total = stage.epochs * n_batches
    opt = _adam(net, stage.lr)
    losses: list[float] = []
    step = 0
    net.train()
    for _ in range(stage.epochs):
        perm = torch.randperm(n, generator=generators[0]).to(X.device)
        epoch_loss = torch.zeros((), device=X.device)
        for i in range(n_batches):
            idx = perm[i * bs : (i + 1) * bs]
            frac = step / max(1, total - 1)
            temps = (
                schedule(*stage.t_pi, frac, stage.anneal_start),
                schedule(*stage.t_rl, frac, stage.anneal_start),
            )
            loss = _loss(net, (xd[idx], xb[idx]), y[idx], temps, objective, generators[1])
            opt.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            if frac < stage.freeze_consequents:
                net.logits.grad = None
            opt.step()
            if stage.project:
                net.project_()
            else:
                net.clamp_()
            epoch_loss += loss.detach() * idx.shape[0]
            step += 1
        losses.append(float(epoch_loss) / n / net.n_models)
        progress.epoch_done(losses[-1], net)
    net.eval()
    return losses

"""Training stages: cross-entropy + lambda * support regulariser, Adam, temperature annealing.

One `Stage` is a run of optimiser steps over a fixed set of rows with its temperature schedule.
fit runs two or three of them (see `NeuRulesClassifier`): the paper's annealed training, then a
fine-tuning of the pruned structure at the final temperatures with the network projected after
every step onto the networks that are rule lists at zero temperature (`SoftRuleList.project_`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from models.exceptions import TrainingCancelled
from models.network import SoftRuleList
from models.relaxations import gumbel_from_uniform

__all__ = [
    "Objective",
    "Progress",
    "Stage",
    "StaticStep",
    "TrainingCancelled",
    "TrainingDiverged",
    "batches",
    "schedule",
    "support_regulariser",
    "train_stage",
]

ProgressInfo = dict[str, Any]

CUDA_GRAPHS = True  # capture the training step as a CUDA graph on CUDA devices
ADVICE = "try a smaller learning rate (lr), other temperatures (t_pi, t_rl) or a smaller lambda_support"


class TrainingDiverged(ValueError):
    """Raised by training when the loss is no longer a finite number or a parameter is NaN."""


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
    `freeze_consequents` of the stage; `project` projects the network after every step. Every
    step draws the selector's Gumbel noise.
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
        hold_last: bool = False,
    ) -> None:
        self.n_epochs = n_epochs
        self.callback = callback
        self.val_score = val_score
        self.val_every = val_every
        self.hold_last = hold_last  # the last epoch's point is kept in `held`, for the caller to report
        self.held: ProgressInfo | None = None
        self.epoch = 0
        self.steps: list[str] = []  # per stage: how its steps ran ("cuda graph", "eager", "eager: <why>")
        self.last_loss = math.nan  # the last epoch's mean loss (in a divergence message)

    def epoch_done(self, loss: float, net: SoftRuleList) -> None:
        """Report one finished epoch (a loss that is not finite is reported as it is: the restarts train as one
        batch, so one restart gone NaN makes it NaN while the others still train; `train_stage` checks them)."""
        self.epoch += 1
        self.last_loss = loss
        if self.callback is None:
            return
        if self.hold_last and self.epoch == self.n_epochs:
            self.held = {"epoch": self.epoch, "n_epochs": self.n_epochs, "loss": loss, "val_score": None}
            return
        score = None
        if self.val_score is not None and (self.epoch % self.val_every == 0 or self.epoch == self.n_epochs):
            net.eval()
            score = float(self.val_score(net))
            net.train()
        info = {"epoch": self.epoch, "n_epochs": self.n_epochs, "loss": loss, "val_score": score}
        if self.callback(info) is True:
            raise TrainingCancelled(f"training cancelled by the callback at epoch {self.epoch}")


def _adam(net: SoftRuleList, lr: float, capturable: bool) -> torch.optim.Optimizer:
    try:  # one fused kernel per step where torch has it (CUDA, recent CPU builds)
        return torch.optim.Adam(net.parameters(), lr=lr, fused=True, capturable=capturable)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(net.parameters(), lr=lr, capturable=capturable)


class StaticStep:
    """One optimiser step on static buffers (batch rows, temperatures, noise, freeze flag).

    Every step runs the same `_body` on the same tensors, so on CUDA the step is captured once as
    a graph and replayed (a step costs one launch instead of hundreds: the step count, not the
    arithmetic, bounds training time on a GPU). Elsewhere, or when capture fails, it runs eagerly.
    """

    WARMUP = 3  # eager steps (on a side stream) before capture

    def __init__(
        self, net: SoftRuleList, X: torch.Tensor, y: torch.Tensor, batch: int, objective: Objective, stage: Stage
    ) -> None:
        dev = X.device
        self.net, self.y, self.objective, self.project = net, y, objective, stage.project
        self.xd, self.xb = net.split_inputs(X)
        self.rows = torch.zeros(batch, dtype=torch.long, device=dev)
        self.t_pi = torch.ones((), device=dev)
        self.t_rl = torch.ones((), device=dev)
        self.unfrozen = torch.ones((), device=dev)
        self.uniform = torch.full((net.n_models, batch, net.n_rules + 1), 0.5, device=dev)
        self.loss_sum = torch.zeros((), device=dev)
        self.capture = dev.type == "cuda" and CUDA_GRAPHS
        self.opt = _adam(net, stage.lr, self.capture)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.steps = 0
        self.failure: str | None = None

    def _body(self) -> None:
        net = self.net
        noise = gumbel_from_uniform(self.uniform)
        rows = self.rows
        loss = _loss(net, (self.xd[rows], self.xb[rows]), self.y[rows], (self.t_pi, self.t_rl), self.objective, noise)
        loss.backward()  # type: ignore[no-untyped-call]
        if net.logits.grad is not None:
            net.logits.grad.mul_(self.unfrozen)
        self.opt.step()
        if self.project:
            net.project_()
        else:
            net.clamp_()
        self.loss_sum += loss.detach() * rows.shape[0]

    def run(self, rows: torch.Tensor, t_pi: float, t_rl: float, frozen: bool, noise: Sequence[torch.Generator]) -> None:
        """One step on `rows` at the given temperatures."""
        self.rows.copy_(rows)
        self.t_pi.fill_(t_pi)
        self.t_rl.fill_(t_rl)
        self.unfrozen.fill_(0.0 if frozen else 1.0)
        for m, gen in enumerate(noise):  # each restart draws its own noise
            self.uniform[m].uniform_(generator=gen)
        if self.graph is not None:
            self.graph.replay()
        elif self.capture and self.steps >= self.WARMUP:
            self._capture()
        else:
            self._eager()
        self.steps += 1

    def _eager(self) -> None:
        self.opt.zero_grad(set_to_none=True)
        if not self.capture:
            self._body()
            return
        side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self._body()
        torch.cuda.current_stream().wait_stream(side)

    def _capture(self) -> None:
        """Record the step as a CUDA graph and replay it; fall back to eager steps if torch cannot."""
        graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        try:
            with torch.cuda.graph(graph):
                self._body()
        except RuntimeError as exc:  # capture unsupported here: keep stepping eagerly
            self.failure = str(exc).splitlines()[0][:200]
            self.capture = False
            torch.cuda.synchronize()
            self._eager()
            return
        self.graph = graph
        graph.replay()


def _loss(
    net: SoftRuleList,
    x: tuple[torch.Tensor, torch.Tensor],
    y: torch.Tensor,
    temps: tuple[torch.Tensor, torch.Tensor],
    objective: Objective,
    noise: torch.Tensor | None,
) -> torch.Tensor:
    """Sum over restarts of each restart's mean loss (independent gradients per restart)."""
    logits, sel = net(x, temps[0], temps[1], noise)
    m = logits.shape[0]
    loss: torch.Tensor = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.repeat(m)) * m
    if objective.lambda_support > 0:
        reg = support_regulariser(sel, objective.min_support, objective.max_support).sum()
        loss = loss + objective.lambda_support * reg
    return loss


def batches(perm: torch.Tensor, batch: int) -> list[torch.Tensor]:
    """An epoch's batches of exactly `batch` rows: the permutation in order, the last batch
    ending at its end (so it may repeat rows of the one before). Rows are sorted within a batch:
    the shuffle decides which rows train together, not the order of floating-point sums (a
    full batch is then the same for every seed)."""
    n = perm.shape[0]
    starts = [*range(0, n - batch, batch), n - batch]
    return [perm[s : s + batch].sort().values for s in starts]


def train_stage(
    net: SoftRuleList,
    X: torch.Tensor,
    y: torch.Tensor,
    stage: Stage,
    objective: Objective,
    generators: tuple[torch.Generator, Sequence[torch.Generator]],
    progress: Progress,
) -> list[float]:
    """Optimise `net` on (X, y) in place for one stage; returns the mean loss per epoch.

    generators: (shuffling on the CPU, each restart's Gumbel noise on the network's device).
    """
    n = X.shape[0]
    batch = max(1, min(stage.batch_size, n))
    n_batches = len(range(0, n - batch, batch)) + 1
    total = stage.epochs * n_batches
    step = StaticStep(net, X, y, batch, objective, stage) if stage.epochs else None
    losses: list[float] = []
    net.train()
    for epoch in range(stage.epochs):
        assert step is not None
        step.loss_sum.zero_()
        perm = torch.randperm(n, generator=generators[0]).to(X.device)
        for i, rows in enumerate(batches(perm, batch)):
            frac = (epoch * n_batches + i) / max(1, total - 1)
            t_pi = schedule(*stage.t_pi, frac, stage.anneal_start)
            t_rl = schedule(*stage.t_rl, frac, stage.anneal_start)
            step.run(rows, t_pi, t_rl, frac < stage.freeze_consequents, generators[1])
        losses.append(float(step.loss_sum) / (n_batches * batch) / net.n_models)
        progress.epoch_done(losses[-1], net)
    if step is not None:
        progress.steps.append("cuda graph" if step.graph is not None else f"eager: {step.failure or X.device.type}")
        _check_parameters(net, progress)
    net.eval()
    return losses


def _check_parameters(net: SoftRuleList, progress: Progress) -> None:
    """TrainingDiverged when every restart has a NaN parameter (a diverged restart beside others that trained
    is left to selection, as before: it cannot be chosen over a list that fits)."""
    with torch.no_grad():  # one read per stage, no host sync per step; +-inf bounds are boxes open on that side
        per_restart = torch.stack([torch.isnan(p).flatten(1).any(1) for p in net.parameters()]).any(0)
    if bool(per_restart.all()):
        raise TrainingDiverged(
            f"training diverged: every restart's parameters are NaN after epoch {progress.epoch} of "
            f"{progress.n_epochs} (last mean loss {progress.last_loss}); " + ADVICE
        )

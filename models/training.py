"""Training loop: cross-entropy + lambda * support regulariser, Adam, temperature annealing."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from models.exceptions import TrainingCancelled
from models.network import SoftRuleList

__all__ = [
    "TrainConfig",
    "TrainingCancelled",
    "schedule",
    "support_regulariser",
    "train",
]


@dataclass
class TrainConfig:
    """Optimisation settings (see `NeuRulesClassifier` for their meaning)."""

    epochs: int
    batch_size: int
    lr: float
    min_support: float
    max_support: float
    lambda_support: float
    t_pi: tuple[float, float]
    t_rl: tuple[float, float]
    anneal_start: float = 0.5  # fraction of training after which both temperatures anneal
    freeze_consequents: float = 0.5  # fraction of training with the consequent logits frozen
    val_every: int = 5


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


Progress = dict[str, Any]


def train(
    net: SoftRuleList,
    X: torch.Tensor,
    y: torch.Tensor,
    cfg: TrainConfig,
    shuffle_gen: torch.Generator,
    noise_gen: torch.Generator,
    callback: Callable[[Progress], Any] | None = None,
    val_score: Callable[[], float] | None = None,
) -> list[float]:
    """Optimise `net` on (X, y) in place; returns the mean loss per epoch.

    One Adam step per batch. The consequent logits receive no update for the first
    `freeze_consequents` of training; temperatures anneal linearly after `anneal_start`.
    """
    n = X.shape[0]
    xd, xb = net.split_inputs(X)
    bs = max(1, min(cfg.batch_size, n))
    n_batches = max(1, math.ceil(n / bs))
    total = cfg.epochs * n_batches
    try:  # one fused kernel per step where torch has it (CUDA, recent CPU builds)
        opt = torch.optim.Adam(net.parameters(), lr=cfg.lr, fused=True)
    except (RuntimeError, TypeError, ValueError):
        opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    losses: list[float] = []
    step = 0
    for epoch in range(1, cfg.epochs + 1):
        net.train()
        perm = torch.randperm(n, generator=shuffle_gen).to(X.device)
        epoch_loss = torch.zeros((), device=X.device)
        for i in range(n_batches):
            idx = perm[i * bs : (i + 1) * bs]
            progress = step / max(1, total - 1)
            t_pi = schedule(cfg.t_pi[0], cfg.t_pi[1], progress, cfg.anneal_start)
            t_rl = schedule(cfg.t_rl[0], cfg.t_rl[1], progress, cfg.anneal_start)
            logits, sel = net((xd[idx], xb[idx]), t_pi, t_rl, noise_gen)
            m = logits.shape[0]
            # sum over restarts of each restart's mean loss: independent gradients per restart
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[idx].repeat(m)) * m
            if cfg.lambda_support > 0:
                loss = loss + cfg.lambda_support * support_regulariser(sel, cfg.min_support, cfg.max_support).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if progress < cfg.freeze_consequents:
                net.logits.grad = None
            opt.step()
            net.clamp_()
            epoch_loss += loss.detach() * idx.shape[0]
            step += 1
        mean_loss = float(epoch_loss) / n / net.n_models
        losses.append(mean_loss)
        if callback is not None:
            score = None
            if val_score is not None and (epoch % cfg.val_every == 0 or epoch == cfg.epochs):
                net.eval()
                score = float(val_score())
            info = {
                "epoch": epoch,
                "n_epochs": cfg.epochs,
                "loss": mean_loss,
                "val_score": score,
            }
            if callback(info) is True:
                raise TrainingCancelled(f"training cancelled by the callback at epoch {epoch}")
    net.eval()
    return losses

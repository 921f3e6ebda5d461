"""How much training fit does: restarts, batch size and epochs of each stage (numbers only)."""

from __future__ import annotations

import math
from dataclasses import dataclass

# restarts="auto": as many restarts as keep batch * rules * (dense inputs + two-valued / 10)
# * restarts under this, at least the four kinds of the seeding pool
RESTART_BUDGET = 800_000
MIN_AUTO_RESTARTS = 4
# at most this many elements per step (batch * rules * restarts * effective inputs): wider data
# gets smaller batches, never below MIN_BATCH
MAX_STEP_WORK = 1_200_000
MIN_BATCH = 128


@dataclass(frozen=True)
class Budget:
    """Restarts, batch size and the epochs of the three stages (annealed training on the inner
    training rows, fine-tuning of the pruned structure on them, refit on all rows)."""

    n_restarts: int
    batch_size: int
    main_epochs: int
    tune_epochs: int
    refit_epochs: int

    @property
    def total_epochs(self) -> int:
        """Epochs over all stages (what the progress callback counts)."""
        return self.main_epochs + self.tune_epochs + self.refit_epochs


@dataclass(frozen=True)
class BudgetRequest:
    """The estimator's settings that decide the budget."""

    n_rules: int
    epochs: int | str
    batch_size: int
    n_restarts: int | str
    max_restarts: int
    target_steps: int
    min_epochs: int
    max_epochs: int
    tune_fraction: float
    refit_fraction: float


def _restarts(req: BudgetRequest, n: int, width: float) -> int:
    if req.n_restarts != "auto":
        return int(req.n_restarts)
    fits = RESTART_BUDGET // max(1.0, min(req.batch_size, n) * width)
    return int(min(req.max_restarts, max(MIN_AUTO_RESTARTS, fits)))


def _epochs_for(steps: float, n: int, batch: int) -> int:
    return max(1, math.ceil(steps / max(1, math.ceil(n / max(1, min(batch, n))))))


def _split_epochs(total: int, req: BudgetRequest, has_refit: bool) -> tuple[int, int, int]:
    """A fixed number of epochs shared out in the stages' proportions, main stage first."""
    shares = (1.0, req.tune_fraction, req.refit_fraction if has_refit else 0.0)
    tune = int(total * shares[1] / sum(shares))
    refit = int(total * shares[2] / sum(shares))
    return total - tune - refit, tune, refit


def plan_budget(req: BudgetRequest, n_fit: int, n_all: int, n_dense: int, n_two: int) -> Budget:
    """The budget for n_fit inner training rows (n_all with the held-out ones) and the inputs."""
    width = req.n_rules * (n_dense + 0.1 * n_two + 1)
    restarts = _restarts(req, n_fit, width)
    batch = int(min(req.batch_size, max(MIN_BATCH, MAX_STEP_WORK // (width * restarts))))
    has_refit = n_all > n_fit
    if req.epochs != "auto":
        main, tune, refit = _split_epochs(int(req.epochs), req, has_refit)
        return Budget(restarts, batch, main, tune, refit)
    steps = req.target_steps
    main = min(req.max_epochs, max(req.min_epochs, _epochs_for(steps, n_fit, batch)))
    tune = _epochs_for(steps * req.tune_fraction, n_fit, batch) if req.tune_fraction > 0 else 0
    refit = _epochs_for(steps * req.refit_fraction, n_all, batch) if has_refit and req.refit_fraction > 0 else 0
    return Budget(restarts, batch, main, tune, refit)

"""The differentiable rule list (torch module)."""

from __future__ import annotations

import torch
from torch import nn

from models.relaxations import (
    gumbel_noise,
    hard_predicate,
    ordered_bounds,
    relaxed_conjunction,
    rule_selector,
    soft_predicate,
)

# Active priority of the default (else) rule: below every firing rule (priorities are kept in
# [PRIORITY_MIN, PRIORITY_MAX]) and above every non-firing one (a rule blocked by a predicate of
# weight >= MIN_WEIGHT has activation <= eps / MIN_WEIGHT, so active priority <= 0.08 at eps=1e-3).
DEFAULT_PRIORITY = 0.5
PRIORITY_MIN = 1.0
PRIORITY_MAX = 4.0
MIN_WEIGHT = 0.05


class SoftRuleList(nn.Module):
    """k soft rules over F inputs, learnable priorities, per-rule class logits, a default rule.

    Index k of the selector / consequent logits is the default rule.
    """

    def __init__(
        self,
        n_inputs: int,
        n_rules: int,
        n_classes: int,
        lower: torch.Tensor,
        upper: torch.Tensor,
        priority: torch.Tensor,
        logits: torch.Tensor,
        weight_init: float = 0.5,
        eps: float = 1e-3,
    ) -> None:
        super().__init__()
        self.n_rules = n_rules
        self.n_classes = n_classes
        self.eps = eps
        self.lower = nn.Parameter(lower.clone().float())
        self.upper = nn.Parameter(upper.clone().float())
        self.weight = nn.Parameter(torch.full((n_rules, n_inputs), float(weight_init)))
        self.priority = nn.Parameter(priority.clone().float())
        self.logits = nn.Parameter(logits.clone().float())  # (k+1, C), row k = default rule
        self.register_buffer("rule_mask", torch.ones(n_rules))

    def clamp_(self) -> None:
        """Keep priorities in range after an optimiser step."""
        with torch.no_grad():
            self.priority.clamp_(PRIORITY_MIN, PRIORITY_MAX)

    def activations(self, x: torch.Tensor, t_pi: float) -> torch.Tensor:
        """Soft rule antecedents (B, k)."""
        a, b = ordered_bounds(self.lower, self.upper)
        pi = soft_predicate(x[:, None, :], a, b, t_pi)
        return relaxed_conjunction(pi, self.weight, self.eps)

    def active_priority(self, r: torch.Tensor) -> torch.Tensor:
        """Active priorities (B, k+1): r_j * p_j for rules, the constant DEFAULT_PRIORITY last."""
        ap = r * (self.priority * self.rule_mask)[None, :]
        default = torch.full((ap.shape[0], 1), DEFAULT_PRIORITY, dtype=ap.dtype, device=ap.device)
        return torch.cat([ap, default], dim=1)

    def forward(
        self,
        x: torch.Tensor,
        t_pi: float,
        t_rl: float,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(class logits (B, C), selector weights (B, k+1)); Gumbel noise only in training mode."""
        ap = self.active_priority(self.activations(x, t_pi))
        noise = gumbel_noise(tuple(ap.shape), generator, ap.device) if self.training else None
        sel = rule_selector(ap, t_rl, noise)
        return sel @ self.logits, sel

    @torch.no_grad()
    def zero_temperature(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The limit t_pi, t_rl -> 0 without noise: (selected rule index in 0..k, class index)."""
        a, b = ordered_bounds(self.lower, self.upper)
        pi = hard_predicate(x[:, None, :], a, b)
        r = relaxed_conjunction(pi, self.weight, self.eps)
        ap = self.active_priority(r)
        sel = torch.argmax(ap, dim=1)
        cls = torch.argmax(self.logits, dim=1)[sel]
        return sel, cls

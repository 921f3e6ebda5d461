"""The differentiable rule list (torch module)."""

from __future__ import annotations

import torch
from torch import nn

from models.crisp import DEFAULT_PRIORITY, MAX_EPS, MIN_WEIGHT, PRIORITY_MAX, PRIORITY_MIN, first_match_order
from models.relaxations import (
    conjunction_eta,
    dense_denominator,
    hard_predicate,
    ordered_bounds,
    relaxed_conjunction,
    rule_selector,
    soft_predicate,
)

__all__ = [
    "DEFAULT_PRIORITY",
    "MAX_EPS",
    "MIN_WEIGHT",
    "PRIORITY_MAX",
    "PRIORITY_MIN",
    "SoftRuleList",
    "first_match_order",
]


class SoftRuleList(nn.Module):
    """M independent soft rule lists (restarts), each with k rules over F inputs, learnable
    priorities, per-rule class logits and a default rule, evaluated in one tensor program.

    Parameter shapes: lower/upper/weight (M, k, F), priority (M, k), logits (M, k+1, C); index k
    of the selector and of the consequent logits is the default rule.
    """

    rule_mask: torch.Tensor  # (M, k): 0 for a switched-off rule
    pred_mask: torch.Tensor  # (M, k, F): 0 for a pruned predicate
    dense_idx: torch.Tensor
    two_idx: torch.Tensor
    two_low: torch.Tensor
    two_high: torch.Tensor

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
        if lower.dim() == 2:  # a single rule list
            lower, upper, priority, logits = (
                lower[None],
                upper[None],
                priority[None],
                logits[None],
            )
        self.n_models = lower.shape[0]
        self.n_rules = n_rules
        self.n_classes = n_classes
        self.eps = eps
        self.lower = nn.Parameter(lower.clone().float())
        self.upper = nn.Parameter(upper.clone().float())
        self.weight = nn.Parameter(torch.full((self.n_models, n_rules, n_inputs), float(weight_init)))
        self.priority = nn.Parameter(priority.clone().float())
        self.logits = nn.Parameter(logits.clone().float())
        self.register_buffer("rule_mask", torch.ones(self.n_models, n_rules))
        # 0 where a predicate was pruned: its weight is held at 0 by `project_`
        self.register_buffer("pred_mask", torch.ones(self.n_models, n_rules, n_inputs))
        # optional fast path for inputs that take exactly two values on the training data
        self.register_buffer("dense_idx", torch.arange(n_inputs))
        self.register_buffer("two_idx", torch.zeros(0, dtype=torch.long))
        self.register_buffer("two_low", torch.zeros(0))
        self.register_buffer("two_high", torch.zeros(0))

    def set_two_valued(self, idx: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> None:
        """Declare inputs `idx` as two-valued (values low < high on the training data)."""
        n_inputs = self.weight.shape[-1]
        dev = self.lower.device
        is_two = torch.zeros(n_inputs, dtype=torch.bool)
        is_two[idx.cpu()] = True
        self.dense_idx = torch.arange(n_inputs)[~is_two].to(dev)
        self.two_idx = idx.to(dev).long()
        self.two_low = low.to(dev).float()
        self.two_high = high.to(dev).float()

    def split_inputs(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(dense columns, 0/1 indicator of the high value of each two-valued column)."""
        return x[:, self.dense_idx], (x[:, self.two_idx] == self.two_high).to(x.dtype)

    def clamp_(self) -> None:
        """Keep priorities in [PRIORITY_MIN, PRIORITY_MAX] after an optimiser step."""
        with torch.no_grad():
            self.priority.clamp_(PRIORITY_MIN, PRIORITY_MAX)

    def project_(self) -> None:
        """Project onto the networks that are rule lists at zero temperature: pruned predicates
        weigh 0, kept ones at least MIN_WEIGHT, priorities in [PRIORITY_MIN, PRIORITY_MAX]."""
        with torch.no_grad():
            kept = self.pred_mask > 0
            self.weight.copy_(torch.where(kept, self.weight.clamp(min=MIN_WEIGHT), torch.zeros_like(self.weight)))
            self.clamp_()

    def select(self, m: int) -> SoftRuleList:
        """A single-model copy of restart m."""
        net = SoftRuleList(
            self.weight.shape[-1],
            self.n_rules,
            self.n_classes,
            self.lower.detach()[m : m + 1],
            self.upper.detach()[m : m + 1],
            self.priority.detach()[m : m + 1],
            self.logits.detach()[m : m + 1],
            eps=self.eps,
        ).to(self.lower.device)
        with torch.no_grad():
            net.weight.copy_(self.weight.detach()[m : m + 1])
            net.rule_mask.copy_(self.rule_mask[m : m + 1])
            net.pred_mask.copy_(self.pred_mask[m : m + 1])
        net.dense_idx, net.two_idx = self.dense_idx, self.two_idx
        net.two_low, net.two_high = self.two_low, self.two_high
        net.train(self.training)
        return net

    def activations(
        self, x: torch.Tensor | tuple[torch.Tensor, torch.Tensor], t_pi: float | torch.Tensor
    ) -> torch.Tensor:
        """Soft rule antecedents (M, B, k).

        x is the (B, F) input, or `split_inputs(x)`: then a two-valued input's predicate takes
        one of two values per rule, and its part of the conjunction's denominator is a matrix
        product (the same numbers, far fewer operations).
        """
        if not isinstance(x, tuple):
            a, b = ordered_bounds(self.lower, self.upper)
            pi = soft_predicate(x[None, :, None, :], a[:, None], b[:, None], t_pi)
            return relaxed_conjunction(pi, self.weight, self.eps)
        return self._split_activations(x[0], x[1], t_pi)

    def _index(self, all_dense: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """(dense inputs, two-valued inputs): every input dense when all_dense."""
        if all_dense:
            return torch.arange(self.weight.shape[-1], device=self.weight.device), self.two_idx[:0]
        return self.dense_idx, self.two_idx

    def _split_activations(
        self, xd: torch.Tensor, xb: torch.Tensor, t_pi: float | torch.Tensor | None, all_dense: bool = False
    ) -> torch.Tensor:
        """Activations from `split_inputs` (or the whole input when all_dense); t_pi=None is the
        zero-temperature limit."""
        a, b = ordered_bounds(self.lower, self.upper)
        w = torch.relu(self.weight)
        wsum = w.sum(dim=-1)  # (M, k)
        eta = conjunction_eta(w, self.eps)  # (M, k)
        scale = (1.0 + eta)[:, None, :]
        di, ti = self._index(all_dense)
        if t_pi is None:
            pi_d = hard_predicate(xd[None, :, None, :], a[:, None, :, di], b[:, None, :, di])
            denom = torch.einsum("mbrf,mrf->mbr", 1.0 / (pi_d + eta[:, None, :, None]), w[:, :, di])
        else:
            denom = dense_denominator(xd, a[:, :, di], b[:, :, di], w[:, :, di], eta, t_pi)  # (M,B,k)
        if ti.numel():
            p0, p1 = self._two_valued_predicates(a[:, :, ti], b[:, :, ti], t_pi)
            w2 = w[:, :, ti]
            q0 = 1.0 / (p0 + eta[..., None])  # (M,k,F2)
            q1 = 1.0 / (p1 + eta[..., None])
            base = (w2 * q0).sum(dim=-1)  # (M, k)
            delta = w2 * (q1 - q0)  # (M, k, F2)
            denom = denom + base[:, None, :] + torch.einsum("bf,mrf->mbr", xb, delta)
        out = wsum[:, None, :] / (scale * denom).clamp_min(1e-30)
        return torch.where((wsum <= 0)[:, None, :], torch.ones_like(out), out)

    def _two_valued_predicates(
        self, a: torch.Tensor, b: torch.Tensor, t_pi: float | torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Predicates (M, k, F2) of the two-valued inputs at their low and high value."""
        if t_pi is None:
            return hard_predicate(self.two_low, a, b), hard_predicate(self.two_high, a, b)
        return soft_predicate(self.two_low, a, b, t_pi), soft_predicate(self.two_high, a, b, t_pi)

    def _all_hold(self, xd: torch.Tensor, xb: torch.Tensor, all_dense: bool) -> torch.Tensor:
        """(M, B, k): every weighted predicate of the rule holds (hard predicate 1)."""
        a, b = ordered_bounds(self.lower, self.upper)
        on = torch.relu(self.weight) > 0
        di, ti = self._index(all_dense)
        pi_d = hard_predicate(xd[None, :, None, :], a[:, None, :, di], b[:, None, :, di])
        fails = ((pi_d < 1) & on[:, None, :, di]).sum(dim=-1).to(xd.dtype)  # (M, B, k)
        if ti.numel():
            p0, p1 = self._two_valued_predicates(a[:, :, ti], b[:, :, ti], None)
            f0 = ((p0 < 1) & on[:, :, ti]).to(xd.dtype)
            f1 = ((p1 < 1) & on[:, :, ti]).to(xd.dtype)
            fails = fails + f0.sum(dim=-1)[:, None, :] + torch.einsum("bf,mrf->mbr", xb, f1 - f0)
        return fails == 0

    def active_priority(self, r: torch.Tensor) -> torch.Tensor:
        """Active priorities (M, B, k+1): r_j * p_j for rules, the constant DEFAULT_PRIORITY last."""
        ap = r * (self.priority * self.rule_mask)[:, None, :]
        default = torch.full((*ap.shape[:-1], 1), DEFAULT_PRIORITY, dtype=ap.dtype, device=ap.device)
        return torch.cat([ap, default], dim=-1)

    def forward(
        self,
        x: torch.Tensor | tuple[torch.Tensor, torch.Tensor],
        t_pi: float | torch.Tensor,
        t_rl: float | torch.Tensor,
        noise: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(class logits (M, B, C), selector weights (M, B, k+1)).

        x is the (B, F) input or `split_inputs(x)`; temperatures are numbers or 0-d tensors;
        noise: Gumbel samples (M, B, k+1) added to the active priorities, in training mode only.
        """
        ap = self.active_priority(self.activations(x, t_pi))
        sel = rule_selector(ap, t_rl, noise if self.training else None)
        return torch.bmm(sel, self.logits), sel

    @torch.no_grad()
    def zero_temperature(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The limit t_pi, t_rl -> 0 without noise: (selected rule index in 0..k, class index),
        each (M, B). A rule whose weighted predicates all hold has activation exactly 1 (the
        formula's value, computed without rounding), so equal priorities tie exactly and arg max
        takes the lower index."""
        vals = x[:, self.two_idx]
        # values outside the two training values of a two-valued input: every input on the dense path
        all_dense = not bool(((vals == self.two_low) | (vals == self.two_high)).all())
        xd, xb = (x, x[:, :0]) if all_dense else self.split_inputs(x)
        r = self._split_activations(xd, xb, None, all_dense)
        r = torch.where(self._all_hold(xd, xb, all_dense), torch.ones_like(r), r)
        sel = torch.argmax(self.active_priority(r), dim=-1)  # (M, B)
        cls = torch.gather(torch.argmax(self.logits, dim=-1), 1, sel)
        return sel, cls

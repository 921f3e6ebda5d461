"""The paper's continuous relaxations: soft predicate, relaxed conjunction, rule selector (torch)."""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

# exp() arguments are clipped to [-_CLIP, _CLIP]: exp(60) ~ 1e26 keeps float32 finite while
# 1/(1+exp(60)) ~ 0, and 1 + exp(-60) == 1 in float32, so the lower clip changes no predicate; it keeps
# exp() off its slow path for underflowing arguments (about 50x slower per element on a CPU, and a cold
# predicate far below zero is the common case at low temperature).
_CLIP = 60.0


def _exp_clipped(z: torch.Tensor) -> torch.Tensor:
    """exp of z clipped to [-_CLIP, _CLIP], in place."""
    return z.clamp_(-_CLIP, _CLIP).exp_()


def ordered_bounds(lower: torch.Tensor, upper: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds as used by the predicate: a = min(lower, upper) <= b = max(lower, upper)."""
    return torch.minimum(lower, upper), torch.maximum(lower, upper)


def soft_predicate(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, t: float | torch.Tensor) -> torch.Tensor:
    """Middle output of softmax([x, 2x-a, 3x-a-b] / t): a soft `a <= x <= b`.

    Equal to 1 / (1 + exp((a-x)/t) + exp((x-b)/t)); shapes broadcast, x (B,1,F) with a, b (R,F)
    gives (B,R,F).
    """
    u = ((a - x) / t).clamp(-_CLIP, _CLIP)
    v = ((x - b) / t).clamp(-_CLIP, _CLIP)
    return 1.0 / (1.0 + torch.exp(u) + torch.exp(v))


def hard_predicate(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The soft predicate's limit as t -> 0: 1 inside, 0 outside, 1/2 exactly on a bound."""
    inside = ((x > a) & (x < b)).to(x.dtype)
    on = ((x == a) | (x == b)) & (a <= b)
    both = (x == a) & (x == b)
    # a == b == x: softmax of three equal logits -> 1/3
    return torch.where(
        both,
        torch.full_like(inside, 1.0 / 3.0),
        torch.where(on, torch.full_like(inside, 0.5), inside),
    )


def conjunction_eta(w: torch.Tensor, eps: float) -> torch.Tensor:
    """eta = eps / sum(w) per rule, detached (a constant in the backward pass)."""
    return (eps / w.sum(dim=-1).clamp_min(1e-12)).detach()


def relaxed_conjunction(pi: torch.Tensor, weights: torch.Tensor, eps: float) -> torch.Tensor:
    """sum(w) / sum(w * (1+eta) / (pi+eta)) with w = relu(weights); pi (..., B, R, F), weights
    (..., R, F) -> (..., B, R).

    A rule whose weights are all zero has no condition and is 1 everywhere.
    """
    w = torch.relu(weights)
    wsum = w.sum(dim=-1)  # (..., R)
    eta = conjunction_eta(w, eps)  # (..., R)
    recip = (1.0 + eta).unsqueeze(-2).unsqueeze(-1) / (pi + eta.unsqueeze(-2).unsqueeze(-1))
    denom = torch.einsum("...brf,...rf->...br", recip, w)
    out = wsum.unsqueeze(-2) / denom.clamp_min(1e-30)
    return torch.where((wsum <= 0).unsqueeze(-2), torch.ones_like(out), out)


def gumbel_from_uniform(u: torch.Tensor) -> torch.Tensor:
    """Standard Gumbel samples -log(-log(U)) from uniform samples U."""
    return -torch.log(-torch.log(u.clamp(1e-10, 1.0 - 1e-7)))


def gumbel_noise(shape: tuple[int, ...], generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    """Standard Gumbel samples -log(-log(U))."""
    return gumbel_from_uniform(torch.rand(shape, generator=generator, device=device))


def rule_selector(
    active_priority: torch.Tensor, t: float | torch.Tensor, noise: torch.Tensor | None = None
) -> torch.Tensor:
    """softmax((active priority + Gumbel noise) / t) over rules; pass noise only in training."""
    z = active_priority if noise is None else active_priority + noise
    return torch.softmax(z / t, dim=-1)


class _DenseDenominator(torch.autograd.Function):
    """sum_f w * 1 / (soft_predicate(x_f; a, b, t) + eta) with a hand-written backward pass.

    Same numbers as composing `soft_predicate` and the conjunction's denominator with autograd,
    in about a third of the memory passes over the intermediates. These are laid out (M, k, F, B),
    the batch innermost: every broadcast is then over whole contiguous rows and every sum over b
    a reduction of the last dimension (a (M, B, k, F) layout with F of a few columns cost about
    four times as much on a CPU, in strided copies for einsum and in scalar broadcast loops).
    """

    @staticmethod
    def forward(ctx, x, a, b, w, eta, t):  # type: ignore[no-untyped-def]
        xt = x.t().contiguous()  # (F, B)
        e1 = _exp_clipped((a[..., None] - xt).div_(t))  # (M,k,F,B)
        e2 = _exp_clipped((xt - b[..., None]).div_(t))
        pi = (e1 + e2).add_(1.0).reciprocal_()
        q = (pi + eta[:, :, None, None]).reciprocal_()
        denom = (q * w[..., None]).sum(dim=2).transpose(1, 2)  # (M,B,k)
        ctx.save_for_backward(e1, e2, pi, q, w)
        ctx.t = t
        return denom

    @staticmethod
    @once_differentiable  # the backward is not itself differentiable: a second derivative is an error, not None
    def backward(ctx, g):  # type: ignore[no-untyped-def]
        e1, e2, pi, q, w = ctx.saved_tensors
        gt = g.transpose(1, 2)[:, :, None, :]  # (M,k,1,B)
        gw = (q * gt).sum(dim=-1)
        # d denom / d pi = -w q^2 ; d pi / d a = e1 pi^2 / t ; d pi / d b = -e2 pi^2 / t
        k = q.mul_(pi).square_().mul_(w[..., None]).mul_(gt / ctx.t)
        ga = e1.mul_(k).sum(dim=-1)
        gb = e2.mul_(k).sum(dim=-1).neg_()
        return None, ga, gb, gw, None, None


def dense_denominator(
    x: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    w: torch.Tensor,
    eta: torch.Tensor,
    t: float | torch.Tensor,
) -> torch.Tensor:
    """sum_f w / (soft_predicate(x; a, b, t) + eta): x (B,F), a/b/w (M,k,F), eta (M,k) -> (M,B,k);
    t a number or a 0-d tensor (a static buffer under CUDA-graph capture)."""
    t = t if isinstance(t, torch.Tensor) else float(t)
    out: torch.Tensor = _DenseDenominator.apply(x, a, b, w, eta.detach(), t)  # type: ignore[no-untyped-call]
    return out

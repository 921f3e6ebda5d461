"""Unit tests of the paper's relaxations (models.relaxations)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from models.network import DEFAULT_PRIORITY, SoftRuleList
from models.relaxations import (
    gumbel_noise,
    hard_predicate,
    relaxed_conjunction,
    rule_selector,
    soft_predicate,
)


@pytest.mark.parametrize("t", [0.1, 0.01, 1e-3])
def test_predicate_tends_to_interval_indicator(t: float) -> None:
    a, b = torch.tensor(-1.0), torch.tensor(2.0)
    x = torch.tensor([-3.0, -1.5, 0.0, 1.0, 2.5, 5.0])
    out = soft_predicate(x, a, b, t)
    expect = torch.tensor([0.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    tol = 0.3 if t == 0.1 else 1e-6
    assert torch.all((out - expect).abs() <= tol)


@pytest.mark.parametrize("t", [0.1, 0.01, 1e-4])
def test_predicate_is_one_half_on_the_bounds(t: float) -> None:
    a, b = torch.tensor(-1.0), torch.tensor(2.0)
    out = soft_predicate(torch.tensor([-1.0, 2.0]), a, b, t)
    assert torch.allclose(out, torch.tensor([0.5, 0.5]), atol=1e-3 if t == 0.1 else 1e-6)


def test_predicate_matches_three_bin_softmax() -> None:
    x = torch.linspace(-3, 3, 41)
    a, b, t = torch.tensor(-0.5), torch.tensor(1.2), 0.3
    logits = torch.stack([x, 2 * x - a, 3 * x - a - b], dim=-1) / t
    assert torch.allclose(soft_predicate(x, a, b, t), torch.softmax(logits, dim=-1)[:, 1], atol=1e-6)


def test_hard_predicate_is_the_zero_temperature_limit() -> None:
    a, b = torch.tensor(0.0), torch.tensor(1.0)
    x = torch.tensor([-1.0, 0.0, 0.5, 1.0, 2.0])
    assert torch.equal(hard_predicate(x, a, b), torch.tensor([0.0, 0.5, 1.0, 0.5, 0.0]))
    assert torch.allclose(soft_predicate(x, a, b, 1e-5), hard_predicate(x, a, b), atol=1e-6)


def test_conjunction_is_one_when_all_active_predicates_hold() -> None:
    pi = torch.ones(4, 2, 3)
    w = torch.tensor([[0.5, 0.2, 1.0], [1.0, 0.0, 0.0]])
    assert torch.allclose(relaxed_conjunction(pi, w, 1e-3), torch.ones(4, 2), atol=1e-6)


def test_conjunction_ignores_zero_weight_predicates() -> None:
    pi = torch.tensor([[[1.0, 0.0, 1.0]]])
    w = torch.tensor([[0.5, 0.0, 0.7]])  # the failing predicate has weight 0
    assert torch.allclose(relaxed_conjunction(pi, w, 1e-3), torch.ones(1, 1), atol=1e-6)
    w_neg = torch.tensor([[0.5, -2.0, 0.7]])  # relu(weight) = 0
    assert torch.allclose(relaxed_conjunction(pi, w_neg, 1e-3), torch.ones(1, 1), atol=1e-6)


@pytest.mark.parametrize("eps", [1e-3, 1e-2])
def test_conjunction_is_at_most_eps_when_one_predicate_fails(eps: float) -> None:
    pi = torch.tensor([[[1.0, 0.0, 1.0, 1.0]]])
    w = torch.tensor([[1.0, 1.0, 1.0, 1.0]])
    out = relaxed_conjunction(pi, w, eps)
    assert 0 < float(out) <= eps


def test_conjunction_gradient_does_not_vanish_when_a_predicate_is_zero() -> None:
    pi = torch.tensor([[[0.0, 1.0, 0.0]]], requires_grad=True)
    w = torch.tensor([[0.5, 0.5, 0.5]], requires_grad=True)
    relaxed_conjunction(pi, w, 1e-3).sum().backward()
    assert pi.grad is not None and w.grad is not None
    # the paper's limit: d r / d pi_j ~ w_j / sum(w) for inactive predicates
    assert float(pi.grad[0, 0, 0]) > 0.1
    assert float(pi.grad[0, 0, 2]) > 0.1
    assert float(w.grad.abs().sum()) > 0


def test_unrelaxed_conjunction_gradient_would_vanish() -> None:
    # sanity check of the motivation: without eta the gradient through a zero predicate is 0
    pi = torch.tensor([1e-12, 1.0], requires_grad=True)
    w = torch.tensor([0.5, 0.5])
    (w.sum() / (w / pi).sum()).backward()
    assert float(pi.grad[1].abs()) < 1e-9


@pytest.mark.parametrize("t", [1.0, 0.1, 0.01])
def test_selector_tends_to_arg_max(t: float) -> None:
    ap = torch.tensor([[0.2, 1.5, 1.0, 0.5]])
    sel = rule_selector(ap, t)
    assert torch.allclose(sel.sum(dim=1), torch.ones(1))
    assert int(sel.argmax()) == 1
    if t <= 0.01:
        assert float(sel[0, 1]) > 0.999


def _net() -> SoftRuleList:
    torch.manual_seed(0)
    k, f, c = 3, 4, 2
    return SoftRuleList(
        f,
        k,
        c,
        -torch.rand(k, f),
        torch.rand(k, f),
        torch.tensor([1.0, 1.5, 2.0]),
        torch.randn(k + 1, c),
    )


def test_eval_forward_has_no_gumbel_noise() -> None:
    net = _net().eval()
    x = torch.randn(32, 4)
    g = torch.Generator().manual_seed(1)
    noise = gumbel_noise((1, 32, 4), g, x.device)
    a1, s1 = net(x, 0.2, 0.5, noise)
    a2, s2 = net(x, 0.2, 0.5)
    assert torch.equal(a1, a2) and torch.equal(s1, s2)  # eval mode ignores the noise
    net.train()
    b1, _ = net(x, 0.2, 0.5, noise)
    assert not torch.equal(a1, b1)  # training mode adds it


def test_default_rule_sits_between_firing_and_non_firing_rules() -> None:
    net = _net()
    r = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]])  # (models, rows, rules)
    ap = net.active_priority(r).detach()[0]
    assert float(ap[0, 0]) > DEFAULT_PRIORITY > float(ap[0, 1])
    assert int(ap[1].argmax()) == 3  # nothing fires -> the default rule (last index)


def test_two_valued_fast_path_equals_the_dense_computation() -> None:
    torch.manual_seed(0)
    m, k, f, c, n = 2, 3, 5, 3, 64
    x = torch.randn(n, f)
    x[:, 1] = (torch.rand(n) > 0.5).float()  # 0/1
    x[:, 3] = torch.where(torch.rand(n) > 0.3, 2.5, -0.7)  # two arbitrary values
    net = SoftRuleList(
        f,
        k,
        c,
        -torch.rand(m, k, f) * 2,
        torch.rand(m, k, f) * 2,
        torch.rand(m, k) + 1,
        torch.randn(m, k + 1, c),
    )
    with torch.no_grad():
        net.weight.uniform_(-0.2, 1.0)  # some weights switched off by relu
    dense = net.activations(x, 0.3)
    net.set_two_valued(torch.tensor([1, 3]), torch.tensor([0.0, -0.7]), torch.tensor([1.0, 2.5]))
    fast = net.activations(net.split_inputs(x), 0.3)
    assert torch.allclose(dense, fast, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("t", [0.3, 1e-3])
def test_fused_dense_denominator_matches_autograd(t: float) -> None:
    """Values and gradients of the fused (M, k, F, B) layout equal autograd through `soft_predicate`, also at a
    temperature where most exp() arguments fall below the lower clip."""
    from models.relaxations import dense_denominator

    torch.manual_seed(0)
    m, b_, k, f = 2, 64, 3, 5
    x = torch.randn(b_, f) * (1.0 if t > 0.1 else 0.01)  # at t=1e-3 rows near the bounds keep gradients
    a = (-torch.rand(m, k, f)).requires_grad_()
    b = torch.rand(m, k, f).requires_grad_()
    w = torch.rand(m, k, f).requires_grad_()
    eta = torch.rand(m, k) * 0.01
    g = torch.randn(m, b_, k)
    (dense_denominator(x, a, b, w, eta, t) * g).sum().backward()
    fused = [a.grad.clone(), b.grad.clone(), w.grad.clone()]
    a.grad = b.grad = w.grad = None
    pi = soft_predicate(x[None, :, None, :], a[:, None], b[:, None], t)
    ref = torch.einsum("mbrf,mrf->mbr", 1 / (pi + eta[:, None, :, None]), w)
    (ref * g).sum().backward()
    assert torch.allclose(dense_denominator(x, a, b, w, eta, t), ref, rtol=1e-4)
    assert bool((a.grad != 0).any()) and bool((b.grad != 0).any())
    for got, want in zip(fused, [a.grad, b.grad, w.grad], strict=True):
        assert torch.allclose(got, want, rtol=1e-3, atol=1e-5)


def test_zero_temperature_split_path_equals_dense_path() -> None:
    torch.manual_seed(1)
    m, k, f, c, n = 2, 4, 5, 2, 200
    x = torch.randn(n, f)
    x[:, 2] = (torch.rand(n) > 0.5).float()
    net = SoftRuleList(
        f,
        k,
        c,
        -torch.rand(m, k, f),
        torch.rand(m, k, f),
        torch.rand(m, k) + 1,
        torch.randn(m, k + 1, c),
    )
    dense_sel, dense_cls = net.zero_temperature(x)
    net.set_two_valued(torch.tensor([2]), torch.tensor([0.0]), torch.tensor([1.0]))
    fast_sel, fast_cls = net.zero_temperature(x)
    assert torch.equal(dense_sel, fast_sel) and torch.equal(dense_cls, fast_cls)
    x[0, 2] = 0.5  # a value outside the two training values falls back to the dense path
    assert net.zero_temperature(x)[0].shape == (m, n)

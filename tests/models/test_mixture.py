"""Sparsemax and the joint-range Gaussian mixtures of torchik.models.mixture."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from torchik.models.mixture import (
    JointDomain,
    _log_ndtr,
    mixture_log_prob,
    mixture_sample,
    scale_range,
    sparsemax,
)

F64 = torch.float64
LIMITED = JointDomain(-1.0, 2.0, circular=False)
CIRCLE = JointDomain(-math.pi, math.pi, circular=True)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------------------- sparsemax
def _simplex_projection(z: torch.Tensor) -> torch.Tensor:
    """Reference: argmin ||p - z|| on the simplex by bisection on the threshold tau."""
    lo, hi = z.min() - 1.0, z.max()
    for _ in range(200):
        tau = (lo + hi) / 2
        if torch.clamp(z - tau, min=0).sum() > 1:
            lo = tau
        else:
            hi = tau
    return torch.clamp(z - (lo + hi) / 2, min=0)


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_sparsemax_sums_to_one_and_is_sparse(dtype):
    z = 3 * torch.randn(64, 50, generator=_gen(), dtype=dtype)
    p = sparsemax(z)
    assert (p >= 0).all()
    torch.testing.assert_close(p.sum(-1), torch.ones(64, dtype=dtype))
    zeros = (p == 0).sum(-1)
    assert (zeros > 0).all()  # logits spread this wide always leave components out
    assert zeros.float().mean() > 25


def test_sparsemax_is_the_simplex_projection():
    z = torch.randn(20, 7, generator=_gen(1), dtype=F64)
    p = sparsemax(z)
    for row, expected in zip(z, p, strict=True):
        torch.testing.assert_close(expected, _simplex_projection(row), atol=1e-12, rtol=0)


def test_sparsemax_dim_shift_and_inf():
    z = torch.randn(3, 5, 4, generator=_gen(2), dtype=F64)
    torch.testing.assert_close(sparsemax(z, dim=1), sparsemax(z.transpose(1, 2)).transpose(1, 2))
    torch.testing.assert_close(sparsemax(z + 7.5), sparsemax(z))
    masked = torch.tensor([0.3, -math.inf, 0.1, -math.inf], dtype=F64)
    torch.testing.assert_close(masked.new_tensor([0.6, 0.0, 0.4, 0.0]), sparsemax(masked))
    # equal logits: uniform weights; one dominant logit: a one-hot
    torch.testing.assert_close(
        sparsemax(torch.zeros(4, dtype=F64)), torch.full((4,), 0.25, dtype=F64)
    )
    assert sparsemax(torch.tensor([0.0, 10.0])).tolist() == [0.0, 1.0]


def test_sparsemax_gradient():
    z = torch.randn(6, 8, generator=_gen(3), dtype=F64, requires_grad=True)
    assert (sparsemax(z.detach()) == 0).any()  # the check crosses zero and non-zero weights
    assert torch.autograd.gradcheck(sparsemax, (z,))
    assert torch.autograd.gradgradcheck(lambda x: sparsemax(x, dim=0), (z,))


# ---------------------------------------------------------------------------- domains
def test_domain_from_limits():
    assert JointDomain.from_limits(-math.pi, math.pi).circular
    assert JointDomain.from_limits(-3.14159, 3.14159).circular  # URDF-rounded pi
    assert JointDomain.from_limits(-1.0, 1.0, continuous=True).circular
    assert not JointDomain.from_limits(-2.8973, 2.8973).circular
    with pytest.raises(ValueError, match="must exceed"):
        JointDomain(1.0, 1.0, False)
    assert scale_range(CIRCLE, 1e-3) == (1e-3, math.pi / 2)
    assert scale_range(LIMITED, 1e-3) == (1e-3, 3.0)


def test_project():
    x = torch.tensor([-7.0, -math.pi, 0.5, math.pi, 10.0], dtype=F64)
    wrapped = CIRCLE.project(x)
    assert ((wrapped >= -math.pi) & (wrapped < math.pi)).all()
    torch.testing.assert_close(torch.cos(wrapped), torch.cos(x))
    torch.testing.assert_close(LIMITED.project(x), x.clamp(-1.0, 2.0))


# ---------------------------------------------------------------------------- log density
def _params(k: int, seed: int, zero: int | None = 1):
    g = _gen(seed)
    w = torch.rand(k, generator=g, dtype=F64)
    if zero is not None:
        w[zero] = 0.0
    return (
        w / w.sum(),
        3 * torch.rand(k, generator=g, dtype=F64) - 1.5,
        0.05 + torch.rand(k, generator=g, dtype=F64),
    )


def _direct_log_prob(x: float, w, mu, sigma, domain: JointDomain) -> float:
    """The mixture density written out term by term with math.erf (float64)."""

    def phi(t: float) -> float:
        return 0.5 * (1.0 + math.erf(t / math.sqrt(2.0)))

    def normal(t: float, m: float, s: float) -> float:
        return math.exp(-0.5 * ((t - m) / s) ** 2) / (s * math.sqrt(2 * math.pi))

    total = 0.0
    for wk, mk, sk in zip(w.tolist(), mu.tolist(), sigma.tolist(), strict=True):
        if domain.circular:  # the wrapped normal: sum of images over many turns
            total += wk * sum(normal(x + 2 * math.pi * m, mk, sk) for m in range(-6, 7))
        else:
            z = phi((domain.upper - mk) / sk) - phi((domain.lower - mk) / sk)
            total += wk * normal(x, mk, sk) / z
    return math.log(total)


@pytest.mark.parametrize("domain", [LIMITED, CIRCLE], ids=["limited", "circular"])
def test_log_prob_equals_direct_computation(domain):
    w, mu, sigma = _params(5, seed=4)
    sigma = sigma.clamp_max(math.pi / 2)
    xs = torch.linspace(domain.lower, domain.upper, 23, dtype=F64)
    got = mixture_log_prob(xs, w.expand(23, 5), mu.expand(23, 5), sigma.expand(23, 5), domain)
    expected = [_direct_log_prob(x, w, mu, sigma, domain) for x in xs.tolist()]
    torch.testing.assert_close(got, torch.tensor(expected, dtype=F64), atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("domain", [LIMITED, CIRCLE], ids=["limited", "circular"])
def test_density_integrates_to_one(domain):
    w, mu, sigma = _params(4, seed=5)
    mu = mu * 3  # means outside the limits too
    sigma = sigma.clamp_max(math.pi / 2)
    xs = torch.linspace(domain.lower, domain.lower + domain.span, 200001, dtype=F64)
    dens = mixture_log_prob(
        xs, w.expand(len(xs), 4), mu.expand(len(xs), 4), sigma.expand(len(xs), 4), domain
    ).exp()
    assert torch.trapezoid(dens, xs).item() == pytest.approx(1.0, abs=1e-6)


def test_circular_log_prob_is_periodic_and_limited_is_zero_outside():
    w, mu, sigma = _params(3, seed=6)
    x = torch.tensor([0.3, 2.9, -3.0], dtype=F64)
    args = (w.expand(3, 3), mu.expand(3, 3), sigma.expand(3, 3))
    torch.testing.assert_close(
        mixture_log_prob(x + 4 * math.pi, *args, CIRCLE), mixture_log_prob(x, *args, CIRCLE)
    )
    out = mixture_log_prob(torch.tensor([-1.5, 0.0, 2.5], dtype=F64), *args, LIMITED)
    assert out[0] == -math.inf and out[2] == -math.inf and out[1].isfinite()


def test_far_tails_stay_finite_in_float32():
    # means outside the limits with small scales: Phi(b) - Phi(a) = Phi(-20) - Phi(-320)
    # underflows to 0 in float32 if computed naively
    means = torch.tensor([[2.2, -1.2, 0.5]])
    scales = torch.tensor([[1e-2, 1e-2, 1e-2]])
    w = torch.tensor([[0.5, 0.5, 0.0]])
    lp = mixture_log_prob(torch.tensor([1.99]), w, means, scales, LIMITED)
    lp64 = mixture_log_prob(
        torch.tensor([1.99], dtype=F64), w.double(), means.double(), scales.double(), LIMITED
    )
    assert lp.isfinite().all()
    torch.testing.assert_close(lp.double(), lp64, rtol=1e-5, atol=0)


def test_log_ndtr_matches_torch_and_keeps_its_gradient_in_the_far_tail():
    x = torch.tensor([-5e4, -1e3, -40.0, -20.5, -19.5, -3.0, 0.0, 4.0], dtype=F64)
    torch.testing.assert_close(_log_ndtr(x), torch.special.log_ndtr(x), rtol=1e-12, atol=1e-8)
    assert torch.autograd.gradcheck(_log_ndtr, (x.clone().requires_grad_(),))
    x32 = x.float().requires_grad_()
    (grad,) = torch.autograd.grad(_log_ndtr(x32).sum(), x32)
    # d/dx log Phi(x) = phi(x) / Phi(x), about -x in the far left tail
    torch.testing.assert_close(grad[:2], -x32[:2].detach(), rtol=1e-5, atol=0)


def test_tiny_scales_far_from_a_limit_keep_gradients_finite_in_float32():
    # a component of scale 1e-4 in the middle of a 3-rad range: (lower - mean) / scale = -15000,
    # where torch's own log_ndtr backward is garbage in float32 (this made training diverge)
    means = torch.tensor([[0.5, 1.0]], requires_grad=True)
    raw = torch.tensor([[-12.0, -12.0]], requires_grad=True)
    scales = 1e-4 + torch.sigmoid(raw)
    w = torch.tensor([[0.5, 0.5]])
    lp = mixture_log_prob(torch.tensor([0.50001]), w, means, scales, LIMITED)
    grads = torch.autograd.grad(lp.sum(), (means, raw))
    assert lp.isfinite().all() and all(g.isfinite().all() for g in grads)
    means64 = means.detach().double().requires_grad_()
    raw64 = raw.detach().double().requires_grad_()
    x64, scales64 = torch.tensor([0.50001], dtype=F64), 1e-4 + torch.sigmoid(raw64)
    lp64 = mixture_log_prob(x64, w.double(), means64, scales64, LIMITED)
    grads64 = torch.autograd.grad(lp64.sum(), (means64, raw64))
    for g, g64 in zip(grads, grads64, strict=True):
        torch.testing.assert_close(g.double(), g64, rtol=1e-2, atol=0)  # float32 x - mean


def test_sparsemax_of_nan_is_nan_not_an_index_error():
    assert sparsemax(torch.tensor([[0.0, math.nan], [math.inf, 0.0]])).isnan().any()


@pytest.mark.parametrize("domain", [LIMITED, CIRCLE], ids=["limited", "circular"])
def test_gradients_with_zero_weights_are_finite_and_exact(domain):
    g = _gen(7)
    logits = (2 * torch.randn(10, 6, generator=g, dtype=F64)).requires_grad_()
    means = torch.randn(10, 6, generator=g, dtype=F64).requires_grad_()
    raw_scale = torch.randn(10, 6, generator=g, dtype=F64).requires_grad_()
    x = domain.lower + domain.span * torch.rand(10, generator=g, dtype=F64)
    assert (sparsemax(logits.detach()) == 0).any()

    def nll(logits, means, raw_scale):
        scales = 0.05 + torch.sigmoid(raw_scale)
        return -mixture_log_prob(x, sparsemax(logits), means, scales, domain)

    out = nll(logits, means, raw_scale)
    assert out.isfinite().all()
    grads = torch.autograd.grad(out.sum(), (logits, means, raw_scale))
    assert all(gr.isfinite().all() for gr in grads)
    assert torch.autograd.gradcheck(nll, (logits, means, raw_scale))


# ---------------------------------------------------------------------------- sampling
@pytest.mark.parametrize("domain", [LIMITED, CIRCLE], ids=["limited", "circular"])
def test_samples_follow_the_density(domain):
    scipy_stats = pytest.importorskip("scipy.stats")
    w, mu, sigma = _params(4, seed=8)
    sigma = sigma.clamp_max(math.pi / 2)
    n = 20000
    x = mixture_sample(w.expand(n, 4), mu.expand(n, 4), sigma.expand(n, 4), domain, _gen(9))
    assert x.shape == (n,)
    assert ((x >= domain.lower) & (x <= domain.upper)).all()
    grid = torch.linspace(domain.lower, domain.lower + domain.span, 20001, dtype=F64)
    dens = mixture_log_prob(
        grid, w.expand(len(grid), 4), mu.expand(len(grid), 4), sigma.expand(len(grid), 4), domain
    ).exp()
    cdf = torch.cat((grid.new_zeros(1), torch.cumulative_trapezoid(dens, grid)))

    def model_cdf(t):
        return np.interp(t, grid.numpy(), cdf.numpy())

    assert scipy_stats.kstest(x.numpy(), model_cdf).pvalue > 1e-3


def test_zero_weight_components_are_never_drawn():
    w = torch.tensor([0.0, 1.0, 0.0], dtype=F64).expand(5000, 3)
    mu = torch.tensor([-0.9, 0.5, 1.9], dtype=F64).expand(5000, 3)
    sigma = torch.full((5000, 3), 0.01, dtype=F64)
    x = mixture_sample(w, mu, sigma, LIMITED, _gen(10))
    assert (x - 0.5).abs().max() < 0.1


def test_sampling_is_reproducible_and_extreme_means_stay_inside():
    mu = torch.tensor([[5.0, -5.0]]).expand(1000, 2)
    sigma = torch.full((1000, 2), 1e-3)
    w = torch.tensor([[0.5, 0.5]]).expand(1000, 2)
    a = mixture_sample(w, mu, sigma, LIMITED, _gen(11))
    b = mixture_sample(w, mu, sigma, LIMITED, _gen(11))
    assert torch.equal(a, b)
    assert a.isfinite().all() and ((a >= -1.0) & (a <= 2.0)).all()
    # all the truncated mass of each component sits at the limit nearer its mean
    assert ((a - 2.0).abs() < 0.01).logical_or((a + 1.0).abs() < 0.01).all()

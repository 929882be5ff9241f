"""Rejection-sampled posteriors against the exact one-joint posterior; posterior metrics."""

from __future__ import annotations

import math

import pytest
import torch

from torchik.description import RAIL_ARM_PRIOR_STD
from torchik.learn import metrics as m
from torchik.learn import one_joint_posterior, rejection_sample, rejection_sample_widening
from torchik.robot import PlanarArm

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _target(rho: float, angle: float) -> torch.Tensor:
    return torch.tensor([[rho * math.cos(angle), rho * math.sin(angle)]], dtype=F64)


@pytest.mark.parametrize(
    ("rho", "angle", "std", "radius"),
    [
        (0.95, 0.3, 0.5, 0.1),
        (1.0, 3.0, 1.0, 0.2),
        (0.5, 0.0, 0.5, 0.6),  # the ball holds the base, yet only |θ| <= 0.473 is accepted
        (0.05, 0.0, 0.5, 1.2),  # the ball holds the whole circle: the prior
    ],
)
def test_one_joint_matches_the_exact_posterior(rho, angle, std, radius):
    arm = PlanarArm(1).double()
    n = 10_000
    target = _target(rho, angle)
    post = rejection_sample(arm, [std], target, n, radius, generator=_gen(0), num_threads=1)
    exact = one_joint_posterior(_target(rho, angle)[0].tolist(), std, radius)
    theta = post.samples[0, :, 0]
    assert bool(post.complete.all()) and post.radius.tolist() == [radius]
    se = exact.std / math.sqrt(n)
    assert abs(theta.mean().item() - exact.mean) < 5 * se
    assert abs(theta.std().item() / exact.std - 1) < 0.03
    ks = (exact.cdf(theta.sort().values) - torch.arange(1, n + 1, dtype=F64) / n).abs().max()
    assert ks < 1.63 / math.sqrt(n)  # Kolmogorov-Smirnov at the 1 % level
    rate = post.acceptance_rate.item()  # binomial: accepted of draws
    draws = post.draws.item()
    assert abs(rate - exact.mass) < 5 * math.sqrt(exact.mass / draws)


@pytest.mark.parametrize("radius", [1e-2, 1e-5, 1e-8, 1e-10, 1e-12])
def test_one_joint_posterior_keeps_its_precision_for_tiny_radii(radius):
    """acos((l² + ρ² - r²) / (2 l ρ)) cancels for ρ near l: α was 0 at radius <= 1e-8."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 60
    for rho, length in ((1.0, 1.0), (1.0 + radius / 2, 1.0), (0.7 - radius / 3, 0.7)):
        exact = one_joint_posterior([rho, 0.0], 0.4, radius, length)  # φ = 0: (-α, α) exactly
        r, p, l = mpmath.mpf(radius), mpmath.mpf(rho), mpmath.mpf(length)
        alpha = mpmath.acos((l**2 + p**2 - r**2) / (2 * l * p))
        mass = mpmath.ncdf(alpha / mpmath.mpf(0.4)) - mpmath.ncdf(-alpha / mpmath.mpf(0.4))
        assert exact.intervals[1] == pytest.approx((-float(alpha), float(alpha)), rel=1e-12)
        assert exact.mass == pytest.approx(float(mass), rel=1e-12)


def test_one_joint_posterior_of_a_ball_around_the_base():
    """The refusal said 'every angle is accepted' wherever the ball held the base."""
    arc = one_joint_posterior([0.5, 0.0], 0.5, 0.6)
    assert arc.intervals[1] == pytest.approx((-math.acos(0.89), math.acos(0.89)), rel=1e-12)
    whole = one_joint_posterior([0.05, 0.0], 0.5, 1.2)
    assert whole.intervals == ((-math.inf, math.inf),) and whole.mass == 1.0
    assert (whole.mean, whole.std) == (0.0, 0.5)
    with pytest.raises(ValueError, match=r"no angle reaches \[0.05, 0.0\] within 0.1$"):
        one_joint_posterior([0.05, 0.0], 0.5, 0.1)
    none = rejection_sample(PlanarArm(1).double(), [0.5], _target(0.05, 0.0), 4, 0.1,
                            max_draws=1 << 14, generator=_gen(0), num_threads=1)  # fmt: skip
    assert none.accepted.tolist() == [0]


def test_one_joint_exact_moments_by_quadrature():
    exact = one_joint_posterior([0.0, -1.05], 0.4, 0.2)
    grid = torch.linspace(-4, 4, 400_001, dtype=F64)
    density = torch.zeros_like(grid)
    for a, b in exact.intervals:
        density += ((grid >= a) & (grid <= b)) * torch.exp(-0.5 * (grid / 0.4) ** 2)
    density /= density.sum()
    mean = (grid * density).sum().item()
    assert abs(mean - exact.mean) < 1e-4
    assert abs(((grid - mean) ** 2 * density).sum().sqrt().item() - exact.std) < 1e-4
    with pytest.raises(ValueError, match="no angle"):
        one_joint_posterior([3.0, 0.0], 0.4, 0.2)


@pytest.mark.parametrize("arm", [PlanarArm(4), PlanarArm.rail_arm()], ids=["planar4", "rail"])
def test_samples_reach_their_targets_and_do_not_depend_on_other_targets(arm):
    arm = arm.double()
    std = [0.2] * 4 if not arm.rail else RAIL_ARM_PRIOR_STD
    scale = 0.5 * torch.tensor(std, dtype=F64)
    q = torch.randn(6, 4, generator=torch.Generator().manual_seed(1), dtype=F64) * scale
    targets = arm(q)
    run = dict(n_accept=200, radius=0.05, chunk=1 << 15)
    post = rejection_sample(arm, std, targets, generator=torch.Generator().manual_seed(2), **run)
    assert post.samples.shape == (6, 200, 4) and bool(post.complete.all())
    dist = (arm(post.samples) - targets[:, None]).norm(dim=-1)
    assert dist.max() <= 0.05
    assert (post.accepted >= 200).all() and (post.draws % (1 << 15) == 0).all()
    gen = torch.Generator().manual_seed(2)
    alone = rejection_sample(arm, std, targets[3:4], generator=gen, **run)
    torch.testing.assert_close(alone.samples[0], post.samples[3], rtol=0, atol=0)


def test_incomplete_targets_are_nan_and_widening_completes_them():
    arm = PlanarArm(2).double()
    targets = torch.tensor([[2.0, 0.0], [0.0, 1.9]], dtype=F64)  # the second is far in the tail
    gen = torch.Generator().manual_seed(3)
    post = rejection_sample(arm, [0.2, 0.2], targets, 50, 0.05, generator=gen, max_draws=1 << 14)
    assert post.complete.tolist() == [True, False]
    assert post.samples[1].isnan().any() and not post.samples[0].isnan().any()
    wide = rejection_sample_widening(
        arm, [0.2, 0.2], targets, 50, 0.05, generator=gen, max_draws=1 << 14, growth=2.0
    )
    assert bool(wide.complete.all()) and wide.radius[0] == 0.05 and wide.radius[1] > 0.05
    dist = (arm(wide.samples) - targets[:, None]).norm(dim=-1)
    assert (dist <= wide.radius[:, None]).all()


def test_many_targets_and_blocks_of_candidate_pairs(monkeypatch):
    import torchik.learn.posterior as posterior

    arm = PlanarArm(3).double()
    targets = arm(torch.randn(40, 3, generator=torch.Generator().manual_seed(4), dtype=F64) * 0.2)
    run = dict(n_accept=20, radius=0.1, chunk=1 << 12)
    full = rejection_sample(arm, [0.2] * 3, targets, generator=_gen(5), **run)
    monkeypatch.setattr(posterior, "_PAIR_BLOCK", 64)  # many blocks, same answer
    monkeypatch.setattr(posterior, "_MAX_CELLS", 50)  # coarse grid, same answer
    small = rejection_sample(arm, [0.2] * 3, targets, generator=_gen(5), **run)
    torch.testing.assert_close(small.samples, full.samples, rtol=0, atol=0)
    assert torch.equal(small.accepted, full.accepted)


# ---------------------------------------------------------------------------- metrics
def test_mmd_is_zero_for_a_set_against_itself_and_grows_with_a_shift():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 300, 4, generator=gen, dtype=F64) * 0.2
    assert m.mmd(x, x).abs().max() == 0
    y = torch.randn(3, 300, 4, generator=gen, dtype=F64) * 0.2
    values = [m.mmd(x, y + shift).mean().item() for shift in (0.0, 0.05, 0.1, 0.2, 0.4, 0.8)]
    assert all(a < b for a, b in zip(values[:-1], values[1:], strict=True))
    assert values[0] < 0.05 * values[-1]
    unbiased = m.mmd(x, y, unbiased=True)
    assert unbiased.abs().max() < 0.02 and (unbiased < m.mmd(x, y)).all()


def test_mmd_closed_form_and_blocks(monkeypatch):
    x = torch.zeros(1, 1, 2, dtype=F64)
    y = torch.tensor([[[3.0, 4.0]]], dtype=F64)  # |x - y|² = 25
    expected = 2 * sum(1.0 - h * h / (h * h + 25.0) for h in (0.05, 0.2, 0.9))
    torch.testing.assert_close(m.mmd(x, y), torch.tensor([expected], dtype=F64))
    a = torch.randn(5, 2, 7, 3, dtype=F64)
    b = torch.randn(5, 2, 9, 3, dtype=F64)
    whole = m.mmd(a, b)
    monkeypatch.setattr(m, "_MMD_BLOCK", 1)
    torch.testing.assert_close(m.mmd(a, b), whole)
    assert whole.shape == (5, 2)


def test_resimulation_error_is_zero_for_exact_samples_and_squared_otherwise():
    arm = PlanarArm(4).double()
    q = torch.randn(5, 10, 4, generator=torch.Generator().manual_seed(0), dtype=F64)
    targets = arm(q[:, 0])
    exact = q[:, :1].expand(5, 10, 4)
    assert m.resimulation_error(arm, exact, targets).abs().max() < 1e-24
    torch.testing.assert_close(
        m.resimulation_error(arm, exact, targets + torch.tensor([0.3, 0.4], dtype=F64)),
        torch.full((5,), 0.25, dtype=F64),
    )


def test_convex_hull_area_of_the_unit_square_trims_an_outlier():
    pytest.importorskip("scipy")
    grid = torch.linspace(0.1, 0.9, 5, dtype=F64)
    inner = torch.cartesian_prod(grid, grid)  # 25 points symmetric about (0.5, 0.5)
    corners = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=F64)
    square = torch.cat([corners, inner])
    torch.testing.assert_close(m.convex_hull_area(square, 100.0), torch.tensor(1.0, dtype=F64))
    with_outlier = torch.cat([square, torch.tensor([[50.0, 50.0]], dtype=F64)])
    assert m.convex_hull_area(with_outlier, 100.0) > 10
    torch.testing.assert_close(m.convex_hull_area(with_outlier), torch.tensor(1.0, dtype=F64))
    batch = torch.stack([square, 2 * square])
    areas = m.convex_hull_area(batch, 100.0)
    torch.testing.assert_close(areas, torch.tensor([1.0, 4.0], dtype=F64))
    line = torch.stack([grid, grid], dim=-1)
    assert m.convex_hull_area(line, 100.0) == 0


def test_convex_hull_area_does_not_depend_on_the_orientation():
    pytest.importorskip("scipy")
    corners = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=F64)
    c, s = math.cos(0.7), math.sin(0.7)
    turned = corners @ torch.tensor([[c, s], [-s, c]], dtype=F64) + 3.0
    diamond = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]], dtype=F64)
    for points, area in ((corners, 1.0), (turned, 1.0), (diamond, 2.0)):  # the lower median
        torch.testing.assert_close(m.convex_hull_area(points), torch.tensor(area, dtype=F64))


def test_convex_hull_area_leaves_nan_rows_out_per_target():
    pytest.importorskip("scipy")
    points = torch.randn(2, 60, 2, dtype=F64, generator=torch.Generator().manual_seed(0))
    holed = points.clone()
    holed[0, 5] = torch.nan  # rejection_sample fills an incomplete target with NaN rows
    holed[1, 7:, :] = torch.nan
    expected = [m.convex_hull_area(points[0, torch.arange(60) != 5]),
                m.convex_hull_area(points[1, :7])]  # fmt: skip
    torch.testing.assert_close(m.convex_hull_area(holed), torch.stack(expected))
    assert m.convex_hull_area(holed[0]) > 1  # one NaN point gave 0
    assert m.hull_selection(holed)[0, 5].item() is False
    nothing = torch.full((3, 2), torch.nan, dtype=F64)
    assert m.convex_hull_area(nothing).isnan()  # not one finite point: unknown
    assert m.convex_hull_area(torch.cat([nothing, points[0, :2]])) == 0  # too few points


def _refused(call, error, match):
    with pytest.raises(error, match=match) as caught:
        call()
    assert "\n" not in str(caught.value)


def test_rejection_sampling_refuses_bad_arguments_in_one_line():
    """Counts, targets, radii and priors are checked before torch meets them (chunk=inf and
    NaN, a list of targets: torch's errors, an AttributeError)."""
    arm = PlanarArm(2).double()
    targets = torch.tensor([[1.5, 0.5]], dtype=F64)
    run = {"prior_std": [0.5, 0.5], "targets": targets, "n_accept": 4, "radius": 0.1,
           "generator": _gen(0), "max_draws": 1 << 12, "chunk": 1 << 10}  # fmt: skip
    cases = [
        ({"chunk": math.inf}, TypeError, "chunk must be an int, got float inf"),
        ({"chunk": math.nan}, TypeError, "chunk must be an int, got float nan"),
        ({"chunk": 0}, ValueError, "chunk must be >= 1"),
        ({"targets": [0.0, 0.0, 0.0]}, TypeError, "targets must be a torch.Tensor, got list"),
        ({"targets": targets[0]}, ValueError, r"targets must have shape \(M, T\)"),
        ({"targets": targets.to("meta")}, ValueError, "targets is on the meta device"),
        ({"targets": targets * math.nan}, ValueError, "targets contain NaN"),
        ({"targets": torch.zeros(1, 3, dtype=F64)}, ValueError, r"forward must map q"),
        ({"n_accept": 0}, ValueError, "n_accept must be >= 1"),
        ({"n_accept": 10**12}, ValueError, "n_accept must be <="),
        ({"max_draws": -1}, ValueError, "max_draws must be >= 0"),
        ({"generator": 5}, TypeError, "generator must be a torch.Generator"),
        ({"radius": math.inf}, ValueError, "radius must be finite"),
        ({"targets": targets.float(), "radius": 1e300}, ValueError, "finite in torch.float32"),
        ({"radius": 0.0}, ValueError, "radius must be positive"),
        ({"radius": torch.ones(3, dtype=F64)}, ValueError, r"radius must be one number or \(1,\)"),
        ({"radius": "a"}, TypeError, "radius must be numbers"),
        ({"prior_std": [-0.5, 0.5]}, ValueError, "prior_std must be"),
        ({"prior_std": 0.5}, ValueError, r"prior_std must be \(D,\)"),
        ({"prior_std": ["a", 0.5]}, TypeError, "prior_std must be numbers"),
        ({"prior_mean": [0.0]}, ValueError, r"prior_mean must have shape \(2,\)"),
        ({"prior_mean": [math.nan, 0.0]}, ValueError, "prior_mean must be finite"),
    ]
    for bad, error, match in cases:
        _refused(lambda bad=bad: rejection_sample(arm, **{**run, **bad}), error, match)
    _refused(lambda: rejection_sample(3, **run), TypeError, "forward must be a callable")
    wide = {key: run[key] for key in ("prior_std", "targets", "n_accept", "radius")}
    widening = [
        ({"targets": [[1.5, 0.5]]}, TypeError, "targets must be a torch"),
        ({"growth": 0.5}, ValueError, "growth must be in"),
        ({"max_rounds": 0}, ValueError, "max_rounds must be >= 1"),
        ({"radius": None}, TypeError, "radius must be a number"),
        ({"chunk": math.inf}, TypeError, "chunk must be an int"),
    ]
    for bad, error, match in widening:
        _refused(lambda bad=bad: rejection_sample_widening(arm, **{**wide, **bad}), error, match)
    post = rejection_sample(arm, **{**run, "radius": torch.tensor([0.1], dtype=F64)})
    assert post.samples.shape == (1, 4, 2) and post.radius.tolist() == [0.1]


def test_one_joint_posterior_refuses_bad_arguments_in_one_line():
    """Values whose squares overflow (prior_std=-0.001 with length=1e300 raised OverflowError)
    or that are not numbers are refused, one line naming them."""
    good = {"target": [0.9, 0.3], "prior_std": 0.4, "radius": 0.2}
    cases = [
        ({"prior_std": -0.001, "length": 1e300}, ValueError, "prior_std must be in"),
        ({"length": 1e300}, ValueError, r"length must be in \[1e-100, 1e\+100\], got 1e\+300"),
        ({"length": 0}, ValueError, "length must be in"),
        ({"radius": None}, TypeError, "radius must be a number"),
        ({"prior_std": math.inf}, ValueError, "prior_std must be finite"),
        ({"target": "ab"}, ValueError, r"target must be two numbers \(x, y\)"),
        ({"target": [1.0, 2.0, 3.0]}, ValueError, "target must be two numbers"),
        ({"target": [math.nan, 0.0]}, ValueError, "target x must be finite"),
        ({"target": [0.0, 1e300]}, ValueError, "target y must be in"),
        ({"target": torch.zeros(2, device="meta")}, ValueError, "meta device"),
    ]
    for bad, error, match in cases:
        _refused(lambda bad=bad: one_joint_posterior(**{**good, **bad}), error, match)
    # reachable, but beyond what the prior's density holds in floats: no posterior to describe
    tail = one_joint_posterior([-1.0, 0.0], 1e-3, 0.01)
    assert tail.mass == 0.0
    for moment in ("mean", "std"):
        _refused(lambda moment=moment: getattr(tail, moment), ValueError, "no mass")
    exact = one_joint_posterior(torch.tensor([0.9, 0.3], dtype=F64), 0.4, 0.2)
    assert exact == one_joint_posterior(**good) and 0 < exact.mass < 1

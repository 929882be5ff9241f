"""Ground-truth IK posteriors by rejection sampling from the prior (approximate Bayesian
computation), and the exact posterior of a one-joint arm to test it against.

The posterior of joints ``q`` given an end point ``y*`` under a prior ``p(q)`` and a forward map
``f`` is approximated by the prior restricted to ``{q : |f(q) - y*| <= radius}``. Every accepted
sample is an exact draw from that restricted prior; the approximation is only the width of the
acceptance ball, so choose ``radius`` well below the scales the posterior is compared at (e.g.
0.01 for unit-link arms, whose posteriors span tenths of a radian).

One chunk of prior draws serves every target: the end points are matched against all targets
still short of samples at once, by a sweep over the targets sorted along their widest
coordinate (only pairs within ``radius`` along it have their distance computed), so the cost per
chunk is ``O(chunk log M + candidate pairs)`` instead of the ``chunk × M`` of a full distance
matrix.

Example:
    >>> arm = torchik.PlanarArm(4)
    >>> post = rejection_sample(arm, [0.2] * 4, torch.tensor([[3.8, 0.9]]), 1000, radius=0.02,
    ...                         generator=torch.Generator().manual_seed(0))
    >>> post.samples.shape, bool(post.complete.all())
    (torch.Size([1, 1000, 4]), True)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from torchik.checks import (
    check_float,
    check_generator,
    check_int,
    check_tensor,
    check_values,
    intra_op_threads,
    short_repr,
)
from torchik.robot.configuration import MAX_CONFIGURATIONS

__all__ = [
    "OneJointPosterior",
    "PosteriorSamples",
    "one_joint_posterior",
    "rejection_sample",
    "rejection_sample_widening",
]

_PAIR_BLOCK = 1 << 22  # candidate (sample, target) pairs held at once
_MAX_BINS = 1 << 20  # size of the lookup table of candidate ranges
_MAX_CELLS = 1 << 22  # size of the grid of cells near a target


@dataclass(frozen=True)
class PosteriorSamples:
    """What :func:`rejection_sample` returns.

    Attributes:
        samples: ``(M, n, D)`` accepted prior draws per target, in draw order; rows of a target
            that got fewer than ``n`` (``max_draws`` ran out) are NaN.
        targets: ``(M, T)`` the targets.
        radius: ``(M,)`` the acceptance radius of each target.
        accepted: ``(M,)`` draws within ``radius`` of each target among those examined for it
            (can exceed ``n``: the last chunk is counted whole).
        draws: ``(M,)`` prior draws examined for each target (a target stops being matched
            once it has ``n`` samples).
    """

    samples: Tensor
    targets: Tensor
    radius: Tensor
    accepted: Tensor
    draws: Tensor

    @property
    def acceptance_rate(self) -> Tensor:
        """``(M,)`` float64 ``accepted / draws``."""
        return self.accepted.double() / self.draws.clamp_min(1).double()

    @property
    def complete(self) -> Tensor:
        """``(M,)`` bool: the target got all ``n`` samples."""
        return self.accepted >= self.samples.shape[1]


def rejection_sample(
    forward: Callable[[Tensor], Tensor],
    prior_std: Sequence[float] | Tensor,
    targets: Tensor,
    n_accept: int,
    radius: float | Tensor,
    generator: torch.Generator | None = None,
    max_draws: int = 1 << 28,
    prior_mean: Sequence[float] | Tensor | None = None,
    chunk: int = 1 << 18,
    num_threads: int | None = None,
) -> PosteriorSamples:
    """``n_accept`` samples of ``N(prior_mean, diag(prior_std²))`` restricted to
    ``|forward(q) - target| <= radius``, for every target.

    Args:
        forward: ``q (C, D) -> (C, T)``, e.g. a :class:`torchik.PlanarArm`.
        prior_std: ``(D,)`` standard deviations.
        targets: ``(M, T)``; draws are made in its dtype and on its device.
        n_accept: samples kept per target (the first ones drawn).
        radius: acceptance radius in the units of ``forward``'s output: one for all targets or
            ``(M,)`` (e.g. wider for targets in the prior's tails, whose acceptance rate at a
            common radius would need billions of draws).
        generator: for the prior draws (default: torch's global RNG).
        max_draws: stop after this many prior draws even if some target is short.
        prior_mean: ``(D,)`` (default zeros).
        chunk: prior draws per batch.
        num_threads: torch intra-op threads while sampling (restored after; ``None`` keeps
            torch's setting). The work is elementwise passes over ``chunk`` rows; on a busy
            2-core machine one thread ran it ten times faster than two.

    Returns:
        A :class:`PosteriorSamples`; a target's samples do not depend on the other targets.

    Raises:
        TypeError: ``forward`` not callable, ``targets`` not a floating-point tensor,
            ``n_accept``, ``max_draws`` or ``chunk`` not an int, ``prior_std``, ``prior_mean``
            or ``radius`` not numbers, ``generator`` not a ``torch.Generator``.
        ValueError: ``targets`` not ``(M, T)`` finite values, ``n_accept`` or ``chunk`` out of
            ``[1, MAX_CONFIGURATIONS]`` (:data:`torchik.robot.configuration.MAX_CONFIGURATIONS`),
            ``max_draws`` negative, ``prior_std`` not ``(D,)`` finite and ``>= 0``,
            ``prior_mean`` not ``(D,)`` finite, ``radius`` not positive and finite in the
            targets' dtype or not one or ``(M,)``, ``forward`` not giving ``(C, T)``.
    """
    with intra_op_threads(num_threads):
        checked = _check_sampling(forward, prior_std, targets, n_accept, radius, generator,
                                  max_draws, prior_mean, chunk)  # fmt: skip
        return _rejection_sample(forward, targets, n_accept, generator, max_draws, chunk, *checked)


def _check_sampling(
    forward, prior_std, targets, n_accept, radius, generator, max_draws, prior_mean, chunk
) -> tuple[Tensor, Tensor, Tensor]:
    """The arguments of :func:`rejection_sample`, one line per refusal: ``(radii (M,), std
    (D,), mean (D,))``, in the targets' dtype and on their device."""
    if not callable(forward):
        raise TypeError(f"forward must be a callable q (C, D) -> (C, T), got {short_repr(forward)}")
    _check_targets(targets)
    check_int("n_accept", n_accept, 1, MAX_CONFIGURATIONS)
    check_int("chunk", chunk, 1, MAX_CONFIGURATIONS)
    check_int("max_draws", max_draws, 0)
    check_generator("generator", generator)
    like = {"dtype": targets.dtype, "device": targets.device}
    radii = _values("radius", radius, lambda r: torch.as_tensor(r, **like))
    if radii.dim() > 1 or (radii.dim() and len(radii) not in (1, len(targets))):
        raise ValueError(
            f"radius must be one number or ({len(targets)},), got {tuple(radii.shape)}"
        )
    radii = radii.expand(targets.shape[0]).clone()  # never an alias of the caller's tensor
    if not (radii > 0).all():
        raise ValueError(f"the radius must be positive, got {short_repr(radius)}")
    std = _values("prior_std", prior_std, lambda s: torch.as_tensor(s, **like))
    if std.dim() != 1 or not len(std) or (std < 0).any():
        raise ValueError(
            f"prior_std must be (D,) standard deviations >= 0, got {short_repr(prior_std)}"
        )
    if prior_mean is None:
        return radii, std, torch.zeros_like(std)
    mean = _values("prior_mean", prior_mean, lambda m: torch.as_tensor(m).to(std))
    if mean.shape != std.shape:
        raise ValueError(f"prior_mean must have shape {tuple(std.shape)}, got {tuple(mean.shape)}")
    return radii, std, mean


def _check_targets(targets: Any) -> None:
    """``targets``: ``(M, T)`` finite values with ``T >= 1``."""
    check_tensor("targets", targets)
    if targets.dim() != 2 or not targets.shape[1]:
        raise ValueError(f"targets must have shape (M, T) with T >= 1, got {tuple(targets.shape)}")
    if not bool(torch.isfinite(targets).all()):
        raise ValueError("targets contain NaN or infinite values")


def _values(name: str, value: Any, convert: Callable[[Any], Tensor]) -> Tensor:
    """``convert(value)`` if it holds finite values; else one line naming ``name``."""
    check_values(name, value)
    try:
        out = convert(value)
    except (TypeError, ValueError, OverflowError, RuntimeError):
        raise TypeError(f"{name} must be numbers, got {short_repr(value)}") from None
    if not bool(torch.isfinite(out).all()):
        raise ValueError(f"{name} must be finite in {out.dtype}, got {short_repr(value)}")
    return out


def _rejection_sample(
    forward, targets, n_accept, generator, max_draws, chunk, radii, std, mean
) -> PosteriorSamples:
    m, d = targets.shape[0], std.shape[0]
    samples = targets.new_full((m, n_accept, d), math.nan)
    accepted = torch.zeros(m, dtype=torch.long, device=targets.device)
    draws = torch.zeros_like(accepted)
    active, total = torch.arange(m, device=targets.device), 0
    while active.numel() and total < max_draws:
        size = min(chunk, max_draws - total)
        noise = torch.randn(size, d, generator=generator, dtype=std.dtype, device=std.device)
        q = mean + std * noise
        with torch.no_grad():
            y = forward(q)
        if not isinstance(y, Tensor) or y.shape != (size, targets.shape[1]):
            got = tuple(y.shape) if isinstance(y, Tensor) else type(y).__name__
            raise ValueError(f"forward must map q ({size}, {d}) to ({size}, "
                             f"{targets.shape[1]}) like the targets, got {got}")  # fmt: skip
        rows, cols = _pairs_within(y, targets[active], radii[active])
        _store(samples, accepted, q, rows, active[cols])
        draws[active] += size
        total += size
        active = active[accepted[active] < n_accept]
    return PosteriorSamples(samples, targets, radii, accepted, draws)


def rejection_sample_widening(
    forward: Callable[[Tensor], Tensor],
    prior_std: Sequence[float] | Tensor,
    targets: Tensor,
    n_accept: int,
    radius: float,
    max_draws: int = 1 << 24,
    growth: float = 2.0,
    max_rounds: int = 12,
    **options: Any,
) -> PosteriorSamples:
    """:func:`rejection_sample` with a bounded budget per round: targets that get fewer than
    ``n_accept`` samples in ``max_draws`` draws are sampled again from scratch with their radius
    multiplied by ``growth``, until all are complete (or ``max_rounds``).

    Each target's samples come from a single radius, reported per target in ``radius``; targets
    in the prior's tails get wider ones. ``draws`` and ``accepted`` are those of the round that
    was kept. ``options`` go to :func:`rejection_sample` (``generator``, ``num_threads``, ...).

    Raises:
        TypeError, ValueError: as :func:`rejection_sample`; ``radius`` not positive and
            finite, ``growth`` not in ``[1, 1000]``, ``max_rounds`` not in ``[1, 100]``.
    """
    _check_targets(targets)
    radius = check_float("radius", radius, positive=True)
    check_float("growth", growth, 1.0, 1000.0)
    check_int("max_rounds", max_rounds, 1, 100)
    radii = targets.new_full((targets.shape[0],), radius)
    result = rejection_sample(
        forward, prior_std, targets, n_accept, radii, max_draws=max_draws, **options
    )
    for _ in range(max_rounds - 1):
        redo = (~result.complete).nonzero().squeeze(1)
        if redo.numel() == 0:
            break
        again = rejection_sample(
            forward,
            prior_std,
            targets[redo],
            n_accept,
            result.radius[redo] * growth,
            max_draws=max_draws,
            **options,
        )
        for name in ("samples", "radius", "accepted", "draws"):
            getattr(result, name)[redo] = getattr(again, name)
    return result


def _pairs_within(y: Tensor, targets: Tensor, radius: Tensor) -> tuple[Tensor, Tensor]:
    """Pairs ``(i, j)`` with ``|y_i - targets_j| <= radius_j``, sorted by ``j``, then ``i``.

    Two coarse filters before any distance is computed: a grid over the two widest coordinates
    marks the cells near some target (most draws land in no such cell and cost one gather),
    then a sweep along the widest coordinate pairs each remaining ``y_i`` with the targets
    within the largest radius of it along that coordinate.
    """
    spread = targets.std(dim=0) if targets.shape[0] > 1 else torch.ones_like(targets[0])
    axes = spread.argsort(descending=True)[:2].tolist()
    band = float(radius.max())
    near = _near_mask(y[:, axes], targets[:, axes], band).nonzero().squeeze(1)
    rows, cols = _sweep(y[near], targets, radius, axes[0], band)
    return near[rows], cols


def _near_mask(y: Tensor, targets: Tensor, band: float) -> Tensor:
    """``(C,)`` bool, False only where ``y_i (C, A)`` is farther than ``band`` from every
    target along some axis: a lookup in a grid of cells (width ``>= band``) marked around each
    target's cell."""
    low, high = targets.amin(dim=0) - band, targets.amax(dim=0) + band
    width = max(band, float((high - low).prod() / _MAX_CELLS) ** (1.0 / len(low)))
    shape = ((high - low) / width).floor().long() + 1
    strides = torch.tensor([int(shape[1:].prod()), 1][-len(low) :], device=y.device)
    cell = ((targets - low) / width).floor().long()
    steps = torch.cartesian_prod(*[torch.arange(-1, 2, device=y.device)] * len(low))
    around = (cell[:, None] + steps.reshape(-1, len(low))).clamp_min(0)
    around = torch.minimum(around, shape - 1)
    table = torch.zeros(int(shape.prod()), dtype=torch.bool, device=y.device)
    table[(around * strides).sum(dim=-1).flatten()] = True
    pos = ((y - low) / width).floor()
    inside = ((pos >= 0) & (pos < shape)).all(dim=-1)
    index = (torch.minimum(pos.clamp_min(0).long(), shape - 1) * strides).sum(dim=-1)
    return inside & table[index]


def _sweep(y: Tensor, targets: Tensor, radius: Tensor, axis: int, band: float):
    """The pairs of :func:`_pairs_within` by a sweep along ``axis`` only."""
    key, order = targets[:, axis].contiguous().sort()
    lo, count = _candidate_ranges(key, y[:, axis], band)
    hit = count.nonzero().squeeze(1)
    lo, count = lo[hit], count[hit]
    ends = count.cumsum(0)
    n_pairs = int(ends[-1]) if ends.numel() else 0
    marks = torch.arange(_PAIR_BLOCK, max(n_pairs, _PAIR_BLOCK), _PAIR_BLOCK, device=ends.device)
    cuts = [0, *torch.searchsorted(ends, marks).tolist(), hit.numel()]  # ~_PAIR_BLOCK pairs each
    parts = [
        _check_pairs(y, targets, order, hit[a:b], lo[a:b], count[a:b], radius)
        for a, b in zip(cuts[:-1], cuts[1:], strict=True)
    ]
    rows, cols = (torch.cat(p) for p in zip(*parts, strict=True))
    cols, perm = cols.sort(stable=True)  # rows ascend within each block and blocks are in order
    return rows[perm], cols


def _candidate_ranges(key: Tensor, coord: Tensor, band: float) -> tuple[Tensor, Tensor]:
    """For each ``coord (C,)``: start and count of the sorted ``key (M,)`` within ``band`` (and
    a few more: whole bins of width ``>= band`` are looked up)."""
    width = max(band, float(key[-1] - key[0]) / _MAX_BINS)
    origin, n_bins = float(key[0]) - band, int((float(key[-1] - key[0]) + 2 * band) / width) + 1
    edges = origin + width * torch.arange(n_bins + 1, dtype=key.dtype, device=key.device)
    table_lo = torch.searchsorted(key, edges[:-1] - band)
    table_hi = torch.searchsorted(key, edges[1:] + band, right=True)
    bins = ((coord - origin) / width).floor()
    inside = (bins >= 0) & (bins < n_bins)  # outside every bin: no key within band
    bins = bins.clamp(0, n_bins - 1).long()
    lo = table_lo[bins]
    return lo, torch.where(inside, table_hi[bins] - lo, 0)


def _check_pairs(y, targets, order, rows, lo, count, radius) -> tuple[Tensor, Tensor]:
    """The candidate pairs of ``rows`` (sorted targets ``lo .. lo + count``) that are within."""
    starts = (count.cumsum(0) - count).repeat_interleave(count)
    offset = torch.arange(starts.numel(), device=y.device) - starts
    cols = order[lo.repeat_interleave(count) + offset]
    rows = rows.repeat_interleave(count)
    keep = (y[rows] - targets[cols]).square().sum(dim=-1) <= radius[cols].square()
    return rows[keep], cols[keep]


def _store(samples: Tensor, accepted: Tensor, q: Tensor, rows: Tensor, cols: Tensor) -> None:
    """Append the accepted draws ``q[rows]`` to their targets ``cols`` (sorted), up to ``n``."""
    if cols.numel() == 0:
        return
    targets, counts = cols.unique_consecutive(return_counts=True)
    rank = torch.arange(cols.numel(), device=cols.device)
    rank -= (counts.cumsum(0) - counts).repeat_interleave(counts)
    slot = accepted[cols] + rank
    keep = slot < samples.shape[1]
    samples[cols[keep], slot[keep]] = q[rows[keep]]
    accepted[targets] += counts


# ---------------------------------------------------------------------------- one joint
@dataclass(frozen=True)
class OneJointPosterior:
    """The prior ``N(0, prior_std²)`` of one angle restricted to a union of intervals.

    Attributes:
        prior_std: the prior's standard deviation.
        intervals: disjoint ``(lo, hi)`` angle intervals (radians), ascending.
    """

    prior_std: float
    intervals: tuple[tuple[float, float], ...]

    def _phi(self, x: float) -> float:  # the prior's CDF
        return 0.5 * (1.0 + math.erf(x / (self.prior_std * math.sqrt(2.0))))

    def _pdf(self, x: float) -> float:
        s = self.prior_std
        return math.exp(-0.5 * (x / s) ** 2) / (s * math.sqrt(2.0 * math.pi))

    def _interval_mass(self, a: float, b: float) -> float:
        """``Phi(b) - Phi(a)`` without forming ``1 + erf``: erf near 0, erfc in the tails, so a
        narrow interval keeps its relative precision."""
        k = self.prior_std * math.sqrt(2.0)
        if a >= 0.0:
            return 0.5 * (math.erfc(a / k) - math.erfc(b / k))
        if b <= 0.0:
            return 0.5 * (math.erfc(-b / k) - math.erfc(-a / k))
        return 0.5 * (math.erf(b / k) - math.erf(a / k))

    def _xpdf(self, x: float) -> float:  # x * pdf(x), 0 at an infinite end
        return 0.0 if math.isinf(x) else x * self._pdf(x)

    @property
    def mass(self) -> float:
        """Prior probability of the intervals (the acceptance rate)."""
        return sum(self._interval_mass(a, b) for a, b in self.intervals)

    @property
    def mean(self) -> float:
        """The posterior's mean angle (rad).

        Raises:
            ValueError: the prior has no mass on the accepted angles (no posterior).
        """
        return (
            self.prior_std**2
            * sum(self._pdf(a) - self._pdf(b) for a, b in self.intervals)
            / self._some_mass()
        )

    def _some_mass(self) -> float:
        """:attr:`mass`, refused where it is 0 (the target out of reach, or the accepted
        angles beyond what the prior's density holds in floats): one line, not a division by
        zero."""
        mass = self.mass
        if not mass > 0.0:
            raise ValueError("the prior has no mass on the accepted angles: no posterior "
                             "(the target is out of reach within radius, or too far out in "
                             "the prior's tail)")  # fmt: skip
        return mass

    @property
    def std(self) -> float:
        s2 = self.prior_std**2
        edges = sum(self._xpdf(a) - self._xpdf(b) for a, b in self.intervals)
        return math.sqrt(s2 * (1.0 + edges / self._some_mass()) - self.mean**2)

    def cdf(self, theta: Tensor) -> Tensor:
        """The posterior CDF at ``theta (...)``, in ``theta``'s dtype."""
        s = self.prior_std
        total = torch.zeros_like(theta)
        for a, b in self.intervals:
            inside = theta.clamp(a, b)
            total += torch.special.ndtr(inside / s) - self._phi(a)
        return total / self._some_mass()


_SCALE = 1e100  # the largest magnitude one_joint_posterior takes (1 / _SCALE: the least)


def one_joint_posterior(
    target: Sequence[float], prior_std: float, radius: float, length: float = 1.0
) -> OneJointPosterior:
    """The exact :func:`rejection_sample` posterior of a one-joint arm ``y = l (cos θ, sin θ)``.

    With ``ρ = |y*|`` the distance to the target is ``d² = (ρ - l)² + 4 l ρ sin²((θ - φ) / 2)``
    (``φ`` the angle of ``y*``), so the accepted set ``d <= radius`` is: no angle where
    ``|ρ - l| > radius``; every angle where ``ρ + l <= radius`` (the posterior is the prior,
    one interval ``(-inf, inf)``); else the arcs ``|θ - φ - 2πk| <= α`` with
    ``sin²(α / 2) = (radius - (ρ - l)) (radius + (ρ - l)) / (4 l ρ)``. This form keeps α to a
    few ulps for tiny radii, where ``cos α = (l² + ρ² - radius²) / (2 l ρ)`` cancels (α was 0
    at ``radius <= 1e-8``). Copies ``k = -1, 0, 1`` are kept (farther ones have prior mass
    below ``Φ(-π / prior_std)``; use ``prior_std < 1``).

    ``target``, ``prior_std``, ``radius`` and ``length`` are finite, of magnitudes up to
    ``1e100`` (the last three in ``[1e-100, 1e100]``): their squares and products stay finite
    nonzero floats.

    Raises:
        ValueError: no angle reaches the target within ``radius``; ``target`` not two numbers,
            a value out of range.
        TypeError: ``prior_std``, ``radius`` or ``length`` not a number.
    """
    x, y = _point(target)
    for name, value in (("prior_std", prior_std), ("radius", radius), ("length", length)):
        check_float(name, value, 1 / _SCALE, _SCALE)
    rho, phi = math.hypot(x, y), math.atan2(y, x)
    gap = rho - length  # exact where rho and length are close (Sterbenz)
    if abs(gap) > radius:
        raise ValueError(f"no angle reaches {short_repr(target)} within {radius}")
    if rho + length <= radius:  # the ball holds the whole circle: the prior itself
        return OneJointPosterior(float(prior_std), ((-math.inf, math.inf),))
    half = (radius - gap) * (radius + gap) / (4.0 * length * rho)  # sin²(α / 2), in [0, 1)
    alpha = 2.0 * math.asin(math.sqrt(min(half, 1.0)))
    spans = [(phi - alpha + 2 * math.pi * k, phi + alpha + 2 * math.pi * k) for k in (-1, 0, 1)]
    return OneJointPosterior(float(prior_std), tuple(spans))


def _point(target: Any) -> tuple[float, float]:
    """``target`` as ``(x, y)``, two finite floats of magnitude up to ``_SCALE``."""
    check_values("target", target)
    try:
        x, y = (float(v) for v in ([] if isinstance(target, str | bytes) else target))
    except (TypeError, ValueError, OverflowError, RuntimeError):
        raise ValueError(f"target must be two numbers (x, y), got {short_repr(target)}") from None
    span = (-_SCALE, _SCALE)
    return check_float("target x", x, *span), check_float("target y", y, *span)

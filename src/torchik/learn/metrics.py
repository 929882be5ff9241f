"""Pure metric functions for IK solutions: errors, accuracy, limits, diversity, timing."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import torch
from torch import Tensor

from torchik.checks import check_float, check_int, check_tensor
from torchik.geometry.joints import joint_difference
from torchik.geometry.rotations import geodesic_distance

if TYPE_CHECKING:
    from torchik.robot.robot import Robot

__all__ = [
    "accuracy",
    "best_of_n",
    "convex_hull_area",
    "hull_selection",
    "limit_violations",
    "mean_pairwise_distance",
    "mmd",
    "position_error",
    "resimulation_error",
    "rotation_error",
    "timed",
]

R = TypeVar("R")

_PAIR_BLOCK = 1 << 24  # elements of one (rows, n, D) block of wrapped pairwise differences


def _fk(robot: Robot, q: Tensor, link: str) -> Tensor:
    """``(..., 4, 4)`` poses of ``link``, with ``q`` cast to the robot's dtype and device."""
    return robot.forward_kinematics(q.to(robot.device, robot.dtype), link)


def _broadcast(names: tuple[str, str], a: Tensor, b: Tensor, tail: tuple[int, int]) -> None:
    """The batch shapes of ``a`` and ``b`` (without their last ``tail`` dims) broadcast, or
    one line naming them."""
    shapes = a.shape[: a.dim() - tail[0]], b.shape[: b.dim() - tail[1]]
    try:
        torch.broadcast_shapes(*shapes)
    except RuntimeError:
        raise ValueError(f"{names[0]}'s batch shape {tuple(shapes[0])} and {names[1]}'s "
                         f"{tuple(shapes[1])} do not broadcast") from None  # fmt: skip


def _check_link_targets(robot: Robot, q: Tensor, link: str, name: str, target: Tensor,
                        shape: tuple[int | None, ...]) -> None:  # fmt: skip
    """The arguments of an error of one ``link`` at ``q (..., D)`` against ``target`` (named
    ``name``, trailing sizes ``shape``), whose batch shapes broadcast."""
    robot.link_index(link)  # one link, named
    check_tensor("q", q, (robot.dof,))
    check_tensor(name, target, shape)
    _broadcast(("q", name), q, target, (1, len(shape)))


def _mask(name: str, mask: Tensor | None, size: int) -> None:
    """``mask`` a ``(size,)`` bool tensor (or ``None``)."""
    if mask is not None:
        check_tensor(name, mask, (size,), dtype=torch.bool, batch=False)


def position_error(robot: Robot, q: Tensor, target_pos: Tensor, link: str) -> Tensor:
    """Distance between the origin of ``link`` at ``q`` and a target position.

    Args:
        robot: the robot.
        q: ``(..., D)`` joint values (any dtype; computed in the robot's).
        target_pos: ``(..., 3)`` positions, or ``(..., 2)`` planar ``x, y`` (then only ``x, y``
            are compared); broadcast against ``q``'s batch dims, e.g. ``q (B, n, D)`` with
            ``target_pos[:, None]`` of shape ``(B, 1, 3)``.
        link: the end link.

    Returns:
        ``(...)`` distances in metres, in the robot's dtype.

    Raises:
        ValueError: shapes other than these, batch shapes that do not broadcast, an unknown
            link.
        TypeError: arguments not floating-point tensors, a link not named by a str.
    """
    _check_link_targets(robot, q, link, "target_pos", target_pos, (None,))
    if target_pos.shape[-1] not in (2, 3):
        raise ValueError(f"target_pos must have shape (..., 3) or (..., 2), got "
                         f"{tuple(target_pos.shape)}")  # fmt: skip
    position = _fk(robot, q, link)[..., :3, 3]
    target = target_pos.to(position)
    return (position[..., : target.shape[-1]] - target).norm(dim=-1)


def rotation_error(robot: Robot, q: Tensor, target_rot: Tensor, link: str) -> Tensor:
    """Geodesic angle between the orientation of ``link`` at ``q`` and a target rotation.

    Args:
        robot: the robot.
        q: ``(..., D)`` joint values.
        target_rot: ``(..., 3, 3)`` rotation matrices, broadcast against ``q``'s batch dims.
        link: the end link.

    Returns:
        ``(...)`` angles in ``[0, pi]`` radians.

    Raises:
        ValueError: shapes other than these, batch shapes that do not broadcast, an unknown
            link.
        TypeError: arguments not floating-point tensors, a link not named by a str.
    """
    _check_link_targets(robot, q, link, "target_rot", target_rot, (3, 3))
    rotmat = _fk(robot, q, link)[..., :3, :3]
    return geodesic_distance(rotmat, target_rot.to(rotmat))


def accuracy(errors: Tensor, threshold: float) -> float:
    """Fraction of ``errors (...)`` strictly below ``threshold`` (NaN counts as a miss).

    Example:
        >>> accuracy(torch.tensor([0.01, 0.2, 0.05]), 0.1)
        0.6666666666666666
    """
    check_tensor("errors", errors)
    threshold = check_float("threshold", threshold)
    if errors.numel() == 0:
        raise ValueError("accuracy of no errors is undefined")
    return (errors < threshold).double().mean().item()


def limit_violations(q: Tensor, lower: Tensor, upper: Tensor, tol: float = 0.0) -> Tensor:
    """Number of joints outside ``[lower - tol, upper + tol]`` per configuration.

    Args:
        q: ``(..., D)`` joint values.
        lower, upper: ``(D,)`` limits (continuous joints: ``-pi``, ``pi``).
        tol: slack, e.g. for values rounded to float32.

    Returns:
        ``(...)`` int64 counts; ``(limit_violations(q, lo, hi) > 0).double().mean()`` is the
        fraction of configurations with any violation. NaN joints count as violations.

    Raises:
        ValueError: ``q`` not ``(..., D)`` with ``(D,)`` limits, ``tol`` negative.
        TypeError: arguments not floating-point tensors, ``tol`` not a number.
    """
    check_tensor("q", q, (None,))
    for name, limit in (("lower", lower), ("upper", upper)):
        check_tensor(name, limit, (q.shape[-1],), batch=False)
    tol = check_float("tol", tol, 0.0)
    lower, upper = lower.to(q), upper.to(q)
    inside = (q >= lower - tol) & (q <= upper + tol)
    return (~inside).sum(dim=-1)


def _pairwise_wrapped(x: Tensor, continuous: Tensor) -> Tensor:
    """Sum over pairs of ``|wrap(x_i - x_j)|`` for ``x (B, n, D)``: ``(B,)``, in blocks."""
    b, n, d = x.shape
    rows = max(1, _PAIR_BLOCK // max(1, n * d))
    total = x.new_zeros(b)
    for start in range(0, n, rows):
        diff = joint_difference(x[:, start : start + rows, None, :], x[:, None, :, :], continuous)
        total += diff.norm(dim=-1).sum(dim=(1, 2))
    return total


def mean_pairwise_distance(samples: Tensor, continuous: Tensor | None = None) -> Tensor:
    """Diversity: the mean Euclidean joint-space distance over pairs ``i != j`` of samples.

    Args:
        samples: ``(..., n, D)`` joint values, ``n`` samples per target.
        continuous: ``(D,)`` bool mask of continuous joints, whose differences are wrapped to
            ``(-pi, pi]`` (``None``: no wrapping).

    Returns:
        ``(...)``; zero where ``n < 2``.

    Raises:
        ValueError: ``samples`` of fewer than 2 dimensions, ``continuous`` not ``(D,)``.
        TypeError: ``samples`` not a floating-point tensor, ``continuous`` not bool.
    """
    check_tensor("samples", samples, min_dims=2)
    _mask("continuous", continuous, samples.shape[-1])
    n, d = samples.shape[-2:]
    if n < 2:
        return samples.new_zeros(samples.shape[:-2])
    flat = samples.reshape(-1, n, d)
    if continuous is None or not bool(continuous.any()):
        total = torch.cdist(flat, flat).sum(dim=(1, 2))
    else:
        total = _pairwise_wrapped(flat, continuous.to(samples.device))
    return (total / (n * (n - 1))).reshape(samples.shape[:-2])


def best_of_n(errors: Tensor, n: int | None = None) -> Tensor:
    """The smallest of the first ``n`` errors per target.

    Args:
        errors: ``(..., N)`` errors of ``N`` samples per target.
        n: how many samples to consider (default all ``N``); ``1 <= n <= N``.

    Returns:
        ``(...)``.

    Raises:
        ValueError: ``n`` outside ``[1, N]``, ``errors`` without a dimension.
        TypeError: ``errors`` not a floating-point tensor, ``n`` not an int.
    """
    check_tensor("errors", errors, min_dims=1)
    total = errors.shape[-1]
    n = total if n is None else check_int("n", n)
    if not 1 <= n <= total:
        raise ValueError(f"n must be in [1, {total}], got {n}")
    return errors[..., :n].amin(dim=-1)


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


_MAX_CALLS = 1_000_000
"""The most calls :func:`timed` makes: every timed call's seconds are kept for the median (a
typo's ``10**12`` would grow that list by gigabytes a minute, and run for days)."""


def timed(
    fn: Callable[..., R], *args: Any, repeat: int = 1, warmup: int = 0, **kwargs: Any
) -> tuple[R, float]:
    """Run ``fn(*args, **kwargs)`` and time it (CUDA is synchronised around each call).

    Args:
        fn: the function.
        repeat: timed calls, 1 to 1 000 000; the median is returned.
        warmup: untimed calls first, 0 to 1 000 000.

    Returns:
        ``(result of the last call, median seconds per call)``.

    Raises:
        TypeError: ``repeat`` or ``warmup`` not an int.
        ValueError: ``repeat`` or ``warmup`` out of its range.

    Example:
        >>> out, seconds = timed(torch.ones, 3, repeat=3)
    """
    repeat = check_int("repeat", repeat, 1, _MAX_CALLS)
    warmup = check_int("warmup", warmup, 0, _MAX_CALLS)
    for _ in range(warmup):
        fn(*args, **kwargs)
    times = []
    for _ in range(repeat):
        _sync()
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        _sync()
        times.append(time.perf_counter() - start)
    return result, statistics.median(times)


# ---------------------------------------------------------------------------- posteriors
_MMD_BLOCK = 1 << 24  # elements of one (rows, n, m) block of kernel values


def _imq_mean(x: Tensor, y: Tensor, bandwidths: tuple[float, ...], drop_diagonal: bool) -> Tensor:
    """Mean over pairs of ``sum_h h² / (h² + |x_i - y_j|²)`` for ``x (B, n, D)``, ``y (B, m, D)``.

    The distances are computed directly (not by the matrix-product expansion), so
    ``|x_i - x_i|`` is exactly 0 and ``mmd(x, x)`` is exactly 0.
    """
    d2 = torch.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist").square()
    k = cast(Tensor, sum(h * h / (h * h + d2) for h in bandwidths))
    n = d2.shape[-1]
    if drop_diagonal:
        return (k.sum(dim=(1, 2)) - k.diagonal(dim1=1, dim2=2).sum(dim=1)) / (n * (n - 1))
    return k.mean(dim=(1, 2))


def mmd(
    x: Tensor,
    y: Tensor,
    bandwidths: tuple[float, ...] = (0.05, 0.2, 0.9),
    unbiased: bool = False,
) -> Tensor:
    """Squared maximum mean discrepancy between two sample sets, with a sum of inverse
    multiquadric kernels ``k(a, b) = sum_h h² / (h² + |a - b|²)`` (Ardizzone et al.'s posterior
    mismatch; the BENCHMARKS.md bandwidths by default).

    Args:
        x: ``(..., n, D)`` samples (e.g. a model's, per target).
        y: ``(..., m, D)`` samples (e.g. the ground truth), same leading dims.
        bandwidths: the kernel widths ``h``, in the units of the samples (radians).
        unbiased: ``False`` (default, as Ardizzone et al.'s code): the biased V-statistic
            ``mean k(x, x') + mean k(y, y') - 2 mean k(x, y)`` over all pairs, diagonals
            included: ``>= 0``, exactly 0 for ``x`` against itself, biased upwards by ``O(1/n)``.
            ``True``: the U-statistic without the diagonals: unbiased, can be negative.

    Returns:
        ``(...)`` squared MMD, in the samples' dtype; leading dims are processed in blocks.

    Raises:
        ValueError: ``x`` and ``y`` not ``(..., n, D)`` and ``(..., m, D)``, a width not
            positive, fewer than 2 samples for the unbiased estimator.
        TypeError: samples not floating-point tensors, ``bandwidths`` not a sequence of
            numbers.

    Example:
        >>> x = torch.randn(3, 100, 2)
        >>> mmd(x, x).abs().max() == 0
        tensor(True)
    """
    check_tensor("x", x, min_dims=2)
    check_tensor("y", y, min_dims=2)
    if x.shape[:-2] != y.shape[:-2] or x.shape[-1] != y.shape[-1]:
        raise ValueError(f"x {tuple(x.shape)} and y {tuple(y.shape)} must be (..., n, D)")
    if not isinstance(bandwidths, tuple | list) or not bandwidths:
        raise TypeError(f"bandwidths must be a non-empty tuple of widths, got "
                        f"{type(bandwidths).__name__}")  # fmt: skip
    bandwidths = tuple(check_float("bandwidth", h, positive=True) for h in bandwidths)
    (n, d), m = x.shape[-2:], y.shape[-2]
    if min(n, m) < 1:
        raise ValueError(f"x and y need a sample each at least, got {n} and {m}")
    if unbiased and min(n, m) < 2:
        raise ValueError("the unbiased estimator needs at least 2 samples in each set")
    xf, yf = x.reshape(-1, n, d), y.reshape(-1, m, d).to(x)
    rows = max(1, _MMD_BLOCK // max(n, m) ** 2)
    parts = []
    for s in range(0, xf.shape[0], rows):
        a, b = xf[s : s + rows], yf[s : s + rows]
        xx = _imq_mean(a, a, bandwidths, unbiased)
        yy = _imq_mean(b, b, bandwidths, unbiased)
        parts.append(xx + yy - 2 * _imq_mean(a, b, bandwidths, False))
    return torch.cat(parts).reshape(x.shape[:-2]) if parts else x.new_zeros(x.shape[:-2])


def resimulation_error(
    forward: Callable[[Tensor], Tensor], samples: Tensor, targets: Tensor
) -> Tensor:
    """Mean squared distance between each target and the forward map of its samples.

    Args:
        forward: ``q (..., D) -> (..., T)``, e.g. a :class:`torchik.PlanarArm`.
        samples: ``(..., n, D)``.
        targets: ``(..., T)``.

    Returns:
        ``(...)`` (square units of the targets).

    Raises:
        ValueError: ``samples`` of fewer than 2 dimensions, ``targets`` of another size
            than ``forward``'s output or of a batch shape that does not broadcast.
        TypeError: arguments not floating-point tensors.
    """
    check_tensor("samples", samples, min_dims=2)
    check_tensor("targets", targets, min_dims=1)
    end = forward(samples)
    if end.shape[-1] != targets.shape[-1]:
        raise ValueError(f"targets must have shape (..., {end.shape[-1]}) as forward's "
                         f"output, got {tuple(targets.shape)}")  # fmt: skip
    _broadcast(("samples", "targets"), samples, targets, (2, 1))
    return (end - targets[..., None, :].to(end)).square().sum(dim=-1).mean(dim=-1)


def hull_selection(points: Tensor, percentile: float = 97.0) -> Tensor:
    """Which points :func:`convex_hull_area` keeps: the ``percentile`` % closest to their centre.

    The centre is the coordinate-wise median of the finite points, the mean of the two middle
    values for an even count (as ``numpy.median``): the lower median alone moves the centre
    of a symmetric cloud off its middle and makes the kept set depend on its orientation.
    Points are ranked by distance to that centre (robust to the outliers being trimmed); those
    within the ``percentile``-th percentile of the distances are kept. Rows with a non-finite
    coordinate (:func:`torchik.learn.rejection_sample` fills incomplete targets with NaN) are
    left out per target and never kept.

    Args:
        points: ``(..., n, 2)``.
        percentile: in ``(0, 100]``.

    Returns:
        ``(..., n)`` bool on the CPU, True for the kept points.

    Raises:
        ValueError: ``points`` not ``(..., n, 2)``, ``percentile`` outside ``(0, 100]``.
        TypeError: ``points`` not a floating-point tensor, ``percentile`` not a number.
    """
    check_tensor("points", points, (None, 2))
    percentile = check_float("percentile", percentile, 0.0, 100.0)
    if percentile == 0.0:
        raise ValueError("percentile must be in (0, 100], got 0.0")
    if points.shape[-2] == 0:
        return torch.zeros(points.shape[:-1], dtype=torch.bool)
    pts = points.detach().to("cpu", torch.float64)
    pts = pts.where(pts.isfinite().all(dim=-1, keepdim=True), torch.nan)  # nanquantile skips
    centre = pts.nanquantile(0.5, dim=-2, keepdim=True)  # linear: the two middle values' mean
    dist = (pts - centre).norm(dim=-1)  # NaN for the left-out rows
    limit = dist.nanquantile(percentile / 100.0, dim=-1, keepdim=True)
    return dist <= limit  # NaN compares False


def convex_hull_area(points: Tensor, percentile: float = 97.0) -> Tensor:
    """Area of the convex hull of the ``percentile`` % of 2-D points closest to their centre.

    The points are chosen by :func:`hull_selection` (the coordinate-wise median as centre;
    rows with a NaN or infinite coordinate left out per target). Needs SciPy (the ``eval``
    extra), imported on first use.

    Args:
        points: ``(..., n, 2)``, e.g. the forward map of a model's samples for each target.
        percentile: in ``(0, 100]``.

    Returns:
        ``(...)`` float64 areas; NaN for a target without a finite point (its area is
        unknown); 0 where fewer than 3 points are kept, they are collinear or ``n == 0``.

    Raises:
        ValueError: ``points`` not ``(..., n, 2)``, ``percentile`` outside ``(0, 100]``.
        TypeError: ``points`` not a floating-point tensor, ``percentile`` not a number.
    """
    keep = hull_selection(points, percentile)  # checks the arguments before SciPy's import
    from scipy.spatial import ConvexHull, QhullError

    if points.shape[-2] == 0:  # no points: no area
        return torch.zeros(points.shape[:-2], dtype=torch.float64)
    keep = keep.reshape(-1, points.shape[-2])
    flat = points.detach().to("cpu", torch.float64).reshape(-1, *points.shape[-2:])
    areas = []
    for pts, kept in zip(flat, keep, strict=True):
        chosen = pts[kept].numpy()
        if len(chosen) == 0 and len(pts) > 0:  # not one finite point: unknown
            areas.append(float("nan"))
            continue
        try:
            areas.append(ConvexHull(chosen).volume if len(chosen) >= 3 else 0.0)  # 2-D: area
        except QhullError:  # all points on a line
            areas.append(0.0)
    return torch.tensor(areas, dtype=torch.float64).reshape(points.shape[:-2])

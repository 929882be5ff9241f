"""Figures for IK samples, learned densities, training curves and benchmark results.

matplotlib is an optional dependency (the ``plot`` extra): it is imported inside the functions,
never when torchik is imported. Figures are built with :class:`matplotlib.figure.Figure`
directly, not through ``pyplot``, so no GUI backend or global figure state is involved; save
them with ``figure.savefig("out.png")``.

Example:
    >>> robot = torchik.load_robot("snake2")
    >>> fig = plot_arm_samples(robot, robot.random_configuration(20), torch.tensor([0.1, 0.1]))
    >>> len(fig.axes)
    1
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from torchik.checks import (
    check_float,
    check_generator,
    check_int,
    check_tensor,
    check_values,
    short_repr,
)
from torchik.learn.metrics import hull_selection
from torchik.plot.results import _SAMPLE_COLOR, _figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "plot_arm_samples",
    "plot_joint_densities",
    "plot_posterior",
    "plot_resimulation",
]

_PROJECTIONS = (("x", "y", 0, 1, "top (x-y)"), ("x", "z", 0, 2, "front (x-z)"),
                ("y", "z", 1, 2, "side (y-z)"))  # fmt: skip
_TRUTH_COLOR = "tab:orange"


MAX_GRID = 4096
"""The most mesh points per joint :func:`plot_joint_densities` evaluates (``grid``)."""


def _numpy(x: Any, name: str = "values") -> np.ndarray:
    """``x`` (a tensor, an array, nested numbers) as a float64 array, or one line naming it."""
    check_values(name, x)
    if isinstance(x, Tensor):
        return x.detach().cpu().double().numpy()
    try:
        return np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be numbers (a tensor or an array), got "
                        f"{short_repr(x)}") from None  # fmt: skip


def _rows(x: Any, name: str, width: int) -> np.ndarray:
    """``x`` as ``(n, width)`` float64 rows, ``n >= 1``, or one line naming it."""
    values = _numpy(x, name)
    if values.ndim == 0 or values.shape[-1] != width or values.size == 0:
        raise ValueError(f"{name} must be (n, {width}) with n >= 1, got {values.shape}")
    return values.reshape(-1, width)


def _point(x: Any, name: str, sizes: tuple[int, ...]) -> np.ndarray:
    """``x`` as one point of one of ``sizes`` coordinates, or one line naming it."""
    values = _numpy(x, name).reshape(-1)
    if values.size not in sizes:
        want = " or ".join(f"({k},)" for k in sizes)
        raise ValueError(f"{name} must be {want}, got {values.size} values")
    return values


# ---------------------------------------------------------------------------- arms
def _chain_links(robot: Any, link: str) -> list[str]:
    """The links from the root to ``link`` (the branch that carries it)."""
    return list(robot.links_to(link))


def _arm_points(robot_or_arm: Any, q: Tensor, link: str | None) -> np.ndarray:
    """``(n, P, 2 or 3)`` points of the chain: joints of a PlanarArm, link origins of a Robot."""
    from torchik.robot.planar import PlanarArm

    with torch.no_grad():
        if isinstance(robot_or_arm, PlanarArm):
            return _numpy(robot_or_arm.joint_positions(q.to(robot_or_arm.link_lengths)))
        from torchik.ik.solve import default_link

        links = _chain_links(robot_or_arm, link or default_link(robot_or_arm))
        q = q.to(robot_or_arm.device, robot_or_arm.dtype)
        return _numpy(robot_or_arm.link_positions(q, links))


def _alphas(n: int, probs: Any) -> np.ndarray:
    """Opacity per sample: proportional to its probability (at least 0.08), or uniform."""
    if probs is None:
        return np.full(n, min(0.8, max(0.1, 4.0 / max(n, 1))))
    p = np.clip(_numpy(probs).reshape(n), 0.0, None)
    return 0.08 + 0.82 * p / p.max() if p.max() > 0 else np.full(n, 0.08)


def _draw_chains(ax: Axes, points: np.ndarray, alphas: np.ndarray, start, target, dims) -> None:
    from matplotlib.collections import LineCollection
    from matplotlib.colors import to_rgba

    i, j = dims
    colors = [to_rgba(_SAMPLE_COLOR, a) for a in alphas]
    # matplotlib's stubs want a Sequence of segments; an (N, M, 2) array is one at run time
    ax.add_collection(LineCollection(points[..., [i, j]], colors=colors, linewidths=1.5))  # type: ignore[arg-type]
    ax.scatter(points[:, 1:-1, i].ravel(), points[:, 1:-1, j].ravel(), s=6, color=_SAMPLE_COLOR,
               alpha=float(alphas.mean()), linewidths=0)  # fmt: skip
    if start is not None:
        ax.plot(start[:, i], start[:, j], "--o", color="0.2", lw=1.5, ms=3, label="start")
    ax.plot(points[0, 0, i], points[0, 0, j], "ks", ms=7, label="base")
    ax.plot(target[i], target[j], "*", color="tab:red", ms=15, mec="k", label="target")
    ax.set_aspect("equal", adjustable="datalim")
    ax.autoscale_view()
    ax.grid(alpha=0.3)


def plot_arm_samples(
    robot_or_arm: Any,
    q_samples: Tensor,
    target: Any,
    probs: Any = None,
    start: Tensor | None = None,
    link: str | None = None,
) -> Figure:
    """Arm configurations that solve one target, drawn over each other (Neural IK, Fig. 2 a/c).

    Args:
        robot_or_arm: a :class:`torchik.PlanarArm` or :class:`torchik.Robot`.
        q_samples: ``(n, D)`` configurations (e.g. model samples or IK solutions).
        target: the target position ``(2,)`` or ``(3,)`` (planar arms: x, y).
        probs: ``(n,)`` probabilities (or any non-negative weights): opacity grows with them.
        start: ``(D,)`` a start configuration drawn dashed (e.g. ``robot.neutral()``).
        link: the end link of a Robot (default: its IK end link).

    Returns:
        A Figure: one x-y axes for planar arms (and robots whose chain stays in z = 0), else
        three orthogonal projections (top, front, side) of the chain of link origins.

    Raises:
        ValueError: configurations not ``(n, D)`` with ``n >= 1``, a target of another size,
            ``probs`` not ``n`` weights, ``start`` not ``(D,)``, an unknown link.
        TypeError: arguments of the wrong kind.
    """
    dof = robot_or_arm.dof
    q = check_tensor("q_samples", q_samples, (dof,)).reshape(-1, dof)
    if not len(q):
        raise ValueError(
            f"q_samples must hold a configuration at least, got {tuple(q_samples.shape)}"
        )
    if start is not None and check_tensor("start", start, (dof,)).dim() != 1:
        raise ValueError(f"start must be ({dof},), got {tuple(start.shape)}")
    goal = _point(target, "target", (2, 3))
    if probs is not None and _numpy(probs, "probs").size != len(q):
        raise ValueError(f"probs must be {len(q)} weights, one per configuration")
    points = _arm_points(robot_or_arm, q, link)
    start_points = None if start is None else _arm_points(robot_or_arm, start[None], link)[0]
    planar = points.shape[-1] == 2 or np.abs(points[..., 2]).max() < 1e-9
    if points.shape[-1] == 2:  # a PlanarArm: pad z
        points = np.concatenate((points, np.zeros_like(points[..., :1])), axis=-1)
        if start_points is not None:
            start_points = np.concatenate((start_points, np.zeros_like(start_points[:, :1])), -1)
    goal = np.concatenate((goal, np.zeros(3 - goal.size)))
    views = _PROJECTIONS[:1] if planar else _PROJECTIONS
    fig = _figure(5.0 * len(views), 5.0)
    axes = fig.subplots(1, len(views), squeeze=False)[0]
    alphas = _alphas(len(points), probs)
    for ax, (a, b, i, j, title) in zip(axes, views, strict=True):
        _draw_chains(ax, points, alphas, start_points, goal, (i, j))
        ax.set(xlabel=f"{a} (m)", ylabel=f"{b} (m)", title=None if planar else title)
    axes[0].legend(loc="best", fontsize="small")
    weighting = "opacity ~ probability" if probs is not None else "uniform opacity"
    fig.suptitle(f"{len(points)} configurations for one target ({weighting})")
    return fig


# ---------------------------------------------------------------------------- densities
_GRID_CHUNK = 1 << 15
"""Mesh points per ``log_prob`` call in :func:`plot_joint_densities` (about 2.3 KB each for a
small IKNet: ~75 MB; the whole 4096 x 4096 mesh at once needed ~39 GB)."""


def _grid_log_prob(model: Any, target: Tensor, axes: list[Tensor]) -> Tensor:
    """``log_prob`` on the mesh of ``axes`` (1 or 2 of them), in slabs of the first axis."""
    ref, grid = model.target_mean, len(axes[0])
    rows = max(1, _GRID_CHUNK // grid ** (len(axes) - 1))
    slabs = []
    with torch.no_grad():
        for start in range(0, grid, rows):
            mesh = torch.meshgrid(axes[0][start : start + rows], *axes[1:], indexing="ij")
            points = torch.stack(mesh, dim=-1).reshape(-1, len(axes)).to(ref)
            logp = model.log_prob(points, target.to(ref).expand(len(points), -1))
            slabs.append(logp.double().cpu().reshape(mesh[0].shape))
    return torch.cat(slabs)


def _grid_marginals(model: Any, target: Tensor, grid: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Marginals ``p(q_j | target)`` of a 1- or 2-joint model from ``log_prob`` on a grid, each
    normalised to integrate to 1 on it (trapezoid).

    A peaked posterior puts its mass between grid points: the plain trapezoid of the density
    integrated to 0.72 at grid 400 on snake2 (0.008 at 100), so the curve is scaled by its
    integral; its shape is then that of the density on the grid, which a histogram of the
    samples checks. Raises NotImplementedError where the model has no density."""
    lower, upper = model.lower.double(), model.upper.double()
    axes = [
        torch.linspace(lo, hi, grid, dtype=torch.float64)
        for lo, hi in zip(lower, upper, strict=True)
    ]
    logp = _grid_log_prob(model, target, axes)
    density = torch.exp(logp - logp.max())  # relative: a peaked density does not underflow
    out = []
    for j, values in enumerate(axes):
        marginal = density
        for k in sorted((k for k in range(len(axes)) if k != j), reverse=True):
            marginal = torch.trapezoid(marginal, axes[k], dim=k)  # the other joint integrated out
        total = torch.trapezoid(marginal, values)
        marginal = marginal / total if total > 0 else marginal
        out.append((values.numpy(), marginal.numpy()))
    return out


def plot_joint_densities(
    model: Any,
    target: Tensor,
    grid: int = 400,
    n: int = 2000,
    generator: torch.Generator | None = None,
) -> Figure:
    """A learned model's per-joint densities for one target (Neural IK, Fig. 2 b/d).

    For a model with ``log_prob`` and at most two joints the marginals of its density are drawn
    (``log_prob`` on a ``grid x grid`` mesh, evaluated in slabs of bounded memory, the other
    joint integrated out, each curve normalised to integrate to 1 on the grid: a peaked
    density puts mass between grid points that the plain sum misses). Otherwise the
    model is sampled ``n`` times and each joint's samples are shown as a histogram, which
    estimates the same marginal.

    Args:
        model: an :class:`torchik.models.IKModel`.
        target: ``(T,)`` one encoded target (see :func:`torchik.learn.encode_target`).
        grid: mesh points per joint for the exact marginals.
        n: samples for the histograms (drawn as well when the exact curve is shown).
        generator: random generator on the model's device.

    Returns:
        A Figure with one axes per joint.

    Raises:
        ValueError: ``target`` not one target of the model's size, ``grid`` or ``n`` out of
            range.
        TypeError: arguments of the wrong kind.
    """
    size = model.spec.target_dim
    if check_tensor("target", target, (size,)).numel() != size:
        raise ValueError(f"target must be one ({size},) target, got {tuple(target.shape)}")
    check_int("grid", grid, 2, MAX_GRID)
    check_int("n", n, 1, 1 << 24)
    check_generator("generator", generator)
    target = target.reshape(-1)
    exact = None
    if model.spec.dof <= 2:
        try:
            exact = _grid_marginals(model, target, grid)
        except NotImplementedError:
            exact = None
    with torch.no_grad():
        samples = _numpy(model.sample(target.to(model.target_mean), n, generator=generator))
    dof, names = model.spec.dof, [f"joint {j + 1}" for j in range(model.spec.dof)]
    cols = min(dof, 4)
    fig = _figure(3.4 * cols, 2.8 * math.ceil(dof / cols))
    axes = fig.subplots(math.ceil(dof / cols), cols, squeeze=False).ravel()
    for j, ax in enumerate(axes[:dof]):
        lo, hi = model.spec.lower[j], model.spec.upper[j]
        ax.hist(samples[:, j], bins=60, range=(lo, hi), density=True, color=_SAMPLE_COLOR,
                alpha=0.45, label=f"{n} samples")  # fmt: skip
        if exact is not None:
            ax.plot(*exact[j], color="k", lw=1.5, label="log_prob marginal (normalised)")
        ax.set(xlim=(lo, hi), xlabel=names[j], ylabel="density")
    for ax in axes[dof:]:
        fig.delaxes(ax)
    axes[0].legend(fontsize="small")
    fig.suptitle(f"{model.family}: per-joint densities for one target")
    return fig


# ---------------------------------------------------------------------------- resimulation
def _hull(ax: Axes, points: np.ndarray, label: str) -> bool:
    """Draw the convex hull of ``points (m, 2)``; False where SciPy is missing or it fails."""
    try:
        from scipy.spatial import ConvexHull, QhullError
    except ImportError:
        return False
    try:
        hull = ConvexHull(points)
    except (QhullError, ValueError):  # too few or collinear points
        return False
    loop = points[np.append(hull.vertices, hull.vertices[0])]
    ax.fill(loop[:, 0], loop[:, 1], color=_SAMPLE_COLOR, alpha=0.12, label=label)
    ax.plot(loop[:, 0], loop[:, 1], color=_SAMPLE_COLOR, lw=1.2)
    return True


def plot_resimulation(
    points: Any, target: Any, hull_percentile: float = 97.0, ground_truth: Any = None
) -> Figure:
    """Re-simulated end points of samples for one target (planar-arm benchmark, Fig. 4/5).

    Args:
        points: ``(n, 2)`` end points, FK of the samples.
        target: ``(2,)`` the target end point.
        hull_percentile: the hull encloses the points that
            :func:`torchik.learn.convex_hull_area` measures (chosen by
            :func:`torchik.learn.metrics.hull_selection`): those whose distance to their median
            is within this percentile (97: the 3 % farthest are left out). Rows with a NaN
            coordinate (an incomplete rejection sample) are left out.
        ground_truth: ``(2,)`` or ``(m, 2)`` reference end points to mark (e.g. of the true or
            rejection-sampled configurations).

    Returns:
        A Figure with one axes. Without SciPy the hull is skipped and the title says so.

    Raises:
        ValueError: points not ``(n, 2)`` with ``n >= 1``, a target not ``(2,)``,
            ``hull_percentile`` outside ``(0, 100]``.
        TypeError: arguments of the wrong kind.
    """
    pts, goal = _rows(points, "points", 2), _point(target, "target", (2,))
    hull_percentile = check_float("hull_percentile", hull_percentile, 0.0, 100.0)
    if hull_percentile == 0.0:
        raise ValueError("hull_percentile must be in (0, 100], got 0.0")
    truth = None if ground_truth is None else _rows(ground_truth, "ground_truth", 2)
    kept = hull_selection(torch.from_numpy(pts), hull_percentile).numpy()
    distance = np.linalg.norm(pts - goal, axis=1)
    fig = _figure(5.5, 5.0)
    ax = fig.subplots()
    ax.scatter(pts[:, 0], pts[:, 1], s=4, color=_SAMPLE_COLOR, alpha=0.35, linewidths=0,
               label=f"{len(pts)} re-simulated end points")  # fmt: skip
    drawn = _hull(ax, pts[kept], f"convex hull of the central {hull_percentile:g} %")
    if truth is not None:
        ax.scatter(truth[:, 0], truth[:, 1], s=30, marker="x", color=_TRUTH_COLOR,
                   label="ground truth")  # fmt: skip
    ax.plot(*goal, "*", color="tab:red", ms=15, mec="k", label="target")
    ax.set(xlabel="x (m)", ylabel="y (m)", aspect="equal")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    note = "" if drawn else " (no hull: SciPy missing or too few points)"
    ax.set_title(f"median distance to target {np.nanmedian(distance) * 1000:.1f} mm{note}")
    return fig


def plot_posterior(
    samples: Any, ground_truth_samples: Any, labels: Sequence[str] | None = None
) -> Figure:
    """Model samples against ground-truth samples (e.g. rejection sampling) of one posterior.

    Rows with a NaN coordinate (an incomplete :func:`torchik.learn.rejection_sample` target) are
    left out of both; the axes' ranges come from the finite values of both.

    Args:
        samples: ``(n, D)`` model samples.
        ground_truth_samples: ``(m, D)`` samples of the true posterior.
        labels: ``D`` joint names.

    Returns:
        For ``D <= 4`` a ``D x D`` grid: marginal histograms on the diagonal, pairwise scatter
        below it (the upper triangle is removed). For ``D > 4`` one marginal axes per joint.

    Raises:
        ValueError: samples not ``(n, D)`` and ``(m, D)`` with ``n, m >= 1``, not ``D``
            labels.
        TypeError: arguments of the wrong kind, labels not strings.
    """
    first = _numpy(samples, "samples")
    d = first.shape[-1] if first.ndim else 0
    ours, truth = _rows(first, "samples", d), _rows(ground_truth_samples, "ground_truth_samples", d)
    ours, truth = (x[np.isfinite(x).all(axis=1)] for x in (ours, truth))
    labels = list(labels) if labels is not None else [f"q{j + 1}" for j in range(d)]
    if len(labels) != d or not all(isinstance(label, str) for label in labels):
        raise ValueError(f"labels must be {d} joint names, got {short_repr(labels)}")
    if d > 4:
        return _marginals(ours, truth, labels)
    fig = _figure(2.6 * d + 1, 2.6 * d)
    axes = fig.subplots(d, d, squeeze=False)
    for i in range(d):
        for j in range(d):
            ax = axes[i, j]
            if j > i:
                fig.delaxes(ax)
            elif i == j:
                _histograms(ax, ours[:, i], truth[:, i])
            else:
                ax.scatter(truth[:, j], truth[:, i], s=3, color=_TRUTH_COLOR, alpha=0.3)
                ax.scatter(ours[:, j], ours[:, i], s=3, color=_SAMPLE_COLOR, alpha=0.3)
            if i == d - 1:
                ax.set_xlabel(labels[j])
            if j == 0 and i > 0:
                ax.set_ylabel(labels[i])
    axes[0, 0].legend(fontsize="small")
    fig.suptitle("model samples (blue) vs ground truth (orange)")
    return fig


def _histograms(ax: Axes, ours: np.ndarray, truth: np.ndarray) -> None:
    both = np.concatenate([ours, truth])
    lo, hi = (both.min(), both.max()) if both.size else (0.0, 1.0)  # no finite row: empty axes
    for values, color, label in ((truth, _TRUTH_COLOR, "ground truth"),
                                 (ours, _SAMPLE_COLOR, "model")):  # fmt: skip
        if not values.size:  # a density of no sample is 0 / 0
            continue
        ax.hist(values, bins=40, range=(lo, hi), density=True, histtype="stepfilled",
                color=color, alpha=0.45, label=label)  # fmt: skip


def _marginals(ours: np.ndarray, truth: np.ndarray, labels: list[str]) -> Figure:
    d = ours.shape[-1]
    cols = 4
    fig = _figure(3.2 * cols, 2.6 * math.ceil(d / cols))
    axes = fig.subplots(math.ceil(d / cols), cols, squeeze=False).ravel()
    for j, ax in enumerate(axes[:d]):
        _histograms(ax, ours[:, j], truth[:, j])
        ax.set_xlabel(labels[j])
    for ax in axes[d:]:
        fig.delaxes(ax)
    axes[0].legend(fontsize="small")
    fig.suptitle("model samples vs ground truth: marginals")
    return fig

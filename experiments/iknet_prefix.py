"""Where an autoregressive model's position error comes from: feasible prefixes or precise
last joints (issue 13's question why IKNet is 3x the paper's error on the Franka).

A model that samples joint by joint (IKNet) draws ``q_1`` first, then each joint given the ones
before. Keep the first ``k`` joints of a sample and re-solve the others by numerical IK
(:func:`torchik.ik.solve_ik`, position only, the sample as the seed, the kept joints locked by
a zero-width box): if a completion reaches the target, the prefix ``q_1..q_k`` was still
feasible. While three joints that move the link are left (three coordinates to reach; on the
Franka ``k <= 3``, its last joint turning the hand about its own origin) a failure means the
model's first joints led to a dead end; past that exact completions are rare anyway, and the
residual measures how far the sample's later joints are from a completion. The same with
uniformly random prefixes is the reference: what a model that learned nothing of those joints
would give.

    >>> import torch, torchik
    >>> robot = torchik.load_robot("snake2", dtype=torch.float64)
    >>> q = robot.random_configuration(4, generator=torch.Generator().manual_seed(0))
    >>> target = robot.link_positions(q, ["ee"])[:, 0]
    >>> rows = prefix_rows(robot, q, target, "ee", generator=torch.Generator().manual_seed(1))
    >>> [row["kept"] for row in rows], rows[0]["feasible"], rows[-1]["mean_cm"]
    ([0, 1, 2], 1.0, 0.0)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

__all__ = ["INTRO", "prefix_rows", "prefix_table", "resolved_error"]

TOL = 1e-3
"""A completion reaches the target within this distance (m)."""

INTRO = (
    "An autoregressive model (IKNet) samples joint by joint. Each row keeps the first k joints "
    "of every raw sample and re-solves the others by numerical IK (`solve_ik`, position only, "
    "the sample as the seed, restarts inside a box that locks the kept joints). *feasible* is "
    f"the fraction that then reaches the target within {1000 * TOL:g} mm. While three joints "
    "that move the link are left (k <= 3 on the Franka, whose last joint turns the hand about "
    "its own origin), a failure means the model's first joints led to a dead end. Past that, "
    "exact completions are rare anyway, and the mean distance measures how far the later "
    "joints are from one. *uniform prefix* is the same with the first k joints uniform at "
    "random: what a model that learned nothing of them would give. The last row (all joints "
    "kept) is the raw error."
)
"""The results' intro (``scripts/pretrained_report.py --prefix``)."""


def resolved_error(
    robot: Any, q: Tensor, target: Tensor, link: str, kept: int, generator: torch.Generator
) -> Tensor:
    """``(N,)`` distances (m) to ``target (N, 3)`` after re-solving the joints after the first
    ``kept`` of ``q (N, dof)`` (those stay as they are; ``kept = dof``: ``q``'s own error)."""
    from torchik.ik import solve_ik

    q, target = q.to(robot.dtype), target.to(robot.dtype)
    if kept < robot.dof:
        lower = robot.lower.expand_as(q).clone()
        upper = robot.upper.expand_as(q).clone()
        lower[:, :kept], upper[:, :kept] = q[:, :kept], q[:, :kept]
        result = solve_ik(robot, target, link, position_only=True, seeds=q[:, None],
                          lower=lower, upper=upper, restarts=True, tol_position=TOL,
                          generator=generator, num_threads=1)  # fmt: skip
        q = result.best().q[..., 0, :]
    return (robot.link_positions(q, [link])[:, 0] - target).norm(dim=-1)


def prefix_rows(
    robot: Any,
    samples: Tensor,
    targets: Tensor,
    link: str,
    generator: torch.Generator,
) -> list[dict[str, Any]]:
    """One row per number of kept joints ``k = 0 .. dof``.

    Args:
        robot: the robot, best in float64.
        samples: ``(N, dof)`` a model's raw samples, each for the target in the same row.
        targets: ``(N, 3)`` the positions of ``link`` they were drawn for.
        link: the link.
        generator: seeds the uniform prefixes and the solver's restarts.

    Returns:
        Dicts with ``kept`` (k), ``feasible`` (fraction re-solved within :data:`TOL`),
        ``mean_cm`` (mean distance after re-solving, cm) and ``uniform_feasible`` (the same
        fraction with the first k joints uniform at random instead of the model's).
    """
    uniform = robot.random_configuration(samples.shape[0], generator=generator)
    rows = []
    for k in range(robot.dof + 1):
        error = resolved_error(robot, samples, targets, link, k, generator)
        mixed = torch.cat([uniform[:, :k], samples[:, k:].to(uniform)], dim=-1)
        baseline = resolved_error(robot, mixed, targets, link, k, generator)
        rows.append({"kept": k, "feasible": (error < TOL).double().mean().item(),
                     "mean_cm": 100 * error.mean().item(),
                     "uniform_feasible": (baseline < TOL).double().mean().item()})  # fmt: skip
    return rows


def prefix_table(rows: list[dict[str, Any]], title: str) -> Any:
    """The rows of :func:`prefix_rows` as a :class:`~experiments.table.Table`."""
    from experiments.table import Column, Table

    table = Table(title, [
        Column("feasible", "feasible", "{:.1%}".format),
        Column("mean_cm", "mean distance after re-solving (cm)", "{:.2f}".format),
        Column("uniform_feasible", "uniform prefix: feasible", "{:.1%}".format),
    ])  # fmt: skip
    for row in rows:
        table.add(f"first {row['kept']} joints kept", **row)
    return table

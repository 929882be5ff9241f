"""GPU kinematics throughput (``benchmarks/gpu.py``): FK paths and the IK loop's host checks.

FK, FK + backward and Jacobian per second on the reference path and on the fused Triton kernels
(:attr:`torchik.robot.Robot.backend`), and full-pose numerical IK with a host check every iteration
against every ``sync_every`` iterations (the default: 8 on a GPU). Every time is
:func:`experiments.timing.time_call`'s median. Goals on an H100 (issue 19): FK pose ≥ 5 G
configurations/s at 4 M, FK + backward and Jacobian ≥ 2 G/s; IK on 1000 Panda poses ≥ 99.9 % in ≤ 10
ms, 100 k in ≤ 100 ms, one pose in ≤ 2 ms.

Example:
    >>> from torchik import load_robot
    >>> robot = load_robot("snake2")
    >>> rows = ik_rows(robot, "ee", [10], seconds=0.01)
    >>> [row["path"] for row in rows], rows[0]["success"] == 1.0
    (['sync_every=1', 'sync_every=auto'], True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import torch

from experiments.table import Column, Table
from experiments.timing import time_call

__all__ = ["fk_rows", "gpu_table", "ik_rows"]


def _rate(fn: Callable[[], object], n: int, seconds: float) -> dict[str, float]:
    t = time_call(fn, min_run_time=seconds)
    return {"ms": t.median * 1e3, "G_per_s": n / t.median / 1e9}


def fk_rows(robot: Any, link: str, sizes: Sequence[int], seconds: float) -> list[dict[str, Any]]:
    """FK pose, FK + backward and Jacobian rates of ``n`` configurations, both FK paths.

    Args:
        robot: the robot, on its device.
        link: the link.
        sizes: batch sizes.
        seconds: measurement per row.

    Returns:
        Rows ``what``, ``path`` (``reference`` or ``fused``), ``n``, ``ms``, ``G_per_s``.
    """
    rows = []
    for n in sizes:
        q = robot.random_configuration(n).to(robot.device)
        for path in ("reference", "fused"):
            robot.backend = path if path == "reference" or q.is_cuda else "auto"
            qg = q.clone().requires_grad_()

            def backward(qg: torch.Tensor = qg) -> None:
                robot.forward_kinematics(qg, link).sum().backward()

            for what, fn in (
                ("FK pose", lambda q=q: robot.forward_kinematics(q, link)),
                ("FK + backward", backward),
                ("Jacobian", lambda q=q: robot.jacobian(q, link)),
            ):
                rows.append({"what": what, "path": path, "n": n, **_rate(fn, n, seconds)})
    robot.backend = "auto"
    return rows


def ik_rows(robot: Any, link: str, sizes: Sequence[int], seconds: float) -> list[dict[str, Any]]:
    """Full-pose IK of ``n`` FK poses (seed ``n``), host check every iteration or the default.

    Returns:
        Rows ``what``, ``path`` (``sync_every=1`` or ``sync_every=auto``), ``n``, ``ms``,
        ``success`` (share of targets solved).
    """
    from torchik.ik import LevenbergMarquardt, solve_ik

    rows = []
    for n in sizes:
        g = torch.Generator().manual_seed(n)
        q = robot.random_configuration(n, generator=g).to(robot.device)
        targets = robot.forward_kinematics(q, link)
        for every in (1, 0):  # host check every iteration; the default (8 on a GPU)
            solver = LevenbergMarquardt(sync_every=every)
            result = solve_ik(robot, targets, link, method=solver, num_threads=None)
            t = time_call(partial(solve_ik, robot, targets, link, method=solver),
                          min_run_time=seconds)  # fmt: skip
            rows.append({
                "what": "IK full pose", "path": f"sync_every={every or 'auto'}", "n": n,
                "ms": t.median * 1e3, "success": result.success.any(-1).double().mean().item(),
            })  # fmt: skip
    return rows


def gpu_table(rows: list[dict[str, Any]]) -> Table:
    """The rows of :func:`fk_rows` and :func:`ik_rows` as one table."""
    table = Table(
        "GPU kinematics (issue 19)",
        [
            Column("path", "path"),
            Column("n", "n", lambda x: f"{x:,}"),
            Column("ms", "ms", lambda x: f"{x:.3f}"),
            Column("G_per_s", "G/s", lambda x: f"{x:.3f}"),
            Column("success", "success", lambda x: f"{100 * x:.2f} %"),
        ],
    )
    for row in rows:
        table.add(row["what"], **{k: v for k, v in row.items() if k != "what"})
    return table

"""The cost of loading large URDFs: generated chains and trees, first calls, peak memory.

What ``benchmarks/urdf_chain_load.py`` and ``benchmarks/urdf_load.py`` measure (issues 15 and
17), as functions that run on any URDF text.

The steps are *first* calls: parsing, building a :class:`~torchik.Robot`, and the first FK,
Jacobian and FK + backward on a fresh robot, which build its per-request plans. A first call
happens once per robot, so :func:`~experiments.timing.time_call` (which warms up and repeats a
call) does not apply: each step is timed once with :func:`time.process_time` on fresh robots
and the median over ``repeats`` robots is kept. CPU time is steadier than wall time on a shared
machine.

Example:
    >>> text = crafted_urdf("chain", 50)
    >>> sorted(first_call_seconds(text, repeats=1))[:2]
    ['Robot.from_urdf', 'first FK + backward, every link']
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from torchik.description import parse_urdf
from torchik.description.reading import finite_number
from torchik.robot import Robot

__all__ = ["SHAPES", "crafted_urdf", "first_call_seconds", "load_cost"]

SHAPES = ("chain", "tree", "mimic", "linkonly")
"""The shapes :func:`crafted_urdf` generates."""

_LIMIT = '<limit lower="-1" upper="1" effort="1" velocity="1"/>'


def crafted_urdf(shape: str, links: int) -> str:
    """URDF text of a generated robot named ``shape``, with links ``l0`` to ``l{links-1}``.

    Joints ``j1`` to ``j{links-1}`` are revolute about z, 0.1 m apart, limited to ±1 rad.

    Args:
        shape: ``"chain"`` (link ``i`` is the child of link ``i-1``), ``"tree"`` (every link a
            child of ``l0``), ``"mimic"`` (a chain whose every joint but ``j1`` mimics the one
            before, multiplier 1.0001) or ``"linkonly"`` (links and no joint: not a valid
            robot once there are two links).
        links: The number of links.
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; accepted: {', '.join(SHAPES)}")
    joints = []
    for i in range(1, 0 if shape == "linkonly" else links):
        parent = "l0" if shape == "tree" else f"l{i - 1}"
        mimic = f'<mimic joint="j{i - 1}" multiplier="1.0001"/>'
        joints.append(
            f'<joint name="j{i}" type="revolute"><parent link="{parent}"/><child link="l{i}"/>'
            f'<origin xyz="0 0 0.1"/><axis xyz="0 0 1"/>{_LIMIT}'
            f"{mimic if shape == 'mimic' and i > 1 else ''}</joint>"
        )
    body = "".join(f'<link name="l{i}"/>' for i in range(links)) + "".join(joints)
    return f'<robot name="{shape}">{body}</robot>'


def _cpu_seconds(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def _one_round(text: str, batch: int) -> dict[str, float]:
    """CPU seconds of each first call on fresh robots (the cache of parsed numbers emptied
    before each load, so that neither gains from the other)."""
    finite_number.cache_clear()
    out = {"parse_urdf": _cpu_seconds(lambda: parse_urdf(text))}
    holder: dict[str, Robot] = {}
    finite_number.cache_clear()
    out["Robot.from_urdf"] = _cpu_seconds(
        lambda: holder.setdefault("r", Robot.from_urdf(text, dtype=torch.float64))
    )
    robot = holder["r"]
    q = robot.random_configuration(batch, generator=torch.Generator().manual_seed(0))
    out["first FK, every link"] = _cpu_seconds(lambda: robot.forward_kinematics(q))
    tip = robot.link_names[-1]
    out["first Jacobian of the tip"] = _cpu_seconds(lambda: robot.jacobian(q, tip))
    fresh = Robot.from_urdf(text, dtype=torch.float64)
    qg = q.clone().requires_grad_()
    out["first FK + backward, every link"] = _cpu_seconds(
        lambda: fresh.forward_kinematics(qg).sum().backward()
    )
    return out


def first_call_seconds(text: str, *, batch: int = 16, repeats: int = 5) -> dict[str, float]:
    """CPU seconds of the first calls on a robot loaded from ``text`` (float64).

    Args:
        text: URDF text (e.g. :func:`crafted_urdf`).
        batch: Configurations per FK and Jacobian call (seeded, within the limits).
        repeats: Fresh robots; the median of each step over them is kept.

    Returns:
        Step -> median CPU seconds, for ``parse_urdf``, ``Robot.from_urdf``, ``first FK, every
        link``, ``first Jacobian of the tip`` (the last link) and ``first FK + backward, every
        link``, in this order.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    rounds = [_one_round(text, batch) for _ in range(repeats)]
    return {step: statistics.median(r[step] for r in rounds) for step in rounds[0]}


def load_cost(text: str) -> dict[str, Any]:
    """Wall and CPU seconds of ``Robot.from_urdf(text)``, its outcome and the peak memory.

    The peak resident memory is the whole process's (torch's import alone is about 300 MB):
    call this in a fresh process to read it as the cost of one file. Unix only.

    Returns:
        ``s`` and ``cpu_s`` (rounded to ms), ``peak_rss_mb`` and ``outcome`` (``"loaded"``, or
        the error's type and the length of its message).
    """
    import resource  # Unix only

    start, cpu = time.perf_counter(), time.process_time()
    try:
        Robot.from_urdf(text)
        outcome = "loaded"
    except Exception as err:  # any error is a result here, reported by its type
        outcome = f"{type(err).__name__} ({len(str(err))} chars)"
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    rss_mb = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return {
        "s": round(seconds, 3),
        "cpu_s": round(cpu, 3),
        "peak_rss_mb": rss_mb,
        "outcome": outcome,
    }

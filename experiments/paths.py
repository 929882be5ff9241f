"""The path-following protocol (Neural IK paper, Eq. 15) on any robot and windowed sampler.

Smooth target sequences come from moving the arm (:func:`torchik.learn.make_smooth_targets`,
generator seed 1). For each, the model draws ``paths`` joint paths by windowed sampling with
radius ``radius`` (:func:`torchik.learn.follow_path`; also "best of ``candidates``" per step),
which are then refined by LM freely or within the radius of the refined previous step
(:func:`torchik.learn.refine_path`), and the sequential numerical baseline
(:func:`torchik.learn.sequential_ik_path`) solves every step seeded with the previous solution.
Times: :func:`experiments.timing.time_call` of each method on the first ``timed_sequences``
sequences, with the random generators replayed (the measured results are not changed).

Example:
    >>> import torch, torchik
    >>> from experiments.small_iknet import train_small_iknet
    >>> robot = torchik.load_robot("snake2", dtype=torch.float64)
    >>> model = train_small_iknet(torchik.make_dataset(robot, 256), steps=2).model
    >>> settings = PathsSettings(sequences=1, paths=2, length=3, candidates=2, timed_sequences=0)
    >>> table = paths_table(robot, model, settings)
    >>> table.row("sequential LM (from the true start)")["mean_error"] < 1e-4
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from experiments.table import Column, Table
from experiments.timing import time_call
from torchik.learn import (
    DISTINCT_TOL,
    PathResult,
    follow_path,
    make_smooth_targets,
    refine_path,
    sequential_ik_path,
)
from torchik.robot import Robot

__all__ = ["GOAL_ERROR", "PathsSettings", "paths_table", "sequence_rows"]

GOAL_ERROR = 0.005
"""A path's mean error (m) the protocol asks at most (issue #5's goal, with no jump > r)."""


@dataclass(frozen=True)
class PathsSettings:
    """The protocol's settings (those of ``benchmarks/paths.py``, same names).

    Attributes:
        sequences: smooth target sequences.
        paths: sampled paths per sequence.
        length: targets per sequence.
        radius: window radius r (rad).
        candidates: m of "best of m".
        max_move: largest change of a joint along a sequence (rad).
        timed_sequences: sequences whose methods are timed (the first ones).
        min_run_time: seconds of measurement per timed call (see :func:`time_call`).
    """

    sequences: int = 100
    paths: int = 100
    length: int = 50
    radius: float = 0.1
    candidates: int = 10
    max_move: float = 1.0
    timed_sequences: int = 10
    min_run_time: float = 0.2


def _row(result: PathResult, radius: float, seconds: float | None) -> dict[str, Any]:
    """The table's numbers of one sequence's paths (``seconds``: None where not timed)."""
    within = (result.max_jump <= radius + 1e-6).float()
    ok = (result.mean_error <= GOAL_ERROR).float()
    every = bool((ok * within).all())  # the goal, for this sequence
    return {**result.summary(), "within_r": within.mean().item(), "under_5mm": ok.mean().item(),
            "all_ok": float(every), "seconds": seconds}  # fmt: skip


def _run(
    fn: Callable[[torch.Generator], PathResult], gen: torch.Generator, s: PathsSettings, timed: bool
) -> tuple[PathResult, float | None]:
    """``fn(gen)``, and with ``timed`` its median seconds, replayed from ``gen``'s state."""
    state = gen.get_state()
    result = fn(gen)
    if not timed:
        return result, None
    replay = lambda: fn(torch.Generator().set_state(state))  # noqa: E731
    return result, time_call(replay, min_run_time=s.min_run_time).median


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def sequence_rows(
    model: Any,
    robot: Robot,
    q_true: Tensor,
    target: Tensor,
    settings: PathsSettings,
    gen: torch.Generator,
    timed: bool = False,
) -> dict[str, dict[str, Any]]:
    """Every method on one target sequence: method -> its numbers (see :func:`paths_table`).

    Args:
        model: a model with ``sample_within`` (e.g. :class:`~torchik.models.IKNet`).
        robot: the robot (float64).
        q_true: ``(S, D)`` the joints the targets come from (the baseline starts at step 0).
        target: ``(S, 3)`` positions of the model's end link.
        settings: paths, radius and candidates.
        gen: draws the samples and seeds the restarts of the refinement.
        timed: time every method (:func:`time_call`; the results are unchanged).
    """
    s, r, link, rows = settings, settings.radius, model.spec.link, {}
    restarts = torch.Generator().manual_seed(int(torch.randint(2**31, (1,), generator=gen)))
    sampled = {}
    best = f"IKNet windowed, best of {s.candidates}"
    for name, m in (("IKNet windowed", 1), (best, s.candidates)):

        def sample(g: torch.Generator, m: int = m) -> PathResult:
            return follow_path(model, target.float(), s.paths, r, robot=robot, generator=g,
                               candidates=m)  # fmt: skip

        paths, t = sampled[name] = _run(sample, gen, s, timed)
        rows[name + (" per step" if m > 1 else "")] = _row(paths, r, t)
    for name, (paths, t) in sampled.items():
        for what, radius in (("LM refinement", None), ("r-constrained LM refinement", r)):

            def refine(g: torch.Generator, q: Tensor = paths.q, rad: float | None = radius):
                return refine_path(robot, target, q.double(), link, radius=rad, generator=g)

            refined, t_refine = _run(refine, restarts, s, timed)
            rows[f"{name} + {what}"] = _row(refined, r, _add(t, t_refine))
    for name, start in (("the neutral pose", robot.neutral()), ("the true start", q_true[0])):

        def follow(g: torch.Generator, q: Tensor = start) -> PathResult:
            return sequential_ik_path(robot, target, q, link)

        path, t = _run(follow, gen, s, timed)
        rows[f"sequential LM (from {name})"] = _row(path, r, t)
    return rows


def _mean(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [row[key] for row in rows if row[key] is not None]
    return sum(values) / len(values) if values else None


def _columns() -> list[Column]:
    cm = lambda x: f"{100 * x:.2f}"  # noqa: E731
    pct = lambda x: f"{100 * x:.2f} %"  # noqa: E731
    pct0 = lambda x: f"{100 * x:.0f} %"  # noqa: E731
    return [
        Column("paths", "paths / sequence"),
        Column("mean_error", "mean error per path (cm)", lambda x: f"{100 * x:.3f}"),
        Column("best_error", "best path (cm)", lambda x: f"{100 * x:.3f}"),
        Column("worst_error", "worst path (cm)", cm),
        Column("under_5mm", "paths ≤ 0.5 cm", pct),
        Column("max_jump", "max jump (rad)", lambda x: f"{x:.3f}"),
        Column("mean_jump", "mean jump (rad)", lambda x: f"{x:.4f}"),
        Column("within_r", "paths with no jump > r", pct),
        Column("all_ok", "sequences with every path ≤ 0.5 cm, no jump > r", pct0),
        Column("distinct", f"distinct paths ({DISTINCT_TOL:g} rad)", lambda x: f"{x:.1f}"),
        Column("seconds", "time / sequence", lambda x: f"{x:.2f} s"),
    ]


def paths_table(
    robot: Robot,
    model: Any,
    settings: PathsSettings = PathsSettings(),  # noqa: B008 (frozen)
    name: str | None = None,
    log: Callable[[str], None] | None = None,
) -> Table:
    """The path-following table: every method's numbers, averaged over the sequences.

    Args:
        robot: the robot (float64 for the errors).
        model: a trained model of ``robot`` with ``sample_within`` (e.g. an IKNet), eval mode.
        settings: the protocol's settings.
        name: the robot's name in the title (default ``robot.name``).
        log: called with a progress line every 10 sequences.

    Returns:
        One row per method: ``mean_error``, ``best_error``, ``worst_error`` (m), ``under_5mm``,
        ``max_jump``, ``mean_jump``, ``within_r``, ``all_ok``, ``distinct``, ``seconds`` (see
        the notes).
    """
    s, gen = settings, torch.Generator().manual_seed(1)
    q_true, targets = make_smooth_targets(robot, model.spec.link, steps=s.length,
                                          n_paths=s.sequences, max_move=s.max_move,
                                          generator=gen)  # fmt: skip
    store: dict[str, list[dict[str, Any]]] = {}
    for i in range(s.sequences):
        found = sequence_rows(model, robot, q_true[i], targets[i], s, gen, i < s.timed_sequences)
        for method, row in found.items():
            store.setdefault(method, []).append(row)
        if log is not None and i % 10 == 0:
            log(f"sequence {i}: windowed {100 * found['IKNet windowed']['mean_error']:.2f} cm")
    table = Table(f"{name or robot.name}, {s.sequences} smooth sequences of {s.length} "
                  f"targets, r = {s.radius} rad", _columns(), notes=_notes(s))  # fmt: skip
    for method, rows in store.items():
        row = {k: _mean(rows, k) for k in rows[0]}
        row["max_jump"] = max(r["max_jump"] for r in rows)
        row["worst_error"] = max(r["worst_error"] for r in rows)
        table.add(method, **row)
    return table


def _notes(s: PathsSettings) -> list[str]:
    return [
        "Per sequence: mean error per path = mean over the sequence's steps of the distance "
        "(FK in float64) to the target; 'mean error' averages it over paths and sequences; "
        "'best path' is the mean over sequences of the best path's; 'worst path' the worst "
        "path over all sequences. Max jump: the largest change of any joint between two steps, "
        "over every path; mean jump: mean absolute joint change per step. 'Sequences with "
        "every path ...': the issue's goal, met by a sequence when all its paths are.",
        f"Distinct paths: greedy count (torchik.learn.count_distinct_paths) of paths whose "
        f"joints are at least {DISTINCT_TOL:g} rad apart on average over the steps (mean over "
        "steps of the joint-space Euclidean distance) from every path kept before; mean over "
        "sequences.",
        f"Targets: make_smooth_targets(max_move={s.max_move} rad, margin 0.1): every joint "
        "moves from a random start to a random end with a (1 - cos) profile; the true path's "
        f"largest step is {s.max_move} * pi / (2 * {s.length - 1}) rad.",
        "Windowed: step 0 sampled freely, then every joint drawn within r of the same path's "
        "previous value (IKNet.sample_within). 'best of m' draws m windowed candidates per path "
        "and step and keeps the nearest (uses FK in the loop).",
        "LM refinement: LM (position only, tol 1e-5 m, 30 iterations, no restarts) seeded with "
        "each step of the windowed paths, every step on its own: its jumps are not bounded by r. "
        "r-constrained: refine_path(radius=r), the steps in order, all paths of the sequence in "
        "one batch, step t solved within [q_{t-1} - r, q_{t-1} + r] ∩ joint limits (q_{t-1} the "
        "refined previous step; solve_ik(lower=, upper=)) seeded with the sampled step moved "
        "into that box, random restarts inside the box where that seed stalls (LM, tol 1e-5 m, "
        "30 iterations per step): no jump above r by construction. Step 0 is refined freely. "
        "Each path is refined forwards and backwards (last step first) and the direction with "
        "the lower mean error is kept (both_ways=True).",
        "Times: sampling plus refinement of all paths of a sequence, the median of "
        "experiments.timing.time_call (torch.utils.benchmark, random generators replayed), mean "
        f"over the first {min(s.timed_sequences, s.sequences)} sequences, 1 CPU thread.",
        "Sequential LM: torchik.solve_ik at each step seeded with the previous solution (tol "
        "1e-5 m, no restarts), one path per sequence; the paper's IKPy baseline reaches 3.0 cm.",
        "Paper (Digit arm, 100 generated paths): 3.0 cm average, 1.8 cm best path.",
    ]

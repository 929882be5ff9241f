"""The pose table (protocol "Full-pose learned IK", IKFlow's): a model's samples for full poses.

Test poses are FK poses of configurations uniform within the limits (seed ``seed``; the pretrained
models' held-out :data:`torchik.models.pretrained.TEST_SEED` by default). Four tables: the raw
samples' errors (by :mod:`torchik.learn.evaluate`); every sample refined into an exact solution
(:func:`torchik.ik.refine_samples`) and the distinct solutions kept; the time for ``many`` exact
solutions of one pose (sampling and refinement in one call, :func:`torchik.models.solve_with_model`,
with the model's own sampler and, given ``many_options``, another) against ``solve_ik`` without a
model; one solution for each pose. Success is judged by a float64 FK (the robot's own, or
``check``); runtimes come from :func:`experiments.timing.time_call`.

Example:
    >>> import torch, torchik
    >>> from torchik.models import load_pretrained
    >>> from experiments import pose_table
    >>> robot = torchik.load_robot("panda", dtype=torch.float64)
    >>> tables = pose_table(robot, load_pretrained("panda"), n_poses=2, n_samples=4, many=8,
    ...                     timing_poses=1, min_run_time=0.01)
    >>> [len(t.rows) for t in tables]
    [1, 2, 5, 2]
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from experiments.numerical import FK, Problem, errors, run_timed
from experiments.table import Column, Table, Tables, fmt_pct, fmt_time
from torchik.geometry import joint_distance
from torchik.ik import IKResult, collect_solutions, refine_samples, solve_ik
from torchik.ik.refine import MARGIN
from torchik.learn import evaluate_samples, sample_errors
from torchik.models import model_targets, solve_with_model

__all__ = ["pose_table"]

POS_TOL, ROT_TOL, STRICT_TOL = 1e-3, 0.01, 1e-5  # m, rad (IKFlow's 1 mm / 0.01 rad)
DISTINCT = 0.1  # rad: IKResult.distinct(min_distance)
TOP_UP_ROUNDS = 5


@dataclass
class Setup:
    """What every part of the protocol shares."""

    problem: Problem  # the robot (float64), link, the test poses and the judging FK
    model: Any
    label: str
    min_run_time: float
    many_options: Mapping[str, Any] | None = None  # solve_with_model keywords, many rows
    many_label: str = ""  # their name in the rows

    @property
    def robot(self):
        return self.problem.robot

    def at(self, index: int) -> Problem:
        """The problem of one pose (a batch of 1)."""
        p = self.problem
        return Problem(p.robot, p.link, p.targets[index : index + 1], p.starts, p.fk)


def sample(
    model: Any, poses: Tensor, n: int, seed: int, options: Mapping[str, Any] | None = None
) -> Tensor:
    """``(N, n, dof)`` float64 samples of ``model`` for ``poses (N, 4, 4)`` (``(n, dof)`` for
    one pose ``(4, 4)``), with a fresh generator seeded ``seed``; ``options`` for
    ``model.sample``."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        return model.sample(model_targets(model, poses), n, gen, **(options or {})).double()


def distinct_counts(q: Tensor, ok: Tensor, errs: dict[str, Tensor], continuous: Tensor) -> Tensor:
    """``(N,)`` solutions per pose kept by ``IKResult.distinct(DISTINCT)`` among those ``ok``."""
    pos, rot = errs["position"], errs["rotation"]
    result = IKResult(q, ok, pos, rot, torch.zeros_like(pos, dtype=torch.long), POS_TOL,
                      ROT_TOL, continuous)  # fmt: skip
    return result.distinct(DISTINCT)[1].sum(dim=-1)


def passed(errs: dict[str, Tensor], tol_position: float, tol_rotation: float) -> Tensor:
    """``(N, K)`` bool: within both tolerances and the limits."""
    return (errs["position"] < tol_position) & (errs["rotation"] < tol_rotation) & errs["inside"]


# ------------------------------------------------------------------------------ raw samples
def _f1(v: float) -> str:
    return f"{v:.1f}"


RAW_COLUMNS = [
    Column("samples", "samples"),
    Column("pos_mean_mm", "position mean (mm)", _f1),
    Column("pos_median_mm", "position median (mm)", _f1),
    Column("rot_mean_deg", "rotation mean (°)", _f1),
    Column("rot_median_deg", "rotation median (°)", _f1),
    Column("accuracy", "samples within 1 mm, 0.01 rad", fmt_pct),
    Column("accurate_poses", "poses with such a sample", fmt_pct),
    Column("best_pos_mm", "best of n: position (mm)", _f1),
    Column("best_rot_deg", "best of n: rotation (°)", _f1),
    Column("outside_limits", "outside limits", fmt_pct),
    Column("diversity", "diversity (rad)", lambda v: f"{v:.2f}"),
    Column("distinct", f"distinct samples per pose (> {DISTINCT:g} rad)", _f1),
    Column("sample_s", "sampling time, all", fmt_time),
]


def raw_table(setup: Setup, samples: Tensor, sample_s: float) -> tuple[Table, Tensor]:
    """Errors of the raw samples (:func:`torchik.learn.evaluate_samples` and
    :func:`~torchik.learn.sample_errors`, the robot's float64 FK); also the ``(N,)``
    distinct raw samples per pose."""
    table = Table("Raw samples (no refinement)", RAW_COLUMNS)
    distinct = raw_row(table, setup, setup.label, samples, sample_s)
    table.notes.append(
        "best of n: per pose the sample with the smallest position / 1 mm + rotation / 0.01 rad, "
        "its two errors averaged over the poses; diversity: mean pairwise joint distance of the "
        f"{samples.shape[1]} samples of a pose (rad), averaged over poses; distinct: greedy "
        f"`IKResult.distinct({DISTINCT:g})` over all samples whatever their error."
    )
    return table, distinct


def raw_row(table: Table, setup: Setup, name: str, samples: Tensor, sample_s: float) -> Tensor:
    """Add the row of raw ``samples (N, n, dof)``; return the ``(N,)`` distinct samples per
    pose."""
    from torchik.learn import encode_target

    robot, spec = setup.robot, setup.model.spec
    targets = encode_target(setup.problem.targets, "pose")
    report = evaluate_samples(robot, samples, targets, spec, thresholds=(), limit_tol=1e-6)
    pos, rot = sample_errors(robot, samples, targets, spec)
    assert rot is not None and report.rotation_mean is not None  # full-pose targets
    assert report.rotation_median is not None
    errs = {"position": pos, "rotation": rot}
    distinct = distinct_counts(samples, torch.ones_like(pos, dtype=torch.bool), errs,
                               robot.continuous)  # fmt: skip
    best = (pos + rot * (POS_TOL / ROT_TOL)).argmin(dim=-1, keepdim=True)  # by normalised sum
    accurate = (pos < POS_TOL) & (rot < ROT_TOL)
    table.add(
        name, samples=f"{samples.shape[0]} × {samples.shape[1]}",
        pos_mean_mm=1000 * report.position_mean, pos_median_mm=1000 * report.position_median,
        rot_mean_deg=math.degrees(report.rotation_mean),
        rot_median_deg=math.degrees(report.rotation_median),
        accuracy=accurate.double().mean().item(),
        accurate_poses=accurate.any(-1).double().mean().item(),
        best_pos_mm=1000 * pos.gather(-1, best).mean().item(),
        best_rot_deg=math.degrees(rot.gather(-1, best).mean().item()),
        best_pos_only_mm=1000 * pos.amin(-1).mean().item(),
        outside_limits=report.fraction_outside_limits, diversity=report.diversity,
        distinct=distinct.double().mean().item(), sample_s=sample_s,
    )  # fmt: skip
    return distinct


# ------------------------------------------------------------------------------ refinement
REFINED_COLUMNS = [
    Column("seeds", "seeds"),
    Column("tolerance", "tolerance"),
    Column("success_samples", "success (samples)", fmt_pct),
    Column("success_poses", "success (poses)", fmt_pct),
    Column("distinct_mean", f"distinct kept per pose (> {DISTINCT:g} rad), mean", _f1),
    Column("distinct_min", "min"),
    Column("raw_distinct_mean", "distinct raw samples per pose, mean", _f1),
    Column("moved_mean", "joint distance moved, mean (rad)", lambda v: f"{v:.3f}"),
    Column("moved_median", "median (rad)", lambda v: f"{v:.3f}"),
    Column("iterations", "LM iterations, mean", _f1),
    Column("iterations_ok", "successes' LM iterations, median", _f1),
    Column("within_two", "successes in <= 2 iterations", fmt_pct),
    Column("failed_at_limit", "failures ending on a joint limit", fmt_pct),
    Column("refine_s", "refinement time, all", fmt_time),
    Column("total_s", "sampling + refinement", fmt_time),
]


def refined_row(table: Table, setup: Setup, samples: Tensor, raw: tuple, tol: tuple) -> None:
    """Refine every sample at tolerance ``tol = (m, rad)``, time it, judge it, add a row."""
    robot, p, (tol_p, tol_r) = setup.robot, setup.problem, tol
    options = {"tol_position": tol_p, "tol_rotation": tol_r, "num_threads": 1}
    refine = lambda: refine_samples(robot, p.targets, samples, p.link, **options)  # noqa: E731
    result, timing, _ = run_timed(refine, setup.min_run_time)
    errs = errors(p, result.q)
    ok = passed(errs, tol_p, tol_r)
    kept = distinct_counts(result.q, ok, errs, robot.continuous)
    moved = joint_distance(result.q, samples, robot.continuous)
    near = lambda bound: (result.q - bound).abs() < 1e-6  # noqa: E731
    at_limit = (near(robot.lower) | near(robot.upper)).any(dim=-1)
    ok_iterations = result.iterations[ok].double()  # failures run to the cap and skew the mean
    table.add(
        f"{setup.label} + refine_samples (LM)",
        seeds=f"{samples.shape[0]} × {samples.shape[1]}", tolerance=f"{tol_p:g} m, {tol_r:g} rad",
        success_samples=ok.double().mean().item(), success_poses=ok.any(-1).double().mean().item(),
        distinct_mean=kept.double().mean().item(), distinct_min=int(kept.min()),
        raw_distinct_mean=raw[1].double().mean().item(),
        moved_mean=moved.mean().item(), moved_median=moved.median().item(),
        iterations=result.iterations.double().mean().item(), refine_s=timing.median,
        iterations_ok=ok_iterations.median().item() if ok_iterations.numel() else None,
        within_two=(ok_iterations <= 2).double().mean().item() if ok_iterations.numel() else None,
        failed_at_limit=at_limit[~ok].double().mean().item() if bool((~ok).any()) else None,
        total_s=raw[0]["sample_s"] + timing.median, timed_runs=timing.runs,
        solver_says_success=result.success.double().mean().item(),
    )  # fmt: skip


def refined_table(setup: Setup, samples: Tensor, raw: tuple) -> Table:
    """Every sample refined at 1 mm / 0.01 rad and at 1e-5 m / 1e-5 rad; ``raw``: the raw
    table's row and distinct raw samples per pose."""
    table = Table("Every sample refined (LM, the sample as its seed)", REFINED_COLUMNS)
    for tol in ((POS_TOL, ROT_TOL), (STRICT_TOL, STRICT_TOL)):
        refined_row(table, setup, samples, raw, tol)
    table.notes.append(
        "`torchik.ik.refine_samples` = `solve_ik(seeds=samples, early_stop=False, "
        "restarts=False)`: every sample runs (default 100 iterations at most) and a sample that "
        "stalls stays a failure; success is judged by the float64 check (tolerances and joint "
        "limits); 'distinct kept': greedy `IKResult.distinct(0.1)` over the checked successes; "
        "'moved': joint distance between each sample and its refined solution, all samples; "
        "'LM iterations, mean' counts every sample, so the failures, which run to the cap, "
        "weigh in it; the successes' median and the share of successes within two iterations "
        "read the convergence; "
        "'failures ending on a joint limit': failed samples with some joint within 1e-6 rad of "
        "a limit (LM clamps at the limits, where it can stall short of the pose). Times: "
        "`torch.utils.benchmark` median; sampling time from the raw table."
    )
    return table


# ------------------------------------------------------------------------------ one pose
Solve = Callable[[Tensor, int, int], IKResult]
"""``(pose (4, 4), n, seed) -> IKResult (n, dof)``: ``n`` seeds of one pose, each refined."""


@dataclass(frozen=True)
class Method:
    """A row of the one-pose table: how the seeds are made and refined, and whether to top up.

    ``solve`` None: ``solve_ik``'s own seeding; ``draw``: the seeds alone (timed once per pose
    for the 'drawing' column); ``model``: the seeds come from the model."""

    solve: Solve | None
    draw: Callable[[Tensor, int, int], Tensor] | None
    top_up: bool
    model: bool = False


def one_pose(setup: Setup, method: Method, pose: Tensor, many: int, seed: int) -> dict:
    """``many`` solutions of one pose by a method: the refined ``q`` and the seeds used."""
    robot, link = setup.robot, setup.problem.link
    if method.solve is None:  # solve_ik's own seeding
        gen = torch.Generator().manual_seed(seed)
        result = solve_ik(robot, pose, link, num_seeds=many, early_stop=False,
                          tol_rotation=ROT_TOL, generator=gen, num_threads=1)  # fmt: skip
        return {"q": result.q, "seeds": many}
    solve = method.solve
    if not method.top_up:
        return {"q": solve(pose, many, seed).q, "seeds": many}
    got = collect_solutions(lambda n, round_: solve(pose, n, seed + round_), many,
                            rounds=TOP_UP_ROUNDS)  # fmt: skip
    return {"q": got.q, "seeds": got.seeds}


def one_pose_methods(setup: Setup, many: int) -> dict[str, Method]:
    """Name -> :class:`Method`. The model's rows draw and refine in one call
    (:func:`torchik.models.solve_with_model`); with :attr:`Setup.many_options` the model's own
    sampler and the solver's defaults keep one row (the reference) and the options get the
    others."""
    model, robot, label, link = setup.model, setup.robot, setup.label, setup.problem.link

    def with_model(options: Mapping[str, Any]) -> tuple[Solve, Callable]:
        keywords = {"tol_rotation": ROT_TOL, "num_threads": 1, **options}

        def solve(pose: Tensor, n: int, seed: int) -> IKResult:
            gen = torch.Generator().manual_seed(seed)
            return solve_with_model(robot, model, pose, n, link, generator=gen, **keywords).result

        def draw(pose: Tensor, n: int, seed: int) -> Tensor:
            return sample(model, pose, n, seed, options.get("sample_options"))

        return solve, draw

    def uniform(pose: Tensor, n: int, seed: int) -> Tensor:
        return robot.random_configuration(n, torch.Generator().manual_seed(seed))

    def refine_uniform(pose: Tensor, n: int, seed: int) -> IKResult:
        return refine_samples(robot, pose, uniform(pose, n, seed), link, tol_rotation=ROT_TOL,
                              num_threads=1)  # fmt: skip

    own, fast = with_model({}), with_model(setup.many_options or {})
    fast_label = f"{label}, {setup.many_label}" if setup.many_options else label
    rows = {f"{label}: {many} samples + solve_with_model": Method(*own, False, True)}
    if setup.many_options:
        rows[f"{fast_label}: {many} samples + solve_with_model"] = Method(*fast, False, True)
    return rows | {
        f"{fast_label}: samples + solve_with_model until {many} solve": Method(*fast, True, True),
        f"no model: {many} uniform random seeds + refine_samples":
            Method(refine_uniform, uniform, False),
        f"no model: uniform seeds + refine_samples until {many} solve":
            Method(refine_uniform, uniform, True),
        f"no model: solve_ik(num_seeds={many}, early_stop=False), own seeding":
            Method(None, None, False),
    }  # fmt: skip


def one_pose_run(setup: Setup, method: Method, index: int, many: int) -> dict:
    """One method on test pose ``index``: timed, its answer judged; the seeds' drawing alone
    timed once after."""
    pose, p, seed = setup.problem.targets[index], setup.at(index), 7 + index
    run, timing, cpu = run_timed(lambda: one_pose(setup, method, pose, many, seed),
                                 setup.min_run_time)  # fmt: skip
    draw_s = 0.0
    if method.draw is not None:
        start = time.perf_counter()
        method.draw(pose, many, seed)
        draw_s = time.perf_counter() - start
    errs = errors(p, run["q"][None])
    ok = passed(errs, POS_TOL, ROT_TOL)
    kept = distinct_counts(run["q"][None], ok, errs, setup.robot.continuous) if ok.numel() else [0]
    distinct = int(kept[0])  # no solution kept when topping up found none
    return {**run, "wall": timing.median, "cpu": cpu, "solutions": int(ok.sum()),
            "distinct": distinct, "draw": draw_s, "model": method.model,
            "top_up": method.top_up}  # fmt: skip


ONE_POSE_COLUMNS = [
    Column("poses", "poses"),
    Column("seeds", "seeds (median)"),
    Column("wall_s", "wall time (median)", fmt_time),
    Column("wall_iqr", "quartiles"),
    Column("draw_s", "drawing the seeds alone (median)", fmt_time),
    Column("cpu_s", "CPU time (median)", fmt_time),
    Column("solutions", "solutions (median)"),
    Column("solutions_min", "min"),
    Column("distinct", f"distinct (> {DISTINCT:g} rad, median)"),
]


def one_pose_row(table: Table, name: str, runs: list[dict], many: int) -> None:
    """The medians over the poses of one method's runs."""
    walls = torch.tensor([r["wall"] for r in runs], dtype=torch.float64)
    solutions = [r["solutions"] for r in runs]
    median_of = lambda key: torch.tensor([float(r[key]) for r in runs]).median().item()  # noqa: E731
    q1, q3 = torch.quantile(walls, torch.tensor([0.25, 0.75], dtype=torch.float64)).tolist()
    table.add(
        name, poses=len(runs), seeds=int(median_of("seeds")), wall_s=walls.median().item(),
        wall_iqr=f"{fmt_time(q1)} – {fmt_time(q3)}", draw_s=median_of("draw") or None,
        cpu_s=median_of("cpu"), solutions=int(median_of("solutions")),
        solutions_min=min(solutions), distinct=int(median_of("distinct")),
        walls=walls.tolist(), solutions_all=solutions, model=runs[0]["model"],
        top_up=runs[0]["top_up"],
    )  # fmt: skip


def one_pose_table(setup: Setup, n_poses: int, many: int) -> Table:
    """``many`` exact solutions of one pose: every method on each of the first poses in turn."""
    methods = one_pose_methods(setup, many)
    runs: dict[str, list[dict]] = {name: [] for name in methods}
    for i in range(n_poses):
        for name, method in methods.items():
            runs[name].append(one_pose_run(setup, method, i, many))
    table = Table(f"{many} exact solutions of one pose (1 mm, 0.01 rad)", ONE_POSE_COLUMNS)
    for name in methods:
        one_pose_row(table, name, runs[name], many)
    table.notes += [
        f"Each of the first {n_poses} test poses in turn, every method on each pose; wall time "
        "= sampling (model rows) + refinement, `torch.utils.benchmark` median per pose, then "
        "the median over the poses (quartiles beside it); 'drawing seeds alone': one call "
        f"drawing {many} seeds, after the timed ones. 'solutions': configurations passing "
        f"the float64 check (1 mm, 0.01 rad, limits); 'until {many} solve': "
        f"`torchik.ik.collect_solutions`, {100 * MARGIN:g} % more samples or seeds than {many} "
        "refined first, then 1.5 × the shortfall per round until "
        f"{many} succeed (at most {TOP_UP_ROUNDS} rounds), the first {many} kept.",
        *([f"{setup.many_label} = `{setup.many_options}`."] if setup.many_options else []),
        "CPU time: the process's CPU time per call over every call the timer made. With one "
        "torch thread it is close to the wall time on an idle core, and other jobs inflate it far "
        "less than the wall time.",
    ]
    return table


# ------------------------------------------------------------------------------ one each
ONE_EACH_COLUMNS = [
    Column("poses", "poses"),
    Column("seeds", "seeds per pose"),
    Column("success", "success (1 mm, 0.01 rad)", fmt_pct),
    Column("sample_s", "sampling", fmt_time),
    Column("wall_s", "wall time, all poses", fmt_time),
    Column("per_pose_s", "per pose", fmt_time),
]


def one_each_table(setup: Setup, k: int) -> Table:
    """One solution for each test pose: ``k`` model samples per pose as ``solve_ik`` seeds
    (early stop: the first seeds run first, the others only for the poses still unsolved),
    against ``solve_ik``'s own seeding."""
    robot, p, model = setup.robot, setup.problem, setup.model
    table = Table(f"One solution for each of {len(p.targets)} poses", ONE_EACH_COLUMNS)

    def with_model() -> tuple[IKResult, float]:
        start = time.perf_counter()
        seeds = sample(model, p.targets, k, seed=11)
        took = time.perf_counter() - start
        ik = solve_ik(robot, p.targets, p.link, seeds=seeds, tol_rotation=ROT_TOL, num_threads=1)
        return ik, took

    def own() -> tuple[IKResult, float]:
        gen = torch.Generator().manual_seed(1)
        ik = solve_ik(robot, p.targets, p.link, tol_rotation=ROT_TOL, generator=gen, num_threads=1)
        return ik, 0.0

    for name, fn, seeds in (
        (f"{setup.label}: {k} samples per pose as seeds, solve_ik", with_model, k),
        ("no model: solve_ik, own seeding (defaults)", own, "2 (+ retries)"),
    ):
        (result, sample_s), timing, _ = run_timed(fn, setup.min_run_time)
        ok = passed(errors(p, result.q), POS_TOL, ROT_TOL).any(-1)
        table.add(
            name, poses=len(p.targets), seeds=seeds, success=ok.double().mean().item(),
            sample_s=sample_s or None, wall_s=timing.median,
            per_pose_s=timing.median / len(p.targets), timed_runs=timing.runs,
        )  # fmt: skip
    table.notes.append(
        "solve_ik defaults (early stop, rounds, tolerance 1 mm / 0.01 rad); wall time = "
        "sampling + solving, `torch.utils.benchmark` median after a warm-up."
    )
    return table


# ------------------------------------------------------------------------------ the table
def pose_table(
    robot,
    model: Any,
    n_poses: int = 1000,
    n_samples: int = 100,
    seed: int = 2026,
    *,
    check: FK | None = None,
    timing_poses: int = 20,
    one_each_samples: int = 4,
    many: int = 1000,
    min_run_time: float = 0.2,
    label: str | None = None,
    many_options: Mapping[str, Any] | None = None,
    many_label: str = "",
) -> Tables:
    """The full-pose protocol of a learned model on its robot: four tables.

    Args:
        robot: the robot (used in float64); the model's ``spec.link`` is the end link.
        model: a :class:`torchik.models.IKModel` trained on pose targets.
        n_poses: test poses.
        n_samples: samples per pose for the raw and refined tables.
        seed: seed of the test configurations (default: the value of
            :data:`torchik.models.pretrained.TEST_SEED`, the pretrained models' held-out poses; not
            imported: ``torchik.models.pretrained`` reaches up to ``torchik``).
        check: float64 FK ``(M, dof) -> (M, 4, 4)`` in the robot's joint order that makes the
            test poses and judges success (default: the robot's own).
        timing_poses: poses for the ``many``-solutions timing.
        one_each_samples: model samples per pose as seeds in the one-each table.
        many: exact solutions of one pose to time.
        min_run_time: seconds of measurement per timing (:func:`time_call`).
        label: the model's name in the rows (default: its family).
        many_options: keywords of :func:`torchik.models.solve_with_model` for the
            ``many``-solutions rows, e.g. ``{"sample_options": {"sampler": FEW_PASSES_BF16},
            "max_iters": 15}``; their ``sample_options`` also make a second raw row. The
            model's own sampler keeps the first raw row, the refined table and one ``many``
            row.
        many_label: the options' name in the rows.

    Returns:
        :class:`~experiments.table.Tables`: raw samples, refined samples, ``many``
        solutions of one pose, one solution for each pose.
    """
    from experiments.numerical import problem

    p = problem(robot, model.spec.link, n_poses, seed, retries=0, check=check)
    setup = Setup(p, model, label or str(model.family), min_run_time, many_options, many_label)
    samples, timing, _ = run_timed(lambda: sample(model, p.targets, n_samples, 0), min_run_time)
    raw, distinct = raw_table(setup, samples, timing.median)
    if many_options and "sample_options" in many_options:
        options = many_options["sample_options"]
        draw = lambda: sample(model, p.targets, n_samples, 0, options)  # noqa: E731
        fast, timing, _ = run_timed(draw, min_run_time)
        raw_row(raw, setup, f"{setup.label}, {many_label}", fast, timing.median)
    tables = Tables([raw, refined_table(setup, samples, (raw.rows[0], distinct))])
    tables.append(one_pose_table(setup, min(timing_poses, n_poses), many))
    tables.append(one_each_table(setup, one_each_samples))
    return tables

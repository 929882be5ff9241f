"""Samplers of a flow-matching model against the one they would replace: raw accuracy on the
held-out targets and the time to draw many samples of one target.

Every sampler draws ``n_samples`` samples for each of ``n_targets`` held-out targets
(:func:`torchik.models.pretrained.held_out_targets`, seed
:data:`~torchik.models.pretrained.TEST_SEED`) from the same noise, once per noise seed, and is
judged by :func:`torchik.learn.evaluate_model` (float64 FK). A sampler is kept when its mean
position and rotation errors are within ``tolerance`` (10 %) of the reference's on every noise
seed. Mean errors are dominated by a tail of samples caught between solutions, so one seed can
move a mean by several percent: two seeds, and the ratio is their worst.

Example:
    >>> from torchik.models import load_pretrained
    >>> from torchik.models.fm import FMSampler
    >>> model = load_pretrained("panda", sampler="own")  # its own sampler: the reference
    >>> table = sampler_table(model, {"euler 2": FMSampler(2, "euler")},
    ...                       n_targets=4, n_samples=2, seeds=(0,), many=8, min_run_time=0.01)
    >>> [row["method"] for row in table.rows]
    ['the config: 32 midpoint steps', 'euler 2']
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from experiments.table import Column, Table, fmt_time
from experiments.timing import time_call
from torchik.learn import evaluate_model
from torchik.models.fm import FlowMatching, FMSampler
from torchik.models.pretrained import TEST_SEED, held_out_targets
from torchik.robot import load_robot

__all__ = ["default_samplers", "sampler_table"]

TOLERANCE = 0.10
"""A sampler may be this much (relatively) less accurate than the reference."""


def _f(v: float) -> str:
    return f"{v:.2f}"


COLUMNS = [
    Column("sampler", "solver, steps, schedule, bfloat16 before t"),
    Column("passes", "network passes"),
    Column("position", "position mean (mm), per seed"),
    Column("rotation", "rotation mean (°), per seed"),
    Column("position_median", "position median (mm), first seed"),
    Column("diversity", "diversity (rad), first seed", _f),
    Column("worst_ratio", "worst ratio to the reference", _f),
    Column("kept", "within 10 %"),
    Column("draw_s", "draw 1000 samples of one target", fmt_time),
]


def _errors(model: FlowMatching, target, robot, n: int, seed: int, sampler) -> dict[str, float]:
    options = None if sampler is None else {"sampler": sampler}
    r = evaluate_model(model, target, robot, n, seed, options)
    errors = {"position": 1000 * r.position_mean, "median": 1000 * r.position_median,
              "diversity": r.diversity}  # fmt: skip
    if r.rotation_mean is not None:  # full-pose targets
        errors["rotation"] = math.degrees(r.rotation_mean)
    return errors


def _draw_seconds(model: FlowMatching, target, sampler, many: int, min_run_time: float) -> float:
    """Seconds to draw ``many`` samples for one target (``torch.utils.benchmark`` median)."""
    gen = torch.Generator(target.device)

    def draw() -> None:
        with torch.inference_mode():
            model.sample(target[0], many, generator=gen.manual_seed(0), sampler=sampler)

    return time_call(draw, min_run_time=min_run_time).median


def _describe(s: FMSampler) -> str:
    low = f", bf16 before {s.bf16_until:g}" if s.bf16_until else ""
    if s.mixed:
        low += ", then mixed" if s.bf16_until else ", mixed"
    grid = "fitted grid, weights, scales" if s.times else f"{s.schedule:g}"
    return f"{s.solver}, {s.steps}, {grid}{low}"


def sampler_table(
    model: FlowMatching,
    samplers: dict[str, FMSampler],
    n_targets: int = 1000,
    n_samples: int = 10,
    seeds: tuple[int, ...] = (TEST_SEED, 0),
    *,
    many: int = 1000,
    min_run_time: float = 0.2,
) -> Table:
    """The model's own sampler (:attr:`FMConfig.sampler`, the reference) and each of
    ``samplers``: errors of raw samples per noise seed, the worst ratio to the reference, and
    the time to draw ``many`` samples of one target.

    Args:
        model: a flow-matching model of a bundled robot (its ``spec`` names robot and targets).
        samplers: name -> sampler.
        n_targets, n_samples: held-out targets and samples per target.
        seeds: noise seeds (each sampler sees the same noise per seed).
        many: samples of one target to time.
        min_run_time: seconds of measurement per timing.

    Returns:
        The :class:`~experiments.table.Table`, one row per sampler, the reference first.

    Raises:
        ValueError: ``model`` has a default sampler, which would stand in for its own
            (load it with ``load_pretrained(name, sampler="own")``).
    """
    if model.default_sampler is not None:
        raise ValueError(
            "sampler_table compares samplers with the model's own; this model samples with a "
            "default sampler: load it with load_pretrained(name, sampler='own')"
        )
    robot = load_robot(model.spec.robot, dtype=torch.float64)
    target = held_out_targets(robot, model.spec.targets, n_targets).to(model.target_mean)
    reference = model.config.sampler
    name = f"the config: {reference.steps} {reference.solver} steps"
    table = Table("Samplers against the model's own", COLUMNS)
    base: list[dict[str, float]] = []
    for label, sampler in {name: None, **samplers}.items():
        errs = [_errors(model, target, robot, n_samples, s, sampler) for s in seeds]
        base = base or errs
        ratio = max(e[k] / b[k] for e, b in zip(errs, base, strict=True)
                    for k in ("position", "rotation") if k in e)  # fmt: skip
        rotation = " / ".join(f"{e['rotation']:.3f}" for e in errs if "rotation" in e)
        table.add(
            label, sampler=_describe(sampler or reference), passes=(sampler or reference).passes,
            position=" / ".join(f"{e['position']:.2f}" for e in errs), rotation=rotation or "—",
            position_median=round(errs[0]["median"], 2), diversity=errs[0]["diversity"],
            worst_ratio=ratio,
            kept="reference" if sampler is None else ("yes" if ratio <= 1 + TOLERANCE else "no"),
            draw_s=_draw_seconds(model, target, sampler, many, min_run_time), errors=errs,
        )  # fmt: skip
    table.notes.append(
        f"{n_targets} held-out targets (seed {TEST_SEED}) x {n_samples} samples, noise seeds "
        f"{', '.join(map(str, seeds))}; 'worst ratio': the largest of a sampler's mean "
        "position and rotation errors (position only for position targets) over the "
        "reference's, over the seeds; kept when it is "
        f"at most {1 + TOLERANCE:g}. Schedule p: time grid t_i = 1 - (1 - i / steps)^p. "
        "Diversity: mean pairwise joint distance of a target's samples, averaged over the "
        "targets. Draw time: `torch.utils.benchmark` median, the first target."
    )
    return table


def default_samplers(model: str | None = None) -> dict[str, Any]:
    """The candidates of ``scripts/fm_samplers.py``: name -> :class:`FMSampler`; with the name
    of a bundled model that has a fitted sampler
    (:func:`torchik.models.pretrained.fitted_sampler`), that one too, in full precision and
    with bfloat16 passes, beside the schedule it started from."""
    from torchik.models.fm import FEW_PASSES, FEW_PASSES_BF16
    from torchik.models.pretrained import fitted_sampler

    fitted = None if model is None else fitted_sampler(model)
    low = None if model is None else fitted_sampler(model, bf16=True)
    extra = {} if fitted is None or low is None else {
        f"dpm2m, {fitted.steps} steps, schedule 2 (the fit's start)": FMSampler(
            fitted.steps, "dpm2m", 2.0),
        f"fitted, {fitted.steps} steps": fitted,
        f"fitted, {fitted.steps} steps, bf16 before 0.98": replace(fitted, bf16_until=0.98),
        f"fitted, {fitted.steps} steps, bf16 before 0.98, then mixed (its bf16 variant)": low,
        f"fitted, {fitted.steps} steps, every pass mixed": replace(fitted, mixed=True),
        f"fitted, {fitted.steps} steps, every pass in bf16": replace(fitted, bf16_until=1.0),
    }  # fmt: skip
    return {
        "midpoint, 8 steps (training's validation)": FMSampler(8, "midpoint"),
        "midpoint, 8 steps, schedule 2": FMSampler(8, "midpoint", 2.0),
        "euler, 16 steps, schedule 2": FMSampler(16, "euler", 2.0),
        "dpm2m, 16 steps, uniform": FMSampler(16, "dpm2m"),
        "dpm2m, 8 steps, schedule 2.5": FMSampler(8, "dpm2m", 2.5),
        "dpm2m, 10 steps, schedule 2": FMSampler(10, "dpm2m", 2.0),
        "FEW_PASSES": FEW_PASSES,
        "dpm2m, 16 steps, schedule 1.75": FMSampler(16, "dpm2m", 1.75),
        "FEW_PASSES_BF16": FEW_PASSES_BF16,
        "FEW_PASSES, bf16 before 0.9": FMSampler(12, "dpm2m", 2.0, 0.9),
        "dpm2m, 10 steps, schedule 2, bf16 before 0.98": FMSampler(10, "dpm2m", 2.0, 0.98),
        "FEW_PASSES, every pass in bf16": FMSampler(12, "dpm2m", 2.0, 1.0),
        **extra,
    }

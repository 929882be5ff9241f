"""Learned-model recipes (issue 13): the NSF flow against conditional flow matching (fm).

Panda positions: every recipe trains with the same :class:`torchik.train.TrainConfig` on a
:class:`torchik.learn.FKStream` (fresh pairs every step, uniform joints) for ``--steps`` steps,
then draws ``--samples`` samples for each of ``--targets`` held-out targets (FK of uniform
joints from another seed). Metrics of the raw samples (no refinement): mean and median distance
between the FK of a sample and its target, the share within 1 cm, diversity (mean pairwise
joint distance among a target's samples, radians), seconds of training and of sampling all
targets. The fm model is also sampled with other numbers of integration steps (``--fm-steps``)
without retraining, and with ``--equal-seconds`` trained again for as many steps as fit in the
flow's training seconds (the comparison at equal time). Validation curves: mean error of one
sample per validation target every ``--steps / 10`` steps.

Example:
    >>> args = RecipeRun(recipes=("fm",), steps=2, batch=16, targets=4, samples=3, val_targets=4,
    ...                  fm_steps=(2,))
    >>> rows, curves = run_recipes(args)
    >>> [row["method"] for row in rows]
    ['uniform joints (no model)', 'fm', 'fm, 2 ODE steps']
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from experiments.table import Column, Table, fmt_pct, fmt_time
from torchik.learn import SampleReport, evaluate_model, evaluate_samples

__all__ = [
    "INTRO",
    "RECIPES",
    "RecipeRun",
    "joint_metrics",
    "recipe_tables",
    "run_recipe",
    "run_recipes",
    "sample_metrics",
    "scope_note",
    "train_recipe",
]

Log = Callable[[str], None]
INTRO = (
    "Panda positions: every recipe trains with the same `torchik.train.TrainConfig` on a "
    "`torchik.learn.FKStream` (fresh pairs every step, uniform joints) for `--steps` steps, then "
    "draws `--samples` samples for each of `--targets` held-out targets (FK of uniform joints "
    "from another seed). Metrics of the raw samples (no refinement): mean and median distance "
    "between the FK of a sample and its target, the share within 1 cm, diversity (mean pairwise "
    "joint distance among a target's samples, radians), seconds of training and of sampling all "
    "targets. The fm model is also sampled with other numbers of integration steps (`--fm-steps`)"
    " without retraining, and with `--equal-seconds` trained again for as many steps as fit in "
    "the flow's training seconds (the comparison at equal time). Validation curves: mean error of"
    " one sample per validation target every `--steps / 10` steps."
)
"""The protocol in words (the results' intro; ``--x`` are the script's flags)."""


@dataclass
class RecipeRun:
    """Settings of the comparison (the flags of ``benchmarks/learned_recipes.py``).

    Attributes:
        recipes: names of :data:`RECIPES`.
        steps, batch, lr, ema: training (AdamW, warm-up then cosine; EMA decay, 0: none).
        targets, samples: held-out targets and raw samples per target.
        val_targets: validation targets of the curves.
        fm_steps: fm models are also sampled with these numbers of ODE steps.
        equal_seconds: also train fm for the flow's training seconds.
    """

    recipes: tuple[str, ...] = ("flow", "fm")
    steps: int = 3000
    batch: int = 512
    lr: float = 3e-3
    ema: float = 0.999
    targets: int = 1000
    samples: int = 20
    val_targets: int = 500
    fm_steps: tuple[int, ...] = (2, 4, 16)
    equal_seconds: bool = False


SEEDS = {"model": 0, "stream": 1, "val": 2, "test": 3, "sample": 4}
RECIPES: dict[str, tuple[str, dict[str, Any]]] = {  # name -> (family, config overrides)
    "flow": ("flow", {}),
    "flow+softflow": ("flow", {"softflow": 0.01}),
    "fm": ("fm", {}),
    "fm-logit": ("fm", {"space": "logit"}),
    "fm-uniform-t": ("fm", {"time_power": 1.0}),
}
CM = 100.0


def sample_metrics(
    model: Any, robot: Any, targets: Tensor, n: int, **options: Any
) -> dict[str, Any]:
    """Accuracy and diversity of ``n`` raw samples for each of ``targets (B, 3)``."""
    report = evaluate_model(model, targets, robot, n, SEEDS["sample"], options, dtype=None)
    return _columns(report) | {"sample_s": report.seconds}


def joint_metrics(q: Tensor, robot: Any, targets: Tensor, spec: Any) -> dict[str, float]:
    """Errors and diversity of joints ``q (B, n, D)`` for ``targets (B, 3)``."""
    return _columns(evaluate_samples(robot, q, targets, spec, thresholds=(0.01,)))


def _columns(report: SampleReport) -> dict[str, float]:
    return {
        "mean_cm": report.position_mean * CM,
        "median_cm": report.position_median * CM,
        "acc_1cm": report.accuracy[0.01],
        "diversity": report.diversity,
    }


def train_recipe(
    name: str, robot: Any, val_set: Any, steps: int, args: RecipeRun
) -> tuple[Any, dict[str, Any]]:
    """Train recipe ``name`` of :data:`RECIPES` on an FKStream; the model, its row and curve."""
    family, overrides = RECIPES[name]
    from torchik.models import families
    from torchik.train import TrainConfig, train

    cls = families()[family]
    torch.manual_seed(SEEDS["model"])
    model = cls(val_set.spec, cls.Config(**overrides))
    config = TrainConfig(
        steps=steps, batch_size=args.batch, lr=args.lr, min_lr_ratio=0.02,
        warmup_steps=min(200, steps // 10), log_every=max(1, steps // 10),
        val_every=max(1, steps // 10),
        val_targets=len(val_set), checkpoint_every=0, seed=SEEDS["model"], progress=False,
        ema_decay=args.ema or None, restore_best=False,
    )  # fmt: skip
    from torchik.learn import FKStream

    stream = FKStream(robot, targets="position", seed=SEEDS["stream"])
    result = train(model, stream, val_set, config, robot=robot)
    curve = [
        {"method": name, "step": int(r["step"]), "seconds": r["seconds"],
         "val_cm": r["val_position_error"] * CM}
        for r in result.history if not math.isnan(r["val_position_error"])
    ]  # fmt: skip
    row = {
        "family": family,
        "config": dataclasses.asdict(model.config),
        "steps": result.steps,
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_s": result.seconds,
    }
    return result.model, {"row": row, "curve": curve}


def run_recipe(
    name: str,
    label: str,
    robot: Any,
    val_set: Any,
    test: Any,
    steps: int,
    args: RecipeRun,
    log: Log,
) -> tuple[list, list]:
    """Train one recipe and measure it (an fm model also with ``--fm-steps`` ODE steps)."""
    log(f"training {label} for {steps} steps")
    model, fit = train_recipe(name, robot, val_set, steps, args)
    row = {"method": label, **fit["row"]}
    rows = [row | sample_metrics(model, robot, test.target, args.samples)]
    log(f"{label}: {rows[-1]}")
    if fit["row"]["family"] == "fm":
        for ode in args.fm_steps:
            metrics = sample_metrics(model, robot, test.target, args.samples, steps=ode)
            rows.append({**row, "method": f"{label}, {ode} ODE steps", **metrics})
            log(f"{rows[-1]['method']}: {metrics}")
    return rows, [{**point, "method": label} for point in fit["curve"]]


def run_recipes(
    args: RecipeRun, log: Log = lambda message: None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every recipe's rows (after a "no model" row of uniform joints) and validation curves."""
    from torchik.learn import FKStream
    from torchik.robot import load_robot

    robot = load_robot("panda")
    source = FKStream(robot, targets="position", seed=SEEDS["stream"])
    val_set = source.draw(args.val_targets, seed=SEEDS["val"])
    test = source.draw(args.targets, seed=SEEDS["test"])
    unit = torch.rand(
        args.targets,
        args.samples,
        robot.dof,
        generator=torch.Generator().manual_seed(SEEDS["sample"]),
    )
    prior = robot.lower + (robot.upper - robot.lower) * unit  # what "no model" scores
    rows: list[dict[str, Any]] = [
        {"method": "uniform joints (no model)"}
        | joint_metrics(prior, robot, test.target, test.spec)
    ]
    curves: list[dict[str, Any]] = []
    for name in args.recipes:
        new_rows, new_curve = run_recipe(name, name, robot, val_set, test, args.steps, args, log)
        rows, curves = rows + new_rows, curves + new_curve
    seconds = {row["method"]: row["train_s"] for row in rows if "train_s" in row}
    if args.equal_seconds and {"flow", "fm"} <= set(seconds):
        steps = round(args.steps * seconds["flow"] / seconds["fm"])
        label = "fm, the flow's training seconds"
        new_rows, new_curve = run_recipe("fm", label, robot, val_set, test, steps, args, log)
        rows, curves = rows + new_rows[:1], curves + new_curve
    return rows, curves


def recipe_tables(
    rows: list[dict[str, Any]], curves: list[dict[str, Any]], args: RecipeRun
) -> list[Table]:
    """The results table and the validation-curve table."""
    main = Table(
        f"Panda positions: {args.targets} held-out targets × {args.samples} raw samples",
        [
            Column("steps", "train steps"),
            Column("parameters", "parameters"),
            Column("train_s", "train time", fmt_time),
            Column("mean_cm", "mean error (cm)", lambda x: f"{x:.2f}"),
            Column("median_cm", "median error (cm)", lambda x: f"{x:.2f}"),
            Column("acc_1cm", "< 1 cm", fmt_pct),
            Column("diversity", "diversity (rad)", lambda x: f"{x:.3f}"),
            Column("sample_s", "sampling time", fmt_time),
        ],
    )
    for row in rows:
        main.add(row["method"], **{k: v for k, v in row.items() if k != "method"})
    curve = Table(
        f"Validation curves (mean error of 1 sample on {args.val_targets} targets, EMA weights)",
        [
            Column("step", "step"),
            Column("seconds", "training seconds", lambda x: f"{x:.0f}"),
            Column("val_cm", "mean error (cm)", lambda x: f"{x:.2f}"),
        ],
    )
    for row in curves:
        curve.add(row["method"], **{k: v for k, v in row.items() if k != "method"})
    return [main, curve]


def scope_note(args: RecipeRun) -> str:
    """The scale of a run (CPU minutes, not a GPU's hours)."""
    return (
        f"**CPU scale** ({args.steps} steps of batch {args.batch}, lr {args.lr}, EMA "
        f"{args.ema}, {torch.get_num_threads()} thread(s)): minutes of training where published "
        "learned-IK models train for hours on a GPU; read the ordering, not the absolute errors."
    )

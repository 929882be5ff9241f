"""Learned-model recipes (issue 13): the NSF flow against conditional flow matching (fm).

Panda positions: every recipe trains with the same :class:`torchik.train.TrainConfig` on a
:class:`torchik.data.FKStream` (fresh pairs every step, uniform joints) for ``--steps`` steps,
then draws ``--samples`` samples for each of ``--targets`` held-out targets (FK of uniform
joints from another seed). Metrics of the raw samples (no refinement): mean and median distance
between the FK of a sample and its target, the share within 1 cm, diversity (mean pairwise
joint distance among a target's samples, radians), seconds of training and of sampling all
targets. The fm model is also sampled with other numbers of integration steps (``--fm-steps``)
without retraining, and with ``--equal-seconds`` trained again for as many steps as fit in the
flow's training seconds (the comparison at equal time). Validation curves: mean error of one
sample per validation target every ``--steps / 10`` steps.

    BENCH_THREADS=1 .venv/bin/python benchmarks/learned_recipes.py --steps 3000 --equal-seconds
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Any

import torch
from common import Column, Report, Table, add_common_args, fmt_pct, fmt_time, log

from torchik import load_robot
from torchik.data import FKStream
from torchik.evaluate import SampleReport, evaluate_model, evaluate_samples
from torchik.models import families
from torchik.train import TrainConfig, train

SEEDS = {"model": 0, "stream": 1, "val": 2, "test": 3, "sample": 4}
RECIPES: dict[str, tuple[str, dict[str, Any]]] = {  # name -> (family, config overrides)
    "flow": ("flow", {}),
    "flow+softflow": ("flow", {"softflow": 0.01}),
    "fm": ("fm", {}),
    "fm-logit": ("fm", {"space": "logit"}),
    "fm-uniform-t": ("fm", {"time_power": 1.0}),
}
CM = 100.0


def sample_metrics(model, robot, targets, n: int, **options: Any) -> dict[str, float]:
    """Accuracy and diversity of ``n`` raw samples for each of ``targets (B, 3)``."""
    report = evaluate_model(model, targets, robot, n, SEEDS["sample"], options, dtype=None)
    return _columns(report) | {"sample_s": report.seconds}


def joint_metrics(q, robot, targets, spec) -> dict[str, float]:
    """Errors and diversity of joints ``q (B, n, D)`` for ``targets (B, 3)``."""
    return _columns(evaluate_samples(robot, q, targets, spec, thresholds=(0.01,)))


def _columns(report: SampleReport) -> dict[str, float]:
    return {
        "mean_cm": report.position_mean * CM,
        "median_cm": report.position_median * CM,
        "acc_1cm": report.accuracy[0.01],
        "diversity": report.diversity,
    }


def train_recipe(name: str, robot, val_set, steps: int, args) -> tuple[Any, dict[str, Any]]:
    family, overrides = RECIPES[name]
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


def run_recipe(name, label, robot, val_set, test, steps, args) -> tuple[list, list]:
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


def run(args) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
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
    rows = [
        {"method": "uniform joints (no model)"}
        | joint_metrics(prior, robot, test.target, test.spec)
    ]
    curves = []
    for name in args.recipes:
        new_rows, new_curve = run_recipe(name, name, robot, val_set, test, args.steps, args)
        rows, curves = rows + new_rows, curves + new_curve
    seconds = {row["method"]: row["train_s"] for row in rows if "train_s" in row}
    if args.equal_seconds and {"flow", "fm"} <= set(seconds):
        steps = round(args.steps * seconds["flow"] / seconds["fm"])
        label = "fm, the flow's training seconds"
        new_rows, new_curve = run_recipe("fm", label, robot, val_set, test, steps, args)
        rows, curves = rows + new_rows[:1], curves + new_curve
    return rows, curves


def tables(rows, curves, args) -> list[Table]:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recipes", nargs="+", default=["flow", "fm"], choices=list(RECIPES))
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--ema", type=float, default=0.999, help="0: no EMA")
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--val-targets", type=int, default=500)
    parser.add_argument("--fm-steps", type=int, nargs="*", default=[2, 4, 16])
    parser.add_argument(
        "--equal-seconds", action="store_true", help="also train fm for the flow's seconds"
    )
    add_common_args(parser)
    args = parser.parse_args()
    report = Report(
        "learned_recipes",
        "Learned IK recipes: NSF flow against flow matching (Panda positions)",
        intro=[
            __doc__.split("\n\n")[1].replace("\n", " ").replace("``", "`").replace(":class:", ""),
            "",
            _scope_note(args),
        ],
    )
    rows, curves = run(args)
    report.tables = tables(rows, curves, args)
    md, _ = report.write(args.out)
    log(f"wrote {md}")


def _scope_note(args) -> str:
    return (
        f"**CPU scale** ({args.steps} steps of batch {args.batch}, lr {args.lr}, EMA "
        f"{args.ema}, {torch.get_num_threads()} thread(s)): minutes of training where published "
        "learned-IK models train for hours on a GPU; read the ordering, not the absolute errors."
    )


if __name__ == "__main__":
    main()

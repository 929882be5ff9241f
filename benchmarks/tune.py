"""Protocol "Hyperparameter search" (tune): the cVAE-vs-INN report's search, at CPU scale.

For each arm and family, :func:`torchik.tune.tune` runs an Optuna study (TPE, median pruning,
the family's default space of :mod:`torchik.tune_space`) whose objective is the posterior
mismatch (MMD², IMQ kernels 0.05, 0.2, 0.9) at ``--search-targets`` targets × ``--search-samples``
samples, each trial trained for ``--steps`` steps on ``--train-size`` prior samples. The tuned
best settings and the family's defaults (its default config for the arm, lr 1e-3, no weight
decay) are then trained again with the same budget and scored at ``--final-targets`` targets ×
``--final-samples`` samples against rejection-sampled posteriors (posterior protocol), where
the gain over the defaults is read.

    .venv/bin/python benchmarks/tune.py --arms 4 --families cvae --trials 4 --steps 200
    .venv/bin/python benchmarks/tune.py --arms 4 6 10 rail --trials 12 --steps 600
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any

from common import Column, Report, Table, add_common_args, fmt_time, log

from torchik.train import train
from torchik.tune import TuneConfig, tune
from torchik.tune_objective import build_trial, make_problem, posterior_metrics

ROBOTS = {"4": "planar:1,1,1,1", "6": "planar:1,1,1,1,1,1", "8": "planar:" + ",".join("1" * 8),
          "10": "planar:" + ",".join("1" * 10), "rail": "rail_arm"}  # fmt: skip


def _final(config: TuneConfig, params: dict[str, Any], problem) -> dict[str, Any]:
    """Train ``params`` with the study's budget and score it on the final targets."""
    model, train_config = build_trial(config, params, problem.train_set.spec)
    result = train(model, problem.train_set, problem.val_set, train_config, robot=problem.robot)
    row = posterior_metrics(result.model, problem, config)
    row["parameters"] = sum(p.numel() for p in model.parameters())
    return row | {"train_s": result.seconds}


def run_case(arm: str, family: str, args, final_problem) -> list[dict[str, Any]]:
    config = TuneConfig(
        family=family, robot=ROBOTS[arm], objective="posterior_mismatch", trials=args.trials,
        steps=args.steps, val_every=max(1, args.steps // 4), batch_size=args.batch,
        train_size=args.train_size, posterior_targets=args.search_targets,
        posterior_samples=args.search_samples, sampler=args.sampler, seed=0,
    )  # fmt: skip
    start = time.perf_counter()
    runs = args.runs / f"{family}_{arm}"
    result = tune(config, runs, resume=(runs / "study.journal").exists(), progress=False)
    seconds = time.perf_counter() - start
    final = dataclasses.replace(
        config, posterior_targets=args.final_targets, posterior_samples=args.final_samples
    )
    base = {"arm": arm, "family": family}
    default = _final(final, {}, final_problem) | base | {"settings": "defaults"}
    tuned = _final(final, result.best_config, final_problem) | base
    tuned |= {"settings": _short(result.best_config), "search_s": seconds,
              "trials": result.trials, "search_best": result.best_value,
              "curve": result.curve, "pruned": result.states.get("PRUNED", 0)}  # fmt: skip
    log(f"{arm} {family}: default {default['posterior_mismatch']:.4f}, tuned "
        f"{tuned['posterior_mismatch']:.4f} ({tuned['settings']})")  # fmt: skip
    return [{"method": "default", **default}, {"method": "tuned", **tuned}]


def _short(params: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in params.items())  # fmt: skip


def tables(rows: list[dict[str, Any]], args) -> list[Table]:
    main = Table(
        f"Defaults against the tuned best, {args.final_targets} targets × {args.final_samples} "
        f"samples, {args.steps} training steps each",
        [
            Column("arm", "arm"), Column("family", "family"), Column("settings", "settings"),
            Column("parameters", "params"), Column("posterior_mismatch", "MMD²", _f4),
            Column("resimulation", "re-sim", lambda x: f"{x:.2e}"),
            Column("train_s", "train", fmt_time), Column("trials", "trials"),
            Column("pruned", "pruned"), Column("search_s", "search time", fmt_time),
        ],
    )  # fmt: skip
    curves = Table(
        f"Search curves: best search objective (MMD², {args.search_targets} targets × "
        f"{args.search_samples} samples) after each trial, pruned ones included",
        [Column("arm", "arm"), Column("family", "family"), Column("curve", "best so far")],
    )
    for row in rows:
        main.add(row["method"], **{k: v for k, v in row.items() if k != "method"})
        if row["method"] == "tuned":
            curves.add("tuned", arm=row["arm"], family=row["family"],
                       curve=" → ".join(f"{v:.4f}" for v in row["curve"]))  # fmt: skip
    return [main, curves]


def _f4(x: float) -> str:
    return f"{x:.4f}"


def goals(rows: list[dict[str, Any]]) -> list[str]:
    lines = []
    for arm in dict.fromkeys(r["arm"] for r in rows):
        mine = [r for r in rows if r["arm"] == arm]
        untuned = min(r["posterior_mismatch"] for r in mine if r["method"] == "default")
        best = min(
            (r for r in mine if r["method"] == "tuned"), key=lambda r: r["posterior_mismatch"]
        )
        value = best["posterior_mismatch"]
        text = f"arm {arm}: untuned best MMD² {untuned:.4f}, tuned best {best['family']} "
        text += f"{value:.4f} (ratio {value / untuned:.2f}), re-sim {best['resimulation']:.2e}"
        if arm == "rail":
            ok = best["posterior_mismatch"] <= 0.007 and best["resimulation"] <= 0.008
            text += f"; goal ≤ 0.007 / ≤ 0.008: {'met' if ok else 'missed'}"
        else:
            met = best["posterior_mismatch"] <= untuned / 2
            text += f"; goal ≤ ½ untuned: {'met' if met else 'missed'}"
        lines.append(text)
    return lines


def _scope(args) -> str:
    return (
        f"**CPU-scale budget** (2 shared cores): {args.trials} trials × {args.steps} steps "
        f"(batch {args.batch}) per arm and family on {args.train_size} training pairs, search "
        f"objective at {args.search_targets} targets × {args.search_samples} samples. The "
        "report's search (100 trials, the best retrained on 10^6 samples for 60 epochs) is "
        "not attempted: every model here is far from converged, so read the gain over the "
        "defaults under the same budget, not the absolute values."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arms", nargs="+", default=["4", "6", "10", "rail"], choices=ROBOTS)
    parser.add_argument("--families", nargs="+", default=["cvae", "inn"])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--train-size", type=int, default=10_000)
    parser.add_argument("--sampler", default="tpe", choices=("tpe", "gp", "random"))
    parser.add_argument("--search-targets", type=int, default=20)
    parser.add_argument("--search-samples", type=int, default=200)
    parser.add_argument("--final-targets", type=int, default=100)
    parser.add_argument("--final-samples", type=int, default=1000)
    parser.add_argument("--runs", type=Path, default=Path("runs/tune_bench"))
    add_common_args(parser)
    args = parser.parse_args()
    intro = [__doc__.split("\n\n")[1].replace("\n", " "), "", _scope(args)]
    report = Report("tune", "Hyperparameter search (protocol tune), at CPU scale", intro=intro)
    rows: list[dict[str, Any]] = []
    for arm in args.arms:
        final = TuneConfig("cvae", ROBOTS[arm], "posterior_mismatch", train_size=args.train_size,
                           posterior_targets=args.final_targets,
                           posterior_samples=args.final_samples)  # fmt: skip
        problem = make_problem(final)
        for family in args.families:
            rows += run_case(arm, family, args, problem)
    report.tables = tables([dict(r) for r in rows], args)
    report.tables[0].notes += goals(rows)
    md, _ = report.write(args.out)
    log(f"wrote {md}")


if __name__ == "__main__":
    main()

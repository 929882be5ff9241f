"""The cVAE-vs-INN report's hyperparameter search, reproduced (``benchmarks/tune.py``).

For each arm and family, :func:`torchik.tune.tune` runs an Optuna study (TPE, median pruning,
the family's default space of :mod:`torchik.tune.space`) whose objective is the posterior
mismatch (MMD², IMQ kernels 0.05, 0.2, 0.9) at ``--search-targets`` targets × ``--search-samples``
samples, each trial trained for ``--steps`` steps on ``--train-size`` prior samples. The tuned
best settings and the family's defaults (its default config for the arm, lr 1e-3, no weight
decay) are then trained again with the same budget and scored at ``--final-targets`` targets ×
``--final-samples`` samples against rejection-sampled posteriors (posterior protocol), where
the gain over the defaults is read.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.posterior_run import arm_problem
from experiments.table import Column, Table, fmt_time
from torchik.train import train
from torchik.tune import TuneConfig, tune
from torchik.tune.objective import build_trial, make_problem, posterior_metrics

__all__ = [
    "INTRO",
    "TuneRun",
    "case_seed",
    "goals",
    "run_arm",
    "run_case",
    "scope_note",
    "tune_tables",
]

Log = Callable[[str], None]
INTRO = (
    "For each arm and family, :func:`torchik.tune.tune` runs an Optuna study (TPE, median "
    "pruning, the family's default space of :mod:`torchik.tune.space`) whose objective is the "
    "posterior mismatch (MMD², IMQ kernels 0.05, 0.2, 0.9) at ``--search-targets`` targets × "
    "``--search-samples`` samples, each trial trained for ``--steps`` steps on ``--train-size`` "
    "prior samples. The tuned best settings and the family's defaults (its default config for the"
    " arm, lr 1e-3, no weight decay) are then trained again with the same budget and scored at "
    "``--final-targets`` targets × ``--final-samples`` samples against rejection-sampled "
    "posteriors (posterior protocol), where the gain over the defaults is read."
)
"""The protocol in words (the results' intro; ``--x`` are the script's flags)."""


@dataclass
class TuneRun:
    """Settings of the search (the flags of ``benchmarks/tune.py``).

    Attributes:
        families: families searched on every arm.
        trials, steps, batch, train_size, sampler: each study's budget and sampler.
        search_targets, search_samples: the search objective's posterior protocol size.
        final_targets, final_samples: the final scoring's size.
        runs: folder of the studies (a study found there is resumed).
    """

    families: tuple[str, ...] = ("cvae", "inn")
    trials: int = 12
    steps: int = 600
    batch: int = 256
    train_size: int = 10_000
    sampler: str = "tpe"
    search_targets: int = 20
    search_samples: int = 200
    final_targets: int = 100
    final_samples: int = 1000
    runs: Path = field(default_factory=lambda: Path("runs/tune_bench"))


def run_arm(arm: str, args: TuneRun, log: Log = lambda message: None) -> list[dict[str, Any]]:
    """Every family's ``default`` and ``tuned`` rows on one arm (``"4"``, ..., ``"rail"``)."""
    final = TuneConfig("cvae", arm_problem(arm), "posterior_mismatch", train_size=args.train_size,
                       posterior_targets=args.final_targets,
                       posterior_samples=args.final_samples)  # fmt: skip
    problem = make_problem(final)
    rows: list[dict[str, Any]] = []
    for family in args.families:
        rows += run_case(arm, family, args, problem, log)
    return rows


def _final(config: TuneConfig, params: dict[str, Any], problem: Any) -> dict[str, Any]:
    """Train ``params`` with the study's budget and score it on the final targets."""
    model, train_config = build_trial(config, params, problem.train_set.spec)
    result = train(model, problem.train_set, problem.val_set, train_config, robot=problem.robot)
    row = posterior_metrics(result.model, problem, config)
    row["parameters"] = sum(p.numel() for p in model.parameters())
    return row | {"train_s": result.seconds}


def run_case(
    arm: str, family: str, args: TuneRun, final_problem: Any, log: Log = lambda message: None
) -> list[dict[str, Any]]:
    """Search one family on one arm, then train its defaults and its tuned best again and score
    both on the final targets: the ``default`` and ``tuned`` rows."""
    config = TuneConfig(
        family=family, robot=arm_problem(arm), objective="posterior_mismatch", trials=args.trials,
        steps=args.steps, val_every=max(1, args.steps // 4), batch_size=args.batch,
        train_size=args.train_size, posterior_targets=args.search_targets,
        posterior_samples=args.search_samples, sampler=args.sampler, seed=case_seed(arm, family),
    )  # fmt: skip
    runs = args.runs / f"{family}_{arm}"
    result = tune(config, runs, resume=(runs / "study.journal").exists(), progress=False)
    final = dataclasses.replace(
        config, posterior_targets=args.final_targets, posterior_samples=args.final_samples
    )
    base = {"arm": arm, "family": family, "seed": config.seed}
    default = _final(final, {}, final_problem) | base | {"settings": "defaults"}
    tuned = _final(final, result.best_config, final_problem) | base
    tuned |= {"settings": _short(result.best_config), "search_s": result.trial_seconds,
              "trials": result.trials, "search_best": result.best_value,
              "curve": result.curve, "pruned": result.states.get("PRUNED", 0)}  # fmt: skip
    log(f"{arm} {family}: default {default['posterior_mismatch']:.4f}, tuned "
        f"{tuned['posterior_mismatch']:.4f} ({tuned['settings']})")  # fmt: skip
    return [{"method": "default", **default}, {"method": "tuned", **tuned}]


def case_seed(arm: str, family: str) -> int:
    """The seed of one arm and family's study (training, data and sampler derive theirs from
    it): each study draws its own first trials, where one seed for all made every study start
    from the same settings."""
    return zlib.crc32(f"{arm}/{family}".encode()) % 10_000


def _short(params: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in params.items())  # fmt: skip


def tune_tables(rows: list[dict[str, Any]], args: TuneRun) -> list[Table]:
    """The defaults-vs-tuned table (with the goals' verdicts) and the search curves."""
    main = Table(
        f"Defaults against the tuned best, {args.final_targets} targets × {args.final_samples} "
        f"samples, {args.steps} training steps each",
        [
            Column("arm", "arm"), Column("family", "family"), Column("seed", "seed"),
            Column("settings", "settings"),
            Column("parameters", "params"), Column("posterior_mismatch", "MMD²", _f4),
            Column("resimulation", "re-sim", lambda x: f"{x:.2e}"),
            Column("train_s", "train", fmt_time), Column("trials", "trials"),
            Column("pruned", "pruned"), Column("search_s", "trials' time", fmt_time),
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
    main.notes += goals(rows)
    return [main, curves]


def _f4(x: float) -> str:
    return f"{x:.4f}"


def goals(rows: list[dict[str, Any]]) -> list[str]:
    """Per arm: the tuned best against the untuned best, and the issue's goal met or missed."""
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


def scope_note(args: TuneRun) -> str:
    """The budget of a run (CPU scale, not the report's search)."""
    return (
        f"**CPU-scale budget** (2 shared cores): {args.trials} trials × {args.steps} steps "
        f"(batch {args.batch}) per arm and family on {args.train_size} training pairs, search "
        f"objective at {args.search_targets} targets × {args.search_samples} samples. The "
        "report's search (100 trials, the best retrained on 10^6 samples for 60 epochs) is "
        "not attempted: every model here is far from converged, so read the gain over the "
        "defaults under the same budget, not the absolute values."
    )

"""Protocol "Hyperparameter search" (tune): the cVAE-vs-INN report's search, at CPU scale.

The protocol is :mod:`experiments.tune_run`; this script parses the flags and writes the
results.

    .venv/bin/python benchmarks/tune.py --arms 4 --families cvae --trials 4 --steps 200
    .venv/bin/python benchmarks/tune.py --arms 4 6 10 rail --trials 12 --steps 600
"""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path
from typing import Any

from common import Report, add_common_args, log, wait_for_quiet

from experiments.posterior_run import ARMS
from experiments.tune_run import INTRO, TuneRun, run_arm, scope_note, tune_tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arms", nargs="+", default=["4", "6", "8", "10", "rail"], choices=ARMS)
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
    args.families = tuple(args.families)
    settings = TuneRun(**{f.name: getattr(args, f.name) for f in fields(TuneRun)})
    intro = [INTRO, "", scope_note(settings)]
    report = Report("tune", "Hyperparameter search (protocol tune), at CPU scale", intro=intro)
    report.stamp["waited_for_quiet_s"] = wait_for_quiet(args.wait_idle)
    rows: list[dict[str, Any]] = []
    for arm in args.arms:
        rows += run_arm(arm, settings, log)
    report.tables = tune_tables([dict(r) for r in rows], settings)
    md, _ = report.write(args.out)
    log(f"wrote {md}")


if __name__ == "__main__":
    main()

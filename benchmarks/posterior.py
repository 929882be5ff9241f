"""Protocol "Posterior" (posterior): learned IK models against rejection-sampled posteriors.

The protocol is :mod:`experiments.posterior_run` (arms, ground truth, training, tables);
this script parses the flags and writes the results.

    .venv/bin/python benchmarks/posterior.py --arms 4 rail --targets 20 --minutes 2
    .venv/bin/python benchmarks/posterior.py --targets 1000 --steps 20000 --train-size 1000000
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from common import Report, add_common_args, log, wait_for_quiet

from experiments.posterior_run import (
    ARMS,
    INTRO,
    PosteriorRun,
    default_families,
    posterior_tables,
    run_arm,
    scope_note,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arms", nargs="+", default=list(ARMS))
    parser.add_argument("--families", nargs="+", default=None, help="default: all registered")
    parser.add_argument("--targets", type=int, default=100)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--radius", type=float, default=0.01, help="base acceptance radius")
    parser.add_argument("--max-draws", type=int, default=1 << 24, help="per widening round")
    parser.add_argument("--threads", type=int, default=1, help="for the rejection sampling")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=int, default=None, help="training steps per model")
    budget.add_argument("--minutes", type=float, default=2.0, help="training time per model")
    parser.add_argument("--train-size", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--preset", choices=("tiny", "small", "default"), default="small")
    add_common_args(parser)
    args = parser.parse_args()
    args.families = tuple(args.families or default_families())
    arms = args.arms
    settings = PosteriorRun(**{f.name: getattr(args, f.name) for f in fields(PosteriorRun)})
    report = Report(
        "posterior",
        "Posterior quality of learned IK (protocol Posterior)",
        intro=[INTRO, "", scope_note(settings, arms)],
    )
    report.stamp["waited_for_quiet_s"] = wait_for_quiet(args.wait_idle)
    rows, infos = [], []
    for name in args.arms:
        arm_rows, info = run_arm(name, settings, log)
        rows += arm_rows
        infos.append(info)
    report.tables = posterior_tables(rows, infos, args.samples)
    md, _ = report.write(args.out)
    log(f"wrote {md}")


if __name__ == "__main__":
    main()

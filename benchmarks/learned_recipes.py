"""Learned-model recipes (issue 13): the NSF flow against conditional flow matching (fm).

The protocol is :mod:`experiments.recipes`; this script parses the flags and writes the
results.

    BENCH_THREADS=1 .venv/bin/python benchmarks/learned_recipes.py --steps 3000 --equal-seconds
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from common import Report, add_common_args, log, wait_for_quiet

from experiments.recipes import INTRO, RECIPES, RecipeRun, recipe_tables, run_recipes, scope_note


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
    args.recipes, args.fm_steps = tuple(args.recipes), tuple(args.fm_steps)
    settings = RecipeRun(**{f.name: getattr(args, f.name) for f in fields(RecipeRun)})
    report = Report(
        "learned_recipes",
        "Learned IK recipes: NSF flow against flow matching (Panda positions)",
        intro=[
            INTRO,
            "",
            scope_note(settings),
        ],
    )
    report.stamp["waited_for_quiet_s"] = wait_for_quiet(args.wait_idle)
    rows, curves = run_recipes(settings, log)
    report.tables = recipe_tables(rows, curves, settings)
    md, _ = report.write(args.out)
    log(f"wrote {md}")


if __name__ == "__main__":
    main()

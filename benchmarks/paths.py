"""Path following on the Digit arm: IKNet windowed sampling (Eq. 15), refinement, sequential IK.

The protocol is experiments.paths (what it runs and measures is written there and into
the results file); this script takes the IKNet (--model, else the bundled Digit model, else one
trained here for --steps) and writes results/paths.{md,json}.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import torch
from common import Report, add_common_args, log, wait_for_quiet

import torchik
from experiments.paths import PathsSettings, paths_table
from experiments.small_iknet import load_or_train_iknet


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    parser.add_argument("--sequences", type=int, default=100)
    parser.add_argument("--paths", type=int, default=100, help="IKNet paths per sequence")
    parser.add_argument("--length", type=int, default=50)
    parser.add_argument("--radius", type=float, default=0.1, help="window radius r (rad)")
    parser.add_argument("--candidates", type=int, default=10)
    parser.add_argument("--max-move", type=float, default=1.0)
    parser.add_argument("--timed-sequences", type=int, default=10, help="the first ones")
    parser.add_argument("--model", type=Path, help="an IKNet checkpoint (torchik.models.load)")
    parser.add_argument("--steps", type=int, default=3000, help="training steps (no --model)")
    parser.add_argument("--train-size", type=int, default=20000)
    parser.add_argument("--note", action="append", default=[], help="a line for the intro")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # common sets all cores; this machine is shared
    names = [f.name for f in dataclasses.fields(PathsSettings)]
    settings = PathsSettings(**{k: v for k, v in vars(args).items() if k in names})
    report = Report("paths", "Path following (torchik.learn.paths), Digit arm")  # before training
    report.stamp["waited_for_quiet_s"] = wait_for_quiet(args.wait_idle)
    digit = torchik.load_robot("digit_arm")
    model, what = load_or_train_iknet(digit, args.model, args.steps, args.train_size)
    robot = torchik.load_robot("digit_arm", dtype=torch.float64)
    report.tables = [paths_table(robot, model, settings, "Digit arm", log)]
    report.intro = [f"Model: {what}.", *args.note]
    md, _ = report.write(args.out)
    log(f"wrote {md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

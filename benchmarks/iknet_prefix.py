"""IKNet's error on the Franka, taken apart: feasible prefixes or precise last joints (issue 13).

Trains IKNet as the Neural IK protocol does (``benchmarks/iknet.py``: the same data, seeds and
optimiser; ``--steps``), or loads a trained model (``--checkpoint``), draws raw samples for the
protocol's test targets, and measures :func:`torchik.protocols.iknet_prefix.prefix_rows`: keep
the first k sampled joints, re-solve the rest by numerical IK, and see what still reaches the
target.

    .venv/bin/python benchmarks/iknet_prefix.py --steps 6000 --train-threads 1
    .venv/bin/python benchmarks/iknet_prefix.py --checkpoint RUN/panda_position.pt
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from common import Report, add_common_args, log, wait_for_quiet

import torchik
from torchik.protocols.iknet import iknet_test_targets
from torchik.protocols.iknet_prefix import TOL, prefix_rows
from torchik.protocols.iknet_run import SEEDS, IKNetRun, robot_data, train_model
from torchik.protocols.table import Column, Table

INTRO = (
    "An autoregressive model (IKNet) samples joint by joint. Each row keeps the first k joints "
    "of every raw sample and re-solves the others by numerical IK (`solve_ik`, position only, "
    "the sample as the seed, restarts inside a box that locks the kept joints). *feasible* is "
    f"the fraction that then reaches the target within {1000 * TOL:g} mm. While three joints "
    "that move the link are left (k <= 3 on the Franka, whose last joint turns the hand about "
    "its own origin), a failure means the model's first joints led to a dead end. Past that, "
    "exact completions are rare anyway, and the mean distance measures how far the later "
    "joints are from one. "
    "*uniform prefix* is the same with the first k joints uniform at random: what a model that "
    "learned nothing of them would give. The last row (all joints kept) is the raw error."
)


def _model(args: argparse.Namespace) -> tuple[object, str]:
    """The model to take apart, and a line saying where it came from."""
    if args.checkpoint is not None:
        model = torchik.models.load(args.checkpoint)
        return model, f"Model: `{args.checkpoint.name}` ({type(model).__name__}), loaded."
    settings = IKNetRun(steps={args.robot: args.steps}, train_threads=args.train_threads)
    data = robot_data(args.robot, settings)
    model, result, steps = train_model(args.robot, "iknet", settings, data, log)
    return model, (
        f"Model: IKNet, preset 'small', trained {steps} steps ({result.seconds:.0f} s) as "
        "`benchmarks/iknet.py` trains it."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    parser.add_argument("--robot", default="panda", choices=["digit_arm", "ur5", "panda"])
    parser.add_argument("--steps", type=int, default=6000, help="training steps")
    parser.add_argument("--train-threads", type=int, default=0, help="0: all cores")
    parser.add_argument("--checkpoint", type=Path, help="take this trained model apart instead")
    parser.add_argument("--targets", type=int, default=200, help="test targets")
    parser.add_argument("--samples", type=int, default=20, help="raw samples per target")
    parser.add_argument("--name", default="iknet_prefix", help="results file name")
    args = parser.parse_args(argv)
    waited = wait_for_quiet(args.wait_idle)
    report = Report(args.name, "IKNet's error taken apart: prefixes and last joints")
    report.stamp["waited_for_quiet_s"] = waited
    model, origin = _model(args)
    model = model.eval()
    robot = torchik.load_robot(model.spec.robot, dtype=torch.float64)
    link = model.spec.link
    targets = iknet_test_targets(robot, link, args.targets).double()
    gen = torch.Generator().manual_seed(SEEDS["sample"])
    with torch.no_grad():
        q = model.sample(targets.float(), args.samples, generator=gen).double()
    q = q.reshape(-1, robot.dof)
    targets = targets.repeat_interleave(args.samples, dim=0)
    log(f"{q.shape[0]} samples; re-solving")
    rows = prefix_rows(robot, q, targets, link, torch.Generator().manual_seed(SEEDS["solver"]))
    pct, cm = "{:.1%}".format, "{:.2f}".format
    table = Table(f"{model.spec.robot}, {args.targets} test targets x {args.samples} samples", [
        Column("feasible", "feasible", pct),
        Column("mean_cm", "mean distance after re-solving (cm)", cm),
        Column("uniform_feasible", "uniform prefix: feasible", pct),
    ])  # fmt: skip
    for row in rows:
        table.add(f"first {row['kept']} joints kept", **row)
    report.intro, report.tables = [INTRO, origin], [table]
    md = report.write(args.out)[0]
    log(f"wrote {md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``torchik dataset``: sample joints and their FK targets into a file."""

from __future__ import annotations

import argparse

from torchik.cli.common import (
    _TARGET_KINDS,
    _add_out,
    _check_target_kind_fits,
    _common,
    _end_link,
    _new_output,
    _positive_int,
    _robot,
    _std,
)


def add_parser(sub) -> None:
    p = sub.add_parser("dataset", help="sample joints and their FK targets into a file")
    p.add_argument("robot", help="bundled name, planar:L1,L2,..., a URDF or an MJCF file")
    p.add_argument("-n", type=_positive_int, required=True, help="number of samples")
    _add_out(p, "output file (e.g. panda.pt); an existing one needs --overwrite")
    p.add_argument("--targets", choices=_TARGET_KINDS, default="position")
    p.add_argument("--sampler", choices=("uniform", "normal"), default="uniform")
    p.add_argument("--std", type=float, nargs="+",
                   help="std of the normal sampler (with --sampler normal): one, or one per "
                        "joint (default 0.2)")  # fmt: skip
    p.add_argument("--link", help="end link (default: the robot's end link)")
    _common(p, device=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from torchik.learn.data import make_dataset

    _new_output(args.out, args.overwrite)  # refuse a bad path before the work, not after it
    std = _std(args)
    robot = _robot(args.robot)
    link = _end_link(args, robot)
    _check_target_kind_fits(robot, link, args.targets)
    data = make_dataset(robot, args.n, link, args.sampler, targets=args.targets, seed=args.seed,
                        **std)  # fmt: skip
    data.save(args.out)
    print(
        f"wrote {len(data)} samples of {robot.name} (link {data.spec.link}, {args.targets} "
        f"targets, {args.sampler} joints, seed {args.seed}) to {args.out}"
    )
    return 0

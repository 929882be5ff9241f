"""Full-pose learned IK benchmark: protocol "Full-pose learned IK (pose)" of shared/BENCHMARKS.md.

:func:`experiments.pose.pose_table` on the Panda (``panda_hand``) and
``torchik.models.load_pretrained("panda")``: the held-out test poses (seed
``torchik.models.pretrained.TEST_SEED``), 100 samples per pose, raw errors, every sample refined,
1000 exact solutions of one pose and one solution for each pose. This script adds the independent
float64 check (Pinocchio; ``ik.checker``); goals and published figures come from
:mod:`experiments.pose_notes`. ``--sampler``, ``--max-iters``: a :mod:`torchik.models.fm` sampler
for a second raw row and, with that refinement cap, the many-solutions rows (``many_options``).

    python benchmarks/pose.py                          # -> benchmarks/results/pose.*
    python benchmarks/pose.py --poses 50 --out /tmp/pose   # a quick look elsewhere
"""

from __future__ import annotations

import argparse

import torch
from common import Report, add_common_args, fixture_urdf, log, read_chain, wait_for_quiet
from ik import Urdf, checker

import torchik
from experiments.pose import pose_table
from experiments.pose_notes import MANY, annotate, intro
from torchik.models import fm, load_pretrained
from torchik.models.pretrained import TEST_SEED, fitted_sampler, measured_accuracy

LINK = "panda_hand"


def _sampler(name: str) -> fm.FMSampler:
    """``--sampler``'s sampler: a preset of :mod:`torchik.models.fm`, or the fitted one."""
    if name in ("FITTED", "FITTED_BF16"):
        fitted = fitted_sampler("panda", bf16=name == "FITTED_BF16")
        assert fitted is not None, "samplers.json has no sampler fitted to the panda model"
        return fitted
    return getattr(fm, name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--poses", type=int, default=1000, help="test poses")
    parser.add_argument("--samples", type=int, default=100, help="samples per pose")
    parser.add_argument(
        "--timing-poses", type=int, default=20, help=f"poses for the {MANY}-solutions timing"
    )
    parser.add_argument(
        "--one-each-samples", type=int, default=4, help="model samples per pose as seeds, one each"
    )
    parser.add_argument("--min-run-time", type=float, default=0.2, help="s measured per timing")
    parser.add_argument(
        "--sampler", default="FITTED_BF16",
        help="a torchik.models.fm preset, FITTED or FITTED_BF16 (the sampler fitted to the "
        "bundled model, torchik.models.pretrained.fitted_sampler), '' for the model's own",
    )  # fmt: skip
    parser.add_argument("--max-iters", type=int, default=15, help="refinement cap, those rows")
    add_common_args(parser)
    args = parser.parse_args(argv)
    robot = torchik.load_robot("panda", dtype=torch.float64)
    urdf = fixture_urdf("panda.urdf")
    check, name = None, "torchik's own float64 FK (shared fixtures missing)"
    if urdf is not None:
        spec = read_chain(urdf, LINK)
        check, name = checker(Urdf(spec, [spec.joint_names.index(j) for j in robot.joint_names]))
    lines = intro(args.poses, args.samples, name, measured_accuracy()["panda"], TEST_SEED)
    report = Report("pose", 'Full-pose learned IK (protocol "Full-pose learned IK (pose)")', lines)
    report.stamp["waited_for_quiet_s"] = wait_for_quiet(args.wait_idle)
    model = load_pretrained("panda", sampler="own")  # the first rows: its own 64 passes
    tables = pose_table(
        robot, model, args.poses, args.samples, check=check,
        timing_poses=min(args.timing_poses, args.poses), one_each_samples=args.one_each_samples,
        many=MANY, min_run_time=args.min_run_time, label="pretrained panda",
        many_options={"sample_options": {"sampler": _sampler(args.sampler)},
                      "max_iters": args.max_iters} if args.sampler else None,
        many_label=f"{args.sampler}, max_iters {args.max_iters}",
    )  # fmt: skip
    annotate(tables, model.family)
    report.tables += tables
    md, _ = report.write(args.out)
    log(f"wrote {md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

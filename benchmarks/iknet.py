"""Protocol "Neural IK table" (iknet): IKNet on the Digit arm, UR5 and Franka, position targets.

The protocol is :mod:`experiments.iknet_run` (training, rows, tables and their notes); this
script adds the IKPy anchor (``--solvers``) and writes the results. ``--families`` trains other
learned models the same way, ``--no-iknet`` leaves IKNet out, ``--name`` picks the results file.

    .venv/bin/python benchmarks/iknet.py --steps digit_arm=10000 ur5=12000 panda=12000 --sizes
    .venv/bin/python benchmarks/iknet.py --no-iknet --families mlp rnn mdn cvae inn flow \
        --family-minutes 3 --solvers --name iknet_baselines
    .venv/bin/python benchmarks/iknet.py --robots digit_arm --minutes 1 --out /tmp/iknet
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import torch
from common import (
    Report,
    add_common_args,
    log,
    read_chain,
    try_import,
    wait_for_quiet,
    write_urdf_variant,
)

from experiments.iknet import iknet_metrics, iknet_sizes
from experiments.iknet_notes import iknet_tables
from experiments.iknet_run import (
    LABELS,
    PAPER_CM,
    PRESETS,
    ROBOTS,
    SEEDS,
    IKNetRun,
    preset,
    robot_data,
    row_fields,
    run_robot,
)
from experiments.iknet_run import kept_rows as kept_rows_of
from torchik import load_robot


def ikpy_row(name: str, robot64, test_set, n: int = 200) -> dict[str, Any]:
    """IKPy from one uniform random start per target (the paper's baseline), first ``n``."""
    row = {"method": "IKPy, 1 start", "robot": name, "paper_cm": PAPER_CM[name]}
    ikpy_chain, reason = try_import("ikpy.chain")
    if ikpy_chain is None:
        return row | {"status": f"missing: {reason}"}
    import tempfile
    import warnings

    from ik import ROBOTS as IK_ROBOTS
    from ik import ikpy_chain_for

    from torchik.description import bundled_urdf

    case = IK_ROBOTS.get(name)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / f"{name}-bundled.urdf"
        src.write_text(bundled_urdf(name))
        urdf = write_urdf_variant(src, Path(tmp) / f"{name}.urdf", case.limits if case else None)
        spec = read_chain(urdf, test_set.spec.link)
        chain, active = ikpy_chain_for(ikpy_chain.Chain, spec)
    robot_names = load_robot(name).joint_names
    cols = [spec.joint_names.index(j) for j in robot_names]
    gen = torch.Generator().manual_seed(SEEDS["solver"])
    lower, upper = robot64.lower, robot64.upper
    starts = lower + (upper - lower) * torch.rand(n, len(lower), generator=gen, dtype=torch.float64)
    out = torch.empty(n, len(lower), dtype=torch.float64)
    start_time = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(n):
            init = [0.0] * len(chain.links)
            for k, c in enumerate(cols):
                init[active[c]] = starts[i, k].item()
            goal = test_set.target[i].double().numpy()
            sol = chain.inverse_kinematics(goal, initial_position=init)
            out[i] = torch.tensor([sol[active[c]] for c in cols])
    seconds = time.perf_counter() - start_time
    row |= row_fields(iknet_metrics(robot64, out[:, None], test_set.target[:n], test_set.spec))
    log(f"{name} IKPy: {row['mean_cm']:.3f} cm on {n} targets")
    return row | {"runtime_1_s": seconds / n, "targets": n}


def _parse_sizes(items: list[str]) -> dict[str, int]:
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        out[name] = int(float(value))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    parser.add_argument("--robots", nargs="*", default=list(ROBOTS), choices=list(ROBOTS))
    parser.add_argument("--preset", default="small", choices=PRESETS)
    parser.add_argument("--minutes", type=float, default=6.0, help="training budget per robot")
    parser.add_argument("--train-size", nargs="*", default=[], metavar="ROBOT=N")
    parser.add_argument(
        "--steps", nargs="*", default=[], metavar="ROBOT=N", help="steps instead of --minutes"
    )
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--grad-clip", type=float, default=0.3)
    parser.add_argument(
        "--train-threads",
        type=int,
        default=0,
        help="torch threads while training (0: all cores); timings always use all cores",
    )
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--temperatures", type=float, nargs="*", default=[0.25])
    parser.add_argument("--sizes", action="store_true", help="add the Franka size table")
    parser.add_argument("--size-presets", nargs="*", default=list(PRESETS))
    parser.add_argument("--work", default="/tmp/torchik-iknet-bench", help="checkpoints")
    parser.add_argument("--note", action="append", default=[], help="a line for the intro")
    parser.add_argument(
        "--families", nargs="*", default=[], choices=[f for f in LABELS if f != "iknet"],
        help="other learned models to train and evaluate the same way",
    )  # fmt: skip
    parser.add_argument(
        "--family-minutes", type=float, default=None,
        help="training budget of each --families model (default: --steps, else --minutes)",
    )  # fmt: skip
    parser.add_argument("--no-iknet", action="store_true", help="leave IKNet out")
    parser.add_argument("--solvers", action="store_true", help="add the numerical solvers")
    parser.add_argument("--name", default="iknet", help="results file name")
    parser.add_argument(
        "--keep-from", type=Path, metavar="JSON",
        help="keep the rows of the robots not run now from an earlier run's results JSON",
    )  # fmt: skip
    args = parser.parse_args(argv)
    args.train_size, args.steps = _parse_sizes(args.train_size), _parse_sizes(args.steps)
    args.families = tuple(([] if args.no_iknet else ["iknet"]) + args.families)
    args.temperatures = tuple(args.temperatures)
    given = [f.name for f in fields(IKNetRun) if hasattr(args, f.name)]  # the rest: defaults
    settings = IKNetRun(**{name: getattr(args, name) for name in given})
    waited = wait_for_quiet(args.wait_idle)
    report = Report(args.name, 'IKNet, the "Neural IK table" protocol (iknet)')
    report.stamp["waited_for_quiet_s"] = waited
    report.intro = [
        f"Model: IKNet, preset {args.preset!r}: {asdict(preset(args.preset))}.",
        "Position-only targets, joints uniform within limits; test targets from another seed. "
        "The paper's numbers (Digit arm 2.3 cm, UR5 2.8 cm, Franka 3.1 cm mean) come from "
        "GPU training on 20k / 1M / 1M pairs; these rows are a few CPU minutes each.",
        *args.note,
    ]
    rows, curve = [], []
    intro = list(report.intro)

    def write(sizes: list) -> Path:
        # kept rows are read at every write, so a run beside this one can fill the file first
        kept_rows, kept_curve = [], []
        if args.keep_from is not None and Path(args.keep_from).exists():
            kept_rows, kept_curve, notes = kept_rows_of(args.keep_from, args.robots)
            report.intro = [*intro, *notes]
        report.tables = iknet_tables(kept_rows + rows, kept_curve + curve, sizes, settings)
        return report.write(args.out)[0]

    for name in args.robots:
        data = robot_data(name, settings)
        robot_rows, points = run_robot(name, settings, data, log)
        if args.solvers:
            robot_rows.append(ikpy_row(name, data.robot64, data.test_set))
        rows += robot_rows
        curve += points
        write([])  # partial results survive a later failure
    presets = args.size_presets if args.sizes else []
    md = write([{"preset": p, **iknet_sizes(preset(p), args.batch)} for p in presets])
    log(f"wrote {md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

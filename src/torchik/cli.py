"""The ``torchik`` command line: parses arguments, then calls the library.

Commands: ``info``, ``dataset``, ``train``, ``eval``, ``solve``, ``plot``, ``bench``; run
``torchik COMMAND --help`` for each. A robot is a bundled name (``panda``, ``ur5``,
``digit_arm``, ``snake2``, ``snake4``, ``rail_arm``), ``planar:L1,L2,...`` (a planar arm with
those link lengths) or the path of a URDF file. Errors print one line on stderr and exit with
status 1 (2 for malformed arguments); they never print a traceback. ``solve`` exits with 3 when
no solution is within tolerance; an interrupted command (Ctrl-C) exits with 130.

Example:
    $ torchik solve panda --position 0.4 0.1 0.5 -n 5
    $ python -m torchik.cli info ur5
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from torchik.cli_common import (
    _end_link,
    _load_model,
    _print_records,
    _require_robot,
    _robot,
    _urdf_model,
)

__all__ = ["main"]

_TARGET_KINDS = ("position", "pose", "planar")
_UNSOLVED = 3  # the exit status of a solve with no solution within tolerance
_ERRORS = (ValueError, TypeError, OSError, RuntimeError, ArithmeticError, ImportError, MemoryError)


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (argparse prints the whole usage first)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


# ---------------------------------------------------------------------------- argument types
def _device_arg(text: str) -> str:
    """A torch device this machine has: cpu, cuda[:N] (with a GPU) or mps (on a Mac)."""
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise argparse.ArgumentTypeError(
            f"unknown device {text!r} (use cpu, cuda, cuda:N or mps)"
        ) from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise argparse.ArgumentTypeError(f"{text!r}: no CUDA GPU is available here")
        if device.index is not None and device.index >= count:
            raise argparse.ArgumentTypeError(f"{text!r}: this machine has {count} CUDA GPU(s)")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise argparse.ArgumentTypeError(f"{text!r}: MPS is not available here")
    elif device.type not in ("cpu", "cuda", "mps"):
        raise argparse.ArgumentTypeError(
            f"device {text!r} cannot run torchik (use cpu, cuda, cuda:N or mps)"
        )
    return text


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _non_negative(text: str) -> float:
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def _dpi(text: str) -> int:
    """``--dpi``: a whole number in [1, 1200] (a figure of 100 000 dpi is gigabytes)."""
    value = _positive_int(text)
    if value > 1200:
        raise argparse.ArgumentTypeError(f"must be at most 1200, got {text}")
    return value


def _target(args, robot, link: str) -> tuple[Tensor, bool]:
    """``(pose (4, 4), False)`` from ``--pose`` or ``(position (3,), True)`` from
    ``--position`` (float64); two numbers are x, y of an arm moving in the plane z = 0."""
    from torchik.rotations import pose_to_matrix, quat_to_rotmat

    if args.position is not None:
        values = torch.tensor(args.position, dtype=torch.float64)
        if len(values) not in (2, 3):
            raise ValueError(f"--position takes x y z (x y for planar arms), got {len(values)}")
        if len(values) == 2:
            if not _is_planar(robot, link):
                raise ValueError(f"{robot.name}'s {link} leaves the plane z = 0: pass x y z")
            values = torch.cat((values, values.new_zeros(1)))
        return values, True
    position = torch.tensor(args.pose[:3], dtype=torch.float64)
    quat = torch.tensor(args.pose[3:], dtype=torch.float64)
    if not quat.norm() > 1e-9:
        raise ValueError("the quaternion of --pose must not be zero")
    return pose_to_matrix(position, quat_to_rotmat(quat / quat.norm())), False


def _is_planar(robot, link: str) -> bool:
    """Whether ``link`` stays in the plane z = 0 (checked on random configurations)."""
    q = robot.random_configuration(64, torch.Generator().manual_seed(0))
    with torch.no_grad():
        return bool(robot.link_positions(q, link)[:, 2].abs().max() < 1e-9)


def _add_target(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument(
        "--position", type=_finite, nargs="+", metavar="X",
        help="target position x y z (m); x y for planar arms (orientation free)",
    )  # fmt: skip
    group.add_argument(
        "--pose", type=_finite, nargs=7, metavar=("X", "Y", "Z", "QW", "QX", "QY", "QZ"),
        help="target pose: position (m) and unit quaternion w x y z",
    )  # fmt: skip


def _encode_for(model, target: Tensor, position_only: bool) -> Tensor:
    """The model's ``(T,)`` encoding of a ``--position``/``--pose`` target."""
    from torchik.data import encode_target

    kind = model.spec.targets
    if kind == "pose" and position_only:
        raise ValueError("this model was trained on full poses: pass --pose, not --position")
    pose = torch.eye(4, dtype=target.dtype)
    if position_only:
        pose[:3, 3] = target
    else:
        pose = target
    return encode_target(pose, kind).to(model.target_mean)


# ---------------------------------------------------------------------------- info
def _cmd_info(args) -> int:
    from torchik.robot import Robot

    model = _urdf_model(args.robot)
    robot = Robot(model, dtype=torch.float64)
    try:
        link, why = _end_link(args, robot), ""
    except ValueError as err:  # no single default: show the robot anyway, say why
        if args.link is not None:
            raise
        link, why = None, str(err)
    print(f"robot     {robot.name}  (root {robot.root}, {robot.dof} dof, end link {link or '?'})")
    print(f"joints    {robot.dof} actuated of {len(model.joints)}")
    for row in _joint_rows(model):
        print("  " + row)
    print(f"links     {len(robot.link_names)}: {', '.join(robot.link_names)}")
    print(_reach_text(robot, link, args.samples) if link else f"reach     ? ({why})")
    return 0


def _joint_rows(model) -> list[str]:
    rows = [f"{'name':<20} {'type':<11} {'lower':>9} {'upper':>9}  unit  note"]
    for j in model.joints:
        unit = "m" if j.type == "prismatic" else "rad"
        if j.type == "fixed":
            lo = hi = unit = ""
        elif j.type == "continuous":
            lo, hi = "-inf", "inf"
        else:
            lo, hi = f"{j.lower:.4f}", f"{j.upper:.4f}"
        note = f"mimics {j.mimic.joint}" if j.mimic is not None else ""
        rows.append(f"{j.name:<20} {j.type:<11} {lo:>9} {hi:>9}  {unit:<4}  {note}".rstrip())
    return rows


def _reach_text(robot, link: str, n: int) -> str:
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        points = robot.link_positions(robot.random_configuration(n, gen), link)
    reach = points.norm(dim=-1).max().item()
    lo, hi = points.amin(dim=0).tolist(), points.amax(dim=0).tolist()
    box = ", ".join(f"{a} [{b:.3f}, {c:.3f}]" for a, b, c in zip("xyz", lo, hi, strict=True))
    return (
        f"reach     ~{reach:.3f} m from the root origin to {link} (largest of {n} random "
        "configurations)\n"
        f"workspace {box} m"
    )


# ---------------------------------------------------------------------------- dataset
def _cmd_dataset(args) -> int:
    from torchik.data import make_dataset

    robot = _robot(args.robot)
    std = args.std[0] if len(args.std) == 1 else args.std
    link = _end_link(args, robot)
    data = make_dataset(robot, args.n, link, args.sampler, std, args.targets, seed=args.seed)
    data.save(args.out)
    print(
        f"wrote {len(data)} samples of {robot.name} (link {data.spec.link}, {args.targets} "
        f"targets, {args.sampler} joints, seed {args.seed}) to {args.out}"
    )
    return 0


# ---------------------------------------------------------------------------- train, eval
def _cmd_train(args) -> int:
    from torchik.cli_train import cmd_train

    return cmd_train(args)


def _cmd_eval(args) -> int:
    from torchik.cli_train import cmd_eval

    return cmd_eval(args)


# ---------------------------------------------------------------------------- solve
def _solve_numerically(args, robot, target, position_only, link):
    from torchik.ik import solve_ik

    gen = torch.Generator().manual_seed(args.seed)
    result = solve_ik(
        robot, target, link, position_only=position_only, num_seeds=args.n, method=args.method,
        tol_position=args.tol_position, tol_rotation=math.radians(args.tol_rotation),
        generator=gen, early_stop=False,
    )  # fmt: skip
    return result.top(args.n), f"numerical IK ({args.method})"


@torch.no_grad()
def _solve_with_model(args, robot, target, position_only, link):
    from torchik.data import robot_hash
    from torchik.ik import refine_samples

    model = _load_model(args.model, args.robot, torch.device(args.device))
    if model.spec.robot_hash != robot_hash(robot) or model.spec.link != link:
        raise ValueError(
            f"the model is for robot {model.spec.robot!r}, link {model.spec.link!r}; "
            f"not for {robot.name!r}, link {link!r}"
        )
    gen = torch.Generator(model.target_mean.device).manual_seed(args.seed)
    seeds = model.sample(_encode_for(model, target, position_only), args.n, generator=gen)
    seeds = seeds.to(robot.device, robot.dtype)
    tol_rotation = math.radians(args.tol_rotation)
    name = f"{model.family} model"
    if not args.refine:
        return _unrefined(robot, seeds, target, position_only, link, args.tol_position,
                          tol_rotation).top(args.n), name  # fmt: skip
    result = refine_samples(
        robot, target, seeds, link, position_only=position_only,
        tol_position=args.tol_position, tol_rotation=tol_rotation,
    )  # fmt: skip
    return result.top(args.n), f"{name} + refinement"


def _unrefined(robot, q, target, position_only, link, tol_position, tol_rotation):
    """An :class:`~torchik.ik.IKResult` of model samples ``q (n, D)`` as they are."""
    from torchik import metrics
    from torchik.ik import IKResult

    position = target if position_only else target[:3, 3]
    pos_err = metrics.position_error(robot, q, position, link)
    rot_err = torch.zeros_like(pos_err)
    if not position_only:
        rot_err = metrics.rotation_error(robot, q, target[:3, :3], link)
    success = (pos_err <= tol_position) & (position_only | (rot_err <= tol_rotation))
    tol_rotation = math.inf if position_only else tol_rotation
    iterations = torch.zeros_like(pos_err, dtype=torch.long)
    return IKResult(q, success, pos_err, rot_err, iterations, tol_position, tol_rotation,
                    robot.continuous)  # fmt: skip


def _solution_records(result, robot, position_only: bool) -> list[dict[str, Any]]:
    """One dict per slot of a single-target result, best first: successes, then by error
    (sorted here: ``IKResult.top`` adds 1e30 to failures, which erases their differences)."""
    records = []
    for i in range(result.q.shape[0]):
        row: dict[str, Any] = dict(zip(robot.joint_names, result.q[i].tolist(), strict=True))
        row["position_error"] = result.position_error[i].item()
        row["rotation_error"] = None if position_only else result.rotation_error[i].item()
        row["success"] = bool(result.success[i])
        records.append(row)
    tol_rot = result.tol_rotation if math.isfinite(result.tol_rotation) else 1.0

    def key(row: dict[str, Any]) -> tuple[bool, float]:
        score = row["position_error"] / result.tol_position
        return not row["success"], score + (row["rotation_error"] or 0.0) / tol_rot

    return sorted(records, key=key)


def _cmd_solve(args) -> int:
    robot = _robot(args.robot).to(args.device)
    link = _end_link(args, robot)
    target, position_only = _target(args, robot, link)
    solve = _solve_numerically if args.model is None else _solve_with_model
    result, method = solve(args, robot, target.to(robot.device), position_only, link)
    records = _solution_records(result, robot, position_only)
    ok = sum(r["success"] for r in records)
    if args.format == "table":
        print(f"{robot.name} {link}: {len(records)} solutions by {method}, {ok} within tolerance")
    _print_records([_table_units(r) for r in records] if args.format == "table" else records,
                   args.format)  # fmt: skip
    if ok == 0:
        best = 1000 * min(r["position_error"] for r in records)
        print(f"torchik: no solution within tolerance (closest: {best:.1f} mm from the target); "
              f"exit status {_UNSOLVED}", file=sys.stderr)  # fmt: skip
        return _UNSOLVED
    return 0


def _table_units(row: dict[str, Any]) -> dict[str, Any]:
    """Errors in mm and degrees for people."""
    out = {k: v for k, v in row.items() if k not in ("position_error", "rotation_error")}
    out["pos err (mm)"] = 1000 * row["position_error"]
    if row["rotation_error"] is not None:
        out["rot err (deg)"] = math.degrees(row["rotation_error"])
    out["ok"] = "yes" if out.pop("success") else "no"
    return out


# ---------------------------------------------------------------------------- plot
def _cmd_plot(args) -> int:
    try:
        import matplotlib
    except ImportError:
        raise ImportError(
            "torchik plot needs matplotlib: pip install 'torchik[plot]' (or matplotlib)"
        ) from None
    matplotlib.use("Agg")
    from torchik import plot

    figure = _PLOTS[args.kind](args, plot)
    figure.savefig(args.out, dpi=args.dpi, bbox_inches="tight")
    print(f"wrote {args.out}")
    return 0


def _plot_arm(args, plot):
    robot = _robot(args.robot)
    link = _end_link(args, robot)
    target, position_only = _target(args, robot, link)
    position = target if position_only else target[:3, 3]
    if args.model is None:
        args.method, args.tol_position, args.tol_rotation = "lm", 1e-3, 1.0
        result, _ = _solve_numerically(args, robot, target, position_only, link)
        return plot.plot_arm_samples(robot, result.q, position, start=robot.neutral(), link=link)
    model = _load_model(args.model, args.robot, torch.device(args.device))
    encoded = _encode_for(model, target, position_only)
    gen = torch.Generator(model.target_mean.device).manual_seed(args.seed)
    with torch.no_grad():
        q = model.sample(encoded, args.n, generator=gen)
        try:
            probs = model.log_prob(q, encoded).exp().cpu()
        except NotImplementedError:
            probs = None
    return plot.plot_arm_samples(robot, q.cpu().double(), position, probs, robot.neutral(), link)


def _plot_model(args, plot, kind: str):
    device = torch.device(args.device)
    model = _load_model(args.model, args.robot, device)
    robot = _require_robot(model.spec, args.robot)
    target, position_only = _target(args, robot, model.spec.link)
    encoded = _encode_for(model, target, position_only)
    if kind == "densities":
        return plot.plot_joint_densities(model, encoded, n=args.n)
    gen = torch.Generator(device).manual_seed(args.seed)
    with torch.no_grad():
        q = model.sample(encoded, args.n, generator=gen).cpu().double()
        points = robot.link_positions(q, model.spec.link)[:, :2]
    return plot.plot_resimulation(points, target[:2] if position_only else target[:2, 3])


_PLOTS = {
    "arm": _plot_arm,
    "densities": lambda args, plot: _plot_model(args, plot, "densities"),
    "resim": lambda args, plot: _plot_model(args, plot, "resim"),
    "training": lambda args, plot: plot.plot_training_curves(_log_path(args.source)),
    "benchmark": lambda args, plot: plot.plot_benchmark(args.source),
}


def _log_path(source: str) -> Path:
    path = Path(source)
    return path / "log.csv" if path.is_dir() else path


# ---------------------------------------------------------------------------- bench
def _find_benchmarks() -> Path | None:
    for root in (Path.cwd(), Path(__file__).resolve().parents[2]):
        if (root / "benchmarks" / "run.py").is_file():
            return root
    return None


def _cmd_bench(args) -> int:
    root = _find_benchmarks()
    if root is None and args.rest in (["-h"], ["--help"]):
        print(
            "usage: torchik bench [fk|ik|all] [--wait-idle S]  (runs benchmarks/run.py of a "
            "source checkout; run it there for its options)"
        )
        return 0
    if root is None:
        raise ValueError(
            "torchik bench needs a source checkout (benchmarks/run.py was not found in the "
            "current directory or beside the installed package)"
        )
    command = [sys.executable, str(root / "benchmarks" / "run.py"), *args.rest]
    return subprocess.call(command, cwd=root, env={**os.environ, "TORCHIK_PROG": "torchik bench"})


# ---------------------------------------------------------------------------- the parser
def _common(parser: argparse.ArgumentParser, device: bool = True, seed: bool = True) -> None:
    if device:
        parser.add_argument("--device", type=_device_arg, default="cpu",
                            help="cpu, cuda, cuda:N or mps (default: cpu)")  # fmt: skip
    if seed:
        parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")


def _add_info(sub) -> None:
    p = sub.add_parser("info", help="joints, limits, links, end link and reach of a robot")
    p.add_argument("robot", help="bundled name, planar:L1,L2,... or a URDF file")
    p.add_argument("--samples", type=_positive_int, default=10000, help="FK samples for the reach")
    p.add_argument("--link", help="link for the reach (default: the robot's end link)")
    p.set_defaults(func=_cmd_info)


def _add_dataset(sub) -> None:
    p = sub.add_parser("dataset", help="sample joints and their FK targets into a file")
    p.add_argument("robot", help="bundled name, planar:L1,L2,... or a URDF file")
    p.add_argument("-n", type=_positive_int, required=True, help="number of samples")
    p.add_argument("--out", required=True, help="output file (e.g. panda.pt)")
    p.add_argument("--targets", choices=_TARGET_KINDS, default="position")
    p.add_argument("--sampler", choices=("uniform", "normal"), default="uniform")
    p.add_argument("--std", type=float, nargs="+", default=[0.2],
                   help="std of the normal sampler: one, or one per joint")  # fmt: skip
    p.add_argument("--link", help="end link (default: the robot's end link)")
    _common(p, device=False)
    p.set_defaults(func=_cmd_dataset)


def _add_train(sub) -> None:
    p = sub.add_parser(
        "train", help="train a learned IK model on a data set, or on pairs made by FK as it goes"
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help="a file written by 'torchik dataset'")
    source.add_argument("--stream", metavar="ROBOT",
                        help="fresh pairs made by FK every step instead of a file: a bundled "
                             "name, planar:L1,L2,... or a URDF (with --targets, --sampler, "
                             "--std, --link)")  # fmt: skip
    p.add_argument("--targets", choices=_TARGET_KINDS, default="position",
                   help="--stream's target kind (default position)")  # fmt: skip
    p.add_argument("--sampler", choices=("uniform", "normal"), default="uniform",
                   help="--stream's joint sampler (default uniform in the limits)")  # fmt: skip
    p.add_argument("--std", type=float, nargs="+", default=[0.2],
                   help="--stream's normal sampler std: one, or one per joint")  # fmt: skip
    p.add_argument("--link", help="--stream's end link (default: the robot's end link)")
    p.add_argument("--model", required=True, help="model family (iknet, mlp, ...)")
    p.add_argument(
        "--config",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="model or training settings, e.g. width=64 batch_size=256 lr=1e-3",
    )
    p.add_argument("--preset", choices=("tiny", "small", "paper"),
                   help="model size: tiny (tests, seconds), small (CPU minutes), paper (the "
                        "paper's, a GPU); default: the family's, sized for the robot")  # fmt: skip
    p.add_argument("--steps", type=_positive_int, help="training steps (default: TrainConfig's)")
    p.add_argument("--out", help="run folder (default: runs/FAMILY_ROBOT)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier run in OUT")
    p.add_argument("--threads", type=_positive_int, default=1,
                   help="CPU threads (default 1: these small models train fastest on one, and "
                        "more threads on a busy machine stall each other)")  # fmt: skip
    p.add_argument("--val-fraction", type=float, default=0.1, help="rows held out (default 0.1)")
    p.add_argument("--robot", help="robot for the validation error (default: the data's)")
    _common(p)  # fmt: skip
    p.set_defaults(func=_cmd_train)


def _add_eval(sub) -> None:
    p = sub.add_parser("eval", help="metrics of a trained model on a data set")
    p.add_argument("--model", required=True, help="a model file (e.g. runs/x/model.pt)")
    p.add_argument("--data", required=True, help="a file written by 'torchik dataset'")
    p.add_argument("-n", type=_positive_int, default=10, help="samples per target (default 10)")
    p.add_argument("--limit", type=_positive_int, default=1000, help="targets (default 1000)")
    p.add_argument("--robot", help="the robot, if the data's robot is not bundled")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    _common(p)
    p.set_defaults(func=_cmd_eval)


def _add_solve(sub) -> None:
    from torchik.ik import METHODS

    p = sub.add_parser(
        "solve", help="inverse kinematics of one target",
        epilog=f"Exit status: 0 with a solution within tolerance, {_UNSOLVED} without one, 1 on "
               "errors, 2 for malformed arguments.",
    )  # fmt: skip
    p.add_argument("robot", help="bundled name, planar:L1,L2,... or a URDF file")
    _add_target(p)
    p.add_argument("--link", help="link to place (default: the robot's end link)")
    p.add_argument("--model", help="'pretrained' or a model file (default: numerical IK)")
    p.add_argument("-n", type=_positive_int, default=100,
                   help="solutions (seeds or samples), default 100")  # fmt: skip
    p.add_argument("--refine", action="store_true", help="refine model samples numerically")
    p.add_argument("--method", choices=METHODS, default="lm", help="numerical solver")
    p.add_argument("--tol-position", type=_non_negative, default=1e-3, help="m (default 1e-3)")
    p.add_argument("--tol-rotation", type=_non_negative, default=1.0, help="degrees (default 1)")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    _common(p)
    p.set_defaults(func=_cmd_solve)


def _add_plot(sub) -> None:
    p = sub.add_parser("plot", help="write a PNG figure (needs matplotlib)")
    kinds = p.add_subparsers(dest="kind", required=True, metavar="KIND", parser_class=_Parser)
    arm = kinds.add_parser("arm", help="arm configurations solving one target")
    arm.add_argument("robot", help="bundled name, planar:L1,L2,... or a URDF file")
    arm.add_argument("--model", help="draw samples of this model (default: numerical IK)")
    arm.add_argument("--link", help="link to place (default: the robot's end link)")
    for name, text in (("densities", "per-joint densities"), ("resim", "re-simulated ends")):
        q = kinds.add_parser(name, help=f"a model's {text} for one target")
        q.add_argument("--model", required=True, help="a model file")
        q.add_argument("--robot", help="the robot, if the model's robot is not bundled")
    for name in ("arm", "densities", "resim"):
        k = kinds.choices[name]
        _add_target(k)
        k.add_argument("-n", type=_positive_int, default=30 if name == "arm" else 1000,
                       help="samples")  # fmt: skip
        _common(k)
    for name, text in (("training", "run folder or log.csv"), ("benchmark", "results JSON")):
        k = kinds.add_parser(name, help=f"curves or bars from a {text}")
        k.add_argument("source", help=text)
    for k in kinds.choices.values():
        k.add_argument("--out", default="torchik.png", help="PNG file (default torchik.png)")
        k.add_argument("--dpi", type=_dpi, default=120, help="resolution (1 to 1200, default 120)")
    p.set_defaults(func=_cmd_plot)


def build_parser() -> argparse.ArgumentParser:
    """The ``torchik`` argument parser."""
    text = __doc__.split("\n\n")[1].replace("\n", " ").replace("``", "")  # no RST in --help
    parser = _Parser(prog="torchik", description=text)
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_info, _add_dataset, _add_train, _add_eval, _add_solve, _add_plot):
        add(sub)
    p = sub.add_parser("bench", help="run benchmarks/run.py of a source checkout", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for benchmarks/run.py")
    p.set_defaults(func=_cmd_bench)
    return parser


def _version() -> str:
    from torchik import __version__

    return f"torchik {__version__}"


def _message(err: BaseException) -> str:
    if isinstance(err, FileNotFoundError) and err.filename:
        return f"file not found: {err.filename}"
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 500 else text[:497] + "..."


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["bench"]:  # argparse's REMAINDER would not pass on a leading --help
            return _cmd_bench(argparse.Namespace(rest=argv[1:]))
        args = build_parser().parse_args(argv)
        args.argv = argv
        return args.func(args)
    except SystemExit as exit_:  # argparse: --help (0) or a usage error (2)
        return exit_.code if isinstance(exit_.code, int) else 1
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print("torchik: interrupted", file=sys.stderr)
        return 130
    except _ERRORS as err:
        print(f"torchik: error: {_message(err)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

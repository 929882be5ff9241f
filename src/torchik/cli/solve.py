"""``torchik solve``: inverse kinematics of one target, by a numerical solver or a learned model
(optionally refined); exits with 3 when no solution is within tolerance."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

import torch

from torchik.cli.common import (
    _add_target,
    _bundled,
    _check_target_kind,
    _common,
    _load_model,
    _model_link,
    _positive,
    _positive_int,
    _print_records,
    _robot,
    _target,
    _usage_error,
)

_UNSOLVED = 3  # the exit status of a solve with no solution within tolerance


def add_parser(sub) -> None:
    from torchik.ik.solve import METHODS

    p = sub.add_parser(
        "solve", help="inverse kinematics of one target",
        epilog=f"Exit status: 0 with a solution within tolerance, {_UNSOLVED} without one, 1 on "
               "errors, 2 for malformed arguments.",
    )  # fmt: skip
    p.add_argument("robot", help="bundled name, planar:L1,L2,..., a URDF or an MJCF file")
    _add_target(p)
    p.add_argument(
        "--link", help="link to place (default: the --model's link, else the robot's end link)"
    )
    p.add_argument("--model", help="'pretrained' or a model file (default: numerical IK)")
    p.add_argument("-n", type=_positive_int, default=100,
                   help="solutions (seeds or samples), default 100")  # fmt: skip
    p.add_argument("--refine", action="store_true", help="refine model samples numerically")
    p.add_argument("--sampler", type=_sampler_arg, default=None,
                   help="a flow-matching model's sampler: by default a bundled model's "
                        "few-pass one (fitted to it where there is one, else 12 passes), in "
                        "bfloat16 on GPUs and CPUs with AMX, and 12 passes for a model file; "
                        "'fitted' (7 or 8 passes fitted to a bundled model), 'fitted-bf16' "
                        "(all but the last in bfloat16, the last mixed), 'few' (12 passes), "
                        "'few-bf16', 'model' (the model's own, 64 passes for the bundled "
                        "ones) or a JSON file of 'torchik fit-sampler'")  # fmt: skip
    p.add_argument("--method", choices=METHODS, default="lm", help="numerical solver")
    p.add_argument("--tol-position", type=_positive, default=1e-3,
                   help="position tolerance in metres (default 1e-3)")  # fmt: skip
    p.add_argument("--tol-rotation-deg", "--tol-rotation", dest="tol_rotation",
                   type=_positive, default=1.0,
                   help="rotation tolerance in degrees (default 1; --tol-rotation is the same "
                        "flag; solve_ik's tol_rotation is in radians)")  # fmt: skip
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    _common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.model is None and (args.refine or args.sampler is not None):
        flag = "--refine" if args.refine else "--sampler"
        _usage_error("torchik solve", f"{flag} is for a model's samples: pass --model too")
    robot = _robot(args.robot).to(args.device)
    model = None
    if args.model is not None:
        model = _load_model(args.model, args.robot, torch.device(args.device))
    link = _model_link(args, robot, model)
    robot = _fixed_part(robot, link)
    if idle := _idle_joints(robot, link):
        shown = ", ".join(idle[:8]) + (f" and {len(idle) - 8} more" if len(idle) > 8 else "")
        joints = "1 joint does" if len(idle) == 1 else f"{len(idle)} joints do"
        source = "the solver's random starts" if model is None else "the model's samples"
        print(f"torchik: {joints} not move {link} ({shown}): their values are {source}",
              file=sys.stderr)  # fmt: skip
    target, position_only = _target(args, robot, link)
    target = target.to(robot.device)
    if model is None:
        result, method = _solve_numerically(args, robot, target, position_only, link)
    else:
        result, method = _solve_with_model(args, model, robot, target, position_only, link)
    records = _solution_records(result, robot, position_only)
    ok = sum(r["success"] for r in records)
    if args.format == "table":
        print(f"{robot.name} {link}: {len(records)} solutions by {method}, {ok} within tolerance")
    _print_records([_table_units(r) for r in records] if args.format == "table" else records,
                   args.format)  # fmt: skip
    if ok == 0:
        errors = [r["position_error"] for r in records if math.isfinite(r["position_error"])]
        best = f"{1000 * min(errors):.1f} mm from the target" if errors else "no finite error"
        print(f"torchik: no solution within tolerance (closest: {best}); "
              f"exit status {_UNSOLVED}", file=sys.stderr)  # fmt: skip
        return _UNSOLVED
    return 0


def _fixed_part(robot, link: str):
    """``robot``, or for a MuJoCo scene the chain from the world to ``link`` (its free bodies
    stay out of ``q``); a link that rides on a floating base is refused in one line."""
    if not robot.floating:
        return robot
    owner = robot.base_of(link)
    if owner is not None:
        base = robot.joint_names[7 * owner].rsplit("/", 1)[0]
        other = (
            "a link fixed in the world with --link"
            if robot.base_of(robot.root) is None
            else "a fixed-base file, or move the base too with torchik.solve_wholebody in Python"
        )
        raise ValueError(
            f"{link} moves with the floating base {base!r}; torchik solve places links on a "
            f"fixed base: choose {other}"
        )
    one = robot.floating_bases == 1
    bodies, verb = ("free body", "stays") if one else ("free bodies", "stay")
    print(f"torchik: the scene's {robot.floating_bases} {bodies} {verb} out of q: solving the "
          f"chain {robot.root} -> {link}", file=sys.stderr)  # fmt: skip
    return robot.chain(robot.root, link)


def _idle_joints(robot, link: str) -> list[str]:
    """The coordinates of ``q`` that do not move ``link`` (another leg's, the other arm's)."""
    on_path, moving = set(robot.links_to(link)), set()
    for joint in robot.model.joints:
        if joint.child in on_path and joint.type != "fixed":
            moving.add(joint.mimic.joint if joint.mimic is not None else joint.name)
    # a floating base's or a planar joint's coordinates are named <joint>/x, ...
    return [n for n in robot.joint_names if n not in moving and n.rsplit("/", 1)[0] not in moving]


def _solve_numerically(args, robot, target, position_only, link):
    from torchik.ik.solve import solve_ik

    gen = torch.Generator().manual_seed(args.seed)
    result = solve_ik(
        robot, target, link, position_only=position_only, num_seeds=args.n,
        method=_one_shot(args.method, robot), tol_position=args.tol_position,
        tol_rotation=math.radians(args.tol_rotation), generator=gen, early_stop=False,
    )  # fmt: skip
    return result.top(args.n), f"numerical IK ({args.method})"


def _one_shot(method: str, robot) -> Any:
    """The solver of a one-shot process's one target: LM's host loop on the CPU, where the
    compiled loop's first load in a process (about 2 s, :mod:`torchik.kinematics.native`)
    would cost far more than it saves on a few rows; ``method`` elsewhere."""
    from torchik.ik import LevenbergMarquardt

    return (
        LevenbergMarquardt(loop="host") if method == "lm" and robot.device.type == "cpu" else method
    )


@torch.no_grad()
def _solve_with_model(args, model, robot, target, position_only, link):
    from torchik.models.pipeline import check_model_fits, model_targets, solve_with_model

    check_model_fits(model, robot, link)
    bundled = _bundled(args.model, args.robot)
    _check_target_kind(model, position_only, bundled)
    options = _sample_options(model, args.sampler, bundled)
    gen = torch.Generator(model.target_mean.device).manual_seed(args.seed)
    tol_rotation = math.radians(args.tol_rotation)
    name = f"{model.family} model"
    if not args.refine:
        encoded = model_targets(model, target, position_only)
        seeds = model.sample(encoded, args.n, generator=gen, **options)
        return _unrefined(robot, seeds.to(robot.device, robot.dtype), target, position_only, link,
                          args.tol_position, tol_rotation).top(args.n), name  # fmt: skip
    result = solve_with_model(
        robot, model, target, args.n, link, position_only=position_only, generator=gen,
        tol_position=args.tol_position, tol_rotation=tol_rotation, sample_options=options,
        method=_one_shot("lm", robot),
    ).result  # fmt: skip
    return result.top(args.n), f"{name} + refinement"


_SAMPLERS = {"fitted": None, "fitted-bf16": None, "few": "FEW_PASSES",
             "few-bf16": "FEW_PASSES_BF16", "model": None}  # fmt: skip
"""``--sampler`` -> the :mod:`torchik.models` preset (``None``: the model's own sampler, or
for ``fitted*`` the one fitted to a bundled model)."""


def _sampler_arg(value: str) -> str:
    """``--sampler``: a name of :data:`_SAMPLERS` or a ``.json`` file."""
    if value in _SAMPLERS or value.endswith(".json"):
        return value
    raise argparse.ArgumentTypeError(
        f"{value!r}: choose from {', '.join(_SAMPLERS)} or a .json file of torchik fit-sampler"
    )


def _sample_options(model, sampler: str | None, bundled: str | None = None) -> dict[str, Any]:
    """``model.sample`` keywords for ``--sampler``: a flow-matching model samples with its
    default samplers (a bundled one's, :func:`torchik.models.load_pretrained`: few passes, in
    bfloat16 where it is fast), else with ``FEW_PASSES``, unless told otherwise
    (``bundled`` names a bundled model, for ``fitted*``); other families have no sampler to
    choose."""
    import torchik.models
    from torchik.models.pretrained import fitted_sampler, fitted_samplers

    if model.family != "fm":
        if sampler not in (None, "model"):
            raise ValueError(
                f"--sampler is for flow-matching models; this model is {model.family!r}"
            )
        return {}
    if sampler is not None and sampler.endswith(".json"):
        from torchik.models.fm_fit import load_sampler

        return {"sampler": load_sampler(sampler)}
    if sampler is None:  # a bundled model's defaults (load_pretrained's), else FEW_PASSES
        return {} if model.default_sampler is not None else {"sampler": torchik.models.FEW_PASSES}
    if sampler == "model":
        return {"sampler": model.config.sampler}
    if sampler.startswith("fitted"):
        fitted = None if bundled is None else fitted_sampler(bundled, sampler == "fitted-bf16")
        if fitted is None:
            raise ValueError(
                f"--sampler {sampler}: no sampler is fitted to this model (bundled ones with "
                "one: " + ", ".join(fitted_samplers()) + "); use few or few-bf16"
            )
        return {"sampler": fitted}
    return {"sampler": getattr(torchik.models, str(_SAMPLERS[sampler]))}


def _unrefined(robot, q, target, position_only, link, tol_position, tol_rotation):
    """An :class:`~torchik.ik.IKResult` of model samples ``q (n, D)`` as they are."""
    from torchik.ik.result import IKResult
    from torchik.learn import metrics

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


def _table_units(row: dict[str, Any]) -> dict[str, Any]:
    """Errors in mm and degrees for people."""
    out = {k: v for k, v in row.items() if k not in ("position_error", "rotation_error")}
    out["pos err (mm)"] = 1000 * row["position_error"]
    if row["rotation_error"] is not None:
        out["rot err (deg)"] = math.degrees(row["rotation_error"])
    out["ok"] = "yes" if out.pop("success") else "no"
    return out

"""``torchik plot KIND``: write a PNG figure (needs matplotlib, imported only here): arm
configurations solving a target, a model's joint densities or re-simulated ends, training
curves or benchmark bars."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from torchik.cli.common import (
    _add_target,
    _bundled,
    _common,
    _dpi,
    _encode_for,
    _load_model,
    _model_link,
    _Parser,
    _positive_int,
    _require_robot,
    _robot,
    _target,
)
from torchik.cli.solve import _solve_numerically
from torchik.files import output_file, save_figure


def add_parser(sub) -> None:
    p = sub.add_parser("plot", help="write a PNG figure (needs matplotlib)")
    kinds = p.add_subparsers(dest="kind", required=True, metavar="KIND", parser_class=_Parser)
    arm = kinds.add_parser("arm", help="arm configurations solving one target")
    arm.add_argument("robot", help="bundled name, planar:L1,L2,..., a URDF or an MJCF file")
    arm.add_argument("--model", help="draw samples of this model (default: numerical IK)")
    arm.add_argument(
        "--link", help="link to place (default: the --model's link, else the robot's end link)"
    )
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
        text = "PNG file (default torchik.png); an existing one is replaced"
        k.add_argument("--out", default="torchik.png", help=text)
        k.add_argument("--dpi", type=_dpi, default=120, help="resolution (1 to 1200, default 120)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    output_file(args.out)  # refuse a bad path before the work, not after it
    try:
        import matplotlib
    except ImportError:
        raise ImportError(
            "torchik plot needs matplotlib: pip install 'torchik[plot]' (or matplotlib)"
        ) from None
    matplotlib.use("Agg")
    from torchik import plot

    figure = _PLOTS[args.kind](args, plot)
    save_figure(figure, args.out, dpi=args.dpi, bbox_inches="tight")
    print(f"wrote {args.out}")
    return 0


def _plot_arm(args, plot):
    from torchik.models.pipeline import check_model_fits

    robot = _robot(args.robot)
    model = None
    if args.model is not None:
        model = _load_model(args.model, args.robot, torch.device(args.device))
    link = _model_link(args, robot, model)
    if model is not None:  # a model of another robot or link: refused before sampling
        check_model_fits(model, robot, link)
    target, position_only = _target(args, robot, link)
    position = target if position_only else target[:3, 3]
    if model is None:
        args.method, args.tol_position, args.tol_rotation = "lm", 1e-3, 1.0
        result, _ = _solve_numerically(args, robot, target, position_only, link)
        return plot.plot_arm_samples(robot, result.q, position, start=robot.neutral(), link=link)
    encoded = _encode_for(model, target, position_only, _bundled(args.model, args.robot))
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
    encoded = _encode_for(model, target, position_only, _bundled(args.model, args.robot))
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
    """The training log of ``source`` (a run folder or its ``log.csv``), checked by its header
    (a run's JSON file said "has no rows yet: the run stopped before its first log row")."""
    from torchik.files import read_head

    path = Path(source)
    path = path / "log.csv" if path.is_dir() else path
    if path.is_file():
        first = read_head(path).split(b"\n", 1)[0].decode("utf-8", "replace")
        if not {"step", "loss"} <= {c.strip() for c in first.split(",")}:
            raise ValueError(
                f"{source!r} is not a training log (its first line is not a header of step, "
                "loss, ...): plot training takes a run folder of torchik train or its log.csv"
            )
    return path

"""``torchik fit-sampler``: a few-pass sampler fitted to a flow-matching model
(:func:`torchik.models.fm_fit.fit_sampler`), written as JSON for ``torchik solve --sampler``."""

from __future__ import annotations

import argparse
import sys

import torch

from torchik.cli.common import (
    _add_out,
    _common,
    _load_model,
    _new_output,
    _positive_int,
    _require_robot,
)


def add_parser(sub) -> None:
    p = sub.add_parser("fit-sampler", help="fit a few-pass sampler to a flow-matching model (JSON)")
    what = "'pretrained' (with --robot NAME) or a model file (RUN/model.pt)"
    p.add_argument("--model", required=True, help=what)
    p.add_argument("--robot", help="the robot: a bundled name, or a URDF if the model's robot "
                   "is not bundled")  # fmt: skip
    _add_out(p, "the JSON file to write (e.g. RUN/sampler.json); an existing one needs "
             "--overwrite")  # fmt: skip
    p.add_argument("--steps", type=_positive_int, default=8, help="passes (default 8)")
    p.add_argument("--iters", type=_positive_int, default=200, help="Adam steps (default 200)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _common(p, seed=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``torchik fit-sampler``: fit, print the sampler's grid, write the JSON."""
    from torchik.models.fm_fit import SamplerFit, fit_sampler, save_sampler

    _new_output(args.out, args.overwrite)  # refuse a bad path before the work, not after it
    model = _load_model(args.model, args.robot, torch.device(args.device))
    if model.family != "fm":
        raise ValueError(f"fit-sampler is for flow-matching models; this model is {model.family!r}")
    robot_name = None if args.model == "pretrained" else args.robot
    robot = _require_robot(model.spec, robot_name).to(torch.float64).to(args.device)
    fit = SamplerFit(steps=args.steps, iters=args.iters)
    fitted = fit_sampler(model, robot, fit, progress=not args.no_progress)
    save_sampler(fitted, args.out, model=args.model)
    times = ", ".join(f"{t:.3f}" for t in fitted.sampler.times)
    use = f"torchik solve ... --model {args.model} --sampler {args.out}"
    print(f"torchik: {fitted.sampler.passes} passes, times {times}; loss "
          f"{fitted.losses[0]:.3f} -> {fitted.losses[-1]:.3f}; wrote {args.out} ({use})",
          file=sys.stderr)  # fmt: skip
    return 0

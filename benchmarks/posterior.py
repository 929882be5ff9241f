"""Protocol "Posterior" (posterior): learned IK models against rejection-sampled posteriors.

Planar arms with N = 4, 6, 8, 10 unit links and θ ~ N(0, 0.2²), and the rail arm with its prior
N(0, diag(0.25, 0.5, 0.5, 0.5)²). Test targets are the end points of prior draws. Ground truth:
``torchik.posterior.rejection_sample_widening`` (radius ``--radius``; a target short of samples
after ``--max-draws`` draws is sampled again with twice the radius: each target's radius is
recorded), ``2 × --samples`` accepted per target: the first half is the reference, the second an
independent draw that gives the finite-sample floor of every metric. Each registered model family
is trained with ``torchik.train.train`` on prior samples (``make_dataset(..., sampler="normal",
targets="planar")``) for ``--steps`` steps or ``--minutes`` minutes, then draws ``--samples``
samples per target. Metrics per target, averaged: MMD² to the reference (IMQ kernels, bandwidths
0.05, 0.2, 0.9, biased estimator), re-simulation error (mean squared end-point distance),
convex-hull area of the 97th percentile of re-simulated end points, diversity (mean pairwise
joint distance). The "prior" row ignores the target (an upper reference).

    .venv/bin/python benchmarks/posterior.py --arms 4 rail --targets 20 --minutes 2
    .venv/bin/python benchmarks/posterior.py --targets 1000 --steps 20000 --train-size 1000000
"""

from __future__ import annotations

import argparse
import traceback
from typing import Any

import torch
from common import Column, Report, Table, add_common_args, fmt_sci, fmt_time, log

from torchik import load_robot
from torchik.data import make_dataset
from torchik.models import families
from torchik.planar import RAIL_ARM_PRIOR_STD, PlanarArm
from torchik.protocols.iknet_run import seconds_per_step
from torchik.protocols.posterior import posterior_table, posterior_truth
from torchik.train import TrainConfig, train

FAMILIES = ("cvae", "inn", "flow", "mdn", "iknet", "mlp")
SEEDS = {"train": 1, "val": 2, "model": 0}
"""Seeds of the training data and the models (the protocol's own: torchik.protocols.posterior)."""


def arm_setup(name: str) -> tuple[PlanarArm, Any, list[float]]:
    """``(closed-form arm, generic robot, prior std)`` of ``"4"``, ``"6"``, ... or ``"rail"``."""
    if name == "rail":
        return PlanarArm.rail_arm(), load_robot("rail_arm"), list(RAIL_ARM_PRIOR_STD)
    n = int(name)
    return PlanarArm(n), load_robot("planar", link_lengths=[1.0] * n), [0.2] * n


# ---------------------------------------------------------------------------- models
def make_model(cls, spec, preset: str):
    if preset == "tiny":
        config = cls.tiny_config()
    elif preset == "small" and hasattr(cls.Config, "small"):
        config = cls.Config.small()
    else:
        config = cls.Config()
    torch.manual_seed(SEEDS["model"])
    return cls(spec, config)


def train_family(cls, robot, train_set, val_set, args) -> tuple[Any, dict[str, Any]]:
    model = make_model(cls, train_set.spec, args.preset)
    steps = args.steps
    if steps is None:
        steps = max(50, int(args.minutes * 60 / seconds_per_step(model, train_set, args.batch)))
    config = TrainConfig(
        steps=steps, batch_size=args.batch, lr=args.lr, warmup_steps=min(200, steps // 10),
        min_lr_ratio=0.02, log_every=max(1, steps // 20), val_every=max(1, steps // 5),
        val_targets=len(val_set), checkpoint_every=0, seed=SEEDS["model"], progress=False,
    )  # fmt: skip
    result = train(model, train_set, val_set, config, robot=robot)
    row = {
        "steps": steps,
        "train_s": result.seconds,
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    return result.model, row


def run_arm(name: str, args) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    arm, robot, std = arm_setup(name)
    log(f"arm {name}: ground truth for {args.targets} targets")
    truth = posterior_truth(arm, std, args.targets, args.samples, args.radius,
                            max_draws=args.max_draws, threads=args.threads)  # fmt: skip
    info = {**truth.info, "arm": name}
    log(f"arm {name}: {info}")
    robot_kind = {"sampler": "normal", "std": std if name == "rail" else 0.2, "targets": "planar"}
    train_set = make_dataset(robot, args.train_size, seed=SEEDS["train"], **robot_kind)
    val_set = make_dataset(robot, 500, seed=SEEDS["val"], **robot_kind)
    registry, models, fits = families(), {"prior": None}, {}
    for family in args.families:
        if family not in registry:
            fits[family] = {"status": "not available yet: family not registered"}
            continue
        try:
            models[family], fits[family] = train_family(registry[family], robot, train_set,
                                                        val_set, args)  # fmt: skip
        except Exception as err:  # a model still being written: keep the other rows
            traceback.print_exc()
            fits[family] = {"status": f"failed: {type(err).__name__}: {err}"[:200]}
    table = posterior_table(arm, models, truth=truth)
    rows = [{"method": m, "arm": name, **fits.get(m, {}), **r} for m, r in table.rows.items()]
    rows += [{"method": m, "arm": name, **fit} for m, fit in fits.items() if m not in models]
    order = ["ground truth (2nd draw)", "prior", *args.families]
    rows.sort(key=lambda r: order.index(r["method"]))
    for row in rows[2:]:
        log(f"arm {name}: {row}")
    return rows, info


# ---------------------------------------------------------------------------- report
def tables(rows, infos, args) -> list[Table]:
    truth = Table(
        "Ground truth by rejection sampling",
        [
            Column("arm", "arm"),
            Column("targets", "targets"),
            Column("accepted", "accepted / target"),
            Column("radius_base", "radius ε"),
            Column("at_base_radius", "targets at ε", lambda x: f"{100 * x:.0f} %"),
            Column("radius_median", "median radius", lambda x: f"{x:.3g}"),
            Column("radius_max", "max radius", lambda x: f"{x:.3g}"),
            Column("rate_median", "median acceptance", fmt_sci),
            Column("rate_min", "min acceptance", fmt_sci),
            Column("draws_max", "draws (max)", fmt_sci),
            Column("seconds", "time", fmt_time),
            Column("targets_x_accepted_per_s", "targets × accepted / s", lambda x: f"{x:.3g}"),
        ],
    )
    for info in infos:
        truth.add("rejection", **info)
    main = Table(
        f"Posterior metrics, {args.samples} samples per target (means over targets)",
        [
            Column("arm", "arm"),
            Column("steps", "steps"),
            Column("train_s", "train time", fmt_time),
            Column("mmd", "MMD²", lambda x: f"{x:.4f}"),
            Column("resim", "re-sim error", fmt_sci),
            Column("hull", "hull area (97 %)", fmt_sci),
            Column("diversity", "diversity", lambda x: f"{x:.3f}"),
        ],
    )
    for row in rows:
        main.add(row.pop("method"), row.pop("status", "ok"), **row)
    return [truth, main]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arms", nargs="+", default=["4", "6", "8", "10", "rail"])
    parser.add_argument("--families", nargs="+", default=None, help="default: all registered")
    parser.add_argument("--targets", type=int, default=100)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--radius", type=float, default=0.01, help="base acceptance radius")
    parser.add_argument("--max-draws", type=int, default=1 << 24, help="per widening round")
    parser.add_argument("--threads", type=int, default=1, help="for the rejection sampling")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=int, default=None, help="training steps per model")
    budget.add_argument("--minutes", type=float, default=2.0, help="training time per model")
    parser.add_argument("--train-size", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--preset", choices=("tiny", "small", "default"), default="small")
    add_common_args(parser)
    args = parser.parse_args()
    if args.families is None:
        known = families()
        args.families = [f for f in FAMILIES if f in known] + sorted(set(known) - set(FAMILIES))
    report = Report(
        "posterior",
        "Posterior quality of learned IK (protocol Posterior)",
        intro=[__doc__.split("\n\n")[1].replace("\n", " "), "", _scope_note(args)],
    )
    rows, infos = [], []
    for name in args.arms:
        arm_rows, info = run_arm(name, args)
        rows += arm_rows
        infos.append(info)
    report.tables = tables(rows, infos, args)
    md, _ = report.write(args.out)
    log(f"wrote {md}")


def _scope_note(args) -> str:
    every_arm = set(args.arms) >= {"4", "6", "8", "10", "rail"}
    budget = f"{args.steps} steps" if args.steps else f"{args.minutes} min"
    scope = (
        f"{args.targets} targets, arms {', '.join(args.arms)}, preset {args.preset}, training "
        f"budget {budget} per model on the CPU, {args.train_size} training pairs"
    )
    if args.targets >= 1000 and every_arm:
        return f"Full protocol run ({scope})."
    if args.targets >= 100 and every_arm:
        return (
            f"**Protocol table at CPU scale** ({scope}): the protocol's 100 test targets (its "
            "final table asks 1000) and every arm; the models are trained for minutes, so the "
            "learned rows are far from converged and only their ordering should be read."
        )
    return f"**Small run** ({scope}): a smoke test of the protocol, not its table."


if __name__ == "__main__":
    main()

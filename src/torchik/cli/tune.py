"""``torchik tune``: a hyperparameter study of a model family (:func:`torchik.tune.tune`), on
Optuna by default or on Ray Tune (``--backend ray``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from torchik.cli.common import _INTERRUPTED, _positive_int, _resume_command


def add_parser(sub) -> None:
    p = sub.add_parser(
        "tune", help="search a model family's settings (Optuna; Ray Tune with --backend ray)"
    )
    p.add_argument("--model", required=True, help="model family (cvae, inn, mdn, ...)")
    p.add_argument(
        "--robot",
        default="planar:1,1,1,1",
        help="a bundled robot, planar:L1,L2,... or rail_arm (default planar:1,1,1,1)",
    )
    p.add_argument(
        "--objective",
        default="position_error",
        choices=("position_error", "posterior_mismatch", "resimulation"),
        help="what is minimised (default: the validation FK position error; the "
        "posterior ones need a planar arm or rail_arm)",
    )
    p.add_argument("--space", help="a JSON or YAML file overriding the default search space")
    p.add_argument("--trials", type=_positive_int, default=20, help="trials in the study")
    p.add_argument("--steps", type=_positive_int, default=1000, help="training steps per trial")
    p.add_argument(
        "--val-every",
        type=_positive_int,
        default=100,
        help="steps between validations, the pruner's checkpoints (default 100)",
    )
    p.add_argument("--batch-size", type=_positive_int, default=256)
    p.add_argument("--train-size", type=_positive_int, default=10_000, help="training pairs")
    p.add_argument("--val-size", type=_positive_int, default=500, help="validation pairs")
    p.add_argument(
        "--preset",
        choices=("tiny", "small"),
        help="the model config the searched settings start from (default: the "
        "family's default for the robot)",
    )
    p.add_argument("--posterior-targets", type=_positive_int, default=20)
    p.add_argument("--posterior-samples", type=_positive_int, default=200)
    _study_args(p)
    p.set_defaults(func=run)


def _study_args(p) -> None:
    """Where the study lives, how it searches and who runs it."""
    p.add_argument("--sampler", choices=("tpe", "gp", "random"), default="tpe")
    p.add_argument("--pruner", choices=("median", "hyperband", "none"), default="median")
    p.add_argument("--out", help="run folder (default: runs/tune_MODEL_ROBOT)")
    p.add_argument("--study", help="study name (default: MODEL_ROBOT_OBJECTIVE)")
    p.add_argument(
        "--storage",
        help="an Optuna storage URL shared by workers on many machines "
        "(postgresql://..., sqlite:///FILE); default: OUT/study.journal",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the study in OUT after a kill (its running trials run again)",
    )
    p.add_argument("--jobs", type=_positive_int, default=1, help="worker processes here")
    p.add_argument("--threads", type=_positive_int, default=1, help="torch threads per worker")
    p.add_argument(
        "--backend",
        choices=("optuna", "ray"),
        default="optuna",
        help="ray: Ray Tune with Optuna search and ASHA (the 'ray' extra)",
    )
    p.add_argument("--ray-address", help="an existing Ray cluster (default: start a local Ray)")
    p.add_argument("--seed", type=int, default=0, help="training seed of every trial")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--no-baseline",
        action="store_true",
        help="do not run the starting config (the preset or the family's default, moved into "
        "the space) as a new study's first trial",
    )


def _config(args: argparse.Namespace):
    from torchik.tune.study import TuneConfig

    return TuneConfig(
        family=args.model, robot=args.robot, objective=args.objective, trials=args.trials,
        steps=args.steps, val_every=args.val_every, batch_size=args.batch_size,
        train_size=args.train_size, val_size=args.val_size, preset=args.preset,
        posterior_targets=args.posterior_targets, posterior_samples=args.posterior_samples,
        sampler=args.sampler, pruner=args.pruner, seed=args.seed, threads=args.threads,
        baseline=not args.no_baseline,
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """``torchik tune``: run, continue or join a study; print the best settings and files."""
    from torchik.tune.space import default_space, read_space

    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0, got {args.seed}")
    config = _config(args)
    space = read_space(args.space, config.family) if args.space else None
    _check_batch_size(args, space if space is not None else default_space(config.family))
    out = Path(args.out or f"runs/tune_{config.study_name}")
    try:
        if args.backend == "ray":
            return _ray(args, config, space or default_space(config.family), out)
        if args.ray_address:
            raise ValueError("--ray-address needs --backend ray")
        from torchik.tune.study import tune

        result = tune(config, out, space, args.storage, args.study, args.resume, args.jobs,
                      progress=not args.quiet)  # fmt: skip
    except KeyboardInterrupt:
        print(_interrupted(out, args.argv), file=sys.stderr)
        return _INTERRUPTED
    print(f"{result.trials} trials in {result.seconds:.1f} s; best {config.objective} "
          f"{result.best_value:.4g} with {result.best_config}")  # fmt: skip
    if result.baseline_value == result.baseline_value:  # not nan: the baseline trial completed
        print(f"the starting config (the baseline trial) gave {result.baseline_value:.4g}")
    for kind, path in result.files.items():
        print(f"{kind}: {path}")
    if "best" in result.files:
        print(f"train it: torchik train --config {result.files['best']} {_stream(config)}")
    return 0


def _check_batch_size(args: argparse.Namespace, space: dict) -> None:
    """Refuse a ``--batch-size`` that ``--train-size`` cannot fill, before the study and in
    the flags' names (the study's own check names TuneConfig's fields: "raise train_size or
    lower batch_size"); a batch size that ``--space`` searches is left to that check."""
    from torchik.train.engine import check_batch_size

    if "batch_size" in space:
        return
    try:
        check_batch_size(args.batch_size, args.train_size)
    except ValueError:
        raise ValueError(
            f"--batch-size {args.batch_size} is more than the --train-size {args.train_size} "
            "training pairs: every trial would fail; raise --train-size or lower --batch-size"
        ) from None


def _interrupted(out: Path, argv: list[str]) -> str:
    """The line an interrupted ``tune`` prints: the command that continues the study, to
    paste as it is (the same one, with ``--out`` and ``--resume``)."""
    return f"interrupted; continue the study with: {_resume_command(argv, out)}"


def _stream(config) -> str:
    """The ``torchik train`` data options of the study's problem."""
    if config.robot == "rail_arm":
        return "--stream rail_arm --targets planar --sampler normal --std 0.25 0.5 0.5 0.5"
    if config.robot.startswith("planar:"):
        return f"--stream {config.robot} --targets planar --sampler normal --std 0.2"
    return f"--stream {config.robot}"


def _ray(args, config, space, out: Path) -> int:
    from torchik.tune.ray import tune_ray

    if args.storage or args.resume or args.jobs != 1:
        raise ValueError("--storage, --resume and --jobs are Optuna's: Ray uses its cluster")
    result = tune_ray(config, out, space, address=args.ray_address, progress=not args.quiet)
    print(f"{result.trials} trials in {result.seconds:.1f} s (Ray Tune); best "
          f"{config.objective} {result.best_value:.4g} with {result.best_config}")  # fmt: skip
    for kind, path in result.files.items():
        print(f"{kind}: {path}")
    return 0

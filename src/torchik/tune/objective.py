"""The objective of a :func:`torchik.tune.tune` trial: the problem's data (built once per
worker), one trial's model and training settings, training with intermediate values for the
pruner, and the posterior protocol's metrics.

A trial's value is the validation FK position error (``"position_error"``: the best
validation of :func:`torchik.train.train`), or on a planar or the rail arm the posterior
mismatch (MMD² between the model's samples and a rejection-sampled ground truth, IMQ kernels
0.05, 0.2, 0.9) or the re-simulation error, at ``posterior_targets`` targets drawn from the
prior with ``posterior_samples`` samples each (ground truth: acceptance radius 0.01, widened
for targets in the prior's tails).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from torchik.tune.results import trial_budget
from torchik.tune.space import Choice, Float, Int, Param, split_params, suggest

__all__ = [
    "InvalidSettings",
    "baseline_params",
    "build_trial",
    "check_settings",
    "final_objective",
    "make_objective",
    "make_problem",
    "posterior_metrics",
    "problem_robot",
    "trial_configs",
    "validation_value",
]


def problem_robot(robot: str):
    """``(Robot, PlanarArm or None, prior std or None)`` of ``robot`` (a bundled name,
    ``planar:L1,L2,...``, ``rail_arm`` or a URDF file): a planar or the rail arm get their
    closed form and the posterior protocol's prior (0.2 per joint; the rail arm's own)."""
    from torchik.description.bundled import RAIL_ARM_PRIOR_STD, list_robots
    from torchik.robot.planar import PlanarArm
    from torchik.robot.robot import Robot, load_robot

    if robot == "rail_arm":
        return load_robot("rail_arm"), PlanarArm.rail_arm(), list(RAIL_ARM_PRIOR_STD)
    if robot.startswith("planar:"):
        try:
            lengths = [float(v) for v in robot[len("planar:") :].split(",")]
        except ValueError:
            raise ValueError(f"planar arm lengths must be numbers, got {robot!r}") from None
        arm = PlanarArm(len(lengths), lengths)
        return load_robot("planar", link_lengths=lengths), arm, [0.2] * len(lengths)
    if Path(robot).is_file():
        return Robot.from_urdf(Path(robot)), None, None
    if robot not in list_robots():  # load_robot's message spells a planar arm as Python does
        raise ValueError(
            f"unknown robot {robot!r}: use a bundled robot ({', '.join(list_robots())}), "
            "'planar:L1,L2,...' or the path of a URDF file"
        )
    return load_robot(robot), None, None


@dataclass
class _Problem:
    """One worker's data: built once, shared by its trials."""

    robot: Any
    train_set: Any
    val_set: Any
    arm: Any = None
    targets: Any = None
    reference: Any = None


def make_problem(config) -> _Problem:
    """The data of ``config``'s study, built once per worker (and, for the posterior
    objectives, the ground-truth posteriors of its test targets)."""
    from torchik.learn.data import make_dataset
    from torchik.learn.posterior import rejection_sample_widening

    robot, arm, std = problem_robot(config.robot)
    if config.objective != "position_error" and arm is None:
        raise ValueError(f"objective {config.objective!r} needs a planar arm or the rail arm")
    kind = {"sampler": "normal", "std": std, "targets": "planar"} if arm is not None else {}
    train_set = make_dataset(robot, config.train_size, seed=config.seed + 1, **kind)
    val_set = make_dataset(robot, config.val_size, seed=config.seed + 2, **kind)
    problem = _Problem(robot, train_set, val_set, arm)
    if config.objective != "position_error":
        gen = torch.Generator().manual_seed(config.seed + 3)
        q = torch.randn(config.posterior_targets, len(std), generator=gen) * torch.tensor(std)
        with torch.no_grad():
            targets = arm(q)
        truth = rejection_sample_widening(
            arm, std, targets, config.posterior_samples, 0.01, generator=gen.manual_seed(
                config.seed + 4), num_threads=config.threads,
        )  # fmt: skip
        problem.targets, problem.reference = targets, truth.samples
    return problem


@torch.no_grad()
def posterior_metrics(model, problem: _Problem, config) -> dict[str, float]:
    """Posterior mismatch and re-simulation error of ``model`` on ``problem``'s targets (the
    caller's RNG untouched, the model's mode kept)."""
    from torchik.learn.metrics import mmd, resimulation_error

    was_training = model.training
    model.eval()
    ref = model.target_mean
    with torch.random.fork_rng(devices=[]):
        gen = torch.Generator().manual_seed(config.seed + 5)
        samples = model.sample(problem.targets.to(ref), config.posterior_samples, generator=gen)
    model.train(was_training)
    samples = samples.float()
    return {
        "posterior_mismatch": mmd(samples, problem.reference.float()).mean().item(),
        "resimulation": resimulation_error(problem.arm, samples, problem.targets).mean().item(),
    }


def trial_configs(config, params: dict[str, Any], dof: int) -> tuple[Any, Any]:
    """``(model config, TrainConfig)`` of one trial's settings ``params`` (model and training
    fields mixed) on a robot of ``dof`` joints: the study's preset (or the family's default for
    the robot) and budget, with ``params`` on top.

    Raises:
        ValueError: a setting out of its config's range.
    """
    from torchik.models.registry import families
    from torchik.train.engine import TrainConfig

    cls = families()[config.family]
    model_kw, train_kw = split_params(config.family, params)
    if config.preset == "tiny":
        model_config = dataclasses.replace(cls.tiny_config(), **model_kw)
    elif config.preset == "small" and hasattr(cls.Config, "small"):
        model_config = cls.Config.small(**model_kw)
    elif hasattr(cls.Config, "for_dof"):  # as `torchik train` sizes it without --preset
        model_config = cls.Config.for_dof(dof, **model_kw)
    else:
        model_config = cls.Config(**model_kw)
    budget = trial_budget(config)
    train_config = TrainConfig(**{
        **budget, "log_every": budget["val_every"], "val_targets": config.val_size,
        "checkpoint_every": 0, "progress": False, **train_kw,
    })  # fmt: skip
    return model_config, train_config


def build_trial(config, params: dict[str, Any], spec) -> tuple[Any, Any]:
    """``(model, TrainConfig)`` of one trial's settings ``params`` (:func:`trial_configs`);
    the model's initial weights come from ``config.seed``.

    Raises:
        ValueError: a setting out of its config's range.
    """
    from torchik.models.registry import families

    model_config, train_config = trial_configs(config, params, spec.dof)
    torch.manual_seed(config.seed)
    return families()[config.family](spec, model_config), train_config


def _nearest(param: Param, value: Any) -> Any:
    """``value`` moved into ``param``: clamped into a range, the closest of numeric choices;
    ``None`` where a choice of strings does not hold it."""
    if isinstance(param, Float | Int):
        return type(param.low)(min(max(value, param.low), param.high))
    if value in param.choices:
        return value
    numbers = [c for c in param.choices if isinstance(c, int | float) and not isinstance(c, bool)]
    if not numbers or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return min(numbers, key=lambda c: (abs(math.log(c / value)) if c > 0 < value
                                       else abs(c - value)))  # fmt: skip


def baseline_params(config, space: dict[str, Param | Any], dof: int) -> dict[str, Any]:
    """The searched settings of the config a study starts from (its preset or the family's
    default for the robot, and :class:`~torchik.train.TrainConfig`'s defaults), each moved
    into the space where it lies outside (``weight_decay`` 0 becomes the range's low end, a
    width the closest choice): a new study's first trial, so that its best is never worse
    than that config. A string setting whose choices miss the default is left out (the
    sampler draws it).

    Example:
        >>> from torchik.tune import TuneConfig
        >>> from torchik.tune.space import default_space
        >>> baseline_params(TuneConfig("mdn"), default_space("mdn"), 4)["width"]
        256
    """
    model_config, train_config = trial_configs(config, {}, dof)
    out = {}
    for name, param in space.items():
        if not isinstance(param, Float | Int | Choice):
            continue  # fixed: every trial has it already
        source = model_config if hasattr(model_config, name) else train_config
        value = _nearest(param, getattr(source, name))
        if value is not None:
            out[name] = value
    return out


def _batch_sizes(config, space: dict[str, Param | Any]) -> list[int]:
    """The batch sizes a trial of ``space`` can draw (the study's own where not searched)."""
    param = space.get("batch_size", config.batch_size)
    if isinstance(param, Int):
        return [param.low, param.high]
    if isinstance(param, Choice):
        return [c for c in param.choices if isinstance(c, int)] or [config.batch_size]
    return [param]


def check_settings(config, space: dict[str, Param | Any], dof: int) -> None:
    """Refuse, before a study starts, settings that fail every trial of ``space``: a batch
    that the training set cannot fill, or fixed values (the space's, on the study's preset)
    that their config refuses.

    Raises:
        ValueError: in one line, saying what to change.
    """
    from torchik.train.engine import check_batch_size

    try:
        check_batch_size(min(_batch_sizes(config, space)), config.train_size)
    except ValueError as err:
        raise ValueError(f"{err}: every trial would fail; raise train_size or lower "
                         "batch_size") from None  # fmt: skip
    fixed = {k: v for k, v in space.items() if not isinstance(v, Float | Int | Choice)}
    try:
        trial_configs(config, fixed, dof)
    except (ValueError, TypeError) as err:
        raise ValueError(f"every trial would fail: {' '.join(str(err).split())}") from None


class InvalidSettings(ValueError):
    """A trial's settings that its config refuses (the trial fails; the study goes on)."""


def validation_value(model, metrics: dict[str, float], problem: _Problem, config) -> float | None:
    """The objective at a step of ``train()``'s callback, or ``None`` on a step without
    validation: the validation position error (the loss without a robot), or the posterior
    metric of the model as it is."""
    if "val_loss" not in metrics:
        return None
    if config.objective != "position_error":
        return posterior_metrics(model, problem, config)[config.objective]
    return metrics.get("val_position_error", metrics["val_loss"])


def final_objective(result, problem: _Problem, config) -> tuple[float, dict[str, float]]:
    """``(objective, metrics)`` of a finished trial: ``metrics`` has ``val_position_error``
    (the best validation; nan without one, which fails the trial) and, for a posterior
    objective, the posterior metrics of the returned model."""
    best = math.nan if result.best_val is None else float(result.best_val)
    metrics = {"val_position_error": best}
    if config.objective == "position_error":
        return best, metrics
    metrics |= posterior_metrics(result.model, problem, config)
    return metrics[config.objective], metrics


def _check_rows(train_config, rows: int) -> None:
    """A drawn batch size that the training set cannot fill (what ``train`` refuses)."""
    from torchik.train.engine import check_batch_size

    check_batch_size(train_config.batch_size, rows)


def make_objective(config, space: dict[str, Param], problem: _Problem):
    """The Optuna objective of ``config``'s study: draw settings from ``space``, train, report
    every validation to the pruner, return the objective (settings and metrics recorded in the
    trial's ``user_attrs``)."""
    import optuna

    from torchik.train.loop import train

    def objective(trial: optuna.Trial) -> float:
        params = suggest(trial, space)
        trial.set_user_attr("config", params)
        trial.set_user_attr("seed", config.seed)
        try:
            model, train_config = build_trial(config, params, problem.train_set.spec)
            _check_rows(train_config, len(problem.train_set))
        except (ValueError, TypeError) as err:
            raise InvalidSettings(f"trial {trial.number}: {err}") from err

        def report(step: int, metrics: dict[str, float]) -> None:
            value = validation_value(model, metrics, problem, config)
            if value is None:
                return
            trial.report(value, step)
            if trial.should_prune():
                raise optuna.TrialPruned(f"pruned at step {step} with {value:.4g}")

        result = train(model, problem.train_set, problem.val_set, train_config,
                       robot=problem.robot, callback=report)  # fmt: skip
        trial.set_user_attr("val_position_error", result.best_val)
        trial.set_user_attr("parameters", sum(p.numel() for p in model.parameters()))
        trial.set_user_attr("train_seconds", result.seconds)
        value, metrics = final_objective(result, problem, config)
        for name in metrics.keys() - {"val_position_error"}:  # the posterior metrics
            trial.set_user_attr(name, metrics[name])
        return value

    return objective

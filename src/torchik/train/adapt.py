"""Robustness to a changed robot: perturbed link lengths, calibration and few-shot fine-tuning.

* :func:`perturbed_robot` scales every joint origin's translation by its own random factor in
  ``[1 - scale, 1 + scale]``: link lengths and offsets change by at most ``scale``.
* :func:`calibrate` fits the joint origins of a robot to measured end-link positions by
  gradient descent through forward kinematics (:meth:`torchik.Robot.learnable_origins`).
* :func:`finetune` continues training a model on a small data set of the changed robot.
* :func:`family_dataset` draws training pairs from many perturbed copies of a robot, for one
  model meant to serve the whole family.

Robots returned here are rebuilt from a modified description
(:class:`torchik.description.URDFModel`), so their :func:`torchik.learn.robot_hash` names the new
geometry and data made with them carry it.

Example:
    >>> import torch, torchik
    >>> arm = torchik.load_robot("planar", link_lengths=[0.5, 0.3], dtype=torch.float64)
    >>> other = perturbed_robot(arm, 0.2, torch.Generator().manual_seed(0))
    >>> q = other.random_configuration(200, torch.Generator().manual_seed(1))
    >>> fit = calibrate(arm, q, other.link_positions(q, "ee"), "ee")
    >>> fit.residual_after < 1e-6 < fit.residual_before
    True
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor

from torchik.checks import (
    check_bool,
    check_float,
    check_generator,
    check_int,
    check_kind,
    check_tensor,
)
from torchik.description.urdf import Origin
from torchik.learn.data import DATA_FORMAT_VERSION, IKDataset, make_dataset
from torchik.learn.spec import ProblemSpec
from torchik.models.base import IKModel
from torchik.robot.configuration import MAX_CONFIGURATIONS
from torchik.robot.robot import Robot
from torchik.train.engine import TrainConfig
from torchik.train.loop import TrainResult, train

__all__ = [
    "FINETUNE_CONFIG",
    "CalibrationResult",
    "calibrate",
    "family_dataset",
    "finetune",
    "perturbed_robot",
    "with_origins",
]

FINETUNE_CONFIG = TrainConfig(
    steps=1000, batch_size=256, lr=3e-4, warmup_steps=0, grad_clip=0.3, normalize=False
)
"""Defaults of :func:`finetune`: a tenth of the usual learning rate, no warm-up, and the
pretrained model's normalisation kept (its weights were learned with it)."""


def with_origins(robot: Robot, xyz: Tensor, rpy: Tensor | None = None) -> Robot:
    """A new robot whose joint origins are ``xyz (N, 3)`` (and ``rpy (N, 3)``) over every URDF
    joint in ``robot.origin_xyz`` order, built from a modified description (same dtype).

    Raises:
        ValueError: ``xyz`` or ``rpy`` not ``(N, 3)`` for the robot's ``N`` joints.
        TypeError: not floating-point tensors.
    """
    count = len(robot.model.joints)
    for name, value in (("xyz", xyz), ("rpy", rpy)):
        if value is None and name == "rpy":  # the robot's own rotations
            continue
        shape = tuple(check_tensor(name, value, (3,)).shape)
        if shape != (count, 3):
            raise ValueError(f"{name} must be ({count}, 3), one row per joint of "
                             f"{robot.name!r}, got {shape}")  # fmt: skip
    xyz_rows = xyz.detach().double().cpu().tolist()
    rpy_rows = (robot.origin_rpy if rpy is None else rpy).detach().double().cpu().tolist()
    joints = tuple(
        dataclasses.replace(j, origin=Origin(tuple(p), tuple(r)))
        for j, p, r in zip(robot.model.joints, xyz_rows, rpy_rows, strict=True)
    )
    model = dataclasses.replace(robot.model, joints=joints)
    return Robot(model, dtype=robot.dtype).to(robot.device)


def perturbed_robot(
    robot: Robot, scale: float = 0.2, generator: torch.Generator | None = None
) -> Robot:
    """``robot`` with every joint origin's translation multiplied by a factor drawn uniformly
    from ``[1 - scale, 1 + scale]`` (one per joint): each link length and offset changes by at
    most ``scale`` of its value, its direction is kept.

    Args:
        robot: the nominal robot.
        scale: largest relative change, ``0 <= scale < 1``.
        generator: random generator (CPU).

    Raises:
        ValueError: ``scale`` outside ``[0, 1)``.
        TypeError: ``scale`` not a number, ``generator`` not a CPU generator.
    """
    check_generator("generator", generator)
    scale = check_float("scale", scale, 0.0, 1.0)
    if generator is not None and generator.device.type != "cpu":
        raise TypeError(f"generator must be a CPU generator, got one on {generator.device}")
    if scale == 1.0:
        raise ValueError(f"scale must be in [0, 1), got {scale}")
    n = robot.origin_xyz.shape[0]
    u = torch.rand(n, 1, generator=generator, dtype=torch.float64)
    factor = 1.0 + scale * (2.0 * u - 1.0)
    return with_origins(robot, robot.origin_xyz.detach().double().cpu() * factor)


def family_dataset(
    robot: Robot,
    n: int,
    per_arm: int = 200,
    scale: float = 0.2,
    seed: int = 0,
    link: str | None = None,
    targets: str = "position",
) -> IKDataset:
    """``n`` pairs from a family of robots: a fresh :func:`perturbed_robot` of ``robot`` (its
    own factors in ``[1 - scale, 1 + scale]``) for every ``per_arm`` pairs.

    The pairs carry ``robot``'s spec (name, hash, limits): a model trained on them is a model of
    the nominal robot that has seen the whole family. ``meta["family"]`` records the family.

    Args:
        robot: the nominal robot.
        n: number of pairs; ``ceil(n / per_arm)`` arms are drawn.
        per_arm: pairs per arm (the last arm may get fewer).
        scale: largest relative change of an origin (see :func:`perturbed_robot`).
        seed: seeds the arms and their joint samples (the global RNG is untouched).
        link, targets: as in :func:`torchik.learn.make_dataset`.

    Raises:
        ValueError: ``n`` negative or over
            :data:`~torchik.robot.configuration.MAX_CONFIGURATIONS`, ``per_arm`` under 1,
            ``seed`` negative, bad ``scale``,
            ``link`` or ``targets``.
        TypeError: arguments of the wrong kind.

    Example:
        >>> arm = torchik.load_robot("digit_arm")
        >>> data = family_dataset(arm, 500, per_arm=100)
        >>> len(data), data.meta["family"]["arms"], data.spec.robot == arm.name
        (500, 5, True)
    """
    check_int("n", n, 0, MAX_CONFIGURATIONS)
    check_int("per_arm", per_arm, 1)
    check_int("seed", seed, 0, 2**63 - 1)
    spec = ProblemSpec.from_robot(robot, link, targets)
    gen = torch.Generator().manual_seed(seed)
    qs, ts = [], []
    for start in range(0, n, per_arm):
        arm = perturbed_robot(robot, scale, gen)
        seed_i = int(torch.randint(2**62, (1,), generator=gen))
        part = make_dataset(arm, min(per_arm, n - start), spec.link, targets=targets, seed=seed_i)
        qs.append(part.q)
        ts.append(part.target)
    q = torch.cat(qs) if qs else torch.empty(0, spec.dof)
    target = torch.cat(ts) if ts else torch.empty(0, spec.target_dim)
    family = {"scale": scale, "per_arm": per_arm, "arms": len(qs), "seed": seed}
    meta = {"sampler": "uniform", "seed": seed, "format_version": DATA_FORMAT_VERSION}
    return IKDataset(q, target, spec, {**meta, "family": family})


@dataclass
class CalibrationResult:
    """What :func:`calibrate` returns.

    Attributes:
        robot: the calibrated robot (the input's dtype and device).
        residual_before: mean distance (m) between FK and the measurements, nominal origins.
        residual_after: the same with the fitted origins.
        iterations: optimiser iterations run.
    """

    robot: Robot
    residual_before: float
    residual_after: float
    iterations: int


def _residual(robot: Robot, q: Tensor, measured: Tensor, link: str) -> Tensor:
    return (robot.link_positions(q, link) - measured).norm(dim=-1)


def calibrate(
    robot: Robot,
    q: Tensor,
    measured: Tensor,
    link: str,
    steps: int = 200,
    lr: float = 1.0,
    fit_rotations: bool = False,
) -> CalibrationResult:
    """Fit the joint origins of ``robot`` to measured end-link positions.

    Minimises the mean squared distance between FK of ``q`` and ``measured`` over the origin
    translations (and rotations with ``fit_rotations``) with L-BFGS (strong-Wolfe line search)
    in float64, starting from the nominal origins. Parameters the data cannot see (e.g. a
    planar arm's out-of-plane offsets) get no gradient and keep their nominal values.

    Args:
        robot: the nominal robot.
        q: ``(N, D)`` joint values at which positions were measured.
        measured: ``(N, 3)`` measured positions of ``link``.
        link: the measured link.
        steps: L-BFGS iterations.
        lr: L-BFGS step length.
        fit_rotations: also fit the origins' roll-pitch-yaw.

    Returns:
        A :class:`CalibrationResult`.

    Raises:
        ValueError: ``q`` not ``(N, D)`` and ``measured`` ``(N, 3)`` with ``N >= 1``, an
            unknown link, ``steps < 1``, ``lr`` not positive.
        TypeError: arguments of the wrong kind.
    """
    robot.link_index(link)
    check_tensor("q", q, (robot.dof,))
    check_tensor("measured", measured, (3,))
    if q.dim() != 2 or not len(q) or tuple(measured.shape) != (len(q), 3):
        raise ValueError(f"q must be (N, {robot.dof}) with N >= 1 and measured (N, 3), got "
                         f"{tuple(q.shape)} and {tuple(measured.shape)}")  # fmt: skip
    check_int("steps", steps, 1)
    lr = check_float("lr", lr, positive=True)
    check_bool("fit_rotations", fit_rotations)
    fit = Robot(with_origins(robot, robot.origin_xyz, robot.origin_rpy).model, torch.float64)
    q, measured = q.detach().double().cpu(), measured.detach().double().cpu()
    with torch.no_grad():
        before = _residual(fit, q, measured, link).mean().item()
    fit.learnable_origins(True)
    fit.origin_rpy.requires_grad_(fit_rotations)
    params = [p for p in (fit.origin_xyz, fit.origin_rpy) if p.requires_grad]
    opt = torch.optim.LBFGS(
        params, lr=lr, max_iter=steps, line_search_fn="strong_wolfe",
        tolerance_grad=1e-14, tolerance_change=1e-16,
    )  # fmt: skip

    def closure() -> Tensor:
        opt.zero_grad()
        loss = _residual(fit, q, measured, link).square().mean()
        loss.backward()
        return loss

    opt.step(closure)
    fitted = with_origins(robot, fit.origin_xyz, fit.origin_rpy)
    with torch.no_grad():
        after = _residual(Robot(fitted.model, torch.float64), q, measured, link).mean().item()
    return CalibrationResult(fitted, before, after, opt.state[params[0]]["n_iter"])


def _transfer(model: IKModel, data: IKDataset) -> IKModel:
    """A copy of ``model`` for ``data``'s spec (another robot of the same shape and limits)."""
    spec, own = data.spec, model.spec
    same = ("dof", "link", "targets", "lower", "upper", "continuous")
    if any(getattr(spec, k) != getattr(own, k) for k in same):
        raise ValueError(f"the model's problem {own} and the data's {spec} differ beyond the robot")
    new = type(model)(spec, model.config).to(model.target_mean)
    new.load_state_dict(model.state_dict())
    return new


def finetune(
    model: IKModel,
    data: IKDataset,
    config: TrainConfig = FINETUNE_CONFIG,
    **train_kwargs,
) -> TrainResult:
    """Continue training a trained ``model`` on a (small) data set of a changed robot.

    A thin wrapper of :func:`torchik.train.train` with a fresh optimiser, starting from a copy
    of the model's weights (the input model is left as it is). The data may come from another
    robot of the same joints, limits and end link (e.g. a :func:`perturbed_robot`): the copy
    then takes the data's spec.

    Args:
        model: the trained model.
        data: the new training pairs.
        config: training settings (default :data:`FINETUNE_CONFIG`; ``batch_size`` is capped
            at the size of ``data``; the model's normalisation is kept whatever
            ``config.normalize`` says: its weights were learned with it).
        **train_kwargs: passed to :func:`~torchik.train.train` (``val_set``, ``robot``,
            ``out_dir``, ...).

    Returns:
        The :class:`~torchik.train.TrainResult` (its ``model`` is the fine-tuned copy).

    Raises:
        TypeError: ``model``, ``data`` or ``config`` of the wrong kind.
        ValueError: data of another problem than the model's (beyond the robot's geometry).
    """
    check_kind("model", model, IKModel)
    check_kind("data", data, IKDataset)
    check_kind("config", config, TrainConfig)
    new = copy.deepcopy(model) if model.spec == data.spec else _transfer(model, data)
    # the weights were learned with the model's normalisation: new statistics would move them
    batch_size = min(config.batch_size, len(data))
    config = dataclasses.replace(config, normalize=False, batch_size=batch_size)
    return train(new, data, config=config, **train_kwargs)

"""Sampling and refinement as one call: a learned model's samples polished into exact solutions.

:func:`solve_with_model` is the one way from a target to refined model samples
(:func:`solutions_with_model` runs it in rounds until a number of them solve); ``torchik solve
--model ... --refine``, ``python -m torchik.demo`` and the full-pose protocol
(``experiments/pose.py``) call it. It lives here, not in :mod:`torchik.ik`, because it reads
the model's targets (:func:`torchik.learn.encode_target`) and :mod:`torchik.learn` already
builds on :mod:`torchik.ik`.

Everything runs where the robot and the model are: the targets are encoded there, the noise is
drawn with the caller's generator there, and the samples go to
:func:`torchik.ik.refine_samples` as they are (a dtype cast, no copy to the host); the only
host round-trips are the solver's own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
from torchik.ik.base import IKSolver
from torchik.ik.refine import MARGIN, Collected, collect_solutions, refine_samples
from torchik.ik.result import IKResult
from torchik.learn.data import encode_target
from torchik.learn.spec import robot_hash
from torchik.models.base import MAX_SAMPLES, IKModel
from torchik.robot.robot import Robot

__all__ = [
    "ModelSolutions",
    "check_model_fits",
    "model_targets",
    "solutions_with_model",
    "solve_with_model",
]


@dataclass(frozen=True)
class ModelSolutions:
    """A model's samples and their refinement, slot for slot.

    Attributes:
        samples: ``(..., n, dof)`` the raw samples, in the robot's dtype and device.
        result: the refinement (:func:`torchik.ik.refine_samples`): slot ``k`` is sample ``k``
            polished.
    """

    samples: Tensor
    result: IKResult


def model_targets(model: IKModel, target: Tensor, position_only: bool = False) -> Tensor:
    """The model's encoding ``(..., T)`` of poses ``(..., 4, 4)`` (or, ``position_only``, of
    positions ``(..., 3)``), in the model's dtype and on its device.

    Raises:
        ValueError: positions for a model trained on full poses.
    """
    kind = model.spec.targets
    if position_only:
        if kind == "pose":
            raise ValueError("this model was trained on full poses: give poses, not positions")
        eye = torch.eye(4, dtype=target.dtype, device=target.device)
        pose = eye.expand(*target.shape[:-1], 4, 4).clone()
        pose[..., :3, 3] = target
    else:
        pose = target
    return encode_target(pose, kind).to(model.target_mean)


def check_model_fits(model: IKModel, robot: Robot, link: str | None = None) -> str:
    """The link to place (default: the model's), checked against the model's spec.

    Raises:
        ValueError: the model is for another robot (:func:`torchik.learn.robot_hash`) or link.
        TypeError: ``link`` not a str (nor None).
    """
    if link is not None and not isinstance(link, str):
        raise TypeError(f"link must be a link name (str) or None, got {type(link).__name__}")
    link = model.spec.link if link is None else link
    if model.spec.robot_hash != robot_hash(robot) or model.spec.link != link:
        differs = "; ".join(model.spec.differences(robot, link))
        raise ValueError(
            f"the model is for robot {model.spec.robot!r}, link {model.spec.link!r}, not for "
            f"this one: {differs}"
        )
    return link


def solve_with_model(
    robot: Robot,
    model: IKModel,
    target: Tensor,
    n: int,
    link: str | None = None,
    *,
    position_only: bool = False,
    generator: torch.Generator | None = None,
    sample_options: Mapping[str, Any] | None = None,
    method: str | IKSolver = "lm",
    tol_position: float = 1e-3,
    tol_rotation: float = math.radians(1.0),
    max_iters: int | None = None,
    num_threads: int | None = None,
) -> ModelSolutions:
    """Draw ``n`` samples per target from ``model`` and refine every one of them.

    Args:
        robot: the robot (the refinement runs in its dtype, on its device).
        model: a model of this robot (:attr:`ProblemSpec.robot_hash <torchik.learn.ProblemSpec>`
            checked), best on the robot's device (else the samples are moved there).
        target: ``(..., 4, 4)`` poses of ``link``, or with ``position_only=True`` ``(..., 3)``
            positions, on the robot's device.
        n: samples per target.
        link: the link to place (default: the model's).
        position_only: ignore the orientation (a position model's targets).
        generator: draws the model's noise (on the model's device); None: torch's global one.
        sample_options: keywords of ``model.sample``, e.g. ``{"sampler": FEW_PASSES}`` for a
            flow-matching model (:data:`torchik.models.fm.FEW_PASSES`).
        method, tol_position, tol_rotation, max_iters, num_threads: as for
            :func:`torchik.ik.refine_samples`.

    Returns:
        :class:`ModelSolutions`: ``samples`` and ``result`` ``(..., n, dof)``.

    Raises:
        ValueError: the model is for another robot or link, or for full poses when
            ``position_only``; ``target`` without values (on the meta device) or of another
            shape; ``n`` out of ``[1, MAX_SAMPLES]``
            (:data:`torchik.models.base.MAX_SAMPLES`).
        TypeError: ``target`` not a floating-point tensor, ``n`` not an int,
            ``position_only`` not a bool, ``generator`` not a ``torch.Generator``,
            ``sample_options`` not a mapping.

    Example:
        >>> import torch, torchik
        >>> from torchik.models import load_pretrained
        >>> robot = torchik.load_robot("panda", dtype=torch.float64)
        >>> pose = robot.forward_kinematics(robot.random_configuration(2), "panda_hand")
        >>> out = solve_with_model(robot, load_pretrained("panda"), pose, 8, tol_rotation=0.01)
        >>> out.samples.shape, out.result.q.shape, bool(out.result.success.any(-1).all())
        (torch.Size([2, 8, 7]), torch.Size([2, 8, 7]), True)
    """
    link = check_model_fits(model, robot, link)
    _check_request(target, position_only, generator, sample_options)
    check_int("n", n, 1, MAX_SAMPLES)
    encoded = model_targets(model, target, position_only)
    with torch.no_grad():
        samples = model.sample(encoded, n, generator=generator, **(sample_options or {}))
    samples = samples.to(robot.device, robot.dtype)
    result = refine_samples(
        robot, target, samples, link, position_only=position_only, method=method,
        tol_position=tol_position, tol_rotation=tol_rotation, max_iters=max_iters,
        num_threads=num_threads,
    )  # fmt: skip
    return ModelSolutions(samples, result)


def solutions_with_model(
    robot: Robot,
    model: IKModel,
    target: Tensor,
    count: int,
    link: str | None = None,
    *,
    position_only: bool = False,
    generator: torch.Generator | None = None,
    sample_options: Mapping[str, Any] | None = None,
    margin: float = MARGIN,
    rounds: int = 5,
    **refine_options: Any,
) -> Collected:
    """``count`` exact solutions of one target: :func:`solve_with_model` in rounds
    (:func:`torchik.ik.collect_solutions`: ``margin`` more samples than ``count`` first, then
    1.5 times the shortfall).

    Args:
        robot, model, link, position_only, generator, sample_options: as for
            :func:`solve_with_model`.
        target: one ``(4, 4)`` pose, or with ``position_only=True`` one ``(3,)`` position.
        count: solutions wanted.
        margin, rounds: as for :func:`~torchik.ik.collect_solutions`.
        **refine_options: ``method``, ``tol_position``, ``tol_rotation``, ``max_iters``,
            ``num_threads`` of :func:`solve_with_model`.

    Returns:
        :class:`~torchik.ik.refine.Collected`: ``q (m, dof)`` with ``m <= count`` (fewer only
        when the rounds ran out), the samples refined and the rounds run.

    Raises:
        ValueError: more than one target (a batch: call :func:`solve_with_model`), ``count``
            out of ``[1, MAX_SAMPLES / 2]`` or more than ``MAX_SAMPLES`` samples in the first
            round (``count * (1 + margin)``), ``margin`` out of ``[0, 100]``, ``rounds`` out of
            ``[1, 100]``; and as :func:`solve_with_model`.
        TypeError: ``count`` or ``rounds`` not an int, ``margin`` not a number; and as
            :func:`solve_with_model`.

    Example:
        >>> import torchik
        >>> from torchik.models import load_pretrained
        >>> robot = torchik.load_robot("panda", dtype=torch.float64)
        >>> pose = robot.forward_kinematics(robot.random_configuration(1)[0], "panda_hand")
        >>> got = solutions_with_model(robot, load_pretrained("panda"), pose, 50,
        ...                            tol_rotation=0.01, max_iters=15)
        >>> got.q.shape
        torch.Size([50, 7])
    """
    _check_request(target, position_only, generator, sample_options)
    if target.dim() != (1 if position_only else 2):
        one = "(3,) position" if position_only else "(4, 4) pose"
        raise ValueError(f"one target, a {one}, got shape {tuple(target.shape)}")
    check_int("count", count, 1, MAX_SAMPLES // 2)  # later rounds ask for 1.5 x the shortfall
    margin, rounds = check_float("margin", margin, 0.0, 100.0), check_int("rounds", rounds, 1, 100)
    if math.ceil(count * (1.0 + margin)) > MAX_SAMPLES:
        raise ValueError(f"count * (1 + margin) must be <= {MAX_SAMPLES}, the samples of the "
                         f"first round; got {count} * (1 + {margin})")  # fmt: skip

    def solve(n: int, round_: int) -> IKResult:
        return solve_with_model(robot, model, target, n, link, position_only=position_only,
                                generator=generator, sample_options=sample_options,
                                **refine_options).result  # fmt: skip

    return collect_solutions(solve, count, margin=margin, rounds=rounds)


def _check_request(target: Any, position_only: Any, generator: Any, sample_options: Any) -> None:
    """The arguments :func:`solve_with_model` and :func:`solutions_with_model` share, one line
    per refusal: a target of values, ``(..., 3)`` with ``position_only``, else ``(..., 4, 4)``."""
    check_bool("position_only", position_only)
    check_tensor("target", target, (3,) if position_only else (4, 4))
    check_generator("generator", generator)
    check_kind("sample_options", sample_options, Mapping, "a mapping of model.sample's keywords",
               optional=True)  # fmt: skip

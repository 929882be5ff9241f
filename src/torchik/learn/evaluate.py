"""Evaluation protocols: run a sampler on targets and measure its samples.

The one place where samples of IK solutions become numbers: ``torchik eval``, the pretrained models'
accuracy table (:func:`torchik.models.pretrained.evaluate`), the demo and ``benchmarks/`` call these
functions. A sampler is a learned model (:func:`evaluate_model`), or any callable ``targets (B, T)
-> samples (B, N, D)``, e.g. a numerical solver (:func:`evaluate_sampler`); samples already drawn
are measured by :func:`evaluate_samples`. The metrics themselves are the pure functions of
:mod:`torchik.learn.metrics`.

Example:
    >>> from torchik import load_robot
    >>> from torchik.models import load_pretrained
    >>> robot = load_robot("snake2", dtype=torch.float64)
    >>> model = load_pretrained("snake2")
    >>> targets = torch.tensor([[0.5, 0.5, 0.0]])
    >>> report = evaluate_model(model, targets, robot, n=10, seed=0)
    >>> report.targets, report.samples_per_target
    (1, 10)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from torchik.checks import check_int, check_kind, check_tensor
from torchik.learn import metrics

if TYPE_CHECKING:
    from torchik.learn.spec import ProblemSpec
    from torchik.robot.robot import Robot

__all__ = [
    "SampleReport",
    "evaluate_model",
    "evaluate_sampler",
    "evaluate_samples",
    "sample_errors",
]

THRESHOLDS = (0.001, 0.005, 0.01)
"""Default accuracy thresholds (m): 1, 5 and 10 mm."""


@dataclass(frozen=True)
class SampleReport:
    """Metrics of ``N`` samples for each of ``B`` targets.

    Attributes:
        targets: ``B``.
        samples_per_target: ``N``.
        position_mean, position_std, position_median: of the position error of every sample (m);
            the std is the sample standard deviation, 0 for a single sample.
        rotation_mean, rotation_median: of the rotation error (rad); None unless pose targets.
        accuracy: threshold (m) -> fraction of samples whose position error is below it.
        best_of: ``k`` -> mean over targets of the smallest position error of the first ``k``
            samples (m).
        outside_limits: number of samples with a joint outside the limits (beyond the slack).
        diversity: mean pairwise joint-space distance between the samples of a target, averaged
            over targets (rad; 0 where ``N < 2``).
        seconds: wall time of drawing the samples; None when they were not drawn here.
    """

    targets: int
    samples_per_target: int
    position_mean: float
    position_std: float
    position_median: float
    rotation_mean: float | None
    rotation_median: float | None
    accuracy: dict[float, float]
    best_of: dict[int, float]
    outside_limits: int
    diversity: float
    seconds: float | None = None

    @property
    def fraction_outside_limits(self) -> float:
        """Fraction of the samples with a joint outside the limits."""
        return self.outside_limits / (self.targets * self.samples_per_target)

    @property
    def fraction_within_limits(self) -> float:
        """Fraction of the samples with every joint within the limits."""
        total = self.targets * self.samples_per_target
        return (total - self.outside_limits) / total


def sample_errors(
    robot: Robot, samples: Tensor, targets: Tensor, spec: ProblemSpec
) -> tuple[Tensor, Tensor | None]:
    """Position and rotation errors of every sample (FK in the robot's dtype).

    Args:
        robot: the robot, e.g. in float64.
        samples: ``(B, N, D)`` joint values.
        targets: ``(B, T)`` targets encoded as ``spec.targets`` (decoded in float64).
        spec: the problem: its ``link`` and target kind.

    Returns:
        ``(position (B, N) in m, rotation (B, N) in rad or None unless pose targets)``.
    """
    from torchik.learn.data import decode_target

    position, rotmat = decode_target(targets.double(), spec.targets)
    errors = metrics.position_error(robot, samples, position[:, None], spec.link)
    if rotmat is None:
        return errors, None
    return errors, metrics.rotation_error(robot, samples, rotmat[:, None], spec.link)


@torch.no_grad()
def evaluate_samples(
    robot: Robot,
    samples: Tensor,
    targets: Tensor,
    spec: ProblemSpec,
    thresholds: Sequence[float] = THRESHOLDS,
    best_of: Sequence[int] | None = None,
    limit_tol: float = 1e-5,
    wrap: Tensor | None = None,
    seconds: float | None = None,
) -> SampleReport:
    """Every metric of samples drawn for targets.

    Args:
        robot: the robot; FK runs in its dtype, its limits bound the joints.
        samples: ``(B, N, D)`` joint values; the diversity is computed in their dtype.
        targets: ``(B, T)`` encoded targets (see :func:`sample_errors`).
        spec: the problem: its ``link`` and target kind.
        thresholds: accuracy thresholds (m).
        best_of: the ``k`` of the best-of-``k`` errors (default: ``N``); those above ``N`` are
            left out.
        limit_tol: slack of the limits (rad or m).
        wrap: ``(D,)`` joints whose differences wrap in the diversity (default: the robot's
            continuous joints).
        seconds: the time the samples took, kept in the report.

    Returns:
        The :class:`SampleReport`.
    """
    if samples.dim() != 3 or samples.shape[0] != targets.shape[0] or samples.numel() == 0:
        raise ValueError(f"samples (B, N, D) for targets (B, T), got {tuple(samples.shape)} "
                         f"and {tuple(targets.shape)}")  # fmt: skip
    b, n, _ = samples.shape
    pos, rot = sample_errors(robot, samples, targets, spec)
    outside = metrics.limit_violations(samples, robot.lower, robot.upper, tol=limit_tol) > 0
    wrap = robot.continuous if wrap is None else wrap
    return SampleReport(
        targets=b,
        samples_per_target=n,
        position_mean=pos.mean().item(),
        position_std=pos.std().item() if pos.numel() > 1 else 0.0,  # torch warns on one
        position_median=pos.median().item(),
        rotation_mean=None if rot is None else rot.mean().item(),
        rotation_median=None if rot is None else rot.median().item(),
        accuracy={t: metrics.accuracy(pos, t) for t in thresholds},
        best_of={k: metrics.best_of_n(pos, k).mean().item() for k in best_of or (n,) if k <= n},
        outside_limits=int(outside.sum()),
        diversity=metrics.mean_pairwise_distance(samples, wrap).mean().item(),
        seconds=seconds,
    )


@torch.no_grad()
def evaluate_sampler(
    sampler: Callable[[Tensor], Tensor],
    targets: Tensor,
    robot: Robot,
    spec: ProblemSpec,
    dtype: torch.dtype | None = torch.float64,
    **options: Any,
) -> SampleReport:
    """Draw samples with any callable (timed, CUDA synchronised) and measure them.

    Args:
        sampler: ``targets (B, T) -> samples (B, N, D)``, e.g. a numerical solver's best
            solutions as ``(B, 1, D)``.
        targets: ``(B, T)`` encoded targets, passed to ``sampler`` as they are.
        robot: the robot (see :func:`evaluate_samples`).
        spec: the problem: its ``link`` and target kind.
        dtype: the samples are measured in this dtype on the robot's device (None: as drawn).
        **options: for :func:`evaluate_samples` (thresholds, best_of, limit_tol, wrap).

    Returns:
        The :class:`SampleReport`, with the sampling time.
    """
    samples, seconds = metrics.timed(sampler, targets)
    samples = samples.to(robot.device, dtype or samples.dtype)
    return evaluate_samples(robot, samples, targets, spec, seconds=seconds, **options)


def evaluate_model(
    model: Any,
    targets: Tensor,
    robot: Robot,
    n: int = 10,
    seed: int = 0,
    sample_options: dict[str, Any] | None = None,
    **options: Any,
) -> SampleReport:
    """Draw ``n`` samples per target from a learned model (seeded, timed) and measure them.

    Args:
        model: a :class:`torchik.models.IKModel`; its ``spec`` names the link and target kind.
        targets: ``(B, T)`` encoded targets, moved to the model's device and dtype.
        robot: the robot whose FK measures the samples (see :func:`evaluate_samples`); not
            checked against the model's robot hash, so that a model is measured on another
            robot of its joints and link too (a perturbed arm before fine-tuning).
        n: samples per target.
        seed: seed of a generator on the model's device (an int that ``manual_seed`` takes).
        sample_options: keyword arguments of ``model.sample`` (e.g. ``temperature``).
        **options: for :func:`evaluate_sampler` (dtype) and :func:`evaluate_samples`.

    Returns:
        The :class:`SampleReport`.

    Raises:
        TypeError: ``targets`` not a floating-point tensor, ``n`` or ``seed`` not an int,
            ``sample_options`` not a mapping.
        ValueError: ``targets`` without values (on the meta device) or not ``(B, T)`` of the
            model's target size ``T``, ``n`` out of ``[1, MAX_SAMPLES]``
            (:data:`torchik.models.base.MAX_SAMPLES`, checked by ``model.sample``), ``seed``
            out of torch's range.
    """
    check_tensor("targets", targets, (model.spec.target_dim,))
    if targets.dim() != 2:
        raise ValueError(f"targets must have shape (B, {model.spec.target_dim}), got "
                         f"{tuple(targets.shape)}")  # fmt: skip
    check_int("n", n, 1)  # model.sample refuses more than its MAX_SAMPLES
    check_int("seed", seed, -(2**63), 2**64 - 1)  # what manual_seed takes
    check_kind("sample_options", sample_options, Mapping, "a mapping of model.sample's keywords",
               optional=True)  # fmt: skip
    target = targets.to(model.target_mean)
    gen = torch.Generator(target.device).manual_seed(seed)

    def sample(t: Tensor) -> Tensor:
        return model.sample(t, n, generator=gen, **(sample_options or {}))

    return evaluate_sampler(sample, target, robot, model.spec, **options)

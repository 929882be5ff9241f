"""The IKNet paper's table ("Neural IK table" protocol) on any robot and learned model.

Position-only targets from joints uniform within the robot's limits (a fixed seed), ``n_samples``
raw samples per target, and the paper's metrics: mean ± std distance (cm) between target and FK of
every sample, accuracy at 10 / 2 / 1 cm, best of 10 and of 100, diversity (mean pairwise joint
distance, wrapped on full-turn joints), the fraction within limits and the runtime per target
(a batch of all targets, 1 and 100 samples, through :func:`torchik.protocols.time_call`).

Example:
    >>> from torchik import load_robot
    >>> from torchik.models import load_pretrained
    >>> robot, model = load_robot("snake2", dtype=torch.float64), load_pretrained("snake2")
    >>> row = iknet_table(robot, model, n_targets=20, n_samples=10, timing=False)
    >>> row.targets, row.samples, row.mean_cm < 5
    (20, 10, True)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from torchik.evaluate import SampleReport, evaluate_model, evaluate_samples
from torchik.protocols.timing import time_call

if TYPE_CHECKING:
    from torchik.models.base import ProblemSpec
    from torchik.robot import Robot

__all__ = ["IKNetRow", "iknet_metrics", "iknet_table", "iknet_test_targets", "sampler_rows"]

CM = 100.0
THRESHOLDS = (0.10, 0.02, 0.01)
"""The paper's 10 cm and the stricter 2 and 1 cm (m)."""
TEST_SEED = 3
"""Seed of the test targets (the training and validation sets of the benchmark use 1 and 2)."""
SAMPLE_SEED = 4
"""Seed of the model's sampling generator."""


@dataclass(frozen=True)
class IKNetRow:
    """One row of the IKNet table (distances in cm, fractions in [0, 1]).

    Attributes:
        targets, samples: test targets and samples per target.
        mean_cm, std_cm, median_cm: of the distance of every sample to its target.
        acc_10cm, acc_2cm, acc_1cm: fraction of samples within 10, 2 and 1 cm.
        best10_cm, best100_cm: mean over targets of the smallest distance of the first 10 / 100
            samples (NaN where there are fewer than 10 / only 1).
        diversity: mean pairwise joint distance of the samples of a target (rad; NaN for 1).
        inside_limits: fraction of samples with every joint within limits (1e-6 slack).
        runtime_1_s, runtime_100_s: seconds per target drawing 1 / 100 samples for all targets
            at once (None when not timed).
    """

    targets: int
    samples: int
    mean_cm: float
    std_cm: float
    median_cm: float
    acc_10cm: float
    acc_2cm: float
    acc_1cm: float
    best10_cm: float
    best100_cm: float
    diversity: float
    inside_limits: float
    runtime_1_s: float | None = None
    runtime_100_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The fields as a dict (the benchmark's row keys)."""
        return asdict(self)

    def markdown(self) -> str:
        """The row as a two-column markdown table."""
        lines = ["| metric | value |", "|---|---|"]
        lines += [f"| {k} | {v:.4g} |" for k, v in self.as_dict().items() if v is not None]
        return "\n".join(lines)


def iknet_test_targets(robot: Robot, link: str, n: int = 1000, seed: int = TEST_SEED) -> Tensor:
    """``(n, 3)`` float32 end positions of ``link`` at joints uniform within limits."""
    from torchik.data import make_dataset

    return make_dataset(robot, n, link=link, seed=seed).target


def _circular(spec: ProblemSpec) -> Tensor:
    """Joints whose differences wrap: continuous, or ranges of a full turn (UR5's)."""
    span = torch.tensor(spec.upper, dtype=torch.float64) - torch.tensor(spec.lower)
    return torch.tensor(spec.continuous) | (span >= 2 * math.pi - 1e-6)


def _options(n: int, spec: ProblemSpec) -> dict[str, Any]:
    """The protocol's thresholds, best-of-N, limit slack and wrapped joints for ``n`` samples."""
    best = (10, min(100, n))
    return dict(thresholds=THRESHOLDS, best_of=best, limit_tol=1e-6, wrap=_circular(spec))


def _row(report: SampleReport, **timing: float | None) -> IKNetRow:
    n, nan = report.samples_per_target, float("nan")
    return IKNetRow(
        targets=report.targets,
        samples=n,
        mean_cm=report.position_mean * CM,
        std_cm=report.position_std * CM,
        median_cm=report.position_median * CM,
        acc_10cm=report.accuracy[0.10],
        acc_2cm=report.accuracy[0.02],
        acc_1cm=report.accuracy[0.01],
        best10_cm=report.best_of.get(10, nan) * CM,
        best100_cm=report.best_of[min(100, n)] * CM if n > 1 else nan,
        diversity=report.diversity if n > 1 else nan,
        inside_limits=report.fraction_within_limits,
        **timing,
    )


def iknet_metrics(robot: Robot, samples: Tensor, targets: Tensor, spec: ProblemSpec) -> IKNetRow:
    """The table's metrics of solutions already drawn (e.g. a numerical solver's).

    Args:
        robot: the robot (FK in its dtype, e.g. float64).
        samples: ``(B, N, D)`` joint values.
        targets: ``(B, 3)`` target positions.
        spec: the problem (its ``link``, limits and continuous joints).

    Returns:
        The :class:`IKNetRow`, untimed.
    """
    n = samples.shape[-2]
    return _row(evaluate_samples(robot, samples, targets, spec, **_options(n, spec)))


def _runtimes(model: Any, targets: Tensor) -> dict[str, float]:
    gen = torch.Generator(targets.device).manual_seed(0)
    out = {}
    with torch.no_grad():
        for n in (1, 100):
            t = time_call(lambda n=n: model.sample(targets, n, generator=gen))
            out[f"runtime_{n}_s"] = t.median / len(targets)
    return out


def iknet_table(
    robot: Robot,
    model: Any,
    targets: Tensor | None = None,
    n_targets: int = 1000,
    n_samples: int = 100,
    seed: int = SAMPLE_SEED,
    temperature: float = 1.0,
    timing: bool = True,
) -> IKNetRow:
    """The IKNet table's row of a learned model (position targets) on a robot.

    Args:
        robot: the robot, best in float64 (FK of the samples runs in its dtype).
        model: a :class:`torchik.models.IKModel` with position targets.
        targets: ``(B, 3)`` test positions (default: :func:`iknet_test_targets` of ``n_targets``).
        n_targets: test targets when ``targets`` is not given.
        n_samples: raw samples per target.
        seed: seed of the sampling generator.
        temperature: scale of the model's sampling noise (1: the learned density, the protocol).
        timing: also time the sampling (1 and 100 samples per target, all targets at once).

    Returns:
        The :class:`IKNetRow`.
    """
    if targets is None:
        targets = iknet_test_targets(robot, model.spec.link, n_targets)
    sample_options = {} if temperature == 1.0 else {"temperature": temperature}
    options = _options(n_samples, model.spec)
    report = evaluate_model(model, targets, robot, n_samples, seed, sample_options,
                            dtype=None, **options)  # fmt: skip
    times = _runtimes(model, targets.to(model.target_mean)) if timing else {}
    return _row(report, **times)


def sampler_rows(
    robot: Robot, solvers: dict[str, Callable[[], Tensor]], targets: Tensor, spec: ProblemSpec
) -> dict[str, IKNetRow]:
    """Rows of solvers that return one ``(B, D)`` solution per target (timed per target).

    Args:
        robot: the robot (float64).
        solvers: label -> a call returning ``(B, D)`` solutions of ``targets`` (seeded inside).
        targets: ``(B, 3)`` target positions.
        spec: the problem.

    Returns:
        label -> :class:`IKNetRow` with ``runtime_1_s``.
    """
    rows = {}
    for label, solve in solvers.items():
        q = solve().reshape(len(targets), 1, -1)
        seconds = time_call(solve, min_run_time=0.5).median / len(targets)
        rows[label] = IKNetRow(**{**iknet_metrics(robot, q, targets, spec).as_dict(),
                                  "runtime_1_s": seconds})  # fmt: skip
    return rows

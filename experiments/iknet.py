"""The IKNet paper's table ("Neural IK table" protocol) on any robot and learned model.

Position-only targets from joints uniform within the robot's limits (a fixed seed), ``n_samples``
raw samples per target, and the paper's metrics: mean ± std distance (cm) between target and FK of
every sample, accuracy at 10 / 2 / 1 cm, best of 10 and of 100, diversity (mean pairwise joint
distance, wrapped on full-turn joints), the fraction within limits and the runtime per target
(a batch of all targets, 1 and 100 samples, through :func:`experiments.timing.time_call`).

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
from functools import partial
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from experiments.timing import time_call
from torchik.learn import SampleReport, evaluate_model, evaluate_samples

if TYPE_CHECKING:
    from torchik.learn import ProblemSpec
    from torchik.robot import Robot

__all__ = [
    "IKNetRow",
    "iknet_metrics",
    "iknet_sizes",
    "iknet_table",
    "iknet_test_targets",
    "sampler_rows",
    "training_step_seconds",
]

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
    from torchik.learn import make_dataset

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
            t = time_call(partial(model.sample, targets, n, generator=gen))
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


def training_step_seconds(
    model: Any, q: Tensor, target: Tensor, lr: float = 1e-6, min_run_time: float = 0.2
) -> float:
    """Seconds of one AdamW training step of ``model.loss(q, target)`` (the model is updated)."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)

    def step() -> None:
        loss = model.loss(q, target)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return time_call(step, min_run_time=min_run_time).median


def _saved_for_backward_mib(model: Any, q: Tensor, target: Tensor) -> float:
    """MiB of the distinct tensors autograd saves for the backward of one loss."""
    seen: dict[tuple[int, int], int] = {}

    def pack(t: Tensor) -> Tensor:
        key = (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
        seen[key] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model.loss(q, target)
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return sum(v for (ptr, _), v in seen.items() if ptr not in parameters) / 2**20


def iknet_sizes(config: Any, batch: int = 256, robot: str = "panda") -> dict[str, Any]:
    """Size, memory and speed of an IKNet configuration (the table of ``--sizes``).

    Args:
        config: an :class:`torchik.models.IKNetConfig`.
        batch: training batch of the timed step and of the saved-for-backward memory.
        robot: a bundled robot name (its default end link, position targets).

    Returns:
        ``config`` (as a dict), ``parameters``, ``head_parameters``, ``generated_per_target``,
        ``generated_mib_per_1000`` (float32), ``step_s``, ``sample_per_target_s`` (1000 targets x
        1 sample), ``saved_mib`` (autograd's saved tensors, parameters excluded) and
        ``state_mib`` (weights, gradients and AdamW's two moments, float32).
    """
    from torchik.learn import make_dataset
    from torchik.models import IKNet
    from torchik.robot import load_robot

    data = make_dataset(load_robot(robot), 1000, seed=0)
    torch.manual_seed(0)
    model = IKNet(data.spec, config)
    model.set_normalization(data.q, data.target)
    q, target = data.q[:batch], data.target[:batch]
    step_s = training_step_seconds(model, q, target)
    model.eval()
    with torch.no_grad():
        sample_s = time_call(lambda: model.sample(data.target, 1)).median
    model.train()
    n_parameters = sum(p.numel() for p in model.parameters())
    return {
        "config": asdict(config),
        "parameters": n_parameters,
        "head_parameters": model.heads.weight.numel() + model.heads.bias.numel(),
        "generated_per_target": model.generated_size,
        "generated_mib_per_1000": model.generated_size * 4 * 1000 / 2**20,
        "step_s": step_s,
        "sample_per_target_s": sample_s / len(data.target),
        "saved_mib": _saved_for_backward_mib(model, q, target),
        "state_mib": 4 * 4 * n_parameters / 2**20,
    }

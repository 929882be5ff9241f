"""The cVAE-vs-INN report's posterior table ("Posterior" protocol) on any planar arm and model.

Test targets are the end points of prior draws; the ground truth is rejection sampling from the
prior (:func:`torchik.learn.rejection_sample_widening`), ``2 n`` accepted per target: the first
half is the reference, the second an independent draw that gives each metric's finite-sample floor.
Metrics per target, averaged: MMD² to the reference (IMQ kernels, bandwidths 0.05, 0.2, 0.9,
biased), re-simulation error (mean squared end-point distance), convex-hull area of the 97th
percentile of re-simulated end points, diversity (mean pairwise joint distance).

Example:
    >>> from torchik import PlanarArm
    >>> table = posterior_table(PlanarArm(2), {"prior": None}, [0.2] * 2, n_targets=2, n_samples=50)
    >>> table.rows["ground truth (2nd draw)"]["mmd"] < table.rows["prior"]["mmd"]
    True
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from torchik.learn import (
    PosteriorSamples,
    convex_hull_area,
    mean_pairwise_distance,
    mmd,
    rejection_sample_widening,
    resimulation_error,
)

__all__ = [
    "PosteriorTable",
    "PosteriorTruth",
    "posterior_metrics",
    "posterior_table",
    "posterior_truth",
]

TARGET_SEED, TRUTH_SEED, SAMPLE_SEED, PRIOR_SEED = 3, 4, 5, 9
"""Seeds of the test targets, the rejection sampling, the models' samples and the prior row."""


@dataclass(frozen=True)
class PosteriorTruth:
    """Ground truth of the protocol: the rejection samples and what they cost.

    Attributes:
        samples: the :class:`torchik.learn.PosteriorSamples` (``2 n`` per target).
        prior_std: ``(D,)`` the prior's standard deviations.
        info: the truth table's row (targets, radii, acceptance rates, draws, seconds).
    """

    samples: PosteriorSamples
    prior_std: list[float]
    info: dict[str, Any]

    @property
    def n(self) -> int:
        """Samples per target a model draws (half the accepted)."""
        return self.samples.samples.shape[1] // 2


def posterior_truth(
    arm: Callable[[Tensor], Tensor],
    prior_std: Sequence[float],
    n_targets: int = 100,
    n_samples: int = 1000,
    radius: float = 0.01,
    max_draws: int = 1 << 24,
    threads: int = 1,
) -> PosteriorTruth:
    """Targets from the prior and ``2 n_samples`` rejection samples of each.

    Args:
        arm: forward map ``(..., D) -> (..., 2)`` (e.g. a :class:`torchik.PlanarArm`).
        prior_std: ``(D,)`` the Gaussian prior's standard deviations.
        n_targets: test targets.
        n_samples: samples per target a model draws (the truth holds twice as many).
        radius: base acceptance radius (widened per target when ``max_draws`` run out).
        max_draws: prior draws per widening round.
        threads: torch threads of the rejection sampling.

    Returns:
        The :class:`PosteriorTruth`.
    """
    gen = torch.Generator().manual_seed(TARGET_SEED)
    q = torch.randn(n_targets, len(prior_std), generator=gen) * torch.tensor(prior_std)
    start = time.perf_counter()
    truth = rejection_sample_widening(
        arm, prior_std, arm(q), 2 * n_samples, radius, max_draws=max_draws,
        generator=gen.manual_seed(TRUTH_SEED), num_threads=threads,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    rate, radii = truth.acceptance_rate, truth.radius
    info = {
        "targets": n_targets,
        "accepted": 2 * n_samples,
        "radius_base": radius,
        "radius_median": radii.median().item(),
        "radius_max": radii.max().item(),
        "at_base_radius": (radii <= radius * 1.0001).double().mean().item(),
        "complete": truth.complete.double().mean().item(),
        "rate_median": rate.median().item(),
        "rate_min": rate.min().item(),
        "draws_max": int(truth.draws.max()),
        "seconds": seconds,
        "targets_x_accepted_per_s": n_targets * 2 * n_samples / seconds,
    }
    return PosteriorTruth(truth, list(prior_std), info)


@torch.no_grad()
def posterior_metrics(
    arm: Callable[[Tensor], Tensor], samples: Tensor, reference: Tensor, targets: Tensor
) -> dict[str, float]:
    """The table's metrics of ``(M, n, D)`` samples for ``(M, 2)`` targets (float32).

    Returns:
        ``{"mmd", "resim", "hull", "diversity"}``, each a mean over targets.
    """
    samples = samples.float()
    return {
        "mmd": mmd(samples, reference.float()).mean().item(),
        "resim": resimulation_error(arm, samples, targets).mean().item(),
        "hull": convex_hull_area(arm(samples)).mean().item(),
        "diversity": mean_pairwise_distance(samples).mean().item(),
    }


@dataclass
class PosteriorTable:
    """What :func:`posterior_table` returns.

    Attributes:
        truth: the truth table's row (see :class:`PosteriorTruth`).
        rows: method -> its metrics (see :func:`posterior_metrics`).
    """

    truth: dict[str, Any]
    rows: dict[str, dict[str, float]] = field(default_factory=dict)

    def markdown(self) -> str:
        """The rows as a markdown table."""
        lines = [
            "| method | MMD² | re-sim error | hull area (97 %) | diversity |",
            "|---" * 5 + "|",
        ]
        for name, r in self.rows.items():
            lines.append(f"| {name} | {r['mmd']:.4f} | {r['resim']:.3g} | {r['hull']:.3g} | "
                         f"{r['diversity']:.3f} |")  # fmt: skip
        return "\n".join(lines)


def _draw(model: Any, targets: Tensor, n: int, std: list[float]) -> Tensor:
    if model is None:  # the prior, ignoring the target: an upper reference
        gen = torch.Generator().manual_seed(PRIOR_SEED)
        return torch.randn(len(targets), n, len(std), generator=gen) * torch.tensor(std)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(SAMPLE_SEED)
        return model.sample(targets.float(), n, generator=gen)


def posterior_table(
    arm: Callable[[Tensor], Tensor],
    models: dict[str, Any],
    prior_std: Sequence[float] | None = None,
    truth: PosteriorTruth | None = None,
    **truth_options: Any,
) -> PosteriorTable:
    """The posterior table of learned models against the ground truth.

    Args:
        arm: forward map ``(..., D) -> (..., 2)``, e.g. a :class:`torchik.PlanarArm`.
        models: name -> a model with ``sample(targets, n, generator=)`` (planar targets), or
            None for the prior row.
        prior_std: ``(D,)`` the prior's standard deviations (when ``truth`` is not given).
        truth: from :func:`posterior_truth` (default: made here with ``truth_options``).
        **truth_options: for :func:`posterior_truth` (``n_targets``, ``n_samples``, ``radius``).

    Returns:
        The :class:`PosteriorTable`; its first row is the ground truth's second draw (the floor).
    """
    if truth is None:
        if prior_std is None:
            raise ValueError("posterior_table needs prior_std or a truth")
        truth = posterior_truth(arm, prior_std, **truth_options)
    n, targets = truth.n, truth.samples.targets
    reference, second = truth.samples.samples[:, :n], truth.samples.samples[:, n:]
    table = PosteriorTable(truth.info)
    table.rows["ground truth (2nd draw)"] = posterior_metrics(arm, second, reference, targets)
    for name, model in models.items():
        samples = _draw(model, targets, n, truth.prior_std)
        table.rows[name] = posterior_metrics(arm, samples, reference, targets)
    return table

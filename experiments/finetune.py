"""The fine-tuning protocols (Neural IK paper, Section 5.4, at CPU scale) on any robot.

Every model is an IKNet of the small preset trained from scratch with
:func:`experiments.small_iknet.train_small_iknet`; robots B and the test arms are
:func:`torchik.train.perturbed_robot` copies of the nominal robot (every joint origin's
translation scaled by its own factor in ``[1 - SCALE, 1 + SCALE]``).

- :func:`finetune_table` (experiment (b)): an IKNet trained on ``n_a`` pairs of robot A,
  evaluated on robot B, then fine-tuned on ``n_few`` pairs of B
  (:func:`torchik.train.finetune`); IKNets trained from scratch on ``n_few`` and ``n_a``
  pairs of B.
- :func:`family_table` (experiment (a)): ``family_arms`` test arms, one IKNet per arm on its
  own ``n_a`` pairs, and one "family" IKNet on ``n_a`` pairs from many other perturbed arms
  (:func:`torchik.train.family_dataset`); every model is evaluated on every test arm and the
  family model is ranked among the per-arm models on each (:func:`percentile`).

Example:
    >>> import torch, torchik
    >>> arm = torchik.load_robot("snake2", dtype=torch.float64)
    >>> settings = FinetuneSettings(n_a=256, n_few=64, test=8, steps=2, finetune_steps=2)
    >>> [row["method"] for row in finetune_table(arm, settings).rows][:2]
    ['trained on A, before fine-tuning', 'A fine-tuned on B']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from experiments.small_iknet import RECIPE, train_small_iknet
from experiments.table import Column, Table
from torchik.ik import default_link
from torchik.learn import IKDataset, evaluate_model, make_dataset
from torchik.models import IKModel
from torchik.robot import Robot
from torchik.train import FINETUNE_CONFIG, family_dataset, finetune, perturbed_robot

__all__ = [
    "SCALE",
    "FinetuneSettings",
    "family_table",
    "finetune_table",
    "largest_change",
    "percentile",
    "sample_errors",
]

SCALE = 0.2
"""Largest relative change of a joint origin of a perturbed robot."""

Log = Callable[[str], None]


@dataclass(frozen=True)
class FinetuneSettings:
    """The protocols' settings (those of ``benchmarks/finetune.py``, same names).

    Attributes:
        n_a: pairs of robot A, of the larger set of B, and of every model of (a).
        n_few: pairs of B for fine-tuning and the small from-scratch models.
        test: test targets (10 samples each).
        steps: training steps from scratch.
        finetune_steps: fine-tuning steps (also the short from-scratch run's).
        family_arms: test arms of (a).
        family_steps: steps of every model of (a) (``None``: ``steps``).
        family_chunk: pairs per arm of the family model's data.
    """

    n_a: int = 20000
    n_few: int = 1000
    test: int = 1000
    steps: int = 1000
    finetune_steps: int = 300
    family_arms: int = 6
    family_steps: int | None = None
    family_chunk: int = 200


def _scratch(data: IKDataset, steps: int) -> tuple[IKModel, float]:
    result = train_small_iknet(data, steps, warmup_steps=min(200, steps // 10))
    return result.model, result.seconds


@torch.no_grad()
def sample_errors(model: IKModel, robot: Robot, test: IKDataset) -> dict[str, float]:
    """Mean and median position error (m) of 10 samples per test target (sample seed 3), and
    the test NLL (``model.loss`` on the test pairs)."""
    report = evaluate_model(model, test.target, robot, n=10, seed=3)
    return {"mean": report.position_mean, "median": report.position_median,
            "nll": model.loss(test.q, test.target).item()}  # fmt: skip


def _finetune_rows(robot: Robot, s: FinetuneSettings, log: Log | None) -> list[dict[str, Any]]:
    arm_b = perturbed_robot(robot, SCALE, torch.Generator().manual_seed(0))
    data_a = make_dataset(robot, s.n_a, seed=0)
    few_b, many_b, test_b = (make_dataset(arm_b, n, seed=seed)
                             for n, seed in ((s.n_few, 1), (s.n_a, 2), (s.test, 3)))  # fmt: skip
    rows: list[dict[str, Any]] = []

    def add(method: str, data: str, steps: int, seconds: float, model: IKModel) -> None:
        rows.append({"method": method, "data": data, "steps": steps, "seconds": seconds,
                     **sample_errors(model, arm_b, test_b)})  # fmt: skip
        if log is not None:
            log(f"{method}, {data}: {rows[-1]}")

    model_a, sec = _scratch(data_a, s.steps)
    add("trained on A, before fine-tuning", f"{s.n_a} of A", s.steps, sec, model_a)
    config = dataclasses.replace(FINETUNE_CONFIG, steps=s.finetune_steps, log_every=100)
    tuned = finetune(model_a, few_b, config)
    add("A fine-tuned on B", f"+ {s.n_few} of B", s.finetune_steps, tuned.seconds, tuned.model)
    for data, steps in ((few_b, s.finetune_steps), (few_b, s.steps), (many_b, s.steps)):
        model, sec = _scratch(data, steps)
        add("from scratch on B", f"{len(data)} of B", steps, sec, model)
    return rows


def finetune_table(
    robot: Robot,
    settings: FinetuneSettings = FinetuneSettings(),  # noqa: B008 (frozen)
    name: str | None = None,
    log: Log | None = None,
) -> Table:
    """Experiment (b): robot A (``robot``) fine-tuned to a perturbed robot B (generator seed 0).

    Args:
        robot: the nominal robot A (float64 for the errors).
        settings: sizes and steps.
        name: the robot's name in the title (default ``robot.name``).
        log: called with a line per row.

    Returns:
        Rows ``data``, ``steps``, ``seconds`` (training), ``mean``, ``median`` (m) and ``nll``
        on B's test pairs.
    """
    s, cm = settings, lambda x: f"{100 * x:.2f}"
    table = Table(
        f"(b) Few-shot fine-tuning: {name or robot.name} B (origins scaled by U[{1 - SCALE:g}, "
        f"{1 + SCALE:g}] per joint), {s.test} test targets x 10",
        [Column("data", "training data"), Column("steps", "steps"),
         Column("seconds", "train time", lambda x: f"{x:.0f} s"),
         Column("mean", "mean error on B (cm)", cm), Column("median", "median (cm)", cm),
         Column("nll", "test NLL", lambda x: f"{x:.3f}")],
    )  # fmt: skip
    for row in _finetune_rows(robot, s, log):
        table.add(**row)
    table.notes = [
        f"IKNet (small preset) everywhere; from scratch: {RECIPE}, 1 CPU thread. Fine-tuning: "
        f"torchik.train.finetune with FINETUNE_CONFIG (lr {FINETUNE_CONFIG.lr}, no warm-up, "
        "A's normalisation kept), fresh optimiser.",
        "Reduced scale: the paper trains for far longer on a GPU; these are CPU minutes, so "
        "absolute errors are larger than the paper's and only the ordering is meaningful.",
        "Experiment (a), one model for a family of arms: `--family-arms N` adds its table "
        "below; `--family-only` writes it alone to results/finetune_family.md.",
    ]
    return table


def percentile(value: float, others: list[float]) -> float:
    """Share (%) of ``others`` (errors) larger than ``value``, ties counted half: 100 means a
    lower error than every one of them."""
    above = sum(o > value for o in others) + 0.5 * sum(o == value for o in others)
    return 100.0 * above / len(others)


def largest_change(arm: Robot, nominal: Robot) -> float:
    """Largest relative change of a joint origin's length between ``nominal`` and ``arm``."""
    length, new = nominal.origin_xyz.norm(dim=-1), arm.origin_xyz.norm(dim=-1)
    moved = length > 0
    return (new[moved] / length[moved] - 1).abs().max().item()


def _family_rows(nominal: Robot, s: FinetuneSettings, log: Log | None) -> list[dict[str, Any]]:
    steps = s.family_steps or s.steps
    gen = torch.Generator().manual_seed(100)  # test arms; the family data use other draws
    arms = [perturbed_robot(nominal, SCALE, gen) for _ in range(s.family_arms)]
    own = [_scratch(make_dataset(arm, s.n_a, seed=300 + i), steps) for i, arm in enumerate(arms)]
    data = family_dataset(nominal, s.n_a, s.family_chunk, SCALE, seed=7)
    family, family_sec = _scratch(data, steps)
    if log is not None:
        log(f"trained {len(own)} per-arm models and the family model ({family_sec:.0f} s)")
    rows: list[dict[str, Any]] = []
    for i, arm in enumerate(arms):
        test = make_dataset(arm, s.test, seed=200 + i)
        errors = [sample_errors(model, arm, test)["mean"] for model, _ in own]
        fam = sample_errors(family, arm, test)["mean"]
        others = [e for j, e in enumerate(errors) if j != i]
        rows.append({
            "method": f"arm {i}", "change": largest_change(arm, nominal), "family": fam,
            "own": errors[i], "others": sum(others) / max(1, len(others)),
            "rank": 1 + sum(e < fam for e in errors), "of": len(errors) + 1,
            "percentile": percentile(fam, errors), "errors": errors,
            "steps": steps, "seconds": family_sec, "own_seconds": own[i][1],
        })  # fmt: skip
        if log is not None:
            log(f"{rows[-1]}")
    keys = ("family", "own", "others", "percentile")
    rows.append({"method": "mean over arms", **{k: sum(r[k] for r in rows) / len(rows)
                                                for k in keys}})  # fmt: skip
    return rows


def _family_notes(s: FinetuneSettings, rows: list[dict[str, Any]], link: str) -> list[str]:
    arms, mean, steps = rows[:-1], rows[-1], s.family_steps or s.steps
    wins = sum(r["family"] < r["own"] for r in arms)
    return [
        f"Summary: the family model's mean percentile is {mean['percentile']:.0f} (paper: 75); "
        f"it beats the arm's own model on {wins} of {len(arms)} arms; its mean error is "
        f"{mean['family'] / mean['own']:.2f}x the own models' and "
        f"{mean['family'] / mean['others']:.2f}x the other arms' models'.",
        f"Every model: IKNet small preset, {s.n_a} pairs, {steps} steps, the from-scratch "
        f"settings of table (b) ({RECIPE}, same initial weights), 1 CPU thread. Per-arm model: "
        "the arm's own pairs. Family model: torchik.train.family_dataset, a fresh perturbed "
        f"arm for every {s.family_chunk} pairs ({-(-s.n_a // s.family_chunk)} arms, none of "
        "them a test arm): the same number of pairs and steps as one per-arm model.",
        f"Error: mean distance (by FK of the test arm) between the target and `{link}` for 10 "
        "samples of each test target. Percentile: the share of the per-arm models (the arm's "
        "own and the other arms', all evaluated on this arm) with a larger error than the "
        "family model (ties half): 100 = better than every per-arm model, including the one "
        "trained on this arm. Rank: the family model's place among those models and itself. "
        "The paper's Section 5.4 reports the family model at the 75th percentile; its text "
        "could not be retrieved here, so this reading of the metric is ours.",
        f"Reduced scale: {steps} steps per model (the paper trains far longer on a GPU); "
        "absolute errors are CPU-minute errors, only the comparison is meaningful.",
    ]


def family_table(
    robot: Robot,
    settings: FinetuneSettings = FinetuneSettings(),  # noqa: B008 (frozen)
    name: str | None = None,
    log: Log | None = None,
) -> Table:
    """Experiment (a): one IKNet for a family of perturbed robots against one per robot.

    Args:
        robot: the nominal robot (float64 for the errors).
        settings: sizes and steps (``family_arms`` test arms, generator seed 100).
        name: the robot's name in the title (default ``robot.name``).
        log: called with a line per arm.

    Returns:
        One row per test arm (``change``: its largest origin change; ``family``, ``own``,
        ``others``: errors (m) of the family model, the arm's own model and the other arms'
        models; ``rank``, ``of`` and ``percentile`` of the family model), then their means.
    """
    s, cm = settings, lambda x: f"{100 * x:.2f}"
    table = Table(
        f"(a) One IKNet for a family of {name or robot.name}s vs one per arm: {s.family_arms} "
        f"test arms (origins scaled by U[{1 - SCALE:g}, {1 + SCALE:g}] per joint), {s.test} "
        "test targets x 10 each",
        [Column("change", "largest length change", lambda x: f"{100 * x:.0f} %"),
         Column("family", "family model (cm)", cm), Column("own", "arm's own model (cm)", cm),
         Column("others", "other arms' models, mean (cm)", cm),
         Column("rank", "family's rank (1 = best)"), Column("of", "models ranked"),
         Column("percentile", "family's percentile", lambda x: f"{x:.0f}")],
    )  # fmt: skip
    rows = _family_rows(robot, s, log)
    for row in rows:
        table.add(**row)
    table.notes = _family_notes(s, rows, default_link(robot))
    return table

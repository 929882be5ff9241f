"""Pretrained models bundled with torchik and the evaluation that measured them.

The checkpoints (``<name>.pt``) and their measured accuracy (``accuracy.json``) are written by
``scripts/train_pretrained.py``; load a model with :func:`torchik.models.load_pretrained`.
The accuracy is that of *raw* samples (no refinement) on held-out targets: the targets of
joint configurations drawn uniformly within the limits with the seed :data:`TEST_SEED`, which
no training set uses.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "TEST_SEED",
    "evaluate",
    "held_out_targets",
    "measured_accuracy",
    "trained_on",
    "training_chunks",
    "training_text",
]

TEST_SEED = 2026
"""Seed of the held-out targets (training data use other seeds)."""


def held_out_targets(robot: Any, targets: str, n: int, seed: int = TEST_SEED) -> Tensor:
    """``(n, T)`` encoded targets of uniformly random configurations of ``robot`` (float32)."""
    from torchik.data import make_dataset

    return make_dataset(robot, n, targets=targets, seed=seed).target


@torch.no_grad()
def evaluate(
    model: Any, n_targets: int = 1000, n_samples: int = 10, seed: int = TEST_SEED
) -> dict[str, float]:
    """Errors of ``n_samples`` raw samples per held-out target of a model of a bundled robot
    (FK in float64).

    Returns:
        ``position_mean_mm``, ``position_median_mm``, ``best_of_n_mm`` (mean over targets of
        the smallest position error of the ``n_samples``) and, for pose models,
        ``rotation_mean_deg``, ``rotation_median_deg``.
    """
    import math

    from torchik.evaluate import evaluate_model
    from torchik.robot import load_robot

    fk_robot = load_robot(model.spec.robot, dtype=torch.float64)
    target = held_out_targets(fk_robot, model.spec.targets, n_targets, seed)
    r = evaluate_model(model, target, fk_robot, n_samples, seed)
    out = {
        "position_mean_mm": 1000 * r.position_mean,
        "position_median_mm": 1000 * r.position_median,
        "best_of_n_mm": 1000 * r.best_of[n_samples],
    }
    if r.rotation_mean is not None:
        assert r.rotation_median is not None  # both or neither
        out |= {"rotation_mean_deg": math.degrees(r.rotation_mean),
                "rotation_median_deg": math.degrees(r.rotation_median)}  # fmt: skip
    return out


def measured_accuracy() -> dict[str, dict[str, Any]]:
    """The contents of ``accuracy.json``: model name -> recipe and measured accuracy."""
    text = resources.files(__name__).joinpath("accuracy.json").read_text(encoding="utf-8")
    return json.loads(text)


def training_chunks(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The trainings that made a model of ``accuracy.json``, oldest first: the ones it
    continued (``scripts/train_pretrained.py --init``, recorded as ``continued_from``), then its
    own; each with ``steps``, ``train_seconds`` and ``curve`` (``[]`` when not recorded)."""
    out: list[dict[str, Any]] = []
    e: dict[str, Any] | None = entry
    while e:
        steps = e["recipe"]["steps"] if "recipe" in e else e.get("steps")
        out.append({"steps": steps, "train_seconds": e.get("train_seconds") or 0.0,
                    "curve": e.get("curve", [])})  # fmt: skip
        e = e.get("continued_from")
    return out[::-1]


def training_text(entry: dict[str, Any]) -> str:
    """How a model of ``accuracy.json`` was trained, in words: its data, steps x batch and
    minutes summed over its chunks, and where (e.g. ``fresh FK pairs, 89623 steps x 8192,
    15.9 min in 3 chunks on H100 80GB HBM3``)."""
    r, parts = entry["recipe"], training_chunks(entry)
    data = "fresh FK pairs" if r.get("stream") else f"{r['train_pairs'] // 1000}k pairs"
    steps = sum(c["steps"] or 0 for c in parts)
    minutes = sum(c["train_seconds"] for c in parts) / 60
    more = f" in {len(parts)} chunks" if len(parts) > 1 else ""
    return (
        f"{data}, {steps} steps x {r['batch_size']}, {minutes:.1f} min{more} on {trained_on(entry)}"
    )


def trained_on(entry: dict[str, Any]) -> str:
    """Where a model of ``accuracy.json`` trained, from its recorded ``machine`` (``GPU name,
    N torch threads`` or ``CPU, N torch thread(s)``): ``H100 80GB HBM3`` or ``1 torch
    thread``."""
    gpu_or_cpu, _, threads = entry.get("machine", "").partition(", ")
    if entry["recipe"].get("device", "cpu").startswith("cuda"):
        return gpu_or_cpu.removeprefix("NVIDIA ")
    return threads

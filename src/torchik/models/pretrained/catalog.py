"""The catalogue of pretrained models bundled with torchik: their names, loading, and the
evaluation that measured them (see the package docstring of :mod:`torchik.models.pretrained`)."""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

if TYPE_CHECKING:
    from torchik.models.base import IKModel
    from torchik.models.fm import FMSampler

__all__ = [
    "BF16_UNTIL",
    "PRETRAINED",
    "TEST_SEED",
    "evaluate",
    "few_pass_samplers",
    "fitted_sampler",
    "fitted_samplers",
    "held_out_targets",
    "load_pretrained",
    "measured_accuracy",
    "trained_on",
    "training_chunks",
    "training_text",
]

PRETRAINED: dict[str, str] = {
    "panda": "Franka Panda: full pose (position and orientation) of panda_hand",
    "ur5": "UR5 (the Neural IK paper's limits): position of ee_link",
    "digit_arm": "Digit arm: position of its end link",
    "snake2": "2-joint snake: position of its end",
    "snake4": "4-joint snake: position of its end",
    "panda_position": "Franka Panda: position of panda_hand",
    "digit_arm_iknet": "Digit arm: position of its end link, an IKNet (samples joint by joint: "
    "path following with sample_within)",
}
"""Name -> description of the models bundled with torchik (see :func:`load_pretrained`);
their measured accuracy is in ``torchik/models/pretrained/accuracy.json`` and the README."""


def load_pretrained(name: str, map_location: Any = None, sampler: str = "fast") -> IKModel:
    """A pretrained model bundled with torchik (no download), in eval mode, float32.

    The name is the robot's (:data:`PRETRAINED`); the checkpoints are package data written by
    ``scripts/train_pretrained.py``.

    Args:
        name: a name of :data:`PRETRAINED`.
        map_location: as :func:`torch.load`'s: ``None``, a device this machine has
            (:func:`torchik.checks.check_device`), a dict or a callable.
        sampler: how a flow-matching model samples when a call names no sampler:

            - ``"fast"``: with few network passes (:func:`few_pass_samplers`), in bfloat16
              where it is fast (:func:`torchik.models.fm.bf16_is_fast`: CUDA from Ampere on,
              CPUs with AMX), else in float32;
            - ``"float32"``: the same passes in float32 everywhere (the same samples on any
              CPU);
            - ``"own"``: the model's own 64 passes (:attr:`~torchik.models.fm.FMConfig.sampler`),
              with which the accuracy in ``accuracy.json`` was measured, bit for bit as
              earlier versions sampled.

            Other families have no sampler to choose.

    Raises:
        ValueError: no model of that name is bundled (the message lists the names), an
            unknown ``sampler``, or a ``map_location`` device torchik cannot run on (``meta``,
            an unknown one, a GPU absent here).
        TypeError: a ``map_location`` of another kind.

    Example:
        >>> model = load_pretrained("snake2")
        >>> model.sample(torch.tensor([[0.1, 0.05, 0.0]]), n=4).shape
        torch.Size([1, 4, 2])
        >>> load_pretrained("panda").default_sampler.passes
        7
        >>> load_pretrained("panda", sampler="own").default_sampler is None
        True
    """
    from torchik.checks import check_choice, check_map_location

    check_choice("sampler", sampler, ("fast", "float32", "own"))
    check_map_location("map_location", map_location)
    if name not in PRETRAINED:
        raise ValueError(
            f"no pretrained model named {name!r} is bundled; available: {', '.join(PRETRAINED)}"
        )
    resource = resources.files("torchik.models.pretrained").joinpath(f"{name}.pt")
    with resources.as_file(resource) as path:
        if not path.is_file():
            raise ValueError(f"the pretrained model {name!r} is missing from this installation")
        from torchik.models.registry import load

        model = load(path, map_location)
    from torchik.models.fm import FlowMatching

    if sampler != "own" and isinstance(model, FlowMatching):
        model.default_sampler, low = few_pass_samplers(name)
        model.default_sampler_bf16 = low if sampler == "fast" else None
    return model


def few_pass_samplers(name: str) -> tuple[FMSampler, FMSampler]:
    """``(float32, bfloat16)`` few-pass samplers of the bundled flow-matching model ``name``:
    the sampler fitted to it and its bfloat16 variant where one is bundled
    (:func:`fitted_sampler`: the Panda models, 7 and 8 passes), else
    :data:`~torchik.models.fm.FEW_PASSES` and :data:`~torchik.models.fm.FEW_PASSES_BF16`
    (12). Measured on 1000 held-out targets x 10 samples (``benchmarks/results/
    fm_samplers*.md``, two noise seeds, the worse one), their mean errors are 1.07 and 1.06
    (Panda pose), 0.91 and 0.96 (Panda position), 0.86 and 0.89 (UR5), 0.68 and 0.67 (Digit
    arm) times those of the model's own 64 passes.

    Example:
        >>> [s.passes for s in few_pass_samplers("ur5")]
        [12, 12]
    """
    from torchik.models.fm import FEW_PASSES, FEW_PASSES_BF16

    fitted = fitted_sampler(name)
    if fitted is None:
        return FEW_PASSES, FEW_PASSES_BF16
    low = fitted_sampler(name, bf16=True)
    assert low is not None
    return fitted, low


TEST_SEED = 2026
"""Seed of the held-out targets (training data use other seeds)."""


def fitted_samplers() -> dict[str, dict[str, Any]]:
    """The contents of ``samplers.json``: model name -> its fitted sampler's record (the
    sampler's fields, the fit's settings, the teacher, the losses, where and when it ran),
    written by ``scripts/fit_sampler.py``."""
    resource = resources.files("torchik.models.pretrained").joinpath("samplers.json")
    return json.loads(resource.read_text()) if resource.is_file() else {}


BF16_UNTIL = 0.98
"""Where :func:`fitted_sampler`'s ``bf16`` variant leaves pure bfloat16: the passes before it
run in bfloat16, the last one mixed (:meth:`torchik.models.fm.VelocityNet.mixed_trunk`)."""


def fitted_sampler(name: str, bf16: bool = False) -> FMSampler | None:
    """The few-pass sampler fitted to the bundled flow-matching model ``name``
    (:func:`torchik.models.fm_fit.fit_sampler`), or None where there is none.

    Args:
        name: a bundled model's name.
        bf16: its passes before :data:`BF16_UNTIL` in bfloat16 and the last one mixed
            (bfloat16 matrix products, full-precision residual stream): for CPUs with bfloat16
            matrix units, and GPUs.

    Example:
        >>> fitted_sampler("panda").passes
        7
        >>> fitted_sampler("panda", bf16=True).mixed
        True
        >>> fitted_sampler("snake2") is None
        True
    """
    from torchik.models.fm import FMSampler

    record = fitted_samplers().get(name)
    if record is None:
        return None
    sampler = FMSampler(**record["sampler"])
    return replace(sampler, bf16_until=BF16_UNTIL, mixed=True) if bf16 else sampler


def held_out_targets(robot: Any, targets: str, n: int, seed: int = TEST_SEED) -> Tensor:
    """``(n, T)`` encoded targets of uniformly random configurations of ``robot`` (float32)."""
    from torchik.learn.data import make_dataset

    return make_dataset(robot, n, targets=targets, seed=seed).target


@torch.no_grad()
def evaluate(
    model: Any,
    n_targets: int = 1000,
    n_samples: int = 10,
    seed: int = TEST_SEED,
    sample_options: dict[str, Any] | None = None,
) -> dict[str, float]:
    """Errors of ``n_samples`` raw samples per held-out target of a model of a bundled robot
    (FK in float64); ``sample_options`` go to ``model.sample`` (e.g. a flow-matching
    ``sampler``).

    Returns:
        ``position_mean_mm``, ``position_median_mm``, ``best_of_n_mm`` (mean over targets of
        the smallest position error of the ``n_samples``) and, for pose models,
        ``rotation_mean_deg``, ``rotation_median_deg``.
    """
    import math

    from torchik.learn.evaluate import evaluate_model
    from torchik.robot.robot import load_robot

    fk_robot = load_robot(model.spec.robot, dtype=torch.float64)
    target = held_out_targets(fk_robot, model.spec.targets, n_targets, seed)
    r = evaluate_model(model, target, fk_robot, n_samples, seed, sample_options)
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
    resource = resources.files("torchik.models.pretrained").joinpath("accuracy.json")
    text = resource.read_text(encoding="utf-8")
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

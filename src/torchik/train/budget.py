"""Fitting a training to a time budget.

A cosine learning-rate schedule must know its number of steps before it starts; a budget is
given in minutes. :func:`steps_per_second` measures the speed of the real training loop
(:func:`torchik.train.train`: data, loss, backward, optimiser, EMA, on the configured device) on
throwaway copies of the model and the data, on this machine as it is loaded now;
:func:`steps_for_minutes` turns a budget into steps with it. Every time-budgeted training in
torchik (protocol runs, ``scripts/train_pretrained.py --fit-minutes``) goes through here.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from typing import Any

from torchik.train.engine import TrainConfig

__all__ = ["steps_for_minutes", "steps_per_second"]

_WARMUP_STEPS = 5
"""Steps left out of the measurement (first-call allocations, lazy initialisation)."""


class _Enough(Exception):
    """Ends the measuring run from its callback."""


def steps_per_second(model: Any, data: Any, config: TrainConfig, seconds: float = 10.0) -> float:
    """Training steps per second of ``model`` on ``data`` under ``config``, measured.

    Args:
        model: an :class:`~torchik.models.IKModel` (not changed: a copy trains).
        data: its training data, an :class:`~torchik.learn.IKDataset` or
            :class:`~torchik.learn.FKStream` (not changed: a copy is read).
        config: the training's settings; its steps, validation, logging and checkpoints are
            ignored.
        seconds: how long to measure, after :data:`_WARMUP_STEPS` steps left out.

    Returns:
        Steps per second (at least two steps are timed, whatever ``seconds``).
    """
    from torchik.train.loop import train

    if seconds <= 0:
        raise ValueError(f"seconds must be positive, got {seconds}")
    marks: list[float] = []

    def callback(step: int, metrics: dict[str, float]) -> None:
        marks.append(time.perf_counter())
        timed = len(marks) - 1 - _WARMUP_STEPS
        if timed >= 2 and marks[-1] - marks[_WARMUP_STEPS] > seconds:
            raise _Enough

    probe = dataclasses.replace(
        config, steps=10**9, val_every=0, log_every=10**9, checkpoint_every=0, progress=False,
        restore_best=False, patience=None,
    )  # fmt: skip
    try:
        train(copy.deepcopy(model), copy.deepcopy(data), None, probe, callback=callback)
    except _Enough:
        pass
    return (len(marks) - 1 - _WARMUP_STEPS) / (marks[-1] - marks[_WARMUP_STEPS])


def steps_for_minutes(
    model: Any,
    data: Any,
    config: TrainConfig,
    minutes: float,
    started: float | None = None,
    margin: float = 0.92,
    min_steps: int = 50,
) -> int:
    """The number of steps that ends a training of ``config`` about ``minutes`` after
    ``started``, so that its learning-rate schedule runs its whole course in the time there is.

    Args:
        model, data, config: as for :func:`steps_per_second`.
        minutes: the budget.
        started: a :func:`time.perf_counter` time the budget counts from, the measurement
            then spent from it (default: the budget is the training's alone).
        margin: the fraction of the time left that the steps fill (validation and checkpoints
            take the rest).
        min_steps: the fewest steps returned.

    Returns:
        ``max(min_steps, margin * rate * seconds left)``.
    """
    if minutes <= 0:
        raise ValueError(f"minutes must be positive, got {minutes}")
    rate = steps_per_second(model, data, config, seconds=min(30.0, 6.0 * minutes))
    started = time.perf_counter() if started is None else started
    left = max(0.0, 60.0 * minutes - (time.perf_counter() - started))
    return max(min_steps, int(margin * rate * left))

"""The small IKNet of the application protocols (paths, fine-tuning, seq2seq) and its recipe.

The path-following, fine-tuning and seq2seq tables all run on an IKNet of the ``small`` preset
trained for CPU minutes with one recipe, :func:`train_small_iknet`: AdamW lr 3e-3, linear
warm-up then cosine decay to 2 %, gradient-norm clip 0.3, no validation and no checkpoints,
model seed 0. :func:`load_or_train_iknet` gets the IKNet a table runs on: a checkpoint if given,
else the bundled model if it is an IKNet, else one trained here with that recipe.

Example:
    >>> import torchik
    >>> data = torchik.make_dataset(torchik.load_robot("snake2"), 512, seed=0)
    >>> result = train_small_iknet(data, steps=5)
    >>> result.steps, type(result.model).__name__
    (5, 'IKNet')
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import torch

from torchik.learn import IKDataset, make_dataset
from torchik.models import IKNet, IKNetConfig, load, load_pretrained
from torchik.robot import Robot
from torchik.train import TrainConfig, TrainResult, train

__all__ = ["RECIPE", "load_or_train_iknet", "sizes", "train_small_iknet"]

RECIPE = "AdamW lr 3e-3, batch 256, warm-up + cosine, grad clip 0.3"
"""The recipe of :func:`train_small_iknet` in words (for a table's notes)."""


def train_small_iknet(
    data: IKDataset, steps: int, *, batch_size: int = 256, warmup_steps: int = 200
) -> TrainResult:
    """An IKNet (small preset, initial weights of seed 0) trained on ``data`` with the recipe.

    AdamW lr 3e-3, ``warmup_steps`` of linear warm-up then cosine decay to 2 % of the peak,
    gradient-norm clip 0.3, no validation and no checkpoints.

    Args:
        data: the training pairs (their spec names the robot, link and targets).
        steps: optimiser steps.
        batch_size: pairs per step (capped at ``len(data)``).
        warmup_steps: steps of linear warm-up.

    Returns:
        The :class:`~torchik.train.TrainResult` (``model``: the trained IKNet, in eval mode;
        ``seconds``: the training wall time).
    """
    torch.manual_seed(0)
    model = IKNet(data.spec, IKNetConfig.small())
    config = TrainConfig(
        steps=steps, batch_size=min(batch_size, len(data)), lr=3e-3, warmup_steps=warmup_steps,
        min_lr_ratio=0.02, grad_clip=0.3, log_every=max(1, steps // 10), val_every=0,
        checkpoint_every=0,
    )  # fmt: skip
    return train(model, data, config=config)


def sizes(config: IKNetConfig) -> str:
    """An IKNet's sizes in words: hypernetwork depth and width, embedding, normalisation."""
    return (
        f"hypernetwork {config.hyper_depth} x {config.hyper_width}, embedding "
        f"{config.embedding}, normalisation: {config.norm}"
    )


def load_or_train_iknet(
    robot: Robot,
    checkpoint: Path | str | None = None,
    steps: int = 3000,
    train_size: int = 200_000,
    save: Path | str | None = None,
) -> tuple[IKNet, str]:
    """The IKNet a protocol runs on, in float32 and eval mode, and where it came from in words.

    ``checkpoint`` if given (it must hold an IKNet of ``robot``), else the bundled IKNet of
    ``robot`` (:func:`torchik.models.load_pretrained` of ``<name>_iknet``, or of ``<name>`` if
    that is an IKNet), else one trained here
    by :func:`train_small_iknet` on ``train_size`` uniform pairs (data seed 0) for ``steps``.

    Args:
        robot: the robot (its name finds the bundled model).
        checkpoint: a file for :func:`torchik.models.load`.
        steps: training steps when an IKNet is trained here.
        train_size: training pairs when an IKNet is trained here.
        save: where to save an IKNet trained here (``None``: not saved).

    Returns:
        ``(model, description)``.
    """
    if checkpoint is not None:
        model, what = load(checkpoint), f"IKNet checkpoint {checkpoint} (torchik.models.load"
        if not isinstance(model, IKNet) or model.spec.robot != robot.name:
            raise ValueError(f"{checkpoint} does not hold an IKNet of {robot.name}")
    else:
        model = None
        for name in (f"{robot.name}_iknet", robot.name):  # the bundled IKNet, if there is one
            try:
                model, what = load_pretrained(name), "pretrained (torchik.models.load_pretrained"
            except (ValueError, OSError):
                continue
            if isinstance(model, IKNet):
                break
    if isinstance(model, IKNet):
        return model.float().eval(), f"{what}; {sizes(model.config)})"
    data = make_dataset(robot, train_size, seed=0)
    result = train_small_iknet(data, steps)
    trained = cast(IKNet, result.model)
    if save is not None:
        trained.save(save)
    threads = torch.get_num_threads()
    return trained.float().eval(), (
        f"IKNet (small: {sizes(trained.config)}) trained here on {train_size} uniform "
        f"{robot.name} pairs, {steps} steps ({RECIPE}), {result.seconds:.0f} s on {threads} "
        f"CPU thread{'s' * (threads > 1)}"
    )

"""Training and evaluating a :class:`~torchik.seq2seq.model.SequenceIK` on paths.

:func:`train_sequence_model` trains with AdamW (the learning-rate schedule of
:func:`torchik.train.engine.lr_factor`) and returns the test error after every epoch; a frozen
embedding is computed once for every sequence.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from torchik.checks import check_bool, check_device, check_float, check_int
from torchik.geometry.joints import circular_joints, joint_difference
from torchik.learn.metrics import position_error
from torchik.robot.robot import Robot
from torchik.seq2seq.data import SequenceDataset, revolute_limits
from torchik.seq2seq.model import SequenceIK, angle_to_direction

__all__ = [
    "SequenceTrainConfig",
    "SequenceTrainResult",
    "evaluate_sequence_model",
    "train_sequence_model",
]


# ---------------------------------------------------------------------------- training
@dataclass(frozen=True)
class SequenceTrainConfig:
    """Settings of :func:`train_sequence_model`.

    Attributes:
        epochs: passes over the training sequences.
        batch_size: sequences per step (the last partial batch of an epoch is kept).
        lr: peak AdamW learning rate (linear warm-up, then cosine decay to
            ``lr * min_lr_ratio`` at the last step).
        weight_decay: AdamW's decoupled weight decay.
        warmup_steps: steps of linear warm-up.
        min_lr_ratio: final learning rate as a fraction of ``lr``.
        grad_clip: maximal global gradient norm (``None``: none).
        seed: seeds the batch order (seed the model's initialisation yourself).
        device: where to train.
        eval_batch_size: sequences per evaluation batch.
        progress: print one line per epoch to stderr.
    """

    epochs: int = 20
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.0
    warmup_steps: int = 50
    min_lr_ratio: float = 0.05
    grad_clip: float | None = 1.0
    seed: int = 0
    device: str = "cpu"
    eval_batch_size: int = 64
    progress: bool = False

    def __post_init__(self) -> None:
        """Each field checked as :class:`torchik.train.TrainConfig` checks its own: one line
        naming the field otherwise."""
        for name in ("epochs", "batch_size", "eval_batch_size"):
            check_int(name, getattr(self, name), 1)
        check_int("warmup_steps", self.warmup_steps, 0)
        check_int("seed", self.seed, 0)
        check_float("lr", self.lr, positive=True)
        check_float("weight_decay", self.weight_decay, 0.0)
        check_float("min_lr_ratio", self.min_lr_ratio, 0.0, 1.0)
        if self.grad_clip is not None:
            check_float("grad_clip", self.grad_clip, positive=True)
        check_device("device", self.device)
        check_bool("progress", self.progress)


@dataclass
class SequenceTrainResult:
    """What :func:`train_sequence_model` returns.

    Attributes:
        model: the trained model, in eval mode.
        history: one row per epoch, epoch 0 being before training: ``epoch``, ``train_loss``
            (mean over the epoch's steps; NaN at epoch 0), ``test_loss``,
            ``test_position_error`` (m), ``test_joint_error`` (rad; see
            :func:`evaluate_sequence_model`) and ``seconds`` (training time so far,
            evaluations excluded).
        seconds: total training time.
    """

    model: SequenceIK
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0

    def curve(self, key: str) -> list[float]:
        """One column of :attr:`history`, e.g. ``curve("test_position_error")``."""
        return [row[key] for row in self.history]


def _batched_features(model: SequenceIK, positions: Tensor, batch_size: int) -> Tensor:
    return torch.cat([model.features(p) for p in positions.split(batch_size)])


@torch.no_grad()
def evaluate_sequence_model(
    model: SequenceIK,
    data: SequenceDataset,
    robot: Robot,
    batch_size: int = 64,
    features: Tensor | None = None,
) -> dict[str, float]:
    """Test errors of ``model`` on ``data``.

    The predicted joints are the model's (read within its limits, which
    :func:`train_sequence_model` sets from the robot).

    Args:
        model: the sequence model.
        data: test sequences.
        robot: FK of the predicted joints (in the robot's dtype and device; use float64) and
            the joints' ranges.
        batch_size: sequences per batch.
        features: ``model.features(data.positions)`` if already computed.

    Returns:
        ``loss``; ``position_error``: mean distance (m) over every step between the target
        and FK of the predicted joints; ``joint_error``: mean absolute joint difference (rad)
        from the true joints, wrapped to ``(-pi, pi]`` for a joint on a circle (continuous or
        limited to a full turn or more: :func:`torchik.geometry.circular_joints`) and plain
        for a joint limited to less, which cannot turn through the gap of its range.

    Raises:
        ValueError: a prismatic joint (:func:`~torchik.seq2seq.data.revolute_limits`).
    """
    lower, upper = revolute_limits(robot)
    circular = circular_joints(lower, upper, robot.continuous)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    totals = torch.zeros(3, dtype=torch.float64)
    for i in range(0, len(data), batch_size):
        q, pos = data.q[i : i + batch_size].to(device), data.positions[i : i + batch_size]
        feats = model.features(pos.to(device)) if features is None else features[i : i + len(q)]
        direction = model.directions(feats)
        loss = (direction - angle_to_direction(q)).square().sum(-1).mean()
        pred = model.angles(direction)
        dist = position_error(robot, pred, pos.to(robot.device), data.link)
        joint = joint_difference(pred, q, circular.to(device)).abs()
        totals += torch.tensor([loss.item() * len(q), dist.mean().item() * len(q),
                                joint.mean().item() * len(q)], dtype=torch.float64)  # fmt: skip
    model.train(was_training)
    loss, dist, joint = (totals / len(data)).tolist()
    return {"loss": loss, "position_error": dist, "joint_error": joint}


def _lr_schedule(optimizer: torch.optim.Optimizer, total: int, config: SequenceTrainConfig):
    from torchik.train.engine import TrainConfig, lr_factor

    schedule = TrainConfig(steps=total, lr=config.lr, warmup_steps=config.warmup_steps,
                           min_lr_ratio=config.min_lr_ratio)  # fmt: skip
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, schedule))


def _epoch(model, inputs, q, config, optimizer, scheduler, gen) -> float:
    """One pass over shuffled batches; ``inputs`` are features (frozen) or positions."""
    model.train()
    order = torch.randperm(q.shape[0], generator=gen).to(q.device)
    losses = []
    for idx in order.split(config.batch_size):
        if not model.train_embed:
            loss = model.loss_from_features(inputs[idx], q[idx])
        else:
            loss = model.loss(inputs[idx], q[idx])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip is not None:
            nn.utils.clip_grad_norm_(model.trainable_parameters(), config.grad_clip)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    return sum(losses) / len(losses)


def train_sequence_model(
    model: SequenceIK,
    train_set: SequenceDataset,
    test_set: SequenceDataset,
    robot: Robot,
    config: SequenceTrainConfig = SequenceTrainConfig(),  # noqa: B008 (frozen)
    callback: Callable[[dict[str, float]], None] | None = None,
) -> SequenceTrainResult:
    """Train ``model`` with AdamW and measure the test error before training and after
    every epoch.

    A frozen embedding (or none) is computed once for every sequence instead of at every
    step: the numbers are the same, the cost is one pass. Raw inputs are standardised with
    the training set's statistics (:meth:`SequenceIK.set_normalization`), and the model reads
    its angles within the robot's limits (:meth:`SequenceIK.set_limits`).

    Args:
        model: the sequence model (moved to ``config.device``).
        train_set: training sequences.
        test_set: test sequences.
        robot: FK for the position error (use float64).
        config: the settings.
        callback: called with every history row as it is made.

    Returns:
        A :class:`SequenceTrainResult`.

    Raises:
        ValueError: a prismatic joint (:func:`~torchik.seq2seq.data.revolute_limits`).
    """
    device = torch.device(config.device)
    model.set_limits(*revolute_limits(robot))
    model.to(device).set_normalization(train_set.positions)
    q, test_features = train_set.q.to(device), None
    inputs = train_set.positions.to(device)
    if not model.train_embed:  # frozen or raw: features once
        inputs = _batched_features(model, inputs, config.eval_batch_size)
        test_features = _batched_features(
            model, test_set.positions.to(device), config.eval_batch_size
        )
    optimizer = torch.optim.AdamW(
        model.trainable_parameters(), lr=config.lr, weight_decay=config.weight_decay
    )
    steps = config.epochs * math.ceil(len(train_set) / config.batch_size)
    scheduler = _lr_schedule(optimizer, steps, config)
    gen = torch.Generator().manual_seed(config.seed)
    result = SequenceTrainResult(model)

    _record(result, 0, math.nan, test_set, robot, config, test_features, callback)
    for epoch in range(1, config.epochs + 1):
        start = time.perf_counter()
        train_loss = _epoch(model, inputs, q, config, optimizer, scheduler, gen)
        result.seconds += time.perf_counter() - start
        _record(result, epoch, train_loss, test_set, robot, config, test_features, callback)
    model.eval()
    return result


def _record(result, epoch, train_loss, test_set, robot, config, test_features, callback) -> None:
    """Evaluate on the test set and append (and report) one history row."""
    test = evaluate_sequence_model(
        result.model, test_set, robot, config.eval_batch_size, test_features
    )
    row = {"epoch": epoch, "train_loss": train_loss}
    row |= {f"test_{key}": value for key, value in test.items()}
    row["seconds"] = result.seconds
    result.history.append(row)
    if callback is not None:
        callback(row)
    if config.progress:
        print(
            f"epoch {epoch:3d}: train loss {train_loss:.4f}, test "
            f"{100 * row['test_position_error']:.2f} cm, {row['test_joint_error']:.3f} rad",
            file=sys.stderr,
            flush=True,
        )

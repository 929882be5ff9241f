"""One training loop for every :class:`torchik.models.IKModel`.

:func:`train` runs AdamW with a warm-up + cosine learning-rate schedule on shuffled minibatches,
validates every ``val_every`` steps (forward-kinematics errors of samples when a robot is
given), stops early on a stalled validation metric, logs to ``log.csv`` and writes resumable
checkpoints. A run killed at any moment and restarted with ``resume=True`` continues exactly:
the losses after the last checkpoint are bit-for-bit those of the uninterrupted run (same
device and thread count).
"""

from __future__ import annotations

import csv
import dataclasses
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from torchik.data import IKDataset, decode_target, robot_hash
from torchik.metrics import position_error
from torchik.models.base import IKModel, atomic_save

if TYPE_CHECKING:
    from torchik.robot import Robot

__all__ = ["TrainConfig", "TrainResult", "lr_factor", "train", "validate"]

TRAIN_FORMAT_VERSION = 1
CHECKPOINT = "checkpoint.pt"
BEST = "best.pt"
LOG = "log.csv"
_COLUMNS = ("step", "loss", "lr", "val_loss", "val_position_error", "seconds")


@dataclass(frozen=True)
class TrainConfig:
    """Settings of :func:`train`.

    Attributes:
        steps: optimisation steps.
        batch_size: rows per step (epochs of shuffled rows; the last partial batch of an epoch
            is dropped).
        lr: peak learning rate of AdamW.
        weight_decay: AdamW's decoupled weight decay.
        warmup_steps: linear warm-up from ``lr / warmup_steps`` to ``lr``.
        min_lr_ratio: the cosine decays from ``lr`` to ``lr * min_lr_ratio`` at ``steps``.
        grad_clip: maximal global gradient norm (``None``: no clipping).
        log_every: steps between progress lines and CSV rows (loss averaged over them).
        val_every: steps between validations (``0``: only at the end).
        val_targets: validation rows used (the first ones of ``val_set``).
        patience: stop after this many validations without improvement (``None``: never).
        checkpoint_every: steps between checkpoints (``0``: only at the end).
        seed: seeds torch's global RNG (the models' training noise) and the batch sampler.
        device: where to train (``"cpu"``, ``"cuda"``, ...).
        normalize: call ``model.set_normalization`` on the training set first.
        restore_best: at the end, load the weights of the best validation.
        progress: print progress lines to stderr.
    """

    steps: int = 10_000
    batch_size: int = 512
    lr: float = 1e-3
    weight_decay: float = 0.0
    warmup_steps: int = 100
    min_lr_ratio: float = 0.0
    grad_clip: float | None = 1.0
    log_every: int = 100
    val_every: int = 1000
    val_targets: int = 1000
    patience: int | None = None
    checkpoint_every: int = 1000
    seed: int = 0
    device: str = "cpu"
    normalize: bool = True
    restore_best: bool = True
    progress: bool = True

    def __post_init__(self) -> None:
        positive = ("steps", "batch_size", "log_every", "val_targets")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("warmup_steps", "val_every", "checkpoint_every"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.lr <= 0 or not 0 <= self.min_lr_ratio <= 1:
            raise ValueError("lr must be > 0 and min_lr_ratio in [0, 1]")


@dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        model: the trained model (best validation weights if ``restore_best``), in eval mode.
        steps: the last step run.
        best_val: best validation metric (position error in m with a robot, else loss).
        best_step: the step it was reached at.
        stopped_early: whether patience ran out.
        seconds: wall time of the training, summed over resumed runs.
        history: the CSV rows as dicts.
        out_dir: where checkpoints and the log are, if anywhere.
    """

    model: IKModel
    steps: int
    best_val: float | None
    best_step: int | None
    stopped_early: bool
    seconds: float
    history: list[dict[str, float]] = field(default_factory=list)
    out_dir: Path | None = None


def lr_factor(step: int, config: TrainConfig) -> float:
    """Multiplier of ``config.lr`` at ``step`` (0-based): linear warm-up, then cosine decay."""
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    span = max(1, config.steps - config.warmup_steps)
    progress = min(1.0, (step - config.warmup_steps) / span)
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    return config.min_lr_ratio + (1.0 - config.min_lr_ratio) * cosine


class _Batches:
    """Shuffled minibatch indices, epoch after epoch, from a private generator."""

    def __init__(self, n: int, batch_size: int, seed: int):
        if n < batch_size:
            raise ValueError(f"the training set has {n} rows, fewer than batch_size={batch_size}")
        self.n, self.batch_size = n, batch_size
        self.generator = torch.Generator().manual_seed(seed)
        self.order, self.cursor = torch.randperm(n, generator=self.generator), 0

    def next(self) -> Tensor:
        if self.cursor + self.batch_size > self.n:
            self.order, self.cursor = torch.randperm(self.n, generator=self.generator), 0
        self.cursor += self.batch_size
        return self.order[self.cursor - self.batch_size : self.cursor]

    def state_dict(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state(), "order": self.order, "cursor": self.cursor}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["generator"])
        self.order, self.cursor = state["order"], state["cursor"]


# ---------------------------------------------------------------------------- validation
@torch.no_grad()
def validate(
    model: IKModel, data: IKDataset, robot: Robot | None = None, n_samples: int = 1, seed: int = 0
) -> dict[str, float]:
    """Validation metrics of ``model`` on ``data`` (all rows; slice it first if large).

    Returns:
        ``{"val_loss": model.loss}`` and, with a robot, ``"val_position_error"``: the mean
        distance (m) between each target position and the FK of ``n_samples`` samples for it.
        Runs under ``torch.random.fork_rng``: the caller's RNG stream is untouched.
    """
    was_training = model.training
    model.eval()
    ref = model.target_mean
    q, target = data.q.to(ref), data.target.to(ref)
    devices = [ref.device] if ref.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        out = {"val_loss": model.loss(q, target).item()}
        if robot is not None:
            gen = torch.Generator(ref.device).manual_seed(seed)
            samples = model.sample(target, n_samples, generator=gen)
            position, _ = decode_target(target, model.spec.targets)
            err = position_error(robot, samples, position[:, None], model.spec.link)
            out["val_position_error"] = err.mean().item()
    model.train(was_training)
    return out


# ---------------------------------------------------------------------------- the loop
class _Run:
    """The mutable state of one training run; checkpoints are its ``state_dict``."""

    def __init__(self, model: IKModel, train_set: IKDataset, config: TrainConfig):
        self.model, self.config = model, config
        self.optimizer = torch.optim.AdamW(
            model.parameters(), lr=config.lr, weight_decay=config.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: lr_factor(step, config)
        )
        self.batches = _Batches(len(train_set), config.batch_size, config.seed)
        self.step, self.elapsed = 0, 0.0
        self.best_val: float | None = None
        self.best_step: int | None = None
        self.bad_checks, self.window = 0, [0.0, 0]
        self.best_state: dict[str, Tensor] | None = None

    def state_dict(self) -> dict[str, Any]:
        cuda = self.model.target_mean.device.type == "cuda"
        return {
            "format_version": TRAIN_FORMAT_VERSION,
            "config": dataclasses.asdict(self.config),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(self.model.target_mean.device) if cuda else None,
            "batches": self.batches.state_dict(),
            **{k: getattr(self, k) for k in _SCALARS},
            "best_state": self.best_state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] is not None:
            torch.cuda.set_rng_state(state["cuda_rng"], self.model.target_mean.device)
        self.batches.load_state_dict(state["batches"])
        for k in _SCALARS:
            setattr(self, k, state[k])
        self.best_state = state["best_state"]


_SCALARS = ("step", "elapsed", "best_val", "best_step", "bad_checks", "window")


def _save_checkpoint(run: _Run, out_dir: Path) -> None:
    atomic_save({**run.model.checkpoint(), "training": run.state_dict()}, out_dir / CHECKPOINT)


def _resume(run: _Run, out_dir: Path) -> bool:
    """Load ``out_dir/checkpoint.pt`` into ``run``; False where there is none."""
    path = out_dir / CHECKPOINT
    if not path.exists():
        return False
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)  # RNG states live on CPU
        state = ckpt["training"]
    except Exception as err:  # corrupt or foreign file: say which
        raise ValueError(f"cannot resume from {str(path)!r}: {err}") from err
    own = run.model.checkpoint()
    for key in ("family", "config", "spec"):
        if ckpt.get(key) != own[key]:
            raise ValueError(
                f"cannot resume from {str(path)!r}: its model {key} {ckpt.get(key)!r} differs "
                f"from this model's {own[key]!r}"
            )
    if state.get("format_version", math.inf) > TRAIN_FORMAT_VERSION:
        raise ValueError(f"{str(path)!r} was written by a newer torchik")
    run.model.load_state_dict(ckpt["state_dict"])
    run.load_state_dict(state)
    return True


def _read_log(path: Path, upto: int) -> list[dict[str, float]]:
    """The rows of an existing log with ``step <= upto`` (a killed run may have logged more)."""
    if not path.exists():
        return []
    with path.open(newline="") as f:
        rows = [{k: float(v) if v else math.nan for k, v in r.items()} for r in csv.DictReader(f)]
    return [r for r in rows if r["step"] <= upto]


def _write_log(path: Path, rows: list[dict[str, float]], append: bool = False) -> None:
    """Write ``rows`` (``repr`` of each float, so values read back exactly), or append them."""
    with path.open("a" if append else "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=_COLUMNS)
        if not append:
            writer.writeheader()
        for row in rows:
            writer.writerow({k: repr(int(row[k]) if k == "step" else row[k]) for k in _COLUMNS})


def _clock(seconds: float) -> str:
    """``h:mm:ss`` (or ``m:ss``) of a duration."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class _Progress:
    """One line per log step: step, steps/s, loss, validation, ETA (stderr, no tqdm)."""

    def __init__(self, config: TrainConfig, start_step: int):
        self.config, self.t0, self.s0 = config, time.perf_counter(), start_step

    def __call__(self, row: dict[str, float]) -> None:
        if not self.config.progress:
            return
        done = row["step"] - self.s0
        rate = done / max(1e-9, time.perf_counter() - self.t0)
        eta = (self.config.steps - row["step"]) / max(rate, 1e-9)
        val = row["val_position_error"] if not math.isnan(row["val_position_error"]) else None
        val_text = f"  val {val * 1000:.1f} mm" if val is not None else ""
        if val is None and not math.isnan(row["val_loss"]):
            val_text = f"  val loss {row['val_loss']:.4g}"
        print(
            f"step {int(row['step']):>7}/{self.config.steps}  {rate:7.1f} it/s  "
            f"loss {row['loss']:.4g}{val_text}  lr {row['lr']:.2e}  ETA {_clock(eta)}",
            file=sys.stderr,
            flush=True,
        )


def _train_step(run: _Run, q: Tensor, target: Tensor) -> float:
    loss = run.model.loss(q, target)
    if not torch.isfinite(loss):
        raise FloatingPointError(f"the loss is {loss.item()} at step {run.step + 1}")
    run.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if run.config.grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), run.config.grad_clip)
    run.optimizer.step()
    run.scheduler.step()
    run.step += 1
    return loss.item()


def _check_validation(run: _Run, metrics: dict[str, float]) -> None:
    value = metrics.get("val_position_error", metrics["val_loss"])
    if run.best_val is None or value < run.best_val:
        run.best_val, run.best_step, run.bad_checks = value, run.step, 0
        run.best_state = {k: v.detach().cpu().clone() for k, v in run.model.state_dict().items()}
    else:
        run.bad_checks += 1


def _due(step: int, every: int, last: int) -> bool:
    return step == last or (every > 0 and step % every == 0)


def _prepare(model: IKModel, train_set: IKDataset, robot: Robot | None, config: TrainConfig):
    if model.spec != train_set.spec:
        raise ValueError(f"the model's spec {model.spec} differs from the data's {train_set.spec}")
    if robot is not None and robot_hash(robot) != model.spec.robot_hash:
        raise ValueError(f"robot {robot.name!r} is not the robot the model is for")
    model.to(config.device).train()
    ref = model.target_mean
    return train_set.q.to(ref), train_set.target.to(ref)


def train(
    model: IKModel,
    train_set: IKDataset,
    val_set: IKDataset | None = None,
    config: TrainConfig = TrainConfig(),  # noqa: B008 (frozen, so a shared default is safe)
    out_dir: str | Path | None = None,
    resume: bool = False,
    robot: Robot | None = None,
    callback: Callable[[int, dict[str, float]], None] | None = None,
) -> TrainResult:
    """Train ``model`` on ``train_set``.

    Args:
        model: any registered :class:`~torchik.models.IKModel` (moved to ``config.device``).
        train_set: training pairs with the model's spec.
        val_set: validation pairs (its first ``config.val_targets`` rows are used).
        config: the settings.
        out_dir: where ``log.csv``, ``checkpoint.pt`` (resumable; also loadable with
            :func:`torchik.models.load`) and ``best.pt`` go; ``None`` writes nothing.
        resume: continue from ``out_dir/checkpoint.pt`` if it exists (otherwise start afresh).
        robot: enables the FK validation metric (mean position error of one sample per target),
            which then drives early stopping and ``best.pt`` instead of the validation loss.
        callback: called as ``callback(step, metrics)`` at the end of every step (after its
            log row and checkpoint); ``metrics`` has ``"loss"`` and any validation metrics.

    Returns:
        A :class:`TrainResult`.
    """
    q_all, target_all = _prepare(model, train_set, robot, config)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    run = _Run(model, train_set, config)
    if not (resume and out is not None and _resume(run, out)):
        torch.manual_seed(config.seed)
        if config.normalize:
            model.set_normalization(q_all, target_all)
    history = _read_log(out / LOG, run.step) if out is not None and run.step else []
    if out is not None:
        _write_log(out / LOG, history)  # drops rows a killed run logged after its checkpoint
    val = val_set.subset(slice(0, config.val_targets)) if val_set is not None else None
    stopped = _loop(run, q_all, target_all, val, robot, out, history, callback)
    return _finish(run, out, history, stopped)


def _loop(run, q_all, target_all, val, robot, out, history, callback) -> bool:
    """Steps until ``config.steps`` or early stopping; True where patience ran out."""
    config, progress, t0 = run.config, _Progress(run.config, run.step), time.perf_counter()
    elapsed0 = run.elapsed
    while run.step < config.steps:
        index = run.batches.next().to(q_all.device)
        loss = _train_step(run, q_all[index], target_all[index])
        run.window = [run.window[0] + loss, run.window[1] + 1]
        run.elapsed = elapsed0 + time.perf_counter() - t0
        metrics = {}
        if val is not None and _due(run.step, config.val_every, config.steps):
            metrics = validate(run.model, val, robot, seed=config.seed)
            _check_validation(run, metrics)
        if _due(run.step, config.log_every, config.steps) or metrics:
            history.append(_row(run, metrics))
            progress(history[-1])
            if out is not None:
                _write_log(out / LOG, history[-1:], append=True)
        stop = config.patience is not None and run.bad_checks >= config.patience
        if out is not None and (_due(run.step, config.checkpoint_every, config.steps) or stop):
            _save_checkpoint(run, out)
        if callback is not None:
            callback(run.step, {"loss": loss, **metrics})
        if stop:
            return True
    return False


def _row(run: _Run, metrics: dict[str, float]) -> dict[str, float]:
    total, count = run.window
    run.window = [0.0, 0]
    return {
        "step": float(run.step),
        "loss": total / max(count, 1),
        "lr": run.scheduler.get_last_lr()[0],
        "val_loss": metrics.get("val_loss", math.nan),
        "val_position_error": metrics.get("val_position_error", math.nan),
        "seconds": run.elapsed,
    }


def _finish(run: _Run, out: Path | None, history: list, stopped: bool) -> TrainResult:
    model = run.model
    if run.best_state is not None and run.config.restore_best:
        model.load_state_dict(run.best_state)
    if out is not None and run.best_state is not None:
        atomic_save({**model.checkpoint(), "state_dict": run.best_state}, out / BEST)
    return TrainResult(
        model.eval(), run.step, run.best_val, run.best_step, stopped, run.elapsed, history, out
    )

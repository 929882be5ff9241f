"""One training loop for every :class:`torchik.models.IKModel`.

:func:`train` runs AdamW with a warm-up + cosine learning-rate schedule on minibatches of a
fixed data set (shuffled, epoch after epoch) or of an endless :class:`torchik.learn.FKStream`
(fresh pairs made by FK on the training device), validates every ``val_every`` steps
(forward-kinematics errors of samples when a robot is given), stops early on a stalled
validation metric, logs to ``log.csv`` and writes resumable checkpoints. The step itself
(:class:`torchik.train.engine.Stepper`) never waits for the device: losses are read at log steps
only.
Options: bf16 autocast, ``torch.compile``, micro-batches, an EMA of the weights.

A run killed at any moment and restarted with ``resume=True`` continues exactly: the losses
after the last checkpoint are bit-for-bit those of the uninterrupted run (same device and
thread count). Ctrl-C (or SIGTERM) saves a checkpoint at the end of the current step before
stopping.
"""

from __future__ import annotations

import contextlib
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

from torchik.checks import check_kind, short_repr
from torchik.learn.data import FKStream, IKDataset, decode_target
from torchik.learn.metrics import position_error
from torchik.models.base import IKModel
from torchik.models.checkpoint import read_checkpoint, save_checkpoint
from torchik.train import distributed
from torchik.train.engine import (
    CtrlC,
    Rows,
    Stepper,
    StreamRows,
    TrainConfig,
    batches_kind,
    check_training_state,
    lr_factor,
    matmul_precision,
)
from torchik.train.progress import Progress, read_log, write_log

if TYPE_CHECKING:
    from torchik.robot.robot import Robot

__all__ = [
    "TrainResult",
    "TrainingInterrupted",
    "train",
    "validate",
]

TRAIN_FORMAT_VERSION = 5
"""Version of the training state in ``checkpoint.pt`` (1: before streams and EMA; 2: a fixed
data set's epoch order saved whole, 8 bytes a row; 3: no ``stopped_early``; 4: no hash of the
rows nor a stream's sampler, std and FK dtype, whose resume checks are then skipped; all still
read)."""
CHECKPOINT = "checkpoint.pt"
BEST = "best.pt"
LOG = "log.csv"


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped :func:`train`; where an ``out_dir`` was given, a resumable checkpoint of
    the last finished step was written first.

    Attributes:
        step: the last finished step.
        checkpoint: the checkpoint written (``None`` without an ``out_dir``).
    """

    def __init__(self, step: int, checkpoint: Path | None):
        where = f"; resumable checkpoint {checkpoint}" if checkpoint is not None else ""
        super().__init__(f"training interrupted at step {step}{where}")
        self.step, self.checkpoint = step, checkpoint


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

    def __init__(self, model: IKModel, rows: Rows | StreamRows, config: TrainConfig):
        self.model, self.config, self.rows = model, config, rows
        device = model.target_mean.device
        self.stepper = Stepper(model, config, device)
        self.optimizer, self.ema = self.stepper.optimizer, self.stepper.ema
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: lr_factor(step, config)
        )
        self.step, self.elapsed = 0, 0.0
        self.best_val: float | None = None
        self.best_step: int | None = None
        self.bad_checks, self.logged = 0, 0
        self.stopped_early = False  # saved: a resumed run that stopped early stays stopped
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        self.best_state: dict[str, Tensor] | None = None

    @property
    def cuda(self) -> bool:
        return self.model.target_mean.device.type == "cuda"

    def state_dict(self) -> dict[str, Any]:
        device = self.model.target_mean.device
        optimizer, scheduler = self.stepper.portable_state(self.scheduler)
        return {
            "format_version": TRAIN_FORMAT_VERSION,
            "config": dataclasses.asdict(self.config),
            "optimizer": optimizer,
            "scheduler": scheduler,
            "torch_rng": distributed.gather(torch.get_rng_state()),
            "cuda_rng": distributed.gather(torch.cuda.get_rng_state(device)) if self.cuda else None,
            "batches": distributed.gather(self.rows.state_dict()),
            **{k: getattr(self, k) for k in _SCALARS},
            "window": [float(self.loss_sum), self.step - self.logged],
            "best_state": self.best_state,
            "ema": self.ema.state_dict() if self.ema is not None else None,
            "stopped_early": self.stopped_early,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        optimizer, scheduler = _with_config(state, self.config)
        self.optimizer.load_state_dict(optimizer)
        self.scheduler.load_state_dict(scheduler)
        if self.stepper.graph is not None:  # its graph holds the optimiser's old state tensors
            self.stepper.graph.forget()
        torch.set_rng_state(distributed.pick(state["torch_rng"]))
        if state["cuda_rng"] is not None:
            cuda_rng = distributed.pick(state["cuda_rng"])
            torch.cuda.set_rng_state(cuda_rng, self.model.target_mean.device)
        self.rows.load_state_dict(distributed.pick(state["batches"]))
        for k in _SCALARS:
            setattr(self, k, state[k])
        total, count = state["window"]
        self.loss_sum.fill_(total)
        self.logged = self.step - int(count)
        self.best_state = state["best_state"]
        self.stopped_early = state.get("stopped_early", False)  # absent before version 4
        if self.ema is not None:
            if state.get("ema") is None:
                raise ValueError("the checkpoint has no EMA of the weights: resume without one")
            self.ema.load_state_dict(state["ema"])


_SCALARS = ("step", "elapsed", "best_val", "best_step", "bad_checks")


def _with_config(state: dict[str, Any], config: TrainConfig) -> tuple[dict, dict]:
    """The saved optimiser and scheduler states with ``config``'s learning rate and weight
    decay: a run resumed with a new ``lr`` (after a non-finite loss, say) or ``weight_decay``
    takes them, its schedule at the step reached (the saved ones were kept before).

    Args:
        state: the ``"training"`` entry of a checkpoint (already checked).
        config: the settings of the resumed run.

    Returns:
        The optimiser's and the scheduler's ``state_dict`` to load.
    """
    step, lr = state["step"], config.lr
    rate = lr * lr_factor(step, config)  # what LambdaLR sets after ``step`` steps
    groups = [
        {**group, "lr": rate, "initial_lr": lr, "weight_decay": config.weight_decay}
        for group in state["optimizer"]["param_groups"]
    ]
    optimizer = {**state["optimizer"], "param_groups": groups}
    scheduler = {**state["scheduler"], "base_lrs": [lr] * len(groups),
                 "_last_lr": [rate] * len(groups), "last_epoch": step}  # fmt: skip
    return optimizer, scheduler


def _save_checkpoint(run: _Run, out_dir: Path) -> Path:
    """``checkpoint.pt``: the model (its averaged weights with an EMA, so that
    :func:`torchik.models.load` gets those) and the training state (the raw weights too)."""
    ckpt, training = run.model.checkpoint(), run.state_dict()
    if run.ema is not None:
        training["model_state"] = ckpt["state_dict"]
        ckpt["state_dict"] = run.ema.averaged_state(run.model)
    if distributed.is_main():  # every rank's state is in ``training``
        save_checkpoint({**ckpt, "training": training}, out_dir / CHECKPOINT)
    return out_dir / CHECKPOINT


def _resume(run: _Run, out_dir: Path) -> bool:
    """Load ``out_dir/checkpoint.pt`` into ``run``; False where there is none."""
    path = out_dir / CHECKPOINT
    if not path.exists():
        return False
    keys: tuple[str, ...] = (
        "format_version",
        "optimizer",
        "scheduler",
        "torch_rng",
        "cuda_rng",
        "batches",
    )
    keys += (*_SCALARS, "window", "best_state")
    try:  # RNG states live on the CPU
        ckpt = read_checkpoint(path, map_location="cpu", require={"training": keys})
    except ValueError as err:
        raise ValueError(f"cannot resume: {err}") from err
    state = ckpt["training"]
    own = run.model.checkpoint()
    for key in ("family", "config", "spec"):
        if ckpt.get(key) != own[key]:
            raise ValueError(
                f"cannot resume from {str(path)!r}: its model {key} {ckpt.get(key)!r} differs "
                f"from this model's {own[key]!r}"
            )
    if state.get("format_version", math.inf) > TRAIN_FORMAT_VERSION:
        raise ValueError(f"{str(path)!r} was written by a newer torchik")
    saved = batches_kind(state["batches"])
    if saved is not None and saved != run.rows.kind:
        raise ValueError(f"cannot resume from {str(path)!r}: it was trained on {saved}, and this "
                         f"call passes {run.rows.kind}")  # fmt: skip
    if (other := _other_run(state, run)) is not None:  # not damage: another run's settings
        raise ValueError(f"cannot resume from {str(path)!r}: {other}")
    try:
        check_training_state(state)
        run.model.load_state_dict(state.get("model_state", ckpt["state_dict"]))
        run.load_state_dict(state)
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0].rstrip(":")
        raise ValueError(
            f"cannot resume from {str(path)!r}: damaged training state: {first}"
        ) from err
    return True


_SAME_RUN = ("batch_size", "seed")
"""The settings of :class:`TrainConfig` that a resumed run keeps (``lr``, ``weight_decay`` and
``steps`` may change: see :func:`_with_config`)."""


def _other_run(state: dict[str, Any], run: _Run) -> str | None:
    """Why a sound training state belongs to another run than ``run``: another number of
    processes, another :data:`_SAME_RUN` setting, other rows or a stream of other settings;
    ``None`` where none (what a checkpoint of an older torchik lacks is not compared)."""
    if (why := distributed.other_world(state["batches"])) is not None:
        return why
    saved = state.get("config")
    saved = saved if isinstance(saved, dict) else {}
    for key in _SAME_RUN:
        old, new = saved.get(key), getattr(run.config, key)
        if key in saved and not (type(old) is type(new) and old == new):  # a tensor: no bool
            return f"it was trained with {key} {short_repr(old)}, this run has {new!r}"
    return run.rows.other(distributed.first_rank(state["batches"]))


def _report(progress: Progress, row: dict[str, float]) -> None:
    fields = {"loss": f"{row['loss']:.4g}"}
    if not math.isnan(row["val_position_error"]):
        fields["val"] = f"{row['val_position_error'] * 1000:.1f} mm"
    elif not math.isnan(row["val_loss"]):
        fields["val loss"] = f"{row['val_loss']:.4g}"
    fields["lr"] = f"{row['lr']:.2e}"
    progress.report(fields)


def _check_finite(run: _Run) -> float:
    """The summed loss since the last log row (the mean over the ranks), read from the device
    once; raise where it is not finite."""
    total = float(distributed.mean(run.loss_sum))
    if not math.isfinite(total):
        raise FloatingPointError(
            f"the loss became {total} between steps {run.logged + 1} and {run.step}: lower lr, "
            "set grad_clip, or check the data"
        )
    return total


def _validate(run: _Run, val: IKDataset, robot: Robot | None) -> dict[str, float]:
    """Validate (the averaged weights with an EMA) and keep the best state."""
    ema = run.ema
    with ema.applied(run.model) if ema is not None else contextlib.nullcontext():
        metrics = validate(run.model, val, robot, seed=run.config.seed)
        value = metrics.get("val_position_error", metrics["val_loss"])
        if run.best_val is None or value < run.best_val:
            run.best_val, run.best_step, run.bad_checks = value, run.step, 0
            state = run.model.state_dict().items()
            run.best_state = {k: v.detach().cpu().clone() for k, v in state}
        else:
            run.bad_checks += 1
    return metrics


def _due(step: int, every: int, last: int) -> bool:
    return step == last or (every > 0 and step % every == 0)


def _prepare(model: IKModel, source: IKDataset | FKStream, robot: Robot | None, config,
             val_set: Any = None):  # fmt: skip
    """The checked arguments of :func:`train` and the rows it draws batches from."""
    from torchik.robot.robot import Robot

    check_kind("model", model, IKModel)
    check_kind("config", config, TrainConfig)
    check_kind("train_set", source, IKDataset | FKStream, "an IKDataset or an FKStream")
    check_kind("val_set", val_set, IKDataset, optional=True)
    check_kind("robot", robot, Robot, optional=True)
    if model.spec != source.spec:
        mine, theirs = dataclasses.asdict(model.spec), dataclasses.asdict(source.spec)
        shown = [f"{key} {mine[key]!r} vs {theirs[key]!r}" for key in mine
                 if mine[key] != theirs[key]]  # fmt: skip
        raise ValueError(f"the model's spec differs from the data's: {'; '.join(shown)}")
    if robot is not None:
        from torchik.models.pipeline import check_model_fits

        check_model_fits(model, robot)  # names what differs
    model.to(config.device).train()
    like = model.target_mean
    if isinstance(source, FKStream):
        return StreamRows(source, config.batch_size, like)
    return Rows(source, config.batch_size, config.seed, like)


def _normalize(model: IKModel, rows: Rows | StreamRows, config: TrainConfig) -> None:
    if isinstance(rows, Rows):
        model.set_normalization(rows.q, rows.target)
        return
    stream = rows.stream
    sample = stream.draw(config.stats_rows, seed=stream.seed + 1_000_003)
    model.set_normalization(sample.q.to(rows.dtype), sample.target.to(rows.dtype))


def train(
    model: IKModel,
    train_set: IKDataset | FKStream,
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
        train_set: training pairs with the model's spec: a fixed :class:`IKDataset`, or an
            :class:`~torchik.learn.FKStream` that makes fresh pairs on the device every step
            (from a copy restarted at its seed, on every device: the stream does not move).
        val_set: validation pairs (its first ``config.val_targets`` rows are used); for a
            stream, e.g. ``stream.draw(1000, seed=...)``.
        config: the settings.
        out_dir: where ``log.csv``, ``checkpoint.pt`` (resumable; also loadable with
            :func:`torchik.models.load`) and ``best.pt`` go; ``None`` writes nothing.
        resume: continue from ``out_dir/checkpoint.pt`` if it exists (otherwise start afresh).
            A checkpoint of another run is refused, in one line: another model, kind of data,
            number of processes, ``batch_size`` or ``seed``, other rows (compared by hash), or
            a stream of another seed, sampler, std or FK dtype. ``steps``, ``lr`` and
            ``weight_decay`` may change.
        robot: enables the FK validation metric (mean position error of one sample per target),
            which then drives early stopping and ``best.pt`` instead of the validation loss.
        callback: called as ``callback(step, metrics)`` at the end of every step (after its
            log row and checkpoint); ``metrics`` has ``"loss"`` (the mean since the previous
            row) on log steps and the validation metrics on validation steps.

    Returns:
        A :class:`TrainResult`.

    Raises:
        TrainingInterrupted: Ctrl-C or SIGTERM (after writing ``out_dir/checkpoint.pt``, if any).
        FloatingPointError: the loss became NaN or infinite.
    """
    rows = _prepare(model, train_set, robot, config, val_set)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    run = _Run(model, rows, config)
    if resume and out is not None and _resume(run, out):
        if config.progress and distributed.is_main():
            note = " (it stopped early: no more steps)" if run.stopped_early else ""
            print(f"resumed at step {run.step} of {config.steps} from {out / CHECKPOINT}"
                  f"{note}", file=sys.stderr, flush=True)  # fmt: skip
    else:
        torch.manual_seed(config.seed)
        if config.normalize:
            _normalize(model, rows, config)
        if run.ema is not None:  # the average starts from the normalised initial weights
            run.ema.reset(model)
    history = read_log(out / LOG, run.step) if out is not None and run.step else []
    if out is not None and distributed.is_main():  # rows a killed run logged after its
        if history:  # checkpoint are dropped; no rows: no file until the first (not a header)
            write_log(out / LOG, history)
        else:
            (out / LOG).unlink(missing_ok=True)
    val = val_set.subset(slice(0, config.val_targets)) if val_set is not None else None
    device = model.target_mean.device
    with matmul_precision(device, config.tf32), CtrlC(out is not None) as ctrl_c:
        stopped = _loop(run, val, robot, out, history, callback, ctrl_c)
    return _finish(run, out, history, stopped)


def _title(run: _Run) -> str:
    model, config = run.model, run.config
    return (
        f"training {model.family} for {model.spec.robot}: {config.steps} steps x "
        f"{config.batch_size} rows on {model.target_mean.device} ({run.stepper.precision}"
        f"{', compiled' if config.compile else ''}"
        f"{f', {distributed.world()[1]} processes' if distributed.world()[1] > 1 else ''})"
    )


def _loop(run, val, robot, out, history, callback, ctrl_c) -> bool:
    """Steps until ``config.steps`` or early stopping; True where patience ran out (now or
    in the run resumed, which then steps no more)."""
    config = run.config
    shown = config.progress and distributed.is_main()
    progress = Progress(config.steps, run.step, config.batch_size, shown, _title(run))
    t0, elapsed0 = time.perf_counter(), run.elapsed
    try:
        while run.step < config.steps and not run.stopped_early:
            if distributed.any_rank(ctrl_c.requested):  # every rank stops at the same step
                _stop_for_ctrl_c(run, out)
            q, target = run.rows.next()
            run.loss_sum += run.stepper.step(q, target)
            run.scheduler.step()
            run.step += 1
            if run.ema is not None:
                run.ema.update(run.model, run.step)
            run.elapsed = elapsed0 + time.perf_counter() - t0
            progress.advance(run.step)
            _after_step(run, val, robot, out, history, callback, progress)
        return run.stopped_early
    finally:
        progress.close()


def _stop_for_ctrl_c(run: _Run, out: Path | None) -> None:
    """Ctrl-C came during the last step: save it (where there is an ``out_dir``) and stop."""
    _check_finite(run)
    path = _save_checkpoint(run, out) if out is not None else None
    raise TrainingInterrupted(run.step, path)


def _after_step(run, val, robot, out, history, callback, progress) -> None:
    """Validation, log row, checkpoint and callback due after a step; sets
    ``run.stopped_early`` where patience ran out."""
    config, step = run.config, run.step
    validate_now = val is not None and _due(step, config.val_every, config.steps)
    log_now = validate_now or _due(step, config.log_every, config.steps)
    save_now = out is not None and (_due(step, config.checkpoint_every, config.steps))
    total = _check_finite(run) if log_now or save_now else math.nan
    metrics = _validate(run, val, robot) if validate_now else {}
    if log_now:
        history.append(_row(run, metrics, total))
        _report(progress, history[-1])
        if out is not None and distributed.is_main():
            write_log(out / LOG, history[-1:], append=True)
    stop = config.patience is not None and run.bad_checks >= config.patience
    run.stopped_early = stop
    if out is not None and (save_now or stop):
        _save_checkpoint(run, out)
    if callback is not None and distributed.is_main():
        loss = {"loss": history[-1]["loss"]} if log_now else {}
        callback(step, {**loss, **metrics})


def _row(run: _Run, metrics: dict[str, float], total: float) -> dict[str, float]:
    """The log row of the steps since the last one (``total``: their summed loss, read by
    :func:`_check_finite`)."""
    count = run.step - run.logged
    run.loss_sum.zero_()
    run.logged = run.step
    return {
        "step": float(run.step),
        "loss": total / max(count, 1),
        "lr": _rate_of_last_step(run),
        "val_loss": metrics.get("val_loss", math.nan),
        "val_position_error": metrics.get("val_position_error", math.nan),
        "seconds": run.elapsed,
    }


def _rate_of_last_step(run: _Run) -> float:
    """The learning rate the last step ran at, as LambdaLR computed it before that step (its
    ``get_last_lr`` is the next step's rate, and a device tensor under cuda_graph)."""
    scheduler = run.scheduler
    return float(scheduler.base_lrs[0]) * scheduler.lr_lambdas[0](run.step - 1)


def _finish(run: _Run, out: Path | None, history: list, stopped: bool) -> TrainResult:
    model = run.model
    if run.ema is not None:
        model.load_state_dict(run.ema.averaged_state(model))
    if run.best_state is not None and run.config.restore_best:
        model.load_state_dict(run.best_state)
    if out is not None and run.best_state is not None and distributed.is_main():
        save_checkpoint({**model.checkpoint(), "state_dict": run.best_state}, out / BEST)
    return TrainResult(
        model.eval(), run.step, run.best_val, run.best_step, stopped, run.elapsed, history, out
    )

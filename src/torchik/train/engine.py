"""The optimisation step of :func:`torchik.train.train`, built to keep the hardware busy.

One :class:`Stepper` runs a step without waiting for the device: the loss is accumulated on the
device and read (with its finiteness check) only when a progress row is written. Around the
model's ``loss`` it adds what large runs need: bf16 autocast, ``torch.compile``, TF32 matrix
products, fused AdamW (CUDA and the CPU), micro-batches (gradient accumulation) and an
exponential moving average (:class:`EMA`) of the weights. Every piece is deterministic, so a
run resumed from a checkpoint continues exactly.
"""

from __future__ import annotations

import contextlib
import copy
import math
import signal
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from torchik.checks import check_bool, check_choice, check_device, check_float, check_int
from torchik.ik.fixed import on_side_stream
from torchik.learn.data import FKStream, IKDataset
from torchik.models.checkpoint import content_hash
from torchik.train import distributed

if TYPE_CHECKING:
    from torchik.models.base import IKModel

__all__ = [
    "COMPILE_MODES",
    "EMA",
    "GRAPH_WARMUP",
    "CUDAGraphOf",
    "GraphStep",
    "PRECISIONS",
    "CtrlC",
    "Rows",
    "Stepper",
    "StreamRows",
    "TrainConfig",
    "autocast",
    "batches_kind",
    "check_batch_size",
    "check_training_state",
    "lr_factor",
    "matmul_precision",
    "resolve_precision",
]

PRECISIONS = ("fp32", "bf16", "auto")
"""Values of ``TrainConfig.precision``: ``"auto"`` is bf16 on CUDA for the families that
declare ``bf16_safe`` and fp32 everywhere else."""
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")
"""The modes of ``torch.compile`` that :attr:`TrainConfig.compile_mode` takes."""
GRAPH_WARMUP = 3
"""Eager steps (on a side stream) before :attr:`TrainConfig.cuda_graph` captures the step: the
optimiser's state, the libraries' lazy set-up and ``torch.compile`` done off the capture."""


def resolve_precision(precision: str, device: torch.device, model: nn.Module) -> str:
    """``"fp32"`` or ``"bf16"``: what ``precision`` means for ``model`` on ``device``."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision != "auto":
        return precision
    safe = getattr(model, "bf16_safe", False)
    return "bf16" if device.type == "cuda" and safe else "fp32"


def autocast(
    device: torch.device, precision: str, cache: bool = True
) -> contextlib.AbstractContextManager:
    """bf16 autocast on ``device`` for ``"bf16"``; nothing for ``"fp32"``. ``cache=False``
    inside a CUDA graph capture (as PyTorch's documentation of graphs asks)."""
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16, cache_enabled=cache)
    return contextlib.nullcontext()


# ---------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class TrainConfig:
    """Settings of :func:`train`.

    Attributes:
        steps: optimisation steps.
        batch_size: rows per step (a fixed data set: epochs of shuffled rows, the last partial
            batch of an epoch dropped; a stream: fresh rows every step).
        lr: peak learning rate of AdamW.
        weight_decay: AdamW's decoupled weight decay.
        warmup_steps: linear warm-up from ``lr / warmup_steps`` to ``lr``.
        min_lr_ratio: the cosine decays from ``lr`` to ``lr * min_lr_ratio`` at ``steps``.
        grad_clip: maximal global gradient norm, ``> 0`` (``None``: no clipping).
        log_every: steps between progress reports and CSV rows (loss averaged over them); the
            loss is read from the device (and checked to be finite) only then.
        val_every: steps between validations (``0``: only at the end).
        val_targets: validation rows used (the first ones of ``val_set``).
        patience: stop after this many validations without improvement (``None``: never).
        checkpoint_every: steps between checkpoints (``0``: only at the end).
        seed: seeds torch's global RNG (the models' training noise) and the batch sampler.
        device: where to train (``"cpu"``, ``"cuda"``, ...).
        normalize: call ``model.set_normalization`` on the training data first (a stream:
            on ``stats_rows`` pairs drawn apart from it).
        restore_best: at the end, load the weights of the best validation.
        progress: show progress on stderr (a tqdm bar on a terminal, lines otherwise).
        precision: ``"fp32"``, ``"bf16"`` (autocast: matrix products in bfloat16) or
            ``"auto"`` (bf16 on CUDA for families that declare ``bf16_safe``, else fp32).
        compile: run the model's loss through ``torch.compile`` (pays off on long runs; the
            first steps wait for compilation).
        compile_mode: ``torch.compile``'s mode: ``"default"``, ``"reduce-overhead"`` (CUDA
            graphs of the loss and its backward on CUDA: small models' steps stop waiting on
            launches) or ``"max-autotune"``.
        cuda_graph: on CUDA, capture the whole step (the loss, its backward, the clipping and
            AdamW) in one CUDA graph after :data:`GRAPH_WARMUP` eager steps and replay it:
            one launch per step instead of one per operation. The batch is copied into the
            graph's buffers; the learning rate becomes a device tensor the schedule fills.
            One process only; not with ``compile_mode="reduce-overhead"`` (graphs of its
            own). Where a capture fails (a loss that reads the device from the host), the
            steps stay eager, with a warning. Elsewhere than CUDA: the eager step.
        ema_decay: keep an exponential moving average of the weights with this decay (e.g.
            ``0.999``); validation, ``best.pt`` and the returned model use the average.
        micro_batches: split each batch into this many parts whose gradients add up
            (gradient accumulation: the same step with less memory).
        tf32: allow TF32 matrix products on CUDA during training.
        stats_rows: rows drawn from a stream for the normalisation statistics.
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
    precision: str = "auto"
    compile: bool = False
    compile_mode: str = "default"
    cuda_graph: bool = False
    ema_decay: float | None = None
    micro_batches: int = 1
    tf32: bool = True
    stats_rows: int = 100_000

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "log_every", "val_targets", "micro_batches"):
            check_int(name, getattr(self, name), 1)
        for name in ("warmup_steps", "val_every", "checkpoint_every", "seed", "stats_rows"):
            check_int(name, getattr(self, name), 0)
        for name in ("normalize", "restore_best", "progress", "compile", "tf32", "cuda_graph"):
            check_bool(name, getattr(self, name))
        if self.patience is not None:
            check_int("patience", self.patience, 1)
        check_float("lr", self.lr, positive=True)
        check_float("weight_decay", self.weight_decay, 0.0)
        check_float("min_lr_ratio", self.min_lr_ratio, 0.0, 1.0)
        if self.grad_clip is not None:
            check_float("grad_clip", self.grad_clip, positive=True)
        if self.ema_decay is not None:
            check_float("ema_decay", self.ema_decay, 0.0, 1.0, positive=True)
            if self.ema_decay == 1.0:
                raise ValueError("ema_decay must be < 1 (1 would never move the average)")
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("compile_mode", self.compile_mode, COMPILE_MODES)
        check_device("device", self.device)
        if self.cuda_graph and self.compile and self.compile_mode == "reduce-overhead":
            raise ValueError("cuda_graph captures the whole step: use compile_mode='default' "
                             "with it ('reduce-overhead' captures graphs of its own)")  # fmt: skip
        if self.micro_batches > self.batch_size:
            raise ValueError(
                f"micro_batches={self.micro_batches} exceeds batch_size={self.batch_size}"
            )


def check_training_state(state: dict[str, Any]) -> None:
    """The counters and optimiser settings of a training checkpoint's state, checked as new
    settings are (:class:`TrainConfig`): a file altered to resume at step -5, with a negative
    learning rate or a NaN best is refused.

    Args:
        state: the ``"training"`` entry of a checkpoint (its keys already checked present).

    Raises:
        TypeError, ValueError: the first bad value, named, in one line.
    """
    step = check_int("step", state["step"], 0)
    check_float("elapsed", state["elapsed"], 0.0)
    if state["best_val"] is not None:
        check_float("best_val", state["best_val"])
    if state["best_step"] is not None:
        check_int("best_step", state["best_step"], 0, step)
    check_int("bad_checks", state["bad_checks"], 0)
    check_bool("stopped_early", state.get("stopped_early", False))
    window = state["window"]
    if not isinstance(window, list | tuple) or len(window) != 2:
        raise ValueError(f"window must be [loss sum, steps], got {type(window).__name__}")
    check_float("the window's loss sum", window[0])
    check_int("the window's steps", window[1], 0, step)
    _check_optimizer_state(state["optimizer"], state["scheduler"])


def _check_optimizer_state(optimizer: Any, scheduler: Any) -> None:
    groups = optimizer.get("param_groups") if isinstance(optimizer, dict) else None
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise ValueError("the optimizer state has no param_groups")
    for group in groups:
        for key in ("lr", "initial_lr", "weight_decay"):
            if key in group:
                check_float(f"the optimizer's {key}", group[key], 0.0)
        check_float("the optimizer's eps", group.get("eps", 1e-8), positive=True)
        for beta in group.get("betas", ()):
            if check_float("the optimizer's betas", beta, 0.0, 1.0) == 1.0:
                raise ValueError("the optimizer's betas must be < 1, got 1.0")
    if not isinstance(scheduler, dict):
        raise ValueError("the scheduler state is not a dict")
    for key in ("base_lrs", "_last_lr"):
        for lr in scheduler.get(key, ()):
            check_float(f"the scheduler's {key.lstrip('_')}", lr, 0.0)
    check_int("the scheduler's last_epoch", scheduler.get("last_epoch", 0), 0)


def lr_factor(step: int, config: TrainConfig) -> float:
    """Multiplier of ``config.lr`` at ``step`` (0-based): linear warm-up, then cosine decay."""
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    span = max(1, config.steps - config.warmup_steps)
    progress = min(1.0, (step - config.warmup_steps) / span)
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    return config.min_lr_ratio + (1.0 - config.min_lr_ratio) * cosine


# ---------------------------------------------------------------------------- EMA
class EMA:
    """Exponential moving average of a model's floating-point parameters and buffers.

    After optimisation step ``t`` (1-based), every averaged tensor ``a`` of the model's tensor
    ``w`` becomes ``a + (1 - d_t) (w - a)`` with ``d_t = min(decay, (1 + t) / (10 + t))``: the
    warm-up keeps early averages from remembering the random initialisation. Updates are one
    fused ``lerp`` per tensor list on the device, with no host synchronisation.

    Args:
        model: the model whose weights are averaged (its current weights start the average).
        decay: the long-run decay ``0 < decay < 1`` (e.g. 0.999: about 1000 steps of memory).
    """

    def __init__(self, model: nn.Module, decay: float):
        if not 0.0 < decay < 1.0:
            raise ValueError(f"ema_decay must be in (0, 1), got {decay}")
        self.decay = float(decay)
        self.names = [k for k, v in model.state_dict().items() if v.is_floating_point()]
        state = model.state_dict()
        self.shadow = [state[k].detach().clone() for k in self.names]

    def reset(self, model: nn.Module) -> None:
        """Restart the average at the model's current weights."""
        with torch.no_grad():
            torch._foreach_copy_(self.shadow, self._live(model))

    def _live(self, model: nn.Module) -> list[Tensor]:
        state = model.state_dict()
        return [state[k] for k in self.names]

    def decay_at(self, step: int) -> float:
        """The decay ``d_t`` used by the update after step ``step``."""
        return min(self.decay, (1.0 + step) / (10.0 + step))

    @torch.no_grad()
    def update(self, model: nn.Module, step: int) -> None:
        """Fold the model's current weights (after step ``step``) into the average."""
        torch._foreach_lerp_(self.shadow, self._live(model), 1.0 - self.decay_at(step))

    @contextlib.contextmanager
    def applied(self, model: nn.Module) -> Iterator[None]:
        """Within the block the model carries the averaged weights; its own come back after."""
        live = self._live(model)
        saved = [t.detach().clone() for t in live]
        with torch.no_grad():
            torch._foreach_copy_(live, self.shadow)
        try:
            yield
        finally:
            with torch.no_grad():
                torch._foreach_copy_(live, saved)

    def averaged_state(self, model: nn.Module) -> dict[str, Tensor]:
        """The model's ``state_dict`` with the averaged tensors in place (CPU copies)."""
        state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
        state.update(
            {k: v.detach().cpu().clone() for k, v in zip(self.names, self.shadow, strict=True)}
        )
        return state

    def state_dict(self) -> dict[str, Any]:
        return {"decay": self.decay, "shadow": dict(zip(self.names, self.shadow, strict=True))}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        shadow = state["shadow"]
        if sorted(shadow) != sorted(self.names):
            raise ValueError("the saved EMA does not average this model's tensors")
        with torch.no_grad():
            for mine, name in zip(self.shadow, self.names, strict=True):
                mine.copy_(shadow[name])


# ---------------------------------------------------------------------------- batches
class Rows:
    """Shuffled minibatches of a fixed data set, epoch after epoch. The order is drawn on the
    CPU by a private generator and copied to the device once per epoch, not once per step."""

    kind = "a fixed data set (IKDataset)"

    def __init__(self, data: IKDataset, batch_size: int, seed: int, like: Tensor):
        n = len(data)
        self.rank, self.world = distributed.world()
        check_batch_size(batch_size, n, self.world)
        self.q, self.target = data.q.to(like), data.target.to(like)
        self.n, self.batch_size = n, batch_size
        self.generator = torch.Generator().manual_seed(seed)
        self._sha256: str | None = None
        self._new_order(0)

    @property
    def sha256(self) -> str:
        """SHA-256 (hex) of the rows in their order (:func:`~torchik.models.checkpoint.content_hash`
        of ``q`` and ``target``), computed once, at the first checkpoint: checkpoints keep it,
        so that a run resumed on other rows of the same shape is refused."""
        if self._sha256 is None:
            rows = {"q": self.q.contiguous(), "target": self.target.contiguous()}
            self._sha256 = content_hash(rows)  # contiguous: an expanded view hashes too
        return self._sha256

    def _new_order(self, cursor: int) -> None:
        """Draw the epoch's order, keeping the generator's state before it (the checkpoint
        saves that state, a few bytes, rather than the order, 8 bytes per row)."""
        self._drawn_from: Tensor | None = self.generator.get_state()
        self._set_order(torch.randperm(self.n, generator=self.generator), cursor)

    def _set_order(self, order: Tensor, cursor: int) -> None:
        self.order, self.cursor = order, cursor
        self._device_order = order.to(self.q.device)

    def next(self) -> tuple[Tensor, Tensor]:
        if self.cursor + self.batch_size > self.n:
            self._new_order(0)
        self.cursor += self.batch_size
        index = self._device_order[self.cursor - self.batch_size : self.cursor]
        if self.world > 1:  # this rank's rows of the global batch
            index = index[self.rank :: self.world]
        return self.q[index], self.target[index]

    def state_dict(self) -> dict[str, Any]:
        if self._drawn_from is None:  # resumed from a checkpoint that saved the order itself
            return {"generator": self.generator.get_state(), "order": self.order,
                    "cursor": self.cursor, "sha256": self.sha256}  # fmt: skip
        return {"order_drawn_from": self._drawn_from, "cursor": self.cursor, "sha256": self.sha256}

    def other(self, state: Any) -> str | None:
        """Why the batch state ``state`` (:meth:`state_dict`'s) is of other rows than these
        (another data set of the same shape, another split or order of it), both hashes
        named; ``None`` where they are these, or where ``state`` has no hash (written by an
        older torchik: not compared)."""
        saved = state.get("sha256") if isinstance(state, dict) else None
        if saved is None or saved == self.sha256:
            return None
        return (f"it was trained on other rows (SHA-256 {str(saved)[:12]}), this data set's "
                f"are {self.sha256[:12]}")  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "order" in state:  # checkpoints written before 2026-11-26
            self.generator.set_state(state["generator"])
            self._set_order(state["order"], state["cursor"])
            self._drawn_from = None
            return
        self.generator.set_state(state["order_drawn_from"])
        self._new_order(state["cursor"])


class StreamRows:
    """Minibatches of a :class:`~torchik.learn.FKStream` on the training device, drawn from a
    copy restarted at the stream's seed (as :meth:`FKStream.to` moves one to another device):
    the caller's stream does not move, and the same call trains the same model, on any device."""

    kind = "a stream (FKStream)"

    def __init__(self, stream: FKStream, batch_size: int, like: Tensor):
        world = distributed.world()[1]
        check_batch_size(batch_size, processes=world)
        self.stream = distributed.shard_stream(_restarted(stream, like.device))
        self.batch_size, self.dtype = batch_size // world, like.dtype

    def next(self) -> tuple[Tensor, Tensor]:
        q, target = self.stream.next(self.batch_size)
        return q.to(self.dtype), target.to(self.dtype)

    def state_dict(self) -> dict[str, Any]:
        return {"stream": self.stream.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "stream" not in state:
            raise ValueError("the checkpoint was trained on a fixed data set, not on a stream")
        self.stream.load_state_dict(state["stream"])

    def other(self, state: Any) -> str | None:
        """Why the batch state ``state`` (:meth:`state_dict`'s) is of another stream than this
        one, the setting and both values named; ``None`` where it is of this one (or damaged:
        loading it says so)."""
        saved = state.get("stream") if isinstance(state, dict) else None
        if not isinstance(saved, dict) or (why := self.stream.other(saved)) is None:
            return None
        return f"it was trained on a stream of {why}"


def _restarted(stream: FKStream, device: torch.device) -> FKStream:
    """``stream`` on ``device`` restarted at its seed: :meth:`FKStream.to`'s copy, or where the
    stream is on ``device`` already (``to`` returns it then), the same copy made here."""
    moved = stream.to(device)
    if moved is not stream:
        return moved
    own = copy.copy(stream)
    own.generator, own.drawn = torch.Generator(stream.device).manual_seed(stream.seed), 0
    return own


def batches_kind(state: Any) -> str | None:
    """What a checkpoint's batch state was drawn from.

    Args:
        state: the ``"batches"`` entry of a training state (every rank's under DDP).

    Returns:
        :attr:`Rows.kind` or :attr:`StreamRows.kind`; ``None`` for neither (a damaged state).
    """
    first = distributed.first_rank(state)
    if not isinstance(first, dict):
        return None
    if "stream" in first:
        return StreamRows.kind
    return Rows.kind if "order_drawn_from" in first or "order" in first else None


def check_batch_size(batch_size: int, rows: int | None = None, processes: int = 1) -> None:
    """Refuse a batch that a training set of ``rows`` cannot fill (``None``: a stream, which
    fills any) or that ``processes`` cannot share: what :func:`~torchik.train.train` refuses,
    for the callers that check it before their work (the command line, a study).

    Raises:
        ValueError: in one line.
    """
    if rows is not None and rows < batch_size:
        raise ValueError(f"the training set has {rows} rows, fewer than batch_size={batch_size}")
    if batch_size % processes:
        raise ValueError(f"batch_size={batch_size} must be a multiple of the {processes} processes")


# ---------------------------------------------------------------------------- the step
def _optimizer(model: nn.Module, config: TrainConfig, device: torch.device):
    """AdamW: fused kernels on CUDA (one launch for every parameter; capturable with
    ``cuda_graph``) and on the CPU (a step over 96 M parameters took 0.10 s fused against
    0.40 s in torch's default, multi-tensor, implementation, on a 2-core Xeon), the default
    elsewhere."""
    kwargs: dict[str, Any] = {"fused": True} if device.type in ("cuda", "cpu") else {}
    if device.type == "cuda":
        kwargs["capturable"] = config.cuda_graph
    return torch.optim.AdamW(
        model.parameters(), lr=config.lr, weight_decay=config.weight_decay, **kwargs
    )


class Stepper:
    """One optimisation step of ``model.loss``, as :class:`~torchik.train.TrainConfig` says.

    Attributes:
        optimizer: AdamW (fused on CUDA).
        ema: the :class:`EMA`, or ``None``.
        precision: ``"fp32"`` or ``"bf16"`` (``config.precision`` resolved for the device).
        graph: the captured step (:attr:`TrainConfig.cuda_graph` on CUDA), or ``None``.
    """

    def __init__(self, model: IKModel, config: TrainConfig, device: torch.device):
        self.model, self.config, self.device = model, config, device
        self.optimizer = _optimizer(model, config, device)
        self.precision = resolve_precision(config.precision, device, model)
        self.ema = EMA(model, config.ema_decay) if config.ema_decay is not None else None
        self._ddp = distributed.wrap_loss(model, device)  # None in one process
        self._loss: Callable[[Tensor, Tensor], Tensor] = self._ddp or model.loss
        if config.compile:
            self._loss = torch.compile(self._loss, dynamic=False, mode=config.compile_mode)
        self.graph = GraphStep(self) if config.cuda_graph and _captures(device) else None
        if self.graph is not None and self._ddp is not None:
            raise ValueError("cuda_graph trains in one process: run several without it")

    def _micro(self, q: Tensor, target: Tensor) -> Iterator[tuple[Tensor, Tensor]]:
        k = self.config.micro_batches
        return zip(q.chunk(k), target.chunk(k), strict=True) if k > 1 else iter([(q, target)])

    def step(self, q: Tensor, target: Tensor) -> Tensor:
        """Gradients of the loss on the batch ``q (B, D)``, ``target (B, T)``, then an AdamW
        step; returns the batch loss as a detached 0-d tensor on the device (no host sync).
        Replayed from :attr:`graph` where there is one."""
        if self.graph is not None:
            return self.graph.step(q, target)
        return self.eager_step(q, target)

    def eager_step(self, q: Tensor, target: Tensor) -> Tensor:
        """:meth:`step` launching every operation (what :class:`GraphStep` captures)."""
        self.optimizer.zero_grad(set_to_none=True)
        k, total = self.config.micro_batches, None
        cache = not (self.device.type == "cuda" and torch.cuda.is_current_stream_capturing())
        for i, (q_part, target_part) in enumerate(self._micro(q, target)):
            cast = autocast(self.device, self.precision, cache)
            with distributed.no_sync(self._ddp, i == k - 1), cast:
                loss = self._loss(q_part, target_part).float()
            (loss / k if k > 1 else loss).backward()
            total = loss.detach() if total is None else total + loss.detach()
        if self.config.grad_clip is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.optimizer.step()
        assert total is not None
        return total / k if k > 1 else total

    def portable_state(self, scheduler: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """The optimiser's and ``scheduler``'s ``state_dict`` with every learning rate a float
        (a captured step keeps them as device tensors): a checkpoint resumes with or without
        :attr:`TrainConfig.cuda_graph`."""
        optimizer, schedule = self.optimizer.state_dict(), scheduler.state_dict()
        optimizer["param_groups"] = [
            {k: float(v) if k in _LRS and isinstance(v, Tensor) else v for k, v in group.items()}
            for group in optimizer["param_groups"]
        ]
        for key in ("base_lrs", "_last_lr"):
            if key in schedule:
                schedule[key] = [float(v) for v in schedule[key]]
        return optimizer, schedule


def _captures(device: torch.device) -> bool:
    """Whether :attr:`TrainConfig.cuda_graph` captures the step on ``device``: CUDA."""
    return device.type == "cuda"


_LRS = ("lr", "initial_lr")
"""The learning rates of an optimiser's parameter group."""


class CUDAGraphOf:
    """One CUDA graph of a callable: :meth:`capture` records it (``out``: what it returned,
    tensors every replay rewrites), :meth:`replay` runs it again. :class:`GraphStep` makes its
    graphs with :attr:`GraphStep.graph_type` (a test stands in one that calls again)."""

    def __init__(self) -> None:
        self.graph, self.out = torch.cuda.CUDAGraph(), None

    def capture(self, fn: Callable[[], Any]) -> None:
        with torch.cuda.graph(self.graph):
            self.out = fn()

    def replay(self) -> None:
        self.graph.replay()


class GraphStep:
    """A :class:`Stepper`'s step captured whole in one CUDA graph (:attr:`TrainConfig.cuda_graph`):
    :data:`GRAPH_WARMUP` eager steps on a side stream (what a capture wants first), then the
    capture on copies of the batch, then per step a copy of the batch into them and a replay.
    Every step updates the weights: the capture itself runs nothing, so the step that captures
    replays too. A batch of another shape takes the eager step.

    Before the capture each parameter group's learning rate becomes a 0-d device tensor, which
    the schedule fills in place (a float would be baked into the graph). Where the capture
    fails, every later step is eager, with a warning."""

    graph_type: Callable[[], Any] = CUDAGraphOf

    def __init__(self, stepper: Stepper):
        self.stepper, self.warm, self.failed = stepper, 0, False
        self.graph: Any = None
        self.inputs: tuple[Tensor, Tensor] | None = None
        self.rates: list[Tensor] = []  # the learning rates the graph reads

    def forget(self) -> None:
        """Drop the graph (the optimiser's state was replaced): warm up and capture again."""
        self.graph, self.inputs, self.warm = None, None, 0

    def step(self, q: Tensor, target: Tensor) -> Tensor:
        stepper = self.stepper
        if self.failed:
            return stepper.eager_step(q, target)
        if self.graph is None and self.warm < GRAPH_WARMUP:
            self.warm += 1
            return _on_side_stream(stepper.device, lambda: stepper.eager_step(q, target))
        if self.graph is None and not self._capture(q, target):
            return stepper.eager_step(q, target)
        assert self.inputs is not None
        if (q.shape, target.shape) != tuple(x.shape for x in self.inputs):
            return stepper.eager_step(q, target)
        for buffer, x in zip(self.inputs, (q, target), strict=True):
            buffer.copy_(x)
        self._keep_rates()
        self.graph.replay()
        return self.graph.out.clone()  # out of the graph's memory, which the next overwrites

    def _keep_rates(self) -> None:
        """Each group's rate in the tensor the graph reads: a schedule that assigns a float
        (instead of filling the tensor, as torch's schedulers do) is copied into it."""
        for group, rate in zip(self.stepper.optimizer.param_groups, self.rates, strict=True):
            if group["lr"] is not rate:
                rate.fill_(float(group["lr"]))
                group["lr"] = rate

    def _capture(self, q: Tensor, target: Tensor) -> bool:
        stepper, inputs = self.stepper, (q.clone(), target.clone())
        for group in stepper.optimizer.param_groups:  # (a resumed state may have reset them)
            group["capturable"] = stepper.device.type == "cuda"
            if not isinstance(group["lr"], Tensor):
                group["lr"] = torch.tensor(float(group["lr"]), device=stepper.device)
        self.rates = [group["lr"] for group in stepper.optimizer.param_groups]
        graph = self.graph_type()
        try:
            graph.capture(lambda: stepper.eager_step(*inputs))
        except RuntimeError as err:  # an operation that cannot be captured
            if stepper.device.type == "cuda":
                torch.cuda.synchronize(stepper.device)
            warnings.warn(f"training steps stay eager: CUDA graph capture failed ({err})",
                          RuntimeWarning, stacklevel=4)  # fmt: skip
            self.failed = True
            return False
        self.graph, self.inputs = graph, inputs
        return True


def _on_side_stream(device: torch.device, run: Callable[[], Tensor]) -> Tensor:
    """``run()`` on a side stream of a CUDA ``device`` (:func:`torchik.ik.fixed.on_side_stream`),
    elsewhere as it is (a stand-in graph's test on the CPU)."""
    if device.type != "cuda":
        return run()
    with torch.cuda.device(device):
        return on_side_stream(run)


@contextlib.contextmanager
def matmul_precision(device: torch.device, tf32: bool) -> Iterator[None]:
    """TF32 matrix products on CUDA within the block (``tf32``); the global setting comes back
    after, so training leaves no trace in the caller's process."""
    if device.type != "cuda" or not tf32:
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


class CtrlC:
    """While active, the first Ctrl-C (SIGINT) or SIGTERM (``timeout``, a batch scheduler's
    warning) only asks the loop to stop after its current step, so a checkpoint can be
    written; a second one stops at once. Only in the main thread; the caller's handlers come
    back on exit."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, active: bool):
        self.active = active and threading.current_thread() is threading.main_thread()
        self.requested = False
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self) -> CtrlC:
        if self.active:
            self._old = {sig: signal.signal(sig, self._handle) for sig in self.SIGNALS}
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old = {}

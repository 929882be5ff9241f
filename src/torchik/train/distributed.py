"""Training on several processes with :mod:`torch.distributed` (DDP): gloo on the CPU, NCCL on
CUDA, started by ``torchrun`` or by ``torchik train --nproc N``.

Every rank holds the same model (DDP broadcasts it at the start and averages the gradients every
step, so the weights stay equal, bit for bit) and draws its own shard of the rows: of a fixed
data set, rank ``r`` of ``W`` takes rows ``r, r + W, ...`` of each global batch of
``batch_size`` rows, so the run sees exactly the batches of one process; of a stream, each rank
draws ``batch_size / W`` fresh pairs from a generator of its own. Validation and early stopping
run on every rank (same weights, same answer, no messages); rank 0 alone writes logs,
checkpoints and progress. A checkpoint holds every rank's stream position and random state, so
a resumed run continues exactly, with the same number of processes.

Outside a process group every function here is the one-process case: ``world() == (0, 1)``.

Example:
    >>> world()
    (0, 1)
    >>> gather({"a": 1}) == {"a": 1} and pick({"a": 1}) == {"a": 1}
    True
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

if TYPE_CHECKING:
    from torchik.models.base import IKModel

__all__ = [
    "any_rank",
    "broadcast",
    "first_rank",
    "gather",
    "group_from_env",
    "init_from_env",
    "is_main",
    "launched",
    "mean",
    "no_sync",
    "other_world",
    "pick",
    "shard_stream",
    "shutdown",
    "world",
    "wrap_loss",
]

_FLAGS: dict[str, Any] = {}
"""The CPU (gloo) group for stop flags when the default group is NCCL; set by init."""


def world() -> tuple[int, int]:
    """``(rank, world size)`` of this process; ``(0, 1)`` outside a process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def is_main() -> bool:
    """Whether this process writes files and shows progress (rank 0)."""
    return world()[0] == 0


def launched() -> bool:
    """Whether ``torchrun`` started this process (its environment names a world size)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def init_from_env(device: str) -> str:
    """Join the process group ``torchrun`` describes in the environment.

    Args:
        device: the requested device: ``"cpu"`` (gloo) or ``"cuda"`` (NCCL, one GPU per local
            rank).

    Returns:
        This rank's device (``"cuda:LOCAL_RANK"`` for CUDA).
    """
    if dist.is_initialized():
        return device
    cuda = device.startswith("cuda")
    if cuda:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    dist.init_process_group("nccl" if cuda else "gloo")
    if cuda:
        _FLAGS["group"] = dist.new_group(backend="gloo")
    return device


def shutdown() -> None:
    """Leave the process group (if any)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    _FLAGS.clear()


def shard_stream(stream: Any) -> Any:
    """This rank's shard of an :class:`~torchik.learn.FKStream`: the same stream with a generator
    of its own (rank 0 keeps the stream's; the others draw from seeds apart from it)."""
    rank, size = world()
    if size == 1 or rank == 0:
        return stream
    shard = copy.copy(stream)
    shard.generator = torch.Generator(stream.device).manual_seed(stream.seed + 7919 * rank)
    shard.drawn = 0
    return shard


class _Loss(nn.Module):
    """``model.loss`` as a module's forward, for :class:`DistributedDataParallel`."""

    def __init__(self, model: IKModel):
        super().__init__()
        self.model = model

    def forward(self, q: Tensor, target: Tensor) -> Tensor:
        return self.model.loss(q, target)


def wrap_loss(model: IKModel, device: torch.device) -> nn.Module | None:
    """The model's loss under DDP (gradients averaged over the ranks), or ``None`` in one
    process. DDP broadcasts rank 0's parameters and buffers at the start."""
    if world()[1] == 1:
        return None
    ids = [device.index] if device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(_Loss(model), device_ids=ids)


def no_sync(loss: Callable | None, last: bool) -> contextlib.AbstractContextManager:
    """Skip the gradient averaging of a micro-batch that is not the ``last`` of its step."""
    if last or loss is None or not hasattr(loss, "no_sync"):
        return contextlib.nullcontext()
    return loss.no_sync()


def mean(value: Tensor) -> Tensor:
    """The mean of ``value`` over the ranks (a copy; ``value`` itself in one process)."""
    if world()[1] == 1:
        return value
    total = value.detach().clone()
    dist.all_reduce(total)
    return total / world()[1]


def any_rank(flag: bool) -> bool:
    """Whether ``flag`` is set on any rank (e.g. Ctrl-C), so that every rank stops together."""
    if world()[1] == 1:
        return flag
    value = torch.tensor([int(flag)])
    dist.all_reduce(value, op=dist.ReduceOp.MAX, group=_FLAGS.get("group"))
    return bool(value.item())


def broadcast(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank (``obj`` itself in one process)."""
    if world()[1] == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0, group=_FLAGS.get("group"))
    return box[0]


def gather(obj: Any) -> Any:
    """Every rank's ``obj`` as ``{"ranks": [...]}`` (for a checkpoint); ``obj`` in one process."""
    size = world()[1]
    if size == 1:
        return obj
    out: list[Any] = [None] * size
    dist.all_gather_object(out, obj, group=_FLAGS.get("group"))
    return {"ranks": out}


def first_rank(saved: Any) -> Any:
    """Rank 0's part of what :func:`gather` saved (what one process saved is its own)."""
    ranks = saved.get("ranks") if isinstance(saved, dict) else None
    return ranks[0] if isinstance(ranks, list) and ranks else saved


def other_world(saved: Any) -> str | None:
    """Why what :func:`gather` saved cannot be resumed in this run's processes (it was written
    by another number of them), or ``None``."""
    ranks = saved.get("ranks") if isinstance(saved, dict) else None
    written, size = len(ranks) if isinstance(ranks, list) else 1, world()[1]
    if written == size:
        return None
    return (f"the checkpoint was written by {written} process(es), this run has {size}: "
            f"resume with --nproc {written}")  # fmt: skip


def pick(saved: Any) -> Any:
    """This rank's part of what :func:`gather` saved; a clear error where the checkpoint was
    written by another number of processes."""
    if (why := other_world(saved)) is not None:
        raise ValueError(why)
    ranks = saved.get("ranks") if isinstance(saved, dict) else None
    return ranks[world()[0]] if isinstance(ranks, list) else saved


@contextlib.contextmanager
def group_from_env(device: str) -> Iterator[str]:
    """Within the block, this process is in the ``torchrun`` group (if launched by one)."""
    if not launched():
        yield device
        return
    device = init_from_env(device)
    try:
        yield device
        dist.barrier()  # every rank done before any leaves: gloo aborts on a peer that left
    finally:
        shutdown()

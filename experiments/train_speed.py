"""Training throughput of every learned family (``benchmarks/train_speed.py``): the table.

Samples per second of :func:`torchik.train.train`, one fresh process per case (a family and a
mode: ``before`` = an earlier torchik revision, or today's engine with options joined by ``+``:
``eager``, ``compile``, ``graphs``, ``capture``, ``bf16``, ``stream``). The measurement itself
lives in the script (the ``before`` process runs an older torchik that has no such module); this
module holds the table, its intro and the modes and families.

Example:
    >>> table = speed_table("cpu", 1, 512)
    >>> row = table.add("eager", family="mlp", samples_per_s=1e5, samples_per_cpu_s=1e5, step_ms=5)
    >>> "| eager | mlp |" in table.markdown()
    True
"""

from __future__ import annotations

from typing import Any

from experiments.table import Column, Table

__all__ = [
    "FAMILIES",
    "FLOP_ROWS",
    "OPTIONS",
    "matmul_flops",
    "speed_intro",
    "speed_key",
    "speed_table",
]

OPTIONS = ("eager", "compile", "graphs", "capture", "bf16", "stream")
"""A mode is ``before`` (the ``--baseline`` revision) or today's engine with options joined by
``+``, e.g. ``compile+bf16`` (``eager``: none; ``graphs``: ``torch.compile`` with
``mode="reduce-overhead"``, CUDA graphs of the loss and its backward; ``capture``:
``cuda_graph=True``, the whole step in one CUDA graph)."""
FAMILIES = ("iknet", "flow", "fm", "mlp", "mdn", "rnn", "cvae", "inn")


FLOP_ROWS = 64
"""Rows of the batch :func:`matmul_flops` counts (the count is per sample: a step's matrix
products grow with the batch, AdamW's work does not and is not counted)."""


def matmul_flops(model: Any, q: Any, target: Any) -> float:
    """Floating-point operations per sample of one training step's matrix products: the loss of
    ``q (B, D)`` given ``target (B, T)`` and its backward, counted by
    :class:`torch.utils.flop_counter.FlopCounterMode` (products, batched products,
    convolutions; elementwise work is not counted), divided by ``B``. The gradients are
    cleared after. With the step's time it says how far a step is from the device's
    arithmetic peak (compute-bound) or not (launch- or memory-bound).

    Example:
        >>> import torch
        >>> layer = torch.nn.Linear(3, 2)
        >>> class Model(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.layer = layer
        ...     def loss(self, q, target):
        ...         return (self.layer(target) - q).square().mean()
        >>> matmul_flops(Model(), torch.zeros(4, 2), torch.zeros(4, 3))  # forward, weight grad
        24.0
    """
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        model.loss(q, target).backward()
    for p in model.parameters():
        p.grad = None
    return counter.get_total_flops() / q.shape[0]


def speed_table(device: str, threads: int, batch: int) -> Table:
    """The empty throughput table (rows: mode, with ``family`` and the rates)."""
    return Table(
        f"Training throughput, {device}, {threads} threads, batch {batch}",
        [
            Column("family", "family"),
            Column("parameters", "parameters", lambda x: f"{x:,}"),
            Column("samples_per_s", "samples/s (wall)", lambda x: f"{x:,.0f}"),
            Column("samples_per_cpu_s", "samples per CPU-s", lambda x: f"{x:,.0f}"),
            Column("step_ms", "ms/step", lambda x: f"{x:.2f}"),
            Column("mflop_per_sample", "MFLOP/sample (products)", lambda x: f"{x:,.1f}"),
            Column("tflops", "TFLOP/s (products)", lambda x: f"{x:.3g}"),
            Column("speedup", "× before", lambda x: f"{x:.2f}"),
            Column("warmup_s", "warm-up s", lambda x: f"{x:.1f}"),
        ],
    )


def speed_key(device: str, threads: int) -> str:
    """What the speed-up compares: CPU seconds on a CPU with one thread (other jobs on a shared
    machine stretch the wall clock but hardly the CPU time a step needs), else wall seconds."""
    return "samples_per_cpu_s" if device == "cpu" and threads == 1 else "samples_per_s"


def speed_intro(repeats: int, steps: int, warmup: int, baseline: str) -> list[str]:
    """The results' intro: how the rates are measured and what the modes are."""
    return [
        f"Samples per second of `torchik.train.train`: the best of {repeats} runs (the "
        f"modes in turn) of {steps} timed steps after {warmup} untimed ones "
        "(compilation happens there: its seconds are the warm-up column), one fresh process "
        "per case. Panda; the flow on full poses, the other families on positions; 20 000 "
        "fixed pairs, or an `FKStream` (pairs made by FK on the device each step) for `stream`.",
        f"`before` is torchik at git `{baseline}` (the loop that read the loss every step, "
        "and IKNet's per-layer slicing of its generated weights) run by the same script; "
        "`eager` today's engine; `compile` with `compile=True`; `graphs` with "
        "`compile_mode='reduce-overhead'` (CUDA graphs of the loss and its backward); "
        "`capture` with `cuda_graph=True` (the whole step, AdamW included, in one CUDA "
        "graph); `bf16` under autocast. The "
        "warm-up of the compiled modes depends on inductor's on-disk cache: minutes when cold "
        "(the first compilation of the IKNet took 3 to 5 minutes here), seconds when warm.",
        "The machine is shared: the load averages in the stamp say how busy it was. With one "
        "CPU thread the `× before` column compares samples per CPU-second (the process's CPU "
        "time over the timed steps), which other jobs hardly change; otherwise wall time.",
    ]

"""Timing through :mod:`torch.utils.benchmark`: warm-up, CUDA synchronisation, adaptive repeats.

The one timing helper of the library and of ``benchmarks/``: every runtime in a table comes from
:func:`time_call`.

Example:
    >>> import torch
    >>> t = time_call(lambda: torch.ones(8).sum(), min_run_time=0.01)
    >>> t.median > 0 and t.runs >= 1
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils import benchmark

__all__ = ["Timing", "time_call", "time_cuda"]


@dataclass(frozen=True)
class Timing:
    """Seconds per call of a timed function.

    Attributes:
        median: Median seconds per call over the measured blocks.
        iqr: Interquartile range of the per-call seconds (a spread, 0 for one block).
        runs: Number of measured blocks (each of ``calls_per_run`` calls).
        calls_per_run: Calls per measured block, chosen adaptively.
        threads: Intra-op threads the calls ran with.
    """

    median: float
    iqr: float
    runs: int
    calls_per_run: int
    threads: int


def time_call(
    fn: Callable[[], object],
    *,
    min_run_time: float = 0.2,
    threads: int | None = None,
    label: str = "",
    min_runs: int = 1,
) -> Timing:
    """Seconds per call of ``fn()``, by ``torch.utils.benchmark.Timer.blocked_autorange``.

    The timer warms up, synchronises CUDA around each block when CUDA is in use, and repeats
    blocks until ``min_run_time`` seconds are measured.

    Args:
        fn: The call to time, with no arguments (close over its inputs).
        min_run_time: Seconds of measurement at least (warm-up not counted).
        threads: Intra-op threads for the calls (default: ``torch.get_num_threads()``; note that
            :class:`torch.utils.benchmark.Timer` itself would default to 1).
        label: A name for the measurement (shown in reprs of the timer's result only).
        min_runs: Measured blocks at least: a call slower than ``min_run_time`` gives one
            block, so more are timed (``shared/BENCHMARKS.md`` asks a median of >= 7).

    Returns:
        The :class:`Timing` of one call.
    """
    if not callable(fn):
        raise TypeError(f"time_call needs a callable, got {type(fn).__name__}")
    if not min_run_time > 0:
        raise ValueError(f"min_run_time must be > 0 seconds, got {min_run_time}")
    threads = torch.get_num_threads() if threads is None else int(threads)
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if min_runs < 1:
        raise ValueError(f"min_runs must be >= 1, got {min_runs}")
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads, label=label)
    m = timer.blocked_autorange(min_run_time=min_run_time)
    times = list(m.times)
    while len(times) < min_runs:  # blocks of the same length, as blocked_autorange's
        times += timer.timeit(m.number_per_run).times
    quartiles = torch.tensor(times, dtype=torch.float64).quantile(
        torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)
    )  # as torch.utils.benchmark.Measurement computes its median and IQR
    return Timing(
        median=float(quartiles[1]),
        iqr=float(quartiles[2] - quartiles[0]),
        runs=len(times),
        calls_per_run=int(m.number_per_run),
        threads=threads,
    )


def time_cuda(fn: Callable[[], object], *, min_run_time: float = 0.2, label: str = "") -> Timing:
    """Seconds per call of ``fn()`` on the current CUDA device, by CUDA events.

    Three warm-up calls (compilation, graph capture, allocator), then blocks of calls between a
    pair of :class:`torch.cuda.Event` until ``min_run_time`` seconds are measured; the block
    length doubles until a block takes at least 1 ms, so that the events' resolution does not
    matter. The host never waits inside a block.

    Args:
        fn: The call to time (close over its inputs); its work must be queued on the current
            stream.
        min_run_time: Seconds of measured blocks at least.
        label: Unused (the same signature as :func:`time_call`).

    Returns:
        The :class:`Timing` of one call (``threads`` is torch's intra-op setting).
    """
    if not torch.cuda.is_available():
        raise RuntimeError("time_cuda needs a CUDA device; time_call times on the CPU")
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    number, times = 1, []
    while sum(t * number for t in times) < min_run_time:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1e3
        if seconds < 1e-3 and not times:
            number *= 2
            continue
        times.append(seconds / number)
    times.sort()
    quartile = len(times) // 4
    return Timing(
        median=times[len(times) // 2],
        iqr=times[-1 - quartile] - times[quartile],
        runs=len(times),
        calls_per_run=number,
        threads=torch.get_num_threads(),
    )

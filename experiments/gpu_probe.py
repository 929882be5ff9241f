"""What the fused kernels and the IK loop cost on a GPU, for choosing what to speed up (issue 34;
``benchmarks/gpu_probe.py`` runs it on a GPU machine).

1. :func:`kernel_rows`: each fused kernel (FK of one link, of every link, FK backward,
   Jacobian, the LM step) on the Panda at 4 M configurations, float32, for several launch
   shapes (rows per program, warps) and store styles (:data:`torchik.kinematics.fused.STORES`:
   tiles, scalar stores, the Jacobian in one tile, tiles reshaped to rows): registers and
   shared memory as the compiler reports them, median time by CUDA events
   (``triton.testing.do_bench``).
2. :func:`profile_rows`: one IK solve (1 and 1 000 Panda poses per loop; whole-body G1) under
   ``torch.profiler``: kernels and graph launches, their summed GPU time against the wall time.
3. :func:`host_profile`: where the host spends a solve (``cProfile``), and each synchronising
   CUDA call's Python line; ``solve_ik`` or whole-body IK (on a CUDA robot, mostly the CPU's
   compiled code: :mod:`torchik.ik.host`).

Without a GPU the same code runs at tiny sizes in Triton's interpreter (the robot's backend
``"fused"``, ``TRITON_INTERPRET=1`` set before Triton is imported).

Example:
    >>> from torchik import load_robot
    >>> robot = load_robot("snake2")
    >>> [row["case"] for row in profile_rows(robot, None, "ee", [2], cuda=False)][:2]
    ['IK graphs', 'IK graphs, fused step']
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from experiments.table import Column, Table

__all__ = ["SHAPES", "VARIANTS", "host_profile", "kernel_rows", "kernel_table", "profile_rows",
           "solve_table", "unchecked_rows", "variant_rows", "varying_rows"]  # fmt: skip

SHAPES = [(128, 4), (64, 2), (256, 4), (32, 1)]
"""(rows per program, warps) tried per kernel: (128, 4) is today's."""


def _kernels(robot, link: str, n: int):
    """The fused calls timed: name -> a function of no arguments that returns the kernel's
    outputs (a tensor or a tuple of them)."""
    from torchik.kinematics import fused

    tree, index = robot.tree, robot.link_index(link)
    g = torch.Generator().manual_seed(0)  # the same inputs for every variant
    q = robot.random_configuration(n, g).to(robot.device)
    grad = torch.randn(n, 1, 4, 4, generator=g, dtype=q.dtype).to(q.device)
    lo, hi = robot.lower.to(q), robot.upper.to(q)
    target = robot.forward_kinematics(robot.random_configuration(n, g).to(q.device), link)
    w = torch.tensor([1.0, 1, 1, 0.3, 0.3, 0.3], device=q.device)
    err = q.new_empty(n, 6)
    every = tuple(range(len(robot.link_names)))

    def backward():
        out = torch.empty_like(q)
        fused._launch("backward", tree, (index,), q, grad, out, *grad.stride())
        return out

    return {
        "fk pose": lambda: fused.forward_kinematics(q, tree, (index,)),
        "fk all links": lambda: fused.forward_kinematics(q, tree, every),
        "fk backward": backward,
        "jacobian": lambda: fused.jacobian(q, tree, index),
        "lm step": lambda: fused.lm_step(q, tree, index, target[:, :3, 3], target[:, :3, :3], w,
                                         0.1, lo, hi, residual=err),
    }  # fmt: skip


def kernel_rows(robot, link: str, n: int, cuda: bool) -> list[dict]:
    """Each fused kernel of ``link`` on ``n`` configurations, for each launch shape of
    :data:`SHAPES` with tile stores, the first two with scalar stores, the first with the
    Jacobian in one tile and with tiles reshaped to rows (``fused.STORES``; without CUDA, in
    Triton's interpreter: the first two shapes at most), its outputs checked against those of
    the first row of the kernel (tiles, :data:`SHAPES`' first; the same arithmetic, stored
    another way: 0 expected).

    Returns:
        Rows ``kernel``, ``stores``, ``block``, ``warps``, ``regs``, ``spills``, ``shared``
        (CUDA only), ``ms``, ``G_per_s``, ``max_diff`` (the largest absolute difference from
        the first row's outputs); or ``error``.
    """
    from torchik.kinematics import fused

    rows, first = [], {}
    saved = fused.STORES, fused.BLOCK, fused.WARPS
    try:
        for stores in ("tiles", "scalar", "whole", "rows"):
            fused.STORES = stores
            shapes = SHAPES[: 2 if stores == "scalar" else 1]
            shapes = SHAPES if cuda and stores == "tiles" else shapes
            for block, warps in shapes:
                fused.BLOCK, fused.WARPS = block, warps
                for name, call in _kernels(robot, link, n).items():
                    if stores == "whole" and name != "jacobian":
                        continue  # the same code as "tiles"
                    row = {"kernel": name, "stores": stores, "block": block, "warps": warps}
                    rows.append(row)
                    try:
                        row.update(_report(_compiled(call)))
                        row["ms"] = _median_ms(call, cuda)
                        row["G_per_s"] = n / row["ms"] / 1e6
                        out = _outputs(call())
                        row["max_diff"] = float((out - first.setdefault(name, out)).abs().max())
                    except Exception as error:  # noqa: BLE001 - a row of the table
                        row["error"] = str(error)[:200]
    finally:
        fused.STORES, fused.BLOCK, fused.WARPS = saved
    return rows


def _outputs(out) -> torch.Tensor:
    """A call's outputs, flattened and joined."""
    parts = out if isinstance(out, tuple) else (out,)
    return torch.cat([t.detach().reshape(-1) for t in parts])


def _compiled(call):
    """The compiled kernel of ``call``'s (last) launch."""
    from torchik.kinematics import fused

    launched = []
    run = fused._run

    def spy(*args, **kwargs):
        launched.append(run(*args, **kwargs))
        return launched[-1]

    fused._run = spy
    try:
        call()
    finally:
        fused._run = run
    return launched[-1] if launched else None


def _report(compiled) -> dict:
    if compiled is None or not hasattr(compiled, "n_regs"):
        return {}
    return {"regs": compiled.n_regs, "spills": compiled.n_spills,
            "shared": getattr(compiled.metadata, "shared", None)}  # fmt: skip


def _median_ms(call, cuda: bool) -> float:
    if cuda:
        import triton.testing

        return float(triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median"))
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1e3


PROFILED = {
    "graphs": {"fused_step": False, "fused_loop": False, "one_graph": False},
    "graphs, fused step": {"fused_step": True, "fused_loop": False, "one_graph": False},
    "graphs, fused loop": {"fused_loop": True, "one_graph": False},
    "one graph": {"fused_loop": True, "one_graph": True},
    "one graph, restarts in the kernel": {
        "fused_loop": True,
        "one_graph": True,
        "fused_restarts": True,
    },
    "eager": {"capture": False, "fused_step": False, "fused_loop": False, "one_graph": False},
}
"""The fixed loops of :func:`profile_rows`: captured (each iteration's operations, one kernel
per iteration, a chunk in one kernel, the whole call in one graph) and eager."""


def profile_rows(robot, g1, link: str, sizes: list[int], cuda: bool) -> list[dict]:
    """One solve of ``n`` poses of ``link`` (each of ``sizes``) per fixed-loop variant, and of
    the G1's two hands (``g1``, or ``None``), after two warm-up solves: its wall time, then
    under ``torch.profiler`` its kernels (inside graphs too), their GPU time, graph launches,
    synchronisations and copies.

    Returns:
        Rows ``case``, ``n``, ``wall_ms``, ``kernels``, ``gpu_ms``, ``graph_launches``,
        ``syncs_or_copies``, ``iterations`` (mean), ``top`` (most launched kernels); or
        ``error``.
    """
    from torchik.ik import LevenbergMarquardt, solve_ik, solve_wholebody

    rows = []
    cases = []
    for n in sizes:
        g = torch.Generator().manual_seed(n)
        targets = robot.forward_kinematics(robot.random_configuration(n, generator=g).to(
            robot.device), link)  # fmt: skip
        for name, settings in PROFILED.items():
            solver = LevenbergMarquardt(loop="fixed", **settings)
            cases.append(
                (f"IK {name}", n, lambda t=targets, s=solver: solve_ik(robot, t, link, method=s))
            )
    if g1 is not None:  # the G1's two hands, as many targets as the largest size
        hands, n = ["left_rubber_hand", "right_rubber_hand"], sizes[-1]
        poses = g1.forward_kinematics(g1.random_configuration(n).to(g1.device), hands)
        wb = dict(zip(hands, poses.unbind(1), strict=True))
        cases.append(("whole-body graphs", n, lambda: solve_wholebody(g1, wb, loop="fixed")))
    for what, n, call in cases:
        row = {"case": what, "n": n}
        try:
            row.update(_profiled(call, cuda))
        except Exception as error:  # noqa: BLE001
            row["error"] = str(error)[:200]
        rows.append(row)
    return rows


VARIANTS = {
    "fused loop, rounds of 10, chunks of 11": {"fused_loop": True, "sync_every": 11,
                                               "one_graph": False},
    "one graph, 2 + 8 slots, chunks of 11": {"fused_loop": True, "one_graph": True},
    "one graph, 2 + 2 slots, chunks of 11": {"fused_loop": True, "one_graph": True,
                                             "retry_seeds": 2},
    "one graph, 2 + 8 slots, 40 iterations": {"fused_loop": True, "one_graph": True,
                                              "max_iters": 40},
    "one graph, restarts in the kernel": {"fused_loop": True, "one_graph": True,
                                          "fused_restarts": True},
    "one graph, restarts in the kernel, chunks of 6": {"fused_loop": True, "one_graph": True,
                                                       "fused_restarts": True, "sync_every": 6},
    "one graph, restarts in the kernel, 40 iterations": {"fused_loop": True, "one_graph": True,
                                                         "fused_restarts": True, "max_iters": 40},
}  # fmt: skip
"""Settings of the fixed loop (``LevenbergMarquardt(loop="fixed", ...)``) timed by
:func:`variant_rows`: the rounds' default (the settings of earlier runs that lost are in git
history and ``benchmarks/results/gpu_probe.md`` of 2026-11-28), the one-graph program with
fewer slots or iterations, and with the restarts in the loop kernel (``fused_restarts``)."""


def variant_rows(robot, link: str, sizes: list[int], seconds: float) -> list[dict[str, Any]]:
    """Full-pose IK of ``n`` poses (each of ``sizes``) by each of :data:`VARIANTS`, timed and
    scored as ``benchmarks/gpu.py``'s IK rows (:func:`experiments.gpu.ik_rows`)."""
    from experiments.gpu import ik_rows
    from experiments.numerical import WARM_START_RAD
    from torchik.ik import captured

    rows = ik_rows(robot, link, sizes, seconds, loops={
        name: {"loop": "fixed", **settings} for name, settings in VARIANTS.items()
    })  # fmt: skip
    saved, captured.MAX_ROWS = captured.MAX_ROWS, ROWS_BEYOND
    try:  # larger calls in one graph: what a higher MAX_ROWS would give
        loops = {f"one graph, MAX_ROWS {ROWS_BEYOND}": {"loop": "fixed", "one_graph": True}}
        rows += ik_rows(robot, link, [n for n in sizes if n * 10 > saved], seconds, loops)
    finally:
        captured.MAX_ROWS = saved
    cuda = robot.device.type == "cuda"
    small = [n for n in sizes if n <= 1000]
    rows += unchecked_rows(robot, link, small, seconds)
    rows += ik_rows(robot, link, small, seconds, WARM_LOOPS, warm=WARM_START_RAD)  # as ik.py
    return rows + varying_rows(robot, link, *((1000, 64) if cuda else (8, 4)))


WARM_LOOPS = {
    "warm start, one graph": {"loop": "fixed", "one_graph": True},
    "warm start, rounds": {"loop": "fixed", "one_graph": False},
}
"""The warm starts' settings: one seed per target, no restarts (given seeds in the one-graph
program, or in rounds); the CPU's compiled round took 0.29 ms for one Panda pose."""


def unchecked_rows(robot, link: str, sizes: list[int], seconds: float) -> list[dict[str, Any]]:
    """The one-graph program (with and without the restarts in the kernel) with
    ``solve_ik``'s value check of the targets left out (``check_target(values=False)``): the
    price of its one host read, which makes the host wait for the device at every call, so
    that back-to-back calls cannot overlap one's host work with the last one's kernels."""
    from functools import partial

    from experiments.gpu import ik_rows
    from torchik.ik import inputs
    from torchik.ik import solve as solving

    loops = {
        "one graph, target values unchecked": {"loop": "fixed", "one_graph": True},
        "one graph, restarts in the kernel, target values unchecked": {
            "loop": "fixed", "one_graph": True, "fused_restarts": True},
    }  # fmt: skip
    saved = solving.check_target
    solving.check_target = partial(inputs.check_target, values=False)
    try:
        return ik_rows(robot, link, sizes, seconds, loops)
    finally:
        solving.check_target = saved


def varying_rows(robot, link: str, n: int, counts: int = 64) -> list[dict[str, Any]]:
    """Calls whose target count changes every time (``n - counts + 1`` to ``n`` targets, each
    once, in a shuffled order), with the one-graph program made per bucket of counts
    (:func:`~torchik.ik.fixed.bucket`, the default) and per count: the mean milliseconds
    per call over a second pass (the first warms up), and the share of targets solved. More
    counts than :data:`~torchik.ik.captured.MAX_PROGRAMS` keep a program per count from ever
    replaying."""
    from experiments.gpu import measured
    from torchik.ik import LevenbergMarquardt, captured, solve_ik

    g = torch.Generator().manual_seed(n)
    q = robot.random_configuration(n, generator=g).to(robot.device)
    targets = robot.forward_kinematics(q, link)
    order = (n - counts + 1 + torch.randperm(counts, generator=g)).tolist()
    solver = LevenbergMarquardt(loop="fixed", one_graph=True)

    def timed() -> dict[str, float]:
        captured._Program._cache.clear()
        for m in order:  # the first pass: warm-ups and captures
            solve_ik(robot, targets[:m], link, method=solver)
        _sync(robot)
        start, solved = time.perf_counter(), 0.0
        for m in order:
            solved += float(solve_ik(robot, targets[:m], link, method=solver).success.any(-1).sum())
        _sync(robot)
        ms = (time.perf_counter() - start) * 1e3 / counts
        return {"ms": ms, "success": solved / sum(order)}

    rows = []
    for buckets in (True, False):
        saved, captured.BUCKETS = captured.BUCKETS, buckets
        try:
            path = f"one graph, a new count each call, {'buckets' if buckets else 'own counts'}"
            rows.append(measured("IK full pose", path, n, timed))
        finally:
            captured.BUCKETS = saved
    return rows


def _sync(robot) -> None:
    if robot.device.type == "cuda":
        torch.cuda.synchronize(robot.device)


ROWS_BEYOND = 1 << 20
"""``MAX_ROWS`` of :func:`variant_rows`' last row: the sizes whose 2 + 8 slots per target pass
the default run in one graph too."""


def _profiled(call, cuda: bool) -> dict:
    from torch.profiler import ProfilerActivity, profile

    call()
    call()
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    result = call()
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - start
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        call()
        if cuda:
            torch.cuda.synchronize()
    events = prof.events()
    kernels = [e for e in events if getattr(e, "device_type", None) is not None
               and str(e.device_type).endswith("CUDA")]  # fmt: skip
    names: dict[str, int] = {}
    for e in kernels:
        names[e.name[:60]] = names.get(e.name[:60], 0) + 1
    launches = sum(1 for e in events if "cudaGraphLaunch" in e.name)
    syncs = sum(1 for e in events if "Synchronize" in e.name or "cudaMemcpy" in e.name)
    top = sorted(names.items(), key=lambda kv: -kv[1])[:8]
    gpu_ms = sum(e.device_time_total for e in kernels) / 1e3 if kernels else 0.0
    return {"wall_ms": wall * 1e3, "kernels": len(kernels), "gpu_ms": gpu_ms,
            "graph_launches": launches, "syncs_or_copies": syncs,
            "iterations": int(result.iterations.float().mean().item())
            if hasattr(result, "iterations") else None, "top": top}  # fmt: skip


def host_profile(robot, link: str | list[str], sizes: list[int], cuda: bool) -> str:
    """Where the host spends a solve of ``n`` targets (each of ``sizes``; ``solve_ik`` of
    ``link``, or ``solve_wholebody`` of each link of a list, on a CUDA robot the CPU's compiled
    code up to :data:`torchik.ik.host.HOST_WHOLEBODY_ROWS` rows): its median time at 1, 4 and
    every intra-op thread, ``cProfile``'s functions by cumulative and own time over 10 solves,
    and every synchronising CUDA call's Python line in one solve
    (``torch.cuda.set_sync_debug_mode``), as text."""
    import cProfile
    import io
    import pstats
    import warnings

    from torchik.ik import solve_ik, solve_wholebody

    rows = []
    for n in sizes:
        g = torch.Generator().manual_seed(n)
        q = robot.random_configuration(n, generator=g).to(robot.device)
        solve: Callable[[], object]
        if isinstance(link, str):
            solve = partial(solve_ik, robot, robot.forward_kinematics(q, link), link)
        else:
            poses = robot.forward_kinematics(q, link).unbind(-3)
            solve = partial(solve_wholebody, robot, dict(zip(link, poses, strict=True)))
        for _ in range(3):
            solve()
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(10):
            solve()
        if cuda:
            torch.cuda.synchronize()
        profiler.disable()
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text)
        stats.sort_stats("cumulative").print_stats(45)
        stats.sort_stats("tottime").print_stats(25)
        syncs: dict[str, int] = {}
        if cuda:
            torch.cuda.set_sync_debug_mode("warn")
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                solve()
            torch.cuda.set_sync_debug_mode("default")
            for w in caught:
                where = f"{w.filename.split('src/')[-1]}:{w.lineno}"
                syncs[where] = syncs.get(where, 0) + 1
        ordered = sorted(syncs.items(), key=lambda kv: -kv[1])
        rows.append(f"== {link} n={n}: 10 solves\n{_by_threads(solve, cuda)}\n"
                    f"{text.getvalue()}\nsynchronising lines: {ordered}")  # fmt: skip
    return "\n".join(rows)


def _by_threads(solve: Callable[[], object], cuda: bool) -> str:
    """The median wall time of ``solve`` (7 calls) at each of 1, 4 and all of the machine's
    intra-op threads (``torch.set_num_threads``, which the CPU's compiled loops follow too):
    whether a solve's serial part or its loop decides its time."""
    import os

    saved, rows = torch.get_num_threads(), []
    for threads in sorted({1, min(4, os.cpu_count() or 1), os.cpu_count() or 1}):
        torch.set_num_threads(threads)
        times = []
        for _ in range(7):
            start = time.perf_counter()
            solve()
            if cuda:
                torch.cuda.synchronize()
            times.append((time.perf_counter() - start) * 1e3)
        rows.append(f"{threads}: {sorted(times)[3]:.2f}")
    torch.set_num_threads(saved)
    return "median ms by intra-op threads: " + ", ".join(rows)


def kernel_table(rows: list[dict[str, Any]]) -> Table:
    """The rows of :func:`kernel_rows` as a table."""
    table = Table("Fused kernels at 4 M configurations (median of CUDA events)", [
        Column("stores", "stores"), Column("block", "rows/program"), Column("warps", "warps"),
        Column("regs", "registers"), Column("shared", "shared B"),
        Column("ms", "ms", lambda x: f"{x:.3f}"), Column("G_per_s", "G/s", lambda x: f"{x:.2f}"),
        Column("max_diff", "max |Δ| from the first row", lambda x: f"{x:.1e}"),
    ])  # fmt: skip
    for row in rows:
        status = f"failed: {row['error']}" if "error" in row else "ok"
        if "error" not in row and not row.get("max_diff", 0.0) <= 1e-5:  # NaN too
            status = f"failed: values differ from the kernel's first row by {row['max_diff']:.1e}"
        values = {k: v for k, v in row.items() if k not in ("kernel", "error")}
        table.add(row["kernel"], status, **values)
    return table


def solve_table(rows: list[dict[str, Any]]) -> Table:
    """The rows of :func:`profile_rows` as a table."""
    table = Table("One solve under torch.profiler (after two warm-up solves)", [
        Column("n", "n", lambda x: f"{x:,}"), Column("wall_ms", "wall ms", lambda x: f"{x:.1f}"),
        Column("kernels", "kernels", lambda x: f"{x:,}"),
        Column("gpu_ms", "GPU ms (kernels)", lambda x: f"{x:.2f}"),
        Column("graph_launches", "graph launches"), Column("syncs_or_copies", "syncs, copies"),
        Column("iterations", "mean iterations"),
    ])  # fmt: skip
    for row in rows:
        status = f"failed: {row['error']}" if "error" in row else "ok"
        values = {k: v for k, v in row.items() if k not in ("case", "top", "error")}
        table.add(row["case"], status, **values)
    return table

"""GPU kinematics throughput (``benchmarks/gpu.py``): FK paths, IK loops, whole-body IK.

FK (one link, every link), FK + backward and the Jacobian per second on the reference path and
on the fused Triton kernels (:attr:`torchik.robot.Robot.backend`, CUDA only); full-pose
numerical IK by each loop of :data:`LOOPS` (the host loop, the fixed-shape loop eager and
captured in CUDA graphs, and the defaults); whole-body IK by the host and the fixed loop and
the defaults; where small solves answer first (:func:`route_rows`). Times are medians of
CUDA events on CUDA (:func:`experiments.timing.time_cuda`), of
:func:`experiments.timing.time_call` elsewhere. Goals on an H100 or H200 (issue 34): FK pose
≥ 8 G configurations/s at 4 M, FK + backward ≥ 4, Jacobian ≥ 3, every link ≥ 2 G/s; IK of 1 /
1000 / 100 000 Panda poses in ≤ 1 / 5 / 50 ms at ≥ 99.9 %; whole-body IK of the G1's two hands,
1000 targets, in ≤ 20 ms; 1000 solutions of one Panda pose drawn from the bundled model and
refined (:func:`torchik.models.solve_with_model`) in ≤ 10 ms.

Example:
    >>> from torchik import load_robot
    >>> robot = load_robot("snake2")
    >>> rows = ik_rows(robot, "ee", [10], seconds=0.01)
    >>> [row["path"] for row in rows][-3:], rows[0]["success"] == 1.0
    (['fixed, fused LM loop', 'fixed, one graph', 'defaults'], True)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

import torch

from experiments.table import Column, Table
from experiments.timing import time_call, time_cuda

__all__ = [
    "HOST_ROUTE", "HOST_THREADS", "LOOPS", "ROUTE_GPU", "ROUTE_IK", "ROUTE_LIMITS",
    "ROUTE_WHOLEBODY", "WHOLEBODY_GPU", "WHOLEBODY_PATHS", "WHOLEBODY_TRITON", "anchor_fk_rows",
    "failed_row", "fk_rows", "gpu_table", "ik_rows", "measured", "model_rows", "route_limits",
    "route_rows", "wholebody_host_rows", "wholebody_rows", "wholebody_triton_rows",
]  # fmt: skip


def _rate(fn: Callable[[], object], n: int, seconds: float, cuda: bool) -> dict[str, float]:
    """Milliseconds per call and configurations per second: CUDA events on CUDA
    (:func:`~experiments.timing.time_cuda`), else :func:`~experiments.timing.time_call`."""
    t = (time_cuda if cuda else time_call)(fn, min_run_time=seconds)
    return {"ms": t.median * 1e3, "G_per_s": n / t.median / 1e9}


def failed_row(what: str, path: str, n: int, error: Exception) -> dict[str, Any]:
    """A row for a measurement that raised: the table keeps the other rows."""
    return {"what": what, "path": path, "n": n, "status": f"failed: {error}"[:160]}


def measured(what: str, path: str, n: int, measure: Callable[[], dict]) -> dict[str, Any]:
    """The row ``what``, ``path``, ``n`` with the values ``measure()`` returns, or the
    :func:`failed_row` if it raises (a kernel, a capture, bf16 on this device)."""
    try:
        return {"what": what, "path": path, "n": n, **measure()}
    except Exception as error:  # noqa: BLE001 - reported in the table
        return failed_row(what, path, n, error)


def _solved(solve: Callable[[], Any], n: int, seconds: float) -> dict[str, float]:
    """:func:`_rate` of ``solve()`` (an ``IKResult``, on its device) and the share of its
    targets (rows of ``success``) with a success, in its third call (a captured program's
    first call runs eagerly and its second captures: the third replays, as the timed ones)."""
    solve()
    solve()
    success = solve().success
    rate = _rate(solve, n, seconds, success.is_cuda)
    return {**rate, "success": success.reshape(n, -1).any(-1).double().mean().item()}


def fk_rows(robot: Any, link: str, sizes: Sequence[int], seconds: float) -> list[dict[str, Any]]:
    """FK pose (one link and every link), FK + backward and Jacobian rates of ``n``
    configurations, on both FK paths (``robot.backend``; the fused kernels on CUDA only).

    Args:
        robot: the robot, on its device.
        link: the link.
        sizes: batch sizes.
        seconds: measurement per row.

    Returns:
        Rows ``what``, ``path`` (``reference`` or ``fused``), ``n``, ``ms``, ``G_per_s``.
    """
    rows, cuda = [], robot.device.type == "cuda"
    for n in sizes:
        q = robot.random_configuration(n).to(robot.device)
        for path in ("reference", "fused") if cuda else ("reference",):
            robot.backend = path
            qg = q.clone().requires_grad_()

            def backward(qg: torch.Tensor = qg) -> None:
                robot.forward_kinematics(qg, link).sum().backward()

            for what, fn in (
                ("FK pose", lambda q=q: robot.forward_kinematics(q, link)),
                ("FK all links", lambda q=q: robot.forward_kinematics(q)),
                ("FK + backward", backward),
                ("Jacobian", lambda q=q: robot.jacobian(q, link)),
            ):
                rows.append(measured(what, path, n, partial(_rate, fn, n, seconds, cuda)))
    robot.backend = "auto"
    return rows


def anchor_fk_rows(
    name: str,
    ops: dict[str, Callable[[torch.Tensor], torch.Tensor]],
    sample: Callable[[int], torch.Tensor],
    sizes: Sequence[int],
    seconds: float,
) -> list[dict[str, Any]]:
    """The FK rows of another library, measured as :func:`fk_rows` measures torchik's (the
    protocol asks pytorch_kinematics in the same run).

    Args:
        name: the library, written in the ``path`` column.
        ops: ``"FK pose"``, ``"FK + backward"``, ``"Jacobian"`` (any of them) -> a function of
            ``q (n, dof)`` returning a tensor; ``"FK + backward"`` is timed as
            ``fn(q).sum().backward()`` with ``q`` requiring grad.
        sample: ``n`` -> configurations ``(n, dof)`` on the device and dtype of the library.
        sizes: batch sizes.
        seconds: measurement per row.
    """
    rows = []
    for n in sizes:
        q = sample(n)
        cuda = q.device.type == "cuda"
        for what, op in ops.items():
            if what == "FK + backward":
                qg = q.clone().requires_grad_()
                fn = lambda op=op, qg=qg: op(qg).sum().backward()  # noqa: E731
            else:
                fn = lambda op=op, q=q: op(q)  # noqa: E731
            rows.append(measured(what, name, n, partial(_rate, fn, n, seconds, cuda)))
    return rows


_ROUNDS = {"one_graph": False}
LOOPS = {
    "host loop": {"loop": "host", "sync_every": 1, **_ROUNDS},
    "fixed, eager": {"loop": "fixed", "capture": False, "fused_step": False, "fused_loop": False,
                     **_ROUNDS},
    "fixed, CUDA graphs": {"loop": "fixed", "fused_step": False, "fused_loop": False, **_ROUNDS},
    "fixed, fused LM step": {"loop": "fixed", "fused_step": True, "fused_loop": False, **_ROUNDS},
    "fixed, fused LM loop": {"loop": "fixed", "fused_loop": True, **_ROUNDS},
    "fixed, one graph": {"loop": "fixed", "fused_loop": True, "one_graph": True},
    "defaults": {},
}  # fmt: skip
"""The IK loops of :func:`ik_rows`: the host loop that drops finished rows at every iteration,
the fixed-shape loop launching every operation, the same captured in CUDA graphs (eager off
CUDA), captured with each iteration in one kernel (``fused_step``: where FK takes the fused
kernels; the CUDA-graphs row elsewhere), with each chunk of iterations in one kernel
(``fused_loop``), the whole call as one captured program (``one_graph``,
:mod:`torchik.ik.captured`; on CUDA only, the rounds elsewhere), and the defaults (``loop``
``"auto"``: one program on CUDA, except calls of at most :data:`torchik.ik.host.HOST_ROWS` rows,
0 by default, which go to the CPU's compiled rounds, :mod:`torchik.ik.host`)."""


def ik_rows(
    robot: Any,
    link: str,
    sizes: Sequence[int],
    seconds: float,
    loops: dict | None = None,
    warm: float = 0.0,
) -> list[dict[str, Any]]:
    """Full-pose IK of ``n`` FK poses (seed ``n``) by each of ``loops`` (name -> settings of
    :class:`~torchik.ik.LevenbergMarquardt`; default :data:`LOOPS`).

    Args:
        warm: a warm start, one seed per target ``warm`` rad (normal noise per joint, clamped
            into the limits) from the configuration that made it, no restarts: the call of a
            control loop; 0: ``solve_ik``'s own seeding.

    Returns:
        Rows ``what``, ``path`` (the loop), ``n``, ``ms``, ``success`` (share of targets
        solved).
    """
    from experiments.numerical import warm_starts
    from torchik.ik import LevenbergMarquardt, solve_ik

    rows = []
    for n in sizes:
        g = torch.Generator().manual_seed(n)
        q = robot.random_configuration(n, generator=g).to(robot.device)
        targets = robot.forward_kinematics(q, link)
        given: dict[str, Any] = {}
        if warm:
            given = {"seeds": warm_starts(robot, q, warm, g)[:, None], "restarts": False}
        for name, settings in (LOOPS if loops is None else loops).items():
            solver = LevenbergMarquardt(**settings)
            solve = partial(solve_ik, robot, targets, link, method=solver, **given)
            rows.append(measured("IK full pose", name, n, partial(_solved, solve, n, seconds)))
    return rows


WHOLEBODY_PATHS = {"host loop": "host", "fixed, CUDA graphs": "fixed", "defaults": "auto"}
"""The rows of :func:`wholebody_rows` and their ``loop``."""


def wholebody_rows(
    robot: Any,
    links: Sequence[str],
    n: int,
    seconds: float,
    paths: Sequence[str] = tuple(WHOLEBODY_PATHS),
    **options: Any,
) -> list[dict]:
    """Whole-body IK of ``n`` targets of every link in ``links`` (FK poses, seed ``n``), by the
    host loop, the fixed loop (the ``loop`` of :data:`LOOPS`' "host loop" and "fixed, CUDA
    graphs": the iteration's PyTorch operations captured) and the defaults (``loop="auto"``: on
    CUDA, at most :data:`torchik.ik.host.HOST_WHOLEBODY_ROWS` rows go to the CPU's compiled
    loop; the compiled loop on the CPU). ``paths``: these rows of :data:`WHOLEBODY_PATHS`
    only; ``options``: given to every solve (``num_threads``)."""
    from torchik.ik import solve_wholebody

    targets = _wholebody_targets(robot, links, n)
    rows, what = [], f"whole-body IK, {len(links)} links"
    for name in paths:
        solve = partial(solve_wholebody, robot, targets, generator=torch.Generator().manual_seed(0),
                        loop=WHOLEBODY_PATHS[name], **options)  # fmt: skip
        rows.append(measured(what, name, n, partial(_solved, solve, n, seconds)))
    return rows


def _wholebody_targets(robot: Any, links: Sequence[str], n: int) -> dict[str, torch.Tensor]:
    """FK poses of every link in ``links`` at ``n`` random configurations (seed ``n``)."""
    g = torch.Generator().manual_seed(n)
    poses = robot.forward_kinematics(robot.random_configuration(n, generator=g), list(links))
    return dict(zip(links, poses.unbind(1), strict=True))


WHOLEBODY_TRITON = ("one graph, Triton loop kernel", "fixed, Triton loop kernel")
"""The GPU's rows of :func:`wholebody_triton_rows`."""

HOST_THREADS = (1, 2, 4, 8)
"""Threads of the CPU's compiled code that :func:`wholebody_host_rows` also times at 1 000
targets (besides all of them): how the CPU's route scales with the machine's cores (1 000
G1 targets took 34-37 ms on the H200 machine's 16, where this project's 2-core machines take
41-42 ms on 2 and 72-77 on one)."""


def wholebody_triton_rows(
    robot: Any, links: Sequence[str], sizes: Sequence[int], seconds: float
) -> list[dict]:
    """Whole-body IK on Triton's loop kernel (:data:`~torchik.ik.wholebody.solve.FUSED_LOOP`
    on, off by default until these rows say it wins; on CUDA: elsewhere the kernel does not
    serve, the rows time ``loop="fixed"`` as it is and say so): at every size of ``sizes``
    as one captured program (:mod:`torchik.ik.wholebody.captured`, the default generator), and
    at the largest size up to 1 000 in chunks with host reads between them (the program turned
    off), each of ``n`` targets as :func:`wholebody_rows`. Its own group, last: the G1's loop
    kernel takes about 70 s to compile for sm_90 on the CPU machine (Triton 3.9,
    ``benchmarks/kernel_compile.py``). What it has to beat: :func:`wholebody_host_rows`."""
    from torchik.ik import solve_wholebody
    from torchik.ik.wholebody import captured
    from torchik.ik.wholebody import solve as wholebody

    what, rows = f"whole-body IK, {len(links)} links", []
    names = WHOLEBODY_TRITON if robot.device.type == "cuda" else tuple(
        f"{name} (no CUDA: loop='fixed' as it is)" for name in WHOLEBODY_TRITON)  # fmt: skip
    chunked = _chunked(sizes)
    saved = wholebody.FUSED_LOOP, captured.serves
    wholebody.FUSED_LOOP = True
    try:
        for n in sizes:
            solve = partial(solve_wholebody, robot, _wholebody_targets(robot, links, n),
                            loop="fixed")  # fmt: skip
            rows.append(measured(what, names[0], n, partial(_solved, solve, n, seconds)))
            if n == chunked:
                captured.serves = lambda *args: False  # type: ignore[assignment]
                rows.append(measured(what, names[1], n,
                                     partial(_solved, solve, n, seconds)))  # fmt: skip
                captured.serves = saved[1]  # type: ignore[assignment]
    finally:
        wholebody.FUSED_LOOP, captured.serves = saved  # type: ignore[assignment]
    return rows


def _chunked(sizes: Sequence[int]) -> int:
    """The size of the whole-body rows' chunks and thread counts: the largest up to 1 000
    (the first size where none is)."""
    return max([n for n in sizes if n <= 1000] or sizes[:1])


def wholebody_host_rows(
    robot: Any,
    links: Sequence[str],
    sizes: Sequence[int],
    seconds: float,
    threads: Sequence[int] = HOST_THREADS,
) -> list[dict]:
    """What :func:`wholebody_triton_rows`' program has to beat, timed in the same run: the
    CPU's compiled code (:data:`HOST_ROUTE`, whatever the size) at every size of ``sizes``, and
    at the largest up to 1 000 on each count of ``threads`` (rows ``"{HOST_ROUTE}, {k}
    threads"``: how the CPU's route scales with the machine's cores); each of ``n`` targets as
    :func:`wholebody_rows`; counts not below the machine's cores are left out.
    :func:`route_limits` with ``gpu=WHOLEBODY_GPU`` reads the
    ``HOST_WHOLEBODY_ROWS`` that the two call for."""
    chunked, rows = _chunked(sizes), []
    with _on_host():
        for n in sizes:
            timed = wholebody_rows(robot, links, n, seconds, paths=("defaults",))
            rows += [{**row, "path": HOST_ROUTE} for row in timed]
        for k in [k for k in threads if k < (os.cpu_count() or 1)]:  # all: the rows above
            timed = wholebody_rows(robot, links, chunked, seconds, paths=("defaults",),
                                   num_threads=k)  # fmt: skip
            rows += [{**row, "path": f"{HOST_ROUTE}, {k} threads"} for row in timed]
    return rows


ROUTE_IK = (1, 8, 32, 64, 128, 512)
"""Target counts of :func:`route_rows`' ``solve_ik`` rows (2 slots each)."""
ROUTE_WHOLEBODY = (1, 10, 100, 1000, 4000)
"""Target counts of :func:`route_rows`' whole-body rows (2 slots each): one target is a control
loop's call (on the CPU about 2 ms, mostly the call's Python work around 0.2 ms of compiled
loop: ``benchmarks/results/wholebody.md``)."""

HOST_ROUTE = "CPU's compiled code"
"""The path of :func:`route_rows`' rows solved on the CPU whatever their size."""
ROUTE_GPU = {"IK full pose": "fixed, one graph", "whole-body IK, 2 links": "fixed, CUDA graphs"}
"""The GPU's own path that :func:`route_limits` weighs the CPU's against, per kind of row."""
ROUTE_LIMITS = {"IK full pose": "HOST_ROWS", "whole-body IK, 2 links": "HOST_WHOLEBODY_ROWS"}
"""The limit of :mod:`torchik.ik.host` that each kind of row decides."""
WHOLEBODY_GPU = {"whole-body IK, 2 links": WHOLEBODY_TRITON[0]}
"""The GPU's path that :func:`wholebody_host_rows` are weighed against
(:func:`route_limits`' ``gpu``): what ``HOST_WHOLEBODY_ROWS`` would be with ``FUSED_LOOP`` on."""


@contextmanager
def _on_host() -> Iterator[None]:
    """Every solve of a CUDA robot that the CPU's compiled code serves goes to the CPU, whatever
    its size (:data:`torchik.ik.host.HOST_ROWS` and ``HOST_WHOLEBODY_ROWS`` lifted)."""
    from torchik.ik import host

    saved = host.HOST_ROWS, host.HOST_WHOLEBODY_ROWS
    host.HOST_ROWS = host.HOST_WHOLEBODY_ROWS = 1 << 40
    try:
        yield
    finally:
        host.HOST_ROWS, host.HOST_WHOLEBODY_ROWS = saved


def route_rows(robot: Any, link: str, g1: Any, hands: Sequence[str], seconds: float,
               quick: bool = False) -> list[dict]:  # fmt: skip
    """Where small solves go (:mod:`torchik.ik.host`): ``solve_ik`` at :data:`ROUTE_IK` targets
    and ``solve_wholebody`` at :data:`ROUTE_WHOLEBODY` targets, each by the GPU's own path
    (:data:`ROUTE_GPU`), by the CPU's compiled code whatever the size (:data:`HOST_ROUTE`) and
    with the defaults (the route as it is): :func:`route_limits` reads the sizes up to which
    the CPU answers first, :data:`~torchik.ik.host.HOST_ROWS` and
    :data:`~torchik.ik.host.HOST_WHOLEBODY_ROWS`. ``quick``: the two smallest of each."""
    loops = {name: LOOPS[name] for name in ("defaults", "fixed, one graph")}
    sizes, bodies = (ROUTE_IK[:2], ROUTE_WHOLEBODY[:2]) if quick else (ROUTE_IK, ROUTE_WHOLEBODY)
    rows = ik_rows(robot, link, sizes, seconds, loops=loops)
    with _on_host():
        rows += ik_rows(robot, link, sizes, seconds, loops={HOST_ROUTE: {}})
    for n in bodies:
        rows += wholebody_rows(g1, hands, n, seconds, paths=("fixed, CUDA graphs", "defaults"))
        with _on_host():
            hosted = wholebody_rows(g1, hands, n, seconds, paths=("defaults",))
        rows += [{**row, "path": HOST_ROUTE} for row in hosted]
    return rows


def route_limits(rows: Sequence[dict[str, Any]], slots: int = 2,
                 gpu: dict[str, str] | None = None) -> dict[str, int]:  # fmt: skip
    """The limits of :mod:`torchik.ik.host` that :func:`route_rows`' rows call for: for each
    kind of row (:data:`ROUTE_LIMITS`), the rows (targets times ``slots``) of the largest size
    up to which the CPU's compiled code (:data:`HOST_ROUTE`) was faster than the GPU's path
    (``gpu``, what -> path; default :data:`ROUTE_GPU`) at every measured size, solving as many
    targets (0: not even at the smallest). Kinds whose rows are missing or failed are left out.

    Example:
        >>> rows = [{"what": "IK full pose", "path": p, "n": n, "ms": ms, "success": 1.0}
        ...         for p, n, ms in [("fixed, one graph", 1, 1.4), (HOST_ROUTE, 1, 0.6),
        ...                          ("fixed, one graph", 64, 1.5), (HOST_ROUTE, 64, 3.0)]]
        >>> route_limits(rows)
        {'HOST_ROWS': 2}
    """
    limits = {}
    for what, path in (ROUTE_GPU if gpu is None else gpu).items():
        times: dict[str, dict[int, tuple[float, float]]] = {path: {}, HOST_ROUTE: {}}
        for row in rows:
            if row.get("what") == what and row.get("path") in times and "ms" in row:
                times[row["path"]][row["n"]] = row["ms"], row.get("success", 0.0)
        sizes = sorted(set(times[path]) & set(times[HOST_ROUTE]))
        if not sizes:
            continue
        best = 0
        for n in sizes:
            (cpu_ms, cpu_ok), (gpu_ms, gpu_ok) = times[HOST_ROUTE][n], times[path][n]
            if cpu_ms >= gpu_ms or cpu_ok < gpu_ok:
                break
            best = n
        limits[ROUTE_LIMITS[what]] = best * slots
    return limits


def model_rows(
    robot: Any, model: Any, n: int, seconds: float, fitted: Any = None, fitted_bf16: Any = None
) -> list[dict[str, Any]]:
    """``n`` solutions of one pose of ``model``'s link (seed 0): the draw alone and the draw
    refined by :func:`torchik.models.solve_with_model` (at most 15 LM iterations, as the pose
    protocol's fast rows), for the model's own sampler, the few-pass presets and ``fitted``
    (a sampler fitted to the model, :func:`torchik.models.pretrained.fitted_sampler`) and
    ``fitted_bf16`` (its bfloat16 variant); on CUDA also ``fitted``'s draw without a CUDA
    graph, and its refinement in rounds (``one_graph=False``; the other rows refine as one
    captured program, the default on CUDA).

    Returns:
        Rows ``what``, ``path`` (the sampler), ``n``, ``ms``, ``success`` (share of the ``n``
        refined samples within 1 mm and 1°).
    """
    from torchik.ik import LevenbergMarquardt
    from torchik.models import FEW_PASSES, FEW_PASSES_BF16, model_targets, solve_with_model

    cuda, link = robot.device.type == "cuda", model.spec.link
    q = robot.random_configuration(1, generator=torch.Generator().manual_seed(0))
    target = robot.forward_kinematics(q.to(robot.device), link)[0]
    encoded = model_targets(model, target)
    rows = []
    own = model.config.sampler  # named: a model from load_pretrained has a default sampler
    samplers = {"own": own, "FEW_PASSES": FEW_PASSES, "FEW_PASSES_BF16": FEW_PASSES_BF16}
    if fitted is not None:
        samplers[f"fitted, {fitted.passes} passes"] = fitted
    if fitted_bf16 is not None:
        samplers[f"fitted, {fitted_bf16.passes} passes, bf16"] = fitted_bf16
    for name, sampler in samplers.items():
        options = {"sampler": sampler}
        draw = partial(_draw, model, encoded, n, options)
        solve = partial(solve_with_model, robot, model, target, n, sample_options=options,
                        max_iters=15)  # fmt: skip
        rows.append(measured("model draw", name, n, partial(_rate, draw, n, seconds, cuda)))
        refined = partial(_solved, lambda solve=solve: solve().result, n, seconds)
        rows.append(measured("model + refinement", name, n, refined))
    if cuda and fitted is not None:  # what the CUDA graph of the passes saves
        eager = partial(_without_graphs, partial(_draw, model, encoded, n, {"sampler": fitted}))
        path = f"fitted, {fitted.passes} passes, no CUDA graph"
        rows.append(measured("model draw", path, n, partial(_rate, eager, n, seconds, cuda)))
        # the refinement in rounds (the default is one captured program, torchik.ik.captured)
        solve = partial(
            solve_with_model,
            robot,
            model,
            target,
            n,
            sample_options={"sampler": fitted},
            method=LevenbergMarquardt(one_graph=False),
            max_iters=15,
        )
        path = f"fitted, {fitted.passes} passes, refinement in rounds"
        refined = partial(_solved, lambda solve=solve: solve().result, n, seconds)
        rows.append(measured("model + refinement", path, n, refined))
    return rows


def _without_graphs(fn: Callable[[], object]) -> object:
    """``fn()`` with :data:`torchik.models.fm.CUDA_GRAPHS` off."""
    from torchik.models import fm

    saved, fm.CUDA_GRAPHS = fm.CUDA_GRAPHS, False
    try:
        return fn()
    finally:
        fm.CUDA_GRAPHS = saved


@torch.no_grad()  # as solve_with_model draws (with autograd on, the draw timed slower alone)
def _draw(model: Any, encoded: torch.Tensor, n: int, options: dict[str, Any]) -> Any:
    return model.sample(encoded, n, **options)


def gpu_table(rows: list[dict[str, Any]]) -> Table:
    """The rows of :func:`fk_rows` and :func:`ik_rows` as one table."""
    table = Table(
        "GPU kinematics (issues 19, 34)",
        [
            Column("path", "path"),
            Column("n", "n", lambda x: f"{x:,}"),
            Column("ms", "ms", lambda x: f"{x:.3f}"),
            Column("G_per_s", "G/s", lambda x: f"{x:.3f}"),
            Column("success", "success", lambda x: f"{100 * x:.2f} %"),
        ],
    )
    for row in rows:
        table.add(row["what"], **{k: v for k, v in row.items() if k != "what"})
    return table

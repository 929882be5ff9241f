"""FK timing and agreement tables for any set of FK implementations (``benchmarks/fk.py``).

A :class:`Method` offers operations (``"FK"``, ``"FK+backward"``, ``"Jacobian"``), each a
builder of the call to time from configurations ``q (B, dof)``; :func:`fk_timing_table` times
every method on every op, dtype and batch through :func:`experiments.timing.time_call`, and
:func:`agreement_table` compares their poses and Jacobians with float64 references.
:func:`torchik_methods` is torchik's own rows; other libraries' rows are written the same way.

Example:
    >>> import numpy as np
    >>> methods = torchik_methods("snake2", "ee", ["joint_1", "joint_2"])
    >>> q = torch.zeros(4, 2, dtype=torch.float64)
    >>> table = fk_timing_table(methods, q, ("float64",), (1,), min_run_time=0.01)
    >>> sorted({row["op"] for row in table.rows})
    ['FK', 'FK+backward', 'Jacobian']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from experiments.table import Column, Table, fmt_sci, fmt_time
from experiments.timing import time_call

__all__ = [
    "DTYPES",
    "MIN_RUNS",
    "OPS",
    "Method",
    "agreement_table",
    "backward_op",
    "compile_forward",
    "fk_timing_table",
    "forward_op",
    "torchik_methods",
    "unavailable",
]

DTYPES = {"float32": torch.float32, "float64": torch.float64}
OPS = ("FK", "FK+backward", "Jacobian")
MIN_RUNS = 7
"""Measured blocks per case at least: the protocol's median of >= 7 repetitions (a call slower
than ``--min-run-time`` gave one block: pytorch_kinematics at batch 65536)."""
BATCHES = (1, 1024, 65536)
TORCHIK = "torchik"

Thunk = Callable[[], object]
#: Builds the call to time from q ``(B, dof)`` already in the method's dtype and joint order.
Op = Callable[[torch.Tensor], Thunk]


@dataclass
class Method:
    """One row source: the operations it implements and what it offers for agreement checks."""

    name: str
    ops: dict[str, Op]
    status: str = "ok"
    dtypes: tuple[str, ...] = tuple(DTYPES)
    batches: tuple[int, ...] = BATCHES
    columns: list[int] | None = None  # permutation from the URDF's joint order to the method's
    poses: Callable[[torch.Tensor], np.ndarray] | None = None  # q (B, dof) -> (B, 4, 4)
    jacobian: Callable[[torch.Tensor], np.ndarray] | None = None  # q (B, dof) -> (B, 6, dof)
    note: str = ""


def unavailable(name: str, status: str) -> Method:
    """A row that could not be built (its status says why)."""
    return Method(name, {}, status=status)


def forward_op(forward: Callable[[torch.Tensor], torch.Tensor]) -> Op:
    """Time ``forward(q)`` alone."""
    return lambda q: lambda: forward(q)


def backward_op(forward: Callable[[torch.Tensor], torch.Tensor]) -> Op:
    """Time ``forward(q).sum().backward()``: FK plus the gradient of all poses w.r.t. q."""

    def make(q: torch.Tensor) -> Thunk:
        leaf = q.clone().requires_grad_(True)

        def run() -> None:
            leaf.grad = None
            forward(leaf).sum().backward()

        return run

    return make


def compile_forward(forward: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """HOOK for the ``--compile`` rows: the compiled variant of an FK callable.

    Today this is plain ``torch.compile`` on the callable. When torchik ships its own compiled
    entry point, return that here for torchik (the rows and their names need no change).
    """
    return torch.compile(forward, dynamic=False)


def torchik_methods(
    robot_name: str,
    link: str,
    joint_names: Sequence[str],
    with_compile: bool = False,
    limits: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[Method]:
    """torchik's rows: FK, FK + backward and the Jacobian in float32 and float64 on the
    reference path (``backend="reference"``, pure PyTorch); FK and the Jacobian on the CPU's
    native kernels (``backend="native"``, no gradient) too.

    Args:
        robot_name: a bundled robot (``torchik.load_robot``).
        link: the timed link.
        joint_names: the joint order of the configurations given to the table (e.g. a URDF's).
        with_compile: add a ``torch.compile`` row.
        limits: ``(lower, upper)`` in that order, to note a difference with the robot's.
    """
    from torchik.robot import load_robot

    # the PyTorch path by name: "auto" takes the native kernels once a native row loaded them
    robots = {d: load_robot(robot_name, dtype=d, backend="reference") for d in DTYPES.values()}
    robot = robots[torch.float64]
    columns = [list(joint_names).index(n) for n in robot.joint_names]
    same = limits is None or (
        np.allclose(robot.lower.numpy(), limits[0][columns])
        and np.allclose(robot.upper.numpy(), limits[1][columns])
    )

    def fk(q: torch.Tensor) -> torch.Tensor:
        return robots[q.dtype].forward_kinematics(q, link=link)

    def jac(q: torch.Tensor) -> torch.Tensor:
        return robots[q.dtype].jacobian(q, link)

    ops = {"FK": forward_op(fk), "FK+backward": backward_op(fk), "Jacobian": forward_op(jac)}
    note = "" if same else f"torchik's {robot_name} joint limits differ from the URDF's"
    poses, jacobian = (lambda q: fk(q).detach().numpy()), (lambda q: jac(q).detach().numpy())
    methods = [Method(TORCHIK, ops, columns=columns, note=note, poses=poses, jacobian=jacobian)]
    natives = {d: load_robot(robot_name, dtype=d, backend="native") for d in DTYPES.values()}
    native_ops = {
        "FK": forward_op(lambda q: natives[q.dtype].forward_kinematics(q, link=link)),
        "Jacobian": forward_op(lambda q: natives[q.dtype].jacobian(q, link)),
    }
    methods.append(Method(
        f"{TORCHIK} (native)", native_ops, columns=columns,
        note="Robot.backend='native': compiled by Numba, no gradient",
        poses=lambda q: natives[q.dtype].forward_kinematics(q, link=link).numpy(),
        jacobian=lambda q: natives[q.dtype].jacobian(q, link).numpy(),
    ))  # fmt: skip
    if with_compile:
        compiled = {
            "FK": forward_op(compile_forward(fk)),
            "Jacobian": forward_op(compile_forward(jac)),
        }
        methods.append(Method(f"{TORCHIK} (torch.compile)", compiled, columns=columns))
    return methods


def _status_of(exc: BaseException) -> str:
    """An op a library does not have yet is "not available yet"; anything else "failed"."""
    kind = (
        "not available yet" if isinstance(exc, AttributeError | NotImplementedError) else "failed"
    )
    text = str(exc).strip().splitlines()
    what = f"{type(exc).__name__}: {text[0][:120]}" if text else type(exc).__name__
    return f"{kind}: {what}"


def prepare(method: Method, q64: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``q64`` in the method's dtype and joint order."""
    q = q64.to(dtype)
    return q[:, method.columns].contiguous() if method.columns else q


def fk_timing_table(
    methods: list[Method],
    q64: torch.Tensor,
    dtypes: Sequence[str] = tuple(DTYPES),
    batches: Sequence[int] = BATCHES,
    min_run_time: float = 0.2,
    title: str = "FK timings",
    references: tuple[str, ...] = (),
    log: Callable[[str], None] = lambda message: None,
) -> Table:
    """Every method's time per call of every op, dtype and batch (rows: method × case).

    Args:
        methods: the rows' sources (an unavailable one gives a row with its status).
        q64: ``(N, dof)`` float64 configurations (N ≥ the largest batch), in the joint order of
            the methods without ``columns``.
        dtypes, batches: the cases.
        min_run_time: seconds measured per case (:func:`experiments.timing.time_call`).
        title: the table's title.
        references: methods the speed ratios compare with.
        log: receives a line per case.
    """
    columns = [Column("op", "op"), Column("dtype", "dtype"), Column("batch", "batch"),
               Column("time_s", "time per call", fmt_time), Column("iqr_s", "IQR", fmt_time),
               Column("per_config_s", "per config", fmt_time)]  # fmt: skip
    table = Table(title, columns, case_keys=("op", "dtype", "batch"), time_key="time_s",
                  references=references)  # fmt: skip
    for m in methods:
        if m.status != "ok":
            table.add(m.name, status=m.status)
        if m.note:
            table.notes.append(f"{m.name}: {m.note}")
    for op in OPS:
        for dtype in dtypes:
            for batch in batches:
                case = {"op": op, "dtype": dtype, "batch": batch}
                _time_case(table, methods, case, q64, min_run_time, log)
    return table


def _time_case(
    table: Table, methods: list[Method], case: dict, q64: torch.Tensor, min_run_time: float, log
) -> None:
    """Time every method offering this op, dtype and batch (``experiments.timing.time_call``)."""
    op, dtype, batch = case["op"], case["dtype"], case["batch"]
    here = [m for m in methods if m.status == "ok" and op in m.ops and dtype in m.dtypes]
    here = [m for m in here if batch in m.batches]
    log(f"{op:12s} {dtype} batch {batch}: {', '.join(m.name for m in here)}")
    for m in here:
        try:
            thunk = m.ops[op](prepare(m, q64[:batch], DTYPES[dtype]))
            t = time_call(thunk, min_run_time=min_run_time, min_runs=MIN_RUNS)
        except Exception as exc:
            table.add(m.name, status=_status_of(exc), **case)
            continue
        table.add(m.name, **case, time_s=t.median, iqr_s=t.iqr, per_config_s=t.median / batch,
                  reps=t.runs, calls_per_measurement=t.calls_per_run)  # fmt: skip


def agreement_table(
    methods: list[Method],
    q64: torch.Tensor,
    pose_references: Sequence[str],
    jacobian_reference: str,
) -> Table:
    """Max abs difference of the 4x4 poses (and Jacobians) against a float64 reference.

    Args:
        methods: the rows (those with ``poses``; ``jacobian`` where they have one).
        q64: ``(N, dof)`` float64 configurations.
        pose_references: method names in order of preference for the pose reference.
        jacobian_reference: the method whose float64 Jacobian is the reference.
    """
    table = Table(
        f"Agreement ({len(q64)} configurations, against float64 references)",
        [
            Column("dtype", "dtype"),
            Column("pose_reference", "pose reference"),
            Column("max_abs_pose_diff", "max |ΔT|", fmt_sci),
            Column("jacobian_reference", "Jacobian reference"),
            Column("max_abs_jacobian_diff", "max |ΔJ|", fmt_sci),
        ],
    )
    usable = [m for m in methods if m.status == "ok" and m.poses is not None]
    by_name = {m.name: m for m in usable}
    pose_ref = next((by_name[n] for n in pose_references if n in by_name), None)
    jac_ref = by_name.get(jacobian_reference)
    jac_ref = jac_ref if jac_ref is not None and jac_ref.jacobian is not None else None
    if pose_ref is None or pose_ref.poses is None:
        missing = ", ".join(pose_references)
        table.notes.append(f"no float64 reference available ({missing} missing)")
        return table
    ref_T = pose_ref.poses(prepare(pose_ref, q64, torch.float64))
    ref_J = None
    if jac_ref is not None and jac_ref.jacobian is not None:
        ref_J = jac_ref.jacobian(prepare(jac_ref, q64, torch.float64))
    for m in usable:
        for dtype in (d for d in DTYPES if d in m.dtypes):
            if m is pose_ref and dtype == "float64":
                continue
            _compare_one(table, m, dtype, q64, (pose_ref.name, ref_T), (jac_ref, ref_J))
    return table


def _compare_one(table: Table, m: Method, dtype: str, q64, pose_ref, jac_ref) -> None:
    row: dict[str, Any] = {"dtype": dtype, "pose_reference": f"{pose_ref[0]} float64"}
    try:
        q = prepare(m, q64, DTYPES[dtype])
        assert m.poses is not None  # the usable methods have poses
        row["max_abs_pose_diff"] = float(np.abs(m.poses(q) - pose_ref[1]).max())
        ref_method, ref_J = jac_ref
        if m.jacobian is not None and ref_method is not None and m is not ref_method:
            row["jacobian_reference"] = f"{ref_method.name} float64"
            row["max_abs_jacobian_diff"] = float(np.abs(m.jacobian(q) - ref_J).max())
    except Exception as exc:
        table.add(m.name, status=_status_of(exc), **row)
        return
    table.add(m.name, **row)

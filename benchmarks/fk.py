"""FK benchmark: protocol "FK" of shared/BENCHMARKS.md.

Panda, end link ``panda_hand``, joints uniform within limits (seed 0), float32 and float64,
batch 1, 1024 and 65536. Operations: FK pose ``(B, 4, 4)``; FK + backward of the sum of all poses
w.r.t. q; Jacobian ``(B, 6, 7)``. Anchors: pytorch_kinematics and Pinocchio (a Python loop).
torchik rows run as soon as ``torchik.load_robot("panda")`` exists.

    python benchmarks/fk.py                      # the full protocol -> benchmarks/results/fk.*
    python benchmarks/fk.py --batches 1 1024 --out /tmp/fk   # a quick look elsewhere
    python benchmarks/fk.py --compile            # also torch.compile'd FK variants
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from common import (
    ChainSpec,
    Column,
    Report,
    Table,
    add_common_args,
    describe,
    fixture_urdf,
    fmt_sci,
    fmt_time,
    log,
    quiet,
    read_chain,
    time_call,
    try_import,
    wait_for_quiet,
)

import torchik

ROBOT, LINK, URDF = "panda", "panda_hand", "panda.urdf"
BATCHES = (1, 1024, 65536)
PIN_BATCHES = (1, 1024)
DTYPES = {"float32": torch.float32, "float64": torch.float64}
OPS = ("FK", "FK+backward", "Jacobian")
AGREEMENT_CONFIGS = 1024
PK, PIN, TORCHIK = "pytorch_kinematics", "pinocchio (Python loop)", "torchik"

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


# ----------------------------------------------------------------------------------- methods
def pk_methods(urdf: Path, spec: ChainSpec, with_compile: bool) -> list[Method]:
    """pytorch_kinematics: its default path (analytic backward) and plain autograd."""
    pk, reason = try_import("pytorch_kinematics")
    if pk is None:
        return [unavailable(PK, f"missing: {reason}")]
    with quiet():
        chains = {
            d: pk.build_serial_chain_from_urdf(urdf.read_text(), LINK).to(dtype=d)
            for d in DTYPES.values()
        }
    names = tuple(chains[torch.float32].get_joint_parameter_names())
    if names != spec.joint_names:
        return [unavailable(PK, f"failed: joint order {names} != URDF {spec.joint_names}")]
    tip = chains[torch.float32].get_frame_indices(LINK)

    def fk(q: torch.Tensor) -> torch.Tensor:
        return chains[q.dtype].forward_kinematics(q).get_matrix()

    def fk_autograd(q: torch.Tensor) -> torch.Tensor:
        return chains[q.dtype].forward_kinematics_tensor(q, analytical_grad=False)[tip]

    def jac(q: torch.Tensor) -> torch.Tensor:
        return chains[q.dtype].jacobian(q)

    ops = {"FK": forward_op(fk), "FK+backward": backward_op(fk), "Jacobian": forward_op(jac)}
    methods = [
        Method(PK, ops, poses=lambda q: fk(q).numpy(), jacobian=lambda q: jac(q).numpy()),
        Method(f"{PK} (autograd backward)", {"FK+backward": backward_op(fk_autograd)}),
    ]
    if with_compile:
        compiled = compile_forward(lambda q: chains[q.dtype].forward_kinematics_tensor(q)[tip])
        methods.append(Method(f"{PK} (torch.compile)", {"FK": forward_op(compiled)}))
    return methods


def pin_method(urdf: Path, spec: ChainSpec) -> Method:
    """Pinocchio: forwardKinematics + updateFramePlacement per configuration, in Python."""
    pin, reason = try_import("pinocchio")
    if pin is None:
        return unavailable(PIN, f"missing: {reason}")
    with quiet():
        model = pin.buildModelFromUrdf(str(urdf))
    data, frame = model.createData(), model.getFrameId(LINK)
    cols = [model.joints[model.getJointId(n)].idx_q for n in spec.joint_names]

    def configs(q: torch.Tensor) -> list[np.ndarray]:
        full = np.tile(pin.neutral(model), (len(q), 1))  # other joints (fingers) at neutral
        full[:, cols] = q.double().numpy()
        return list(full)

    def loop(q: torch.Tensor) -> Thunk:
        qs = configs(q)

        def run() -> None:
            for qi in qs:
                pin.forwardKinematics(model, data, qi)
                pin.updateFramePlacement(model, data, frame)

        return run

    def poses(q: torch.Tensor) -> np.ndarray:
        out = []
        for qi in configs(q):
            pin.forwardKinematics(model, data, qi)
            out.append(pin.updateFramePlacement(model, data, frame).homogeneous.copy())
        return np.stack(out)

    return Method(PIN, {"FK": loop}, dtypes=("float64",), batches=PIN_BATCHES, poses=poses)


def torchik_methods(spec: ChainSpec, with_compile: bool) -> list[Method]:
    """torchik's rows: FK, FK + backward and the Jacobian in float32 and float64."""
    robots = {d: torchik.load_robot(ROBOT, dtype=d) for d in DTYPES.values()}
    robot = robots[torch.float64]
    columns = [spec.joint_names.index(n) for n in robot.joint_names]
    same = np.allclose(robot.lower.numpy(), spec.lower[columns]) and np.allclose(
        robot.upper.numpy(), spec.upper[columns]
    )

    def fk(q: torch.Tensor) -> torch.Tensor:
        return robots[q.dtype].forward_kinematics(q, links=LINK)

    def jac(q: torch.Tensor) -> torch.Tensor:
        return robots[q.dtype].jacobian(q, LINK)

    ops = {"FK": forward_op(fk), "FK+backward": backward_op(fk), "Jacobian": forward_op(jac)}
    note = "" if same else "torchik's Panda joint limits differ from panda.urdf's"
    poses, jacobian = (lambda q: fk(q).detach().numpy()), (lambda q: jac(q).detach().numpy())
    methods = [Method(TORCHIK, ops, columns=columns, note=note, poses=poses, jacobian=jacobian)]
    if with_compile:
        compiled = {
            "FK": forward_op(compile_forward(fk)),
            "Jacobian": forward_op(compile_forward(jac)),
        }
        methods.append(Method(f"{TORCHIK} (torch.compile)", compiled, columns=columns))
    return methods


# ------------------------------------------------------------------------------------ driver
def status_of(exc: BaseException) -> str:
    """An op a library does not have yet is "not available yet"; anything else "failed"."""
    kind = (
        "not available yet" if isinstance(exc, AttributeError | NotImplementedError) else "failed"
    )
    return f"{kind}: {describe(exc)}"


def prepare(method: Method, q64: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    q = q64.to(dtype)
    return q[:, method.columns].contiguous() if method.columns else q


def time_methods(methods: list[Method], q64: torch.Tensor, args: argparse.Namespace) -> Table:
    columns = [Column("op", "op"), Column("dtype", "dtype"), Column("batch", "batch"),
               Column("time_s", "time per call", fmt_time), Column("iqr_s", "IQR", fmt_time),
               Column("per_config_s", "per config", fmt_time)]  # fmt: skip
    table = Table("FK timings (Panda, panda_hand)", columns, case_keys=("op", "dtype", "batch"),
                  time_key="time_s", references=(PK,))  # fmt: skip
    for m in methods:
        if m.status != "ok":
            table.add(m.name, status=m.status)
        if m.note:
            table.notes.append(f"{m.name}: {m.note}")
    for op in OPS:
        for dtype in args.dtypes:
            for batch in args.batches:
                case = {"op": op, "dtype": dtype, "batch": batch}
                time_case(table, methods, case, q64, args.min_run_time)
    return table


def time_case(
    table: Table, methods: list[Method], case: dict, q64: torch.Tensor, min_run_time: float
) -> None:
    """Time every method offering this op, dtype and batch (``torchik.protocols.time_call``)."""
    op, dtype, batch = case["op"], case["dtype"], case["batch"]
    here = [m for m in methods if m.status == "ok" and op in m.ops and dtype in m.dtypes]
    here = [m for m in here if batch in m.batches]
    log(f"{op:12s} {dtype} batch {batch}: {', '.join(m.name for m in here)}")
    for m in here:
        try:
            t = time_call(
                m.ops[op](prepare(m, q64[:batch], DTYPES[dtype])), min_run_time=min_run_time
            )
        except Exception as exc:
            table.add(m.name, status=status_of(exc), **case)
            continue
        table.add(m.name, **case, time_s=t.median, iqr_s=t.iqr, per_config_s=t.median / batch,
                  reps=t.runs, calls_per_measurement=t.calls_per_run)  # fmt: skip


def agreement(methods: list[Method], q64: torch.Tensor) -> Table:
    """Max abs difference of the 4x4 poses (and Jacobians) against a float64 reference."""
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
    pose_ref = next(
        (m for m in usable if m.name == PIN), next((m for m in usable if m.name == PK), None)
    )
    jac_ref = next((m for m in usable if m.name == PK and m.jacobian is not None), None)
    if pose_ref is None:
        table.notes.append(
            "no float64 reference available (Pinocchio and pytorch_kinematics missing)"
        )
        return table
    table.notes.append(
        "pytorch_kinematics converts URDF origins to float32 while parsing (its urdf.py), so even "
        "its float64 chain differs from the float64 references by ~1e-7."
    )
    ref_T = pose_ref.poses(prepare(pose_ref, q64, torch.float64))
    ref_J = jac_ref.jacobian(prepare(jac_ref, q64, torch.float64)) if jac_ref else None
    for m in usable:
        for dtype in (d for d in DTYPES if d in m.dtypes):
            if m is pose_ref and dtype == "float64":
                continue
            compare_one(table, m, dtype, q64, (pose_ref.name, ref_T), (jac_ref, ref_J))
    return table


def compare_one(table: Table, m: Method, dtype: str, q64, pose_ref, jac_ref) -> None:
    row = {"dtype": dtype, "pose_reference": f"{pose_ref[0]} float64"}
    try:
        q = prepare(m, q64, DTYPES[dtype])
        row["max_abs_pose_diff"] = float(np.abs(m.poses(q) - pose_ref[1]).max())
        ref_method, ref_J = jac_ref
        if m.jacobian is not None and ref_method is not None and m is not ref_method:
            row["jacobian_reference"] = f"{ref_method.name} float64"
            row["max_abs_jacobian_diff"] = float(np.abs(m.jacobian(q) - ref_J).max())
    except Exception as exc:
        table.add(m.name, status=status_of(exc), **row)
        return
    table.add(m.name, **row)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=list(BATCHES))
    parser.add_argument("--dtypes", nargs="+", choices=list(DTYPES), default=list(DTYPES))
    parser.add_argument("--min-run-time", type=float, default=0.2, help="s measured per case")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile'd FK")
    add_common_args(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = Report("fk", 'FK benchmark (protocol "FK")', intro=INTRO)
    report.stamp["waited_for_quiet_s"] = wait_for_quiet(args.wait_idle)
    urdf = fixture_urdf(URDF)
    if urdf is None:
        table = Table("FK timings (Panda, panda_hand)", [])
        for name in (PK, PIN):
            table.add(name, status=f"missing: fixture {URDF} not found (no shared/ folder)")
        report.tables.append(table)
    else:
        spec = read_chain(urdf, LINK)
        n, robot = (
            max(max(args.batches), AGREEMENT_CONFIGS),
            torchik.load_robot(ROBOT, dtype=torch.float64),
        )
        q64 = robot.random_configuration(n, torch.Generator().manual_seed(0))  # its joint order
        q64 = q64[:, [robot.joint_names.index(j) for j in spec.joint_names]]  # the URDF's
        methods = [*pk_methods(urdf, spec, args.compile), pin_method(urdf, spec)]
        methods += torchik_methods(spec, args.compile)
        timings = time_methods(methods, q64, args)
        timings.notes += TIMING_NOTES
        report.tables += [timings, agreement(methods, q64[:AGREEMENT_CONFIGS])]
    md, _ = report.write(args.out)
    log(f"wrote {md}")
    return 0


INTRO = [
    "Panda from `shared/fixtures/urdf/panda.urdf` (read in place, never copied), end link "
    "`panda_hand`, 7 joints uniform within the URDF limits (torch generator seed 0, float64 "
    "samples cast to each dtype). Protocol: `shared/BENCHMARKS.md`, section FK.",
]
TIMING_NOTES = [
    "time per call = one call on the whole batch, by `torch.utils.benchmark` "
    "(`torchik.protocols.time_call`: warm-up, then blocks of calls until --min-run-time seconds "
    "are measured); median over the blocks, IQR = q3 - q1 of the blocks.",
    "× faster than pytorch_kinematics = pytorch_kinematics' time / this row's time, same op, dtype "
    "and batch (> 1: faster). Only ratios travel between machines.",
    "pytorch_kinematics FK = `chain.forward_kinematics(q).get_matrix()` on "
    "`build_serial_chain_from_urdf(urdf, 'panda_hand')`; its FK+backward uses its default "
    "analytic backward (q.requires_grad); the '(autograd backward)' row uses "
    "`forward_kinematics_tensor(q, analytical_grad=False)`; Jacobian = `chain.jacobian(q)`.",
    "FK+backward = forward then `poses.sum().backward()` (gradient w.r.t. q).",
    "Pinocchio: Python loop of `forwardKinematics` + `updateFramePlacement` per configuration, "
    "float64 only, batches 1 and 1024 only; its time is for the whole batch (per config "
    "alongside).",
]


if __name__ == "__main__":
    raise SystemExit(main())

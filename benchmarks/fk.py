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
from pathlib import Path

import numpy as np
import torch
from common import (
    ChainSpec,
    Report,
    Table,
    add_common_args,
    fixture_urdf,
    log,
    quiet,
    read_chain,
    try_import,
    wait_for_quiet,
)

import torchik
from experiments.fk_speed import (
    BATCHES,
    DTYPES,
    Method,
    agreement_table,
    backward_op,
    compile_forward,
    fk_timing_table,
    forward_op,
    torchik_methods,
    unavailable,
)

ROBOT, LINK, URDF = "panda", "panda_hand", "panda.urdf"
PIN_BATCHES = (1, 1024)
AGREEMENT_CONFIGS = 1024
PK, PIN = "pytorch_kinematics", "pinocchio (Python loop)"


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

    def loop(q: torch.Tensor) -> Callable[[], None]:
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
        limits = (spec.lower, spec.upper)
        methods += torchik_methods(ROBOT, LINK, spec.joint_names, args.compile, limits)
        timings = fk_timing_table(methods, q64, args.dtypes, args.batches, args.min_run_time,
                                  "FK timings (Panda, panda_hand)", (PK,), log)  # fmt: skip
        timings.notes += TIMING_NOTES
        agreement = agreement_table(methods, q64[:AGREEMENT_CONFIGS], (PIN, PK), PK)
        if len(agreement.notes) == 0:
            agreement.notes.append(PK_FLOAT32_NOTE)
        report.tables += [timings, agreement]
    md, _ = report.write(args.out)
    log(f"wrote {md}")
    return 0


INTRO = [
    "Panda from `shared/fixtures/urdf/panda.urdf` (read in place, never copied), end link "
    "`panda_hand`, 7 joints uniform within the URDF limits (torch generator seed 0, float64 "
    "samples cast to each dtype). Protocol: `shared/BENCHMARKS.md`, section FK.",
]
PK_FLOAT32_NOTE = (
    "pytorch_kinematics converts URDF origins to float32 while parsing (its urdf.py), so even "
    "its float64 chain differs from the float64 references by ~1e-7."
)
TIMING_NOTES = [
    "time per call = one call on the whole batch, by `torch.utils.benchmark` "
    "(`experiments.timing.time_call`: warm-up, then blocks of calls until --min-run-time seconds "
    "are measured, 7 blocks at least); median over the blocks, IQR = q3 - q1 of the blocks.",
    "× faster than pytorch_kinematics = pytorch_kinematics' time / this row's time, same op, dtype "
    "and batch (> 1: faster). Only ratios travel between machines.",
    "pytorch_kinematics FK = `chain.forward_kinematics(q).get_matrix()` on "
    "`build_serial_chain_from_urdf(urdf, 'panda_hand')`; its FK+backward uses its default "
    "analytic backward (q.requires_grad); the '(autograd backward)' row uses "
    "`forward_kinematics_tensor(q, analytical_grad=False)`; Jacobian = `chain.jacobian(q)`.",
    "FK+backward = forward then `poses.sum().backward()` (gradient w.r.t. q).",
    "`torchik` = `Robot(backend='reference')`, the pure PyTorch path (what a loss with "
    "gradients runs); `torchik (native)` = `backend='native'`, the kernels compiled by Numba "
    "that the default 'auto' takes on the CPU where no gradient is asked, once the process has "
    "loaded Numba (the CPU's IK loop does); they have no backward.",
    "Pinocchio: Python loop of `forwardKinematics` + `updateFramePlacement` per configuration, "
    "float64 only, batches 1 and 1024 only; its time is for the whole batch (per config "
    "alongside).",
]


if __name__ == "__main__":
    raise SystemExit(main())

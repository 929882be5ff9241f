"""GPU kinematics (issues 19, 34): FK, FK of every link, FK + backward and Jacobian throughput,
reference path against the fused Triton kernels and, as the protocol asks, pytorch_kinematics
in the same run (a ``missing: …`` row without it); numerical IK by the host loop and the
fixed-shape loop (eager, and captured in CUDA graphs); whole-body IK of the G1's two hands (the
protocol and its goals: :mod:`experiments.gpu`); the bundled Panda model's samples, drawn and
refined. Writes ``benchmarks/results/gpu.{md,json}``.

Run on a GPU machine (Triton installed, as with the CUDA torch wheels); ``make gpu-check``
runs it:

    python benchmarks/gpu.py                 # Panda, float32, 1 to 4 M configurations
    python benchmarks/gpu.py --quick         # a smoke run (small sizes; also on the CPU)
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

import torch
from common import RESULTS_DIR, Report, fixture_urdf, log, read_chain, try_import

from experiments.gpu import (
    ROUTE_WHOLEBODY,
    WHOLEBODY_GPU,
    anchor_fk_rows,
    failed_row,
    fk_rows,
    gpu_table,
    ik_rows,
    model_rows,
    route_limits,
    route_rows,
    wholebody_host_rows,
    wholebody_rows,
    wholebody_triton_rows,
)
from torchik import load_robot
from torchik.models import load_pretrained
from torchik.models.pretrained import fitted_sampler

GROUPS = ["fk", "pytorch_kinematics", "ik", "wholebody", "model", "wholebody_triton", "route"]
ON_REQUEST = ("wholebody_triton", "route")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--robot", default="panda")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--seconds", type=float, default=0.5, help="measurement per row")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--only", nargs="+", choices=GROUPS,
                        default=[g for g in GROUPS if g not in ON_REQUEST],
                        help="these rows (on request: wholebody_triton, whose G1 kernel takes "
                        "about 70 s to compile; route: where small solves go)")  # fmt: skip
    parser.add_argument("--name", default="gpu", help="the results' file name (NAME.md)")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    robot = load_robot(args.robot, dtype=torch.float32).to(device)
    link = robot.link_names[-1] if args.robot != "panda" else "panda_hand"
    fk_sizes = [4096] if args.quick else [1, 1024, 65536, 1 << 20, 1 << 22]  # the protocol's
    ik_sizes = [100] if args.quick else [1, 1000, 10_000, 100_000]
    g1 = load_robot("g1", dtype=torch.float32).to(device)
    hands = ["left_rubber_hand", "right_rubber_hand"]
    groups = [
        ("fk", lambda: fk_rows(robot, link, fk_sizes, args.seconds)),
        ("pytorch_kinematics", lambda: pytorch_kinematics_rows(device, fk_sizes, args.seconds)),
        ("ik", lambda: ik_rows(robot, link, ik_sizes, args.seconds)),
        ("wholebody", lambda: wholebody_rows(g1, hands, 20 if args.quick else 1000,
                                                 args.seconds)),
    ]  # fmt: skip
    if args.robot == "panda":  # the bundled pose model: 1000 refined solutions of one pose
        model = load_pretrained("panda", sampler="own").to(device)  # rows name their samplers
        n = 50 if args.quick else 1000
        fitted = fitted_sampler("panda"), fitted_sampler("panda", bf16=True)
        groups.append(("model", lambda: model_rows(robot, model, n, args.seconds, *fitted)))
    sizes = (20,) if args.quick else ROUTE_WHOLEBODY
    # the CPU's rows first, written before the G1 kernel's long compile
    for rows_of in (wholebody_host_rows, wholebody_triton_rows):
        groups.append(("wholebody_triton", partial(rows_of, g1, hands, sizes, args.seconds)))
    groups.append(("route", lambda: route_rows(robot, link, g1, hands, args.seconds, args.quick)))
    rows: list[dict] = []
    report = Report(args.name, "GPU kinematics (issues 19, 34)")  # stamped now: its duration
    for name, make_rows in [g for g in groups if g[0] in args.only]:
        try:  # a failing group is a failed row; the table is kept
            new = make_rows()
        except Exception as error:  # noqa: BLE001 - reported in the table and the log
            new = [failed_row(name, "-", 0, error)]
        for row in new:
            log(" ".join(f"{k}={v}" for k, v in row.items()))
        rows += new
        report.tables = [gpu_table(rows)]
        report.intro = _route_reading(rows) if device == "cuda" else []
        md, _ = report.write(args.out)  # after every group: a run cut short keeps its rows
    log(f"wrote {md}")
    print(md.read_text())


def pytorch_kinematics_rows(device: str, sizes: list[int], seconds: float) -> list[dict]:
    """The protocol's anchor in the same run: pytorch_kinematics' FK (its analytic backward
    too) and Jacobian of the Panda fixture's ``panda_hand``, float32, joints uniform within the
    URDF's limits (seed 0); one ``missing: …`` row when it does not import or the fixture is
    absent (said, never left out)."""
    pk, reason = try_import("pytorch_kinematics")
    urdf = fixture_urdf("panda.urdf")
    if pk is None or urdf is None:
        why = reason or "fixture panda.urdf not found (no shared/ folder)"
        return [{"what": "FK pose", "path": "pytorch_kinematics", "n": 0,
                 "status": f"missing: {why}"[:160]}]  # fmt: skip
    spec = read_chain(urdf, "panda_hand")
    chain = pk.build_serial_chain_from_urdf(urdf.read_text(), "panda_hand")
    chain = chain.to(dtype=torch.float32, device=device)
    lower, upper = (torch.tensor(x, dtype=torch.float32, device=device)
                    for x in (spec.lower, spec.upper))  # fmt: skip
    gen = torch.Generator().manual_seed(0)

    def sample(n: int) -> torch.Tensor:
        return lower + (upper - lower) * torch.rand(n, spec.dof, generator=gen).to(device)

    fk = lambda q: chain.forward_kinematics(q).get_matrix()  # noqa: E731
    ops = {"FK pose": fk, "FK + backward": fk, "Jacobian": chain.jacobian}
    return anchor_fk_rows("pytorch_kinematics", ops, sample, sizes, seconds)


def _route_reading(rows: list[dict]) -> list[str]:
    """The route group's reading: the limits of ``torchik.ik.host`` its rows call for."""
    from torchik.ik import host

    lines = []
    for gpu, which in ((None, ""), (WHOLEBODY_GPU, " than Triton's loop kernel's program")):
        limits = route_limits(rows, gpu=gpu)
        if limits:
            said = ", ".join(f"`{name} = {value}` (now {getattr(host, name)})"
                             for name, value in limits.items())  # fmt: skip
            lines.append(f"Where the CPU's compiled code answered first{which} at every size "
                         f"up to it: {said}.")  # fmt: skip
    return lines


if __name__ == "__main__":
    main()

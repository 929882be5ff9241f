"""GPU kinematics (issue 19): FK, FK + backward and Jacobian throughput, reference path against
the fused Triton kernels, and numerical IK with host checks every iteration against every
``sync_every`` iterations. Writes ``benchmarks/results/gpu.{md,json}``.

Run on a GPU machine (Triton installed, as with the CUDA torch wheels):

    python benchmarks/gpu.py                 # Panda, float32, 1 M and 4 M configurations
    python benchmarks/gpu.py --quick         # a smoke run (small sizes; also on the CPU)

Goals (H100): FK pose >= 5 G configurations/s at 4 M, FK + backward >= 2 G/s, Jacobian >= 2 G/s;
IK 1000 Panda poses >= 99.9 % in <= 10 ms, 100 k in <= 100 ms, one pose <= 2 ms.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path

import torch
from common import machine_stamp

from torchik import load_robot, solve_ik
from torchik.ik.lm import LevenbergMarquardt
from torchik.protocols import time_call

RESULTS = Path(__file__).parent / "results"


def _rate(fn: Callable[[], object], n: int, seconds: float) -> dict[str, float]:
    t = time_call(fn, min_run_time=seconds)
    return {"ms": t.median * 1e3, "G_per_s": n / t.median / 1e9}


def _fk_rows(robot, link: str, sizes: list[int], seconds: float) -> list[dict]:
    rows = []
    for n in sizes:
        q = robot.random_configuration(n).to(robot.device)
        for path in ("reference", "fused"):
            os.environ["TORCHIK_FUSED"] = "1" if path == "fused" else "0"
            qg = q.clone().requires_grad_()

            def backward(qg=qg):
                robot.forward_kinematics(qg, link).sum().backward()

            for what, fn in (
                ("FK pose", lambda q=q: robot.forward_kinematics(q, link)),
                ("FK + backward", backward),
                ("Jacobian", lambda q=q: robot.jacobian(q, link)),
            ):
                rows.append({"what": what, "path": path, "n": n, **_rate(fn, n, seconds)})
    os.environ.pop("TORCHIK_FUSED", None)
    return rows


def _ik_rows(robot, link: str, sizes: list[int], seconds: float) -> list[dict]:
    rows = []
    for n in sizes:
        g = torch.Generator().manual_seed(n)
        q = robot.random_configuration(n, generator=g).to(robot.device)
        targets = robot.forward_kinematics(q, link)
        for every in (1, 0):  # host check every iteration; the default (8 on a GPU)
            solver = LevenbergMarquardt(sync_every=every)
            result = solve_ik(robot, targets, link, method=solver, num_threads=None)
            t = time_call(
                lambda s=solver, t=targets: solve_ik(robot, t, link, method=s), min_run_time=seconds
            )
            rows.append({
                "what": "IK full pose", "path": f"sync_every={every or 'auto'}", "n": n,
                "ms": t.median * 1e3, "success": result.success.any(-1).double().mean().item(),
            })  # fmt: skip
    return rows


def _markdown(rows: list[dict], stamp: dict) -> str:
    lines = ["# GPU kinematics (issue 19)", "", "| what | path | n | ms | G/s | success |"]
    lines.append("|---|---|---:|---:|---:|---:|")
    for r in rows:
        rate = f"{r['G_per_s']:.3f}" if "G_per_s" in r else ""
        success = f"{100 * r['success']:.2f} %" if "success" in r else ""
        lines.append(
            f"| {r['what']} | {r['path']} | {r['n']:,} | {r['ms']:.3f} | {rate} | {success} |"
        )
    lines += [
        "",
        "Stamp: " + ", ".join(f"{k}: {stamp[k]}" for k in ("date", "gpu", "torch", "command")),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--robot", default="panda")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--seconds", type=float, default=0.5, help="measurement per row")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    robot = load_robot(args.robot, dtype=torch.float32).to(device)
    link = robot.link_names[-1] if args.robot != "panda" else "panda_hand"
    fk_sizes = [4096] if args.quick else [1, 1 << 20, 1 << 22]
    ik_sizes = [100] if args.quick else [1, 1000, 10_000, 100_000]
    rows = _fk_rows(robot, link, fk_sizes, args.seconds)
    rows += _ik_rows(robot, link, ik_sizes, args.seconds)
    stamp = machine_stamp()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu.json").write_text(json.dumps({"stamp": stamp, "rows": rows}, indent=1) + "\n")
    (args.out / "gpu.md").write_text(_markdown(rows, stamp))
    print(_markdown(rows, stamp))


if __name__ == "__main__":
    main()

"""What the fused kernels and the IK loop cost on a GPU, for choosing what to speed up (issue 34).

1. Each fused kernel (FK of one link, of every link, FK backward, Jacobian, the LM step) on the
   Panda at 4 M configurations, float32, for several launch shapes (rows per program, warps) and
   both store styles (tiles, scalar stores): its registers, spills and shared memory as the
   compiler reports them, and its median time by CUDA events (``triton.testing.do_bench``).
2. One IK solve (1 and 1 000 Panda poses; whole-body G1) under ``torch.profiler``: kernels and
   graph launches, their summed GPU time against the wall time of the call.

Run on the GPU machine (``make gpu-check`` does not; this is a probe):

    python3 scripts/gpu_probe.py --out $OUT          # writes $OUT/gpu_probe.json too

On the CPU (``--dry-run``) it runs the same code at tiny sizes in Triton's interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

SHAPES = [(128, 4), (64, 2), (256, 4), (32, 1)]
"""(rows per program, warps) tried per kernel: (128, 4) is today's."""


def _kernels(robot, link: str, n: int):
    """The fused calls timed: name -> a function of no arguments."""
    from torchik.kinematics import fused

    tree, index = robot.tree, robot.link_index(link)
    q = robot.random_configuration(n).to(robot.device)
    grad = torch.randn(n, 1, 4, 4, device=q.device)
    lo, hi = robot.lower.to(q), robot.upper.to(q)
    target = robot.forward_kinematics(robot.random_configuration(n).to(q.device), link)
    w = torch.tensor([1.0, 1, 1, 0.3, 0.3, 0.3], device=q.device)
    err = q.new_empty(n, 6)
    every = tuple(range(len(robot.link_names)))

    def backward():
        out = torch.empty_like(q)
        fused._launch("backward", tree, (index,), q, grad, out, *grad.stride())

    return {
        "fk pose": lambda: fused.forward_kinematics(q, tree, (index,)),
        "fk all links": lambda: fused.forward_kinematics(q, tree, every),
        "fk backward": backward,
        "jacobian": lambda: fused.jacobian(q, tree, index),
        "lm step": lambda: fused.lm_step(q, tree, index, target[:, :3, 3], target[:, :3, :3], w,
                                         0.1, lo, hi, residual=err),
    }  # fmt: skip


def kernel_rows(robot, link: str, n: int, cuda: bool) -> list[dict]:
    from torchik.kinematics import fused

    rows = []
    for tiles in (True, False):
        fused.TILE_STORES = tiles
        for block, warps in SHAPES if cuda and tiles else SHAPES[:2]:
            fused.BLOCK, fused.WARPS = block, warps
            for name, call in _kernels(robot, link, n).items():
                row = {"kernel": name, "tiles": tiles, "block": block, "warps": warps}
                try:
                    compiled = _compiled(call)
                    row.update(_report(compiled))
                    row["ms"] = _median_ms(call, cuda)
                    row["G_per_s"] = n / row["ms"] / 1e6
                except Exception as error:  # noqa: BLE001 - a row of the table
                    row["error"] = str(error)[:200]
                print(json.dumps(row), flush=True)
                rows.append(row)
    fused.TILE_STORES, fused.BLOCK, fused.WARPS = True, 128, 4
    return rows


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


def profile_rows(robot, g1, link: str, sizes: list[int], cuda: bool) -> list[dict]:
    """Kernels and GPU time of one solve, after a warm-up solve of the same shape."""
    from torchik.ik import LevenbergMarquardt, solve_ik, solve_wholebody

    rows = []
    cases = []
    for n in sizes:
        g = torch.Generator().manual_seed(n)
        targets = robot.forward_kinematics(robot.random_configuration(n, generator=g).to(
            robot.device), link)  # fmt: skip
        for name, settings in (("graphs", {"loop": "fixed"}),
                               ("graphs, fused step", {"loop": "fixed", "fused_step": True}),
                               ("eager", {"loop": "fixed", "capture": False})):  # fmt: skip
            solver = LevenbergMarquardt(**settings)
            cases.append(
                (f"IK {name}", n, lambda t=targets, s=solver: solve_ik(robot, t, link, method=s))
            )
    hands = ["left_rubber_hand", "right_rubber_hand"]
    n = sizes[-1]
    poses = g1.forward_kinematics(g1.random_configuration(n).to(g1.device), hands)
    wb = dict(zip(hands, poses.unbind(1), strict=True))
    cases.append(("whole-body graphs", n, lambda: solve_wholebody(g1, wb, loop="fixed")))
    for what, n, call in cases:
        row = {"case": what, "n": n}
        try:
            row.update(_profiled(call, cuda))
        except Exception as error:  # noqa: BLE001
            row["error"] = str(error)[:200]
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes (CPU, interpreter)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["kernels", "profile"])
    args = parser.parse_args()
    if args.dry_run:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from torchik import load_robot

    cuda = torch.cuda.is_available() and not args.dry_run
    device = "cuda" if cuda else "cpu"
    robot = load_robot("panda", dtype=torch.float32).to(device)
    g1 = load_robot("g1", dtype=torch.float32).to(device)
    if not cuda:
        robot.backend = g1.backend = "fused"
    out: dict = {"device": torch.cuda.get_device_name() if cuda else "cpu"}
    if "kernels" not in args.skip:
        out["kernels"] = kernel_rows(robot, "panda_hand", 1 << 22 if cuda else 64, cuda)
    if "profile" not in args.skip:
        robot.backend = g1.backend = "auto"
        out["profile"] = profile_rows(robot, g1, "panda_hand", [1, 1000] if cuda else [4], cuda)
    args.out.mkdir(parents=True, exist_ok=True)
    out["command"] = "python3 " + " ".join(sys.argv)
    out["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (args.out / "gpu_probe.json").write_text(json.dumps(out, indent=1))
    (args.out / "gpu_probe.md").write_text(markdown(out))
    _summary(out)


def markdown(out: dict) -> str:
    """The probe's two tables (kernels, solves) as Markdown, stamped with device and command."""
    lines = ["# GPU probe: fused kernels and IK solves (issue 34)", "",
             f"Device: {out['device']}; date {out.get('date', '?')}; command "
             f"`{out.get('command', 'python3 scripts/gpu_probe.py')}`. Panda, float32.", "",
             "## Kernels at 4 M configurations (median of CUDA events, do_bench)", "",
             "| kernel | stores | rows/program | warps | registers | shared B | ms | G/s |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in out.get("kernels", []):
        ms = f"{r['ms']:.3f} | {r['G_per_s']:.2f}" if "ms" in r else f"failed: {r.get('error')} |"
        lines.append(
            f"| {r['kernel']} | {'tiles' if r['tiles'] else 'scalar'} | {r['block']} | "
            f"{r['warps']} | {r.get('regs', '-')} | {r.get('shared', '-')} | {ms} |"
        )
    lines += ["", "## One solve under torch.profiler (after two warm-up solves)", "",
              "| case | n | wall ms | kernels | GPU ms (kernels) | graph launches | syncs, copies "
              "| mean iterations |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in out.get("profile", []):
        if "error" in r:
            lines.append(f"| {r['case']} | {r['n']} | failed: {r['error']} | | | | | |")
            continue
        lines.append(
            f"| {r['case']} | {r['n']:,} | {r['wall_ms']:.1f} | {r['kernels']:,} | "
            f"{r['gpu_ms']:.2f} | {r['graph_launches']} | {r['syncs_or_copies']} | "
            f"{r['iterations']} |"
        )
    return "\n".join(lines) + "\n"


def _summary(out: dict) -> None:
    best: dict[str, dict] = {}
    for row in out.get("kernels", []):
        if "ms" in row and (row["kernel"] not in best or row["ms"] < best[row["kernel"]]["ms"]):
            best[row["kernel"]] = row
    print("\nbest launch per kernel (today: tiles, 128 rows, 4 warps):")
    for name, row in best.items():
        print(
            f"  {name:14s} {row['ms']:.3f} ms {row['G_per_s']:.2f} G/s  tiles={row['tiles']} "
            f"block={row['block']} warps={row['warps']} regs={row.get('regs')} "
            f"spills={row.get('spills')} shared={row.get('shared')}"
        )
    for row in out.get("profile", []):
        print("  " + " ".join(f"{k}={v}" for k, v in row.items() if k != "top"))
    sys.stdout.flush()


if __name__ == "__main__":
    main()

"""What the fused kernels and the IK loop cost on a GPU (issue 34; the protocol:
:mod:`experiments.gpu_probe`): each fused kernel per launch shape and store style, IK solves
under the profiler, and settings of the fixed loop timed. Writes
``benchmarks/results/gpu_probe.{md,json}`` and, with ``--host`` or ``--only host``, the host's
profile of a solve (``solve_ik`` of the Panda, whole-body IK of the G1's hands) to
``gpu_probe_host.txt``.

Run on a GPU machine (Triton installed, as with the CUDA torch wheels):

    python benchmarks/gpu_probe.py                     # kernels, solves, loop settings
    python benchmarks/gpu_probe.py --only solves variants --host
    python benchmarks/gpu_probe.py --only host         # the host's profile alone
    python benchmarks/gpu_probe.py --quick             # tiny, also on the CPU (interpreter)
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
from common import RESULTS_DIR, Report, log

GROUPS = ["kernels", "solves", "variants"]
"""The tables; ``--only host`` (or ``--host`` beside tables) writes the host's profile alone."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (CPU: the interpreter)")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=[*GROUPS, "host"],
        default=GROUPS,
        help="these tables (host: the host's profile alone)",
    )
    parser.add_argument("--host", action="store_true", help="also profile the host side")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--name", default="gpu_probe", help="the results' file name (NAME.md)")
    args = parser.parse_args()
    cuda = torch.cuda.is_available() and not args.quick
    if not cuda:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before Triton is imported
    from experiments.gpu import gpu_table
    from experiments.gpu_probe import (
        host_profile,
        kernel_rows,
        kernel_table,
        profile_rows,
        solve_table,
        variant_rows,
    )
    from torchik import load_robot

    device = "cuda" if cuda else "cpu"
    backend = "auto" if cuda else "fused"
    robot = load_robot("panda", dtype=torch.float32, backend=backend).to(device)
    g1 = load_robot("g1", dtype=torch.float32, backend=backend).to(device)
    report = Report(args.name, "GPU probe: fused kernels and IK solves (issue 34)")  # stamped now
    tables = report.tables
    if "kernels" in args.only:
        tables.append(kernel_table(kernel_rows(robot, "panda_hand", 1 << 22 if cuda else 64, cuda)))
        log("kernels done")
    if "solves" in args.only:
        sizes = [1, 1000] if cuda else [4]
        tables.append(solve_table(profile_rows(robot, g1 if cuda else None, "panda_hand", sizes,
                                               cuda)))  # fmt: skip
        log("solves done")
    if "variants" in args.only:
        sizes = [1, 1000, 10_000, 100_000] if cuda else [4]
        table = gpu_table(variant_rows(robot, "panda_hand", sizes, 0.3 if cuda else 0.01))
        table.title = "Fixed-loop settings, full-pose IK (median of CUDA events)"
        tables.append(table)
        log("variants done")
    report.intro = ["Panda, float32; one GPU. Registers and shared memory: Triton's compile "
                    "report."]  # fmt: skip
    if args.host or "host" in args.only:
        sizes = [1, 1000] if cuda else [4]
        hands = ["left_rubber_hand", "right_rubber_hand"]
        text = "\n".join(
            [host_profile(robot, "panda_hand", sizes, cuda), host_profile(g1, hands, sizes, cuda)]
        )
        (args.out / f"{args.name}_host.txt").write_text(text)
        log(f"wrote {args.out / f'{args.name}_host.txt'}")
    if tables:
        md, _ = report.write(args.out)
        log(f"wrote {md}")
        print(md.read_text())


if __name__ == "__main__":
    main()

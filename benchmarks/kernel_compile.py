"""The fused kernels of IK's GPU programs compiled for a GPU here, without one.

``python benchmarks/kernel_compile.py [--calls panda g1 ...] [--arch 90]``

For each call (:data:`CALLS`) one process records, in Triton's interpreter, the kernels the call
launches (``experiments.kernel_compile.recorded_kernels``), then each kernel is compiled for
``sm_ARCH`` in a fresh process (``experiments.kernel_compile.compiled``): seconds in all and in
Triton's GPU passes, registers and spilled bytes a thread (``ptxas -v``), and the instructions of
the kernel's main loop with its spill stores and loads (``nvdisasm``). Writes
``benchmarks/results/kernel_compile.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

CALLS = {
    "panda": "solve_ik's one-graph program, one Panda pose, float32",
    "panda_restarts": "the same with fused_restarts (restarts and early stop in the loop kernel)",
    "g1": "solve_wholebody's program on Triton's loop kernel, the G1's two hands, float32",
    "g1_restarts": "the same with fused_restarts",
}
"""The calls whose kernels are compiled: name -> what it is."""


def _call(name: str):
    """The call ``name`` of :data:`CALLS`, made ready (in the interpreter's process)."""
    import torch

    from torchik import load_robot
    from torchik.ik import LevenbergMarquardt, captured
    from torchik.ik.rounds import Run

    restarts = name.endswith("_restarts")
    if name.startswith("panda"):
        robot = load_robot("panda", dtype=torch.float32, backend="fused")
        pose = load_robot("panda").forward_kinematics(torch.zeros(1, 7), "panda_hand").float()
        solver = LevenbergMarquardt(loop="fixed", one_graph=True, fused_restarts=restarts)
        run = Run(solver, robot, "panda_hand", 1e-3, 0.0175, pose[:, :3, 3], pose[:, :3, :3], 2,
                  restarts=True, seed_pool=256, generator=None)  # fmt: skip
        return lambda: captured.program(run, run.position, run.rotmat)
    from experiments.gpu import _wholebody_targets
    from torchik.ik.wholebody import captured as wholebody_captured
    from torchik.ik.wholebody import solve as wholebody

    wholebody.FUSED_LOOP = True
    robot = load_robot("g1", dtype=torch.float32, backend="fused")
    hands = ["left_rubber_hand", "right_rubber_hand"]
    targets = _wholebody_targets(load_robot("g1", dtype=torch.float32), hands, 2)
    problem, *_ = wholebody._problem(robot, targets, None, None, None, 0.0, False, None, 2,
                                     1e-3, 0.0175, None, None)  # fmt: skip
    solver = wholebody.WholeBodyLM(loop="fixed", max_iters=wholebody.MAX_ITERS,
                                   fused_restarts=restarts)  # fmt: skip
    return lambda: wholebody_captured.program(solver, problem, 2, 256, None)


def _worker(argv: list[str]) -> int:
    """``--record CALL OUT`` (in the interpreter) or ``--compile ENTRY ARCH``: JSON on stdout."""
    sys.path[:0] = [str(REPO / "src"), str(REPO)]
    if argv[0] == "--record":
        from experiments.kernel_compile import recorded_kernels

        Path(argv[2]).write_text(json.dumps(recorded_kernels(_call(argv[1]))))
        return 0
    from experiments.kernel_compile import compiled

    print(json.dumps(compiled(json.loads(Path(argv[1]).read_text()), int(argv[2]))))
    return 0


def _subprocess(args: list[str], interpret: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9's default, without its warning
    done = subprocess.run([sys.executable, __file__, *args], env=env, capture_output=True,
                          text=True, timeout=1800)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1][:200])
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    raw = sys.argv[1:] if argv is None else argv
    if raw and raw[0] in ("--record", "--compile"):
        return _worker(raw)
    import common

    parser = argparse.ArgumentParser(prog="kernel_compile.py", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", nargs="+", default=list(CALLS), choices=list(CALLS))
    parser.add_argument("--arch", type=int, default=90, help="compute capability (90: Hopper)")
    common.add_common_args(parser)
    args = parser.parse_args(raw)
    report = common.Report("kernel_compile", "Fused kernels compiled for a GPU, on a CPU")
    report.stamp["waited_for_quiet_s"] = common.wait_for_quiet(args.wait_idle)
    report.intro = [__doc__.split("\n\n")[2].replace("\n", " ")]
    table = common.Table(
        f"Compiled for sm_{args.arch} (Triton's compiler, no GPU)",
        [common.Column(key, header, fmt) for key, header, fmt in _COLUMNS],
    )
    report.tables.append(table)
    with tempfile.TemporaryDirectory() as tmp:
        for call in args.calls:
            recorded = Path(tmp) / f"{call}.json"
            _subprocess(["--record", call, str(recorded)], interpret=True)
            for entry in json.loads(recorded.read_text()):
                (Path(tmp) / "entry.json").write_text(json.dumps(entry))
                result = json.loads(_subprocess(["--compile", str(Path(tmp) / "entry.json"),
                                                 str(args.arch)], interpret=False))  # fmt: skip
                row = _row(call, entry, result)
                common.log(f"{call} {entry['name']}: {row['seconds']:.1f} s")
                table.add(entry["name"], "ok", **row)
            report.write(args.out)
    return 0


_COLUMNS = (
    ("call", "call", str), ("dtype", "dtype", str), ("lines", "lines", str),
    ("seconds", "compile s", "{:.1f}".format),
    ("ttgir_s", "of which GPU passes s", "{:.1f}".format),
    ("registers", "registers", str), ("spill_stores", "spill stores (B)", str),
    ("spill_loads", "spill loads (B)", str), ("loop", "loop instructions", str),
    ("loop_stl", "loop STL", str), ("loop_ldl", "loop LDL", str),
)  # fmt: skip
"""The table's columns: row key, header, format (numbers stay numbers in the JSON: the
compile seconds are what ``torchik plot benchmark`` draws)."""


def _row(call: str, entry: dict, result: dict) -> dict:
    ptxas, loop = result["ptxas"], result["loop"]
    return dict(
        call=call,
        dtype=entry["signature"].get("q_ptr", "?").lstrip("*"),
        lines=result["lines"],
        seconds=result["seconds"],
        ttgir_s=result["stages"].get("ttgir", 0.0),
        registers=ptxas["registers"],
        spill_stores=ptxas["spill_stores"],
        spill_loads=ptxas["spill_loads"],
        loop=loop["loop"],
        loop_stl=loop["loop_stl"],
        loop_ldl=loop["loop_ldl"],
    )


if __name__ == "__main__":
    sys.path[:0] = [str(HERE), str(REPO)]
    raise SystemExit(main())

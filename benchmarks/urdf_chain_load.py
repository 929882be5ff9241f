"""Cost of a 2000-joint serial chain (issue 17: loading must take at most 0.2 s): CPU seconds of
parsing, of building the Robot, and of the first FK, FK + backward and Jacobian, which build the
per-request plans. Each is a first call on a fresh robot, timed with ``time.process_time`` over
``--repeats`` fresh robots (median), one torch thread: ``experiments.urdf_load.first_call_seconds``.

    .venv/bin/python benchmarks/urdf_chain_load.py   # writes results/urdf_chain_load.*
    .venv/bin/python benchmarks/urdf_chain_load.py --joints 500 --out /tmp/chain
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from common import RESULTS_DIR, Column, Report, Table, log

from experiments.urdf_load import crafted_urdf, first_call_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--joints", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    default = RESULTS_DIR / "urdf_chain_load"
    parser.add_argument("--out", type=Path, default=default, help="results path (.md, .json)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = args.out.with_suffix("")  # as before: /tmp/chain.md also writes /tmp/chain.json
    report = Report(out.name, f"A {args.joints}-joint serial chain: CPU seconds of first calls")
    report.intro = [
        f"Median of {args.repeats} fresh robots, batch {args.batch}, float64, one torch thread, "
        "`time.process_time` (CPU time, steadier than wall time on the shared machine)."
    ]
    title = f"{args.joints}-joint chain, first calls (CPU s, median of {args.repeats})"
    table = Table(title, [Column("cpu_s", "CPU s", lambda s: f"{s:.3f}")])
    table.notes.append("Goal (issue 17): `Robot.from_urdf` <= 0.2 s.")
    text = crafted_urdf("chain", args.joints + 1)
    for step, seconds in first_call_seconds(text, batch=args.batch, repeats=args.repeats).items():
        table.add(step, cpu_s=seconds)
    report.tables.append(table)
    for path in report.write(out.parent):
        log(f"wrote {path}")
    print(table.markdown())


if __name__ == "__main__":
    main()

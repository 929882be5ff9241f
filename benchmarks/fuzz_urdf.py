"""Long URDF fuzzing run (``make fuzz``): writes the ``## URDF`` section of
``benchmarks/results/fuzz.md`` (other sections, such as ``## Checkpoints``, are kept).

The strategies and the check are those of the CI sample (``tests/fuzz/``): valid random trees
damaged by up to three tree mutations and one text mutation, each loaded as a
:class:`torchik.Robot` whose FK and gradient must be finite in float64 and float32.

    TORCHIK_FUZZ_EXAMPLES=10000 python benchmarks/fuzz_urdf.py      # the committed run
    python benchmarks/fuzz_urdf.py --examples 200 --out /tmp/fuzz.md  # a quick look
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

from common import RESULTS_DIR, machine_stamp

from tests.fuzz.urdf_campaign import Tally, fuzz  # common put the repository on sys.path
from tests.fuzz.urdf_strategies import ACCEPTABLE, HANG_S
from torchik.files import write_text

STAMP_KEYS = ("date", "command", "cpu", "cores", "torch_threads", "python", "torch", "torchik")


def section(stamp: dict, tally: Tally, seconds: float) -> str:
    """The markdown of the ``## URDF`` section; ``stamp`` taken when the run started."""
    counts = tally.counts
    total, bad = sum(counts.values()), sum(n for k, n in counts.items() if k not in ACCEPTABLE)
    lines = ["## URDF", "", *(f"- {key}: `{stamp[key]}`" for key in STAMP_KEYS)]
    lines += [
        f"- run time: {seconds:.0f} s; slowest single case {tally.slowest:.2f} s "
        f"(hang: over {HANG_S} s)",
        "",
        f"{total} mutated URDFs: {counts['loaded']} loaded with finite FK and gradients, "
        f"{counts['URDFError']} clear URDFError, {bad} other (crashes, hangs, non-finite FK).",
        "",
        "| outcome | count | example |",
        "|---|---|---|",
    ]
    for key, count in counts.most_common():
        lines.append(f"| {key} | {count} | {_cell(tally.details.get(key, ''))[:120]} |")
    lines += ["", "| URDFError message kind | count |", "|---|---|"]
    lines += [f"| {_cell(kind)} | {n} |" for kind, n in tally.kinds.most_common(25)]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def write(path: Path, text: str) -> None:
    """Replace the ``## URDF`` section of ``path`` (created if missing), keep the others."""
    old = path.read_text() if path.exists() else "# Fuzzing results (issue 15)\n\n"
    pattern = re.compile(r"^## URDF\n.*?(?=^## |\Z)", re.S | re.M)
    new = pattern.sub(lambda _: text + "\n", old) if pattern.search(old) else old + text
    write_text(path, new.rstrip("\n") + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = int(os.environ.get("TORCHIK_FUZZ_EXAMPLES", "10000"))
    parser.add_argument("--examples", type=int, default=default)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "fuzz.md")
    args = parser.parse_args()
    start, stamp = time.perf_counter(), machine_stamp()
    stamp["command"] += f"  (examples {args.examples}, seed {args.seed})"
    tally = fuzz(args.examples, args.seed)
    write(args.out, section(stamp, tally, time.perf_counter() - start))
    print(args.out.read_text())
    sys.exit(0 if tally.counts["loaded"] + tally.counts["URDFError"] == tally.counts.total() else 1)


if __name__ == "__main__":
    main()

"""Long URDF fuzzing run (``make fuzz``): writes the ``## URDF`` section of
``benchmarks/results/fuzz.md`` (other sections, such as ``## Checkpoints``, are kept).

The strategies and the check are those of the CI sample (``tests/fuzz/urdf_strategies.py``):
valid random trees damaged by up to three tree mutations and one text mutation, each loaded as
a :class:`torchik.Robot` whose FK and gradient must be finite in float64 and float32.

    TORCHIK_FUZZ_EXAMPLES=10000 python benchmarks/fuzz_urdf.py      # the committed run
    python benchmarks/fuzz_urdf.py --examples 200 --out /tmp/fuzz.md  # a quick look
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from common import RESULTS_DIR, machine_stamp
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fuzz.urdf_strategies import ACCEPTABLE, HANG_S, check_source, mutated_urdfs  # noqa: E402

STAMP_KEYS = ("date", "command", "cpu", "cores", "torch_threads", "python", "torch", "torchik")


def fuzz(examples: int, seed: int) -> tuple[Counter, Counter, dict[str, str], float]:
    """Run ``examples`` mutations; returns the counts of outcomes and of URDFError message
    kinds, one detail per outcome, and the slowest case in seconds."""
    counts: Counter = Counter()
    kinds: Counter = Counter()
    details: dict[str, str] = {}
    slowest = [0.0]
    folder = tempfile.mkdtemp()

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @hypothesis_seed(seed)  # reproducible runs
    @given(mutated_urdfs())
    def one(source: str | bytes) -> None:
        signal.setitimer(signal.ITIMER_REAL, 2 * HANG_S)  # a real hang would never return
        try:
            outcome, detail, seconds = check_source(source, Path(folder))
        except _Hang:
            outcome, detail, seconds = "hang", repr(source)[:200], 2 * HANG_S
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        counts[outcome] += 1
        if outcome == "URDFError":  # tally the kinds of message, names and numbers left out
            kinds[_kind(detail)] += 1
        details.setdefault(outcome, detail)
        slowest[0] = max(slowest[0], seconds)

    signal.signal(signal.SIGALRM, _raise_hang)
    one()
    return counts, kinds, details, slowest[0]


class _Hang(BaseException):
    """Raised by the alarm in a case that runs too long (a BaseException: never caught as a
    crash)."""


def _raise_hang(*_: object) -> None:
    raise _Hang


def _kind(message: str) -> str:
    message = re.sub(r"^\S*fuzz\.urdf: ", "", message)
    message = re.sub(r"'[^']*'|\"[^\"]*\"|\d+(\.\d+)?(e[+-]?\d+)?", "…", message)
    return message[:70]


def section(
    stamp: dict,
    counts: Counter,
    kinds: Counter,
    details: dict[str, str],
    slowest: float,
    seconds: float,
) -> str:
    """The markdown of the ``## URDF`` section; ``stamp`` taken when the run started."""
    total = sum(counts.values())
    bad = total - sum(counts[key] for key in ACCEPTABLE)
    lines = ["## URDF", ""]
    lines += [f"- {key}: `{stamp[key]}`" for key in STAMP_KEYS]
    lines += [
        f"- run time: {seconds:.0f} s; slowest single case {slowest:.2f} s (hang: over {HANG_S} s)",
        "",
        f"{total} mutated URDFs: {counts['loaded']} loaded with finite FK and gradients, "
        f"{counts['URDFError']} clear URDFError, {bad} other (crashes, hangs, non-finite FK).",
        "",
        "| outcome | count | example |",
        "|---|---|---|",
    ]
    for key, count in counts.most_common():
        lines.append(f"| {key} | {count} | {_cell(details.get(key, ''))[:120]} |")
    lines += ["", "| URDFError message kind | count |", "|---|---|"]
    lines += [f"| {_cell(kind)} | {n} |" for kind, n in kinds.most_common(25)]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def write(path: Path, text: str) -> None:
    """Replace the ``## URDF`` section of ``path`` (created if missing), keep the others."""
    old = path.read_text() if path.exists() else "# Fuzzing results (issue 15)\n\n"
    pattern = re.compile(r"^## URDF\n.*?(?=^## |\Z)", re.S | re.M)
    new = pattern.sub(lambda _: text + "\n", old) if pattern.search(old) else old + text
    path.write_text(new.rstrip("\n") + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = int(os.environ.get("TORCHIK_FUZZ_EXAMPLES", "10000"))
    parser.add_argument("--examples", type=int, default=default)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "fuzz.md")
    args = parser.parse_args()
    start, stamp = time.perf_counter(), machine_stamp()
    stamp["command"] += f"  (examples {args.examples}, seed {args.seed})"
    counts, kinds, details, slowest = fuzz(args.examples, args.seed)
    elapsed = time.perf_counter() - start
    write(args.out, section(stamp, counts, kinds, details, slowest, elapsed))
    print(args.out.read_text())
    sys.exit(0 if counts["loaded"] + counts["URDFError"] == sum(counts.values()) else 1)


if __name__ == "__main__":
    main()

"""Run the benchmarks: ``python benchmarks/run.py [NAME ...|all] [--wait-idle S] [--out DIR]``
(default: all).

``all`` runs the quick ones (minutes each; ``train_speed`` about 10 on a CPU); the learned-IK
protocols that train models for tens of minutes to hours on a CPU (``iknet``, ``posterior``,
``paths``, ``finetune``, ``learned_recipes``) run only by name, with their scripts' defaults.
Each benchmark runs in its own process (fresh thread pool and memory; its results stamp its own
command) and writes ``benchmarks/results/<name>.md`` and ``.json`` (``--out DIR``: there).
``--wait-idle`` and ``--out`` are every script's; a script's own options go after ``--``
(``run.py fk -- --batches 1 10``) and are forwarded as they are: each script runs in the
checkout, so a path among them is read from there (give it absolute; ``--out`` is resolved
here, from the current folder). ``make bench`` calls this.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import NoReturn

HERE = Path(__file__).resolve().parent
BENCHMARKS = ("fk", "ik", "wholebody", "pose", "seq2seq", "train_speed")
LONG = ("iknet", "posterior", "paths", "finetune", "learned_recipes")
"""Run only when named: each trains models for a long time on a CPU."""
PARENT_ENV = "TORCHIK_BENCH_PARENT"  # experiments.report.PARENT_ENV (kept import-free here)


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (argparse prints the whole usage first)."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


def _parse(argv: list[str], known: dict[str, Path]) -> tuple[list[str], list[str]]:
    """``(names, forwarded)``: the benchmarks to run and the options for each script (the
    common ones, then those after ``--``); anything else is refused here, before any script
    starts (an unknown option failed in every script in turn, each with its usage)."""
    cut = argv.index("--") if "--" in argv else len(argv)
    prog = os.environ.get("TORCHIK_PROG", "python benchmarks/run.py")  # set by `torchik bench`
    description = " ".join(__doc__.split("\n\n")[0].split()).replace("``", "")
    epilog = "A script's own options go after --, e.g. " + prog + " fk -- --batches 1 10."
    parser = _Parser(prog=prog, description=description, epilog=epilog)
    parser.add_argument("which", nargs="*", help=f"any of {', '.join(known)}, all (default)")
    parser.add_argument("--wait-idle", type=_seconds, metavar="S",
                        help="wait up to S seconds for an idle CPU before each script")  # fmt: skip
    parser.add_argument("--out", metavar="DIR", help="results folder (default benchmarks/results)")
    args, rest = parser.parse_known_args(argv[:cut])
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)} (a script's own options go "
                     "after --)")  # fmt: skip
    unknown = sorted(set(args.which) - {*known, "all"})
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}; choose from "
                     f"{', '.join(known)} or all")  # fmt: skip
    forwarded = [] if args.wait_idle is None else ["--wait-idle", str(args.wait_idle)]
    if args.out is not None:  # the scripts run in the checkout: a path from here
        forwarded += ["--out", str(Path(args.out).resolve())]
    which = args.which or ["all"]
    names = list(BENCHMARKS) if "all" in which else list(dict.fromkeys(which))
    return names, forwarded + argv[cut + 1 :]


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    known = {name: HERE / f"{name}.py" for name in (*BENCHMARKS, *LONG)}
    names, extra = _parse(list(sys.argv[1:] if argv is None else argv), known)
    env = dict(os.environ, **{PARENT_ENV: shlex.join(["benchmarks/run.py", *sys.argv[1:]])})
    failed = []
    for name in names:
        start = time.perf_counter()
        print(f"== {name}: {known[name].name}", flush=True)
        command = [sys.executable, str(known[name].relative_to(HERE.parent)), *extra]
        code = subprocess.call(command, cwd=HERE.parent, env=env)
        print(f"== {name}: exit {code} after {time.perf_counter() - start:.0f} s", flush=True)
        if code:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

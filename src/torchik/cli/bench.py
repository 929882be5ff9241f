"""``torchik bench``: run ``benchmarks/run.py`` of a source checkout."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="run benchmarks/run.py of a source checkout", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for benchmarks/run.py")
    p.set_defaults(func=run)


def _find_benchmarks() -> Path | None:
    # src/torchik/cli/bench.py: the checkout is three folders up
    for root in (Path.cwd(), Path(__file__).resolve().parents[3]):
        if (root / "benchmarks" / "run.py").is_file():
            return root
    return None


def run(args: argparse.Namespace) -> int:
    root = _find_benchmarks()
    if root is None and args.rest in (["-h"], ["--help"]):
        print(
            "usage: torchik bench [fk|ik|all] [--wait-idle S]  (runs benchmarks/run.py of a "
            "source checkout; run it there for its options)"
        )
        return 0
    if root is None:
        raise ValueError(
            "torchik bench needs a source checkout (benchmarks/run.py was not found in the "
            "current directory or beside the installed package)"
        )
    # in the current folder, where a relative --out is meant (run.py runs each script in root)
    command = [sys.executable, str(root / "benchmarks" / "run.py"), *args.rest]
    return subprocess.call(command, env={**os.environ, "TORCHIK_PROG": "torchik bench"})

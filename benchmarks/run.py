"""Run the benchmarks: ``python benchmarks/run.py [NAME ...|all] [--wait-idle S]`` (default: all).

``all`` runs the quick ones (minutes each; ``train_speed`` about 10 on a CPU); the learned-IK
protocols that train models for tens of minutes to hours on a CPU (``iknet``, ``posterior``,
``paths``, ``finetune``, ``learned_recipes``) run only by name, with their scripts' defaults.
Each benchmark runs in its own process (fresh thread pool and memory; its results stamp its own
command) and writes ``benchmarks/results/<name>.md`` and ``.json``. ``make bench`` calls this.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = ("fk", "ik", "wholebody", "pose", "seq2seq", "train_speed")
LONG = ("iknet", "posterior", "paths", "finetune", "learned_recipes")
"""Run only when named: each trains models for a long time on a CPU."""
PARENT_ENV = "TORCHIK_BENCH_PARENT"  # experiments.report.PARENT_ENV (kept import-free here)


def main(argv: list[str] | None = None) -> int:
    prog = os.environ.get("TORCHIK_PROG", "python benchmarks/run.py")  # set by `torchik bench`
    description = __doc__.splitlines()[0].replace("``", "")
    parser = argparse.ArgumentParser(prog=prog, description=description)
    known = {name: HERE / f"{name}.py" for name in (*BENCHMARKS, *LONG)}
    parser.add_argument("which", nargs="*", help=f"any of {', '.join(known)}, all (default)")
    args, extra = parser.parse_known_args(argv)  # e.g. --wait-idle 600, forwarded to each
    which = args.which or ["all"]
    unknown = set(which) - {*known, "all"}
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    names = list(BENCHMARKS) if "all" in which else list(dict.fromkeys(which))
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

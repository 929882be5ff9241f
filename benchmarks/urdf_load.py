"""Loading cost of large crafted URDFs (issue 15): wall and CPU seconds and peak memory per file
(CPU seconds are the steadier number on a shared machine); one JSON line per case.

Each case (``experiments.urdf_load.crafted_urdf``: a 10 000-link chain or wide tree, a
2 000-joint mimic chain, 30 000 links without joints) runs in a fresh subprocess so that its
peak resident memory (which includes torch's import, about 300 MB) is its own. One torch thread
unless ``BENCH_THREADS`` says otherwise: on a busy 2-core machine an idle thread pool makes every
small op 100x slower.

    python benchmarks/urdf_load.py                # every case
    python benchmarks/urdf_load.py chain tree     # some of them
"""

from __future__ import annotations

import argparse
import subprocess
import sys

LINKS = {"chain": 10_000, "tree": 10_000, "mimic": 2_000, "linkonly": 30_000}
CHILD = """import json, os, sys, torch
from experiments.urdf_load import crafted_urdf, load_cost
from torchik.checks import check_threads
torch.set_num_threads(check_threads("BENCH_THREADS", int(os.environ.get("BENCH_THREADS", "1"))))
text = crafted_urdf(sys.argv[1], int(sys.argv[2]))
print(json.dumps({"case": sys.argv[1], "bytes": len(text), **load_cost(text)}))"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", help=f"any of {', '.join(LINKS)} (default: all)")
    cases = parser.parse_args().cases or list(LINKS)
    if unknown := set(cases) - set(LINKS):
        parser.error(f"unknown case(s): {', '.join(sorted(unknown))}")
    for case in cases:
        command = [sys.executable, "-c", CHILD, case, str(LINKS[case])]
        out = subprocess.run(command, capture_output=True, text=True)
        print(out.stdout.strip() or out.stderr[-500:], flush=True)


if __name__ == "__main__":
    main()

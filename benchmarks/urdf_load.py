"""Loading cost of large crafted URDFs (issue 15): wall and CPU seconds and peak memory per file
(CPU seconds are the steadier number on a shared machine).

Each case runs in a fresh subprocess so that its peak resident memory (``ru_maxrss``, which
includes torch's import, about 300 MB) is its own. One torch thread unless ``BENCH_THREADS``
says otherwise: on a busy 2-core machine an idle thread pool makes every small op 100x slower.

    python benchmarks/urdf_load.py                # every case
    python benchmarks/urdf_load.py chain tree     # some of them
"""

from __future__ import annotations

import subprocess
import sys

CASES = ("chain", "tree", "mimic", "linkonly")


def crafted(case: str) -> str:
    """URDF text of one crafted case: 10 000-link chain or wide tree, 2 000-joint mimic chain,
    30 000 links without joints."""
    lim = '<limit lower="-1" upper="1" effort="1" velocity="1"/>'
    n = {"chain": 10_000, "tree": 10_000, "mimic": 2_000, "linkonly": 30_000}[case]
    links = "".join(f'<link name="l{i}"/>' for i in range(n))
    joints = []
    for i in range(1, n if case != "linkonly" else 0):
        parent = "l0" if case == "tree" else f"l{i - 1}"
        mimic = (
            f'<mimic joint="j{i - 1}" multiplier="1.0001"/>' if case == "mimic" and i > 1 else ""
        )
        joints.append(
            f'<joint name="j{i}" type="revolute"><parent link="{parent}"/>'
            f'<child link="l{i}"/><origin xyz="0 0 0.1"/><axis xyz="0 0 1"/>{lim}{mimic}</joint>'
        )
    return f'<robot name="{case}">{links}{"".join(joints)}</robot>'


CHILD = """
import resource, sys, time, json
sys.path.insert(0, "benchmarks")
from urdf_load import crafted
import os, torch, torchik
torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "1")))
text = crafted(sys.argv[1])
start, cpu = time.perf_counter(), time.process_time()
try:
    torchik.Robot.from_urdf(text)
    outcome = "loaded"
except Exception as err:
    outcome = f"{type(err).__name__} ({len(str(err))} chars)"
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"case": sys.argv[1], "bytes": len(text), "s": round(seconds, 3),
                  "cpu_s": round(cpu, 3), "peak_rss_mb": round(rss), "outcome": outcome}))
"""


def main() -> None:
    for case in sys.argv[1:] or CASES:
        out = subprocess.run([sys.executable, "-c", CHILD, case], capture_output=True, text=True)
        print(out.stdout.strip() or out.stderr[-500:], flush=True)


if __name__ == "__main__":
    main()

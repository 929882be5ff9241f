"""Cost of a 2000-joint serial chain (issue 17: loading must take at most 0.2 s): CPU seconds of
parsing, of building the Robot, and of the first FK, FK + backward and Jacobian, which build the
per-request plans (the backward's subtree matrix, links x depth, was a Python loop filling it
element by element). Each is a first call on a fresh robot, so it is timed with
``time.process_time`` over ``--repeats`` fresh robots (median), one torch thread.

    .venv/bin/python benchmarks/urdf_chain_load.py   # writes results/urdf_chain_load.*
    .venv/bin/python benchmarks/urdf_chain_load.py --joints 500 --out /tmp/chain
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from common import machine_stamp

from torchik import Robot, parse_urdf
from torchik.urdf_read import _finite


def chain_urdf(joints: int) -> str:
    """A serial chain of ``joints`` revolute joints, 0.1 m apart about z."""
    lim = '<limit lower="-1" upper="1" effort="1" velocity="1"/>'
    links = "".join(f'<link name="l{i}"/>' for i in range(joints + 1))
    body = "".join(
        f'<joint name="j{i}" type="revolute"><parent link="l{i}"/><child link="l{i + 1}"/>'
        f'<origin xyz="0 0 0.1"/><axis xyz="0 0 1"/>{lim}</joint>'
        for i in range(joints)
    )
    return f'<robot name="chain">{links}{body}</robot>'


def cpu_seconds(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def one_round(text: str, batch: int) -> dict[str, float]:
    """CPU seconds of each first call on a fresh robot (the number cache emptied before each
    load, so that neither gains from the other)."""
    _finite.cache_clear()
    out = {"parse_urdf": cpu_seconds(lambda: parse_urdf(text))}
    holder: dict[str, Robot] = {}
    _finite.cache_clear()
    out["Robot.from_urdf"] = cpu_seconds(
        lambda: holder.setdefault("r", Robot.from_urdf(text, dtype=torch.float64))
    )
    robot = holder["r"]
    q = robot.random_configuration(batch, generator=torch.Generator().manual_seed(0))
    out["first FK, every link"] = cpu_seconds(lambda: robot.forward_kinematics(q))
    tip = robot.link_names[-1]
    out["first Jacobian of the tip"] = cpu_seconds(lambda: robot.jacobian(q, tip))
    fresh = Robot.from_urdf(text, dtype=torch.float64)
    qg = q.clone().requires_grad_()
    out["first FK + backward, every link"] = cpu_seconds(
        lambda: fresh.forward_kinematics(qg).sum().backward()
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--joints", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "urdf_chain_load"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    text = chain_urdf(args.joints)
    rounds = [one_round(text, args.batch) for _ in range(args.repeats)]
    rows = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    stamp = machine_stamp()
    lines = [
        f"# A {args.joints}-joint serial chain: CPU seconds of first calls",
        "",
        f"Median of {args.repeats} fresh robots, batch {args.batch}, float64, one torch thread, "
        "`time.process_time` (CPU time, steadier than wall time on the shared machine).",
        "",
        "| step | CPU s |",
        "|---|---|",
        *(f"| {name} | {seconds:.3f} |" for name, seconds in rows.items()),
        "",
        f"Goal (issue 17): `Robot.from_urdf` <= 0.2 s. Machine: {stamp['cpu']}, "
        f"{stamp['cores']} cores, load average at start {stamp['load_average_at_start']}; "
        f"torch {stamp['torch']}; {stamp['date']}; torchik {stamp['torchik']}.",
        f"Command: `{stamp['command']}`",
    ]
    out = Path(args.out)
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    table = {
        "title": f"{args.joints}-joint chain, first calls (CPU s, median of {args.repeats})",
        "rows": [{"method": name, "cpu_s": seconds} for name, seconds in rows.items()],
    }
    payload = {"stamp": stamp, "intro": lines[2], "tables": [table]}
    out.with_suffix(".json").write_text(json.dumps(payload, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

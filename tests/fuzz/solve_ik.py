"""Random ``solve_ik`` calls with nonsense arguments.

Each call draws one to three arguments from pools of bad and edge values (negative, zero, NaN,
infinite, huge, wrong types, wrong shapes) on top of a small valid call (the Panda, two
targets, a few iterations; every other call the Panda beside a free box, a scene). Every call
must return an :class:`~torchik.ik.IKResult` of the right shape or raise a ValueError or
TypeError with a one-line message, in under a second.

``tests/test_fuzz_solve_ik.py`` runs a bounded sample in CI; ``make fuzz`` runs
``python tests/fuzz_solve_ik.py --n 2000``.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections import Counter
from collections.abc import Callable
from functools import cache
from typing import Any

import torch

import torchik
from experiments.wholebody import beside_a_free_box
from torchik.ik import solve_ik

F64 = torch.float64
SLOW_S = 1.0
NUMBERS = [-5, -1, 0, 1, 2, 10**9, 2**63, 1.5, -1e-3, 0.0, math.nan, math.inf, -math.inf]
KINDS = ["3", None, True, [1], torch.tensor(1.0)]


@cache
def _problem(scene: bool = False):
    """The Panda (``scene``: beside a free box, as a MuJoCo scene loads, the box's 7
    coordinates first) and two targets of its hand."""
    robot = torchik.load_robot("panda", dtype=F64)
    q = robot.random_configuration(2, torch.Generator().manual_seed(0))
    target = robot.forward_kinematics(q, "panda_hand")
    return beside_a_free_box(robot) if scene else robot, target


def _tensors(rng: random.Random, dof: int = 7) -> list:
    _, target = _problem()
    shapes = [(dof,), (2, dof), (2, 3, dof), (3, 2, dof), (2, 3, dof - 1), (0, dof), (2, 0, dof),
              (1, 1, 1, dof)]  # fmt: skip
    values = [torch.zeros(s, dtype=F64) for s in shapes]
    values += [torch.full((2, 3, dof), math.nan, dtype=F64),
               torch.zeros(2, 3, dof, dtype=torch.long)]  # fmt: skip
    return values + [target[:, :3, :], target[0], target.float(), target.tolist(), "pose"]


def arguments(seed: int) -> dict:
    """The ``seed``-th set of bad keyword arguments for ``solve_ik``."""
    rng = random.Random(seed)
    dof = _problem(scene=seed % 2 == 1)[0].dof
    pools = {
        "tol_position": NUMBERS + KINDS,
        "tol_rotation": NUMBERS + KINDS,
        "max_iters": NUMBERS + KINDS,
        "num_seeds": NUMBERS + KINDS,
        "seed_pool": NUMBERS + KINDS,
        "num_threads": [n for n in NUMBERS if not isinstance(n, int) or n < 64] + KINDS,
        "restarts": [0, 1, "yes", None, True, False],
        "early_stop": [0, 1, "yes", None, True, False],
        "position_only": [True, False, 1, "yes"],
        "method": ["lm", "dls", "jt", "gd", "newton", 3, None],
        "seeds": _tensors(rng, dof),
        "lower": _tensors(rng, dof),
        "target": _tensors(rng, dof),
        "link": ["panda_hand", "nope", 3, None, "box"],
    }
    keys = rng.sample(sorted(pools), rng.randint(1, 3))
    kwargs = {k: rng.choice(pools[k]) for k in keys}
    if "max_iters" not in kwargs:
        kwargs["max_iters"] = 5  # keep the valid calls quick
    if kwargs.get("num_seeds") in (10**9, 2**63) or kwargs.get("seed_pool") in (10**9, 2**63):
        pass  # refused by their bounds, never allocated
    return kwargs


def run_one(seed: int) -> tuple[str, float, str]:
    """``(result, seconds, message)`` of the ``seed``-th call."""
    robot, target = _problem(scene=seed % 2 == 1)
    kwargs = arguments(seed)
    target = kwargs.pop("target", target)
    link = kwargs.pop("link", "panda_hand")
    return attempt(lambda: solve_ik(robot, target, link, **kwargs), kwargs)


def attempt(call: Callable[[], Any], kwargs: dict) -> tuple[str, float, str]:
    """``(result, seconds, message)`` of ``call()`` (a solve made with ``kwargs``): ``solved``
    (its ``q``'s shape), ``refused`` (a one-line ValueError or TypeError), or what a fuzz looks
    for: a multi-line refusal, a leak of another exception, torch's thread count not
    restored."""
    threads = torch.get_num_threads()
    start = time.perf_counter()
    try:
        result = call()
        outcome, message = "solved", f"q {tuple(result.q.shape)}"
    except (ValueError, TypeError) as err:
        outcome, message = "refused", str(err)
        if "\n" in message.strip():
            outcome = "refused (multi-line message)"
    except Exception as err:  # noqa: BLE001 - a leak is what the fuzz looks for
        outcome, message = f"LEAK {type(err).__name__}", str(err)[:200]
    seconds = time.perf_counter() - start
    if torch.get_num_threads() != threads:
        outcome = "THREADS NOT RESTORED"
        torch.set_num_threads(threads)
    return outcome, seconds, f"{kwargs!r:.160} -> {message[:160]}"


def finding(outcome: str, seconds: float) -> bool:
    """A leak, a multi-line message, or a refusal slower than :data:`SLOW_S`."""
    return outcome not in ("solved", "refused") or (outcome == "refused" and seconds > SLOW_S)


def main(argv: list[str] | None = None) -> int:
    return campaign(run_one, __doc__.splitlines()[0], 2000, argv)


def campaign(run: Callable[[int], tuple[str, float, str]], description: str, calls: int,
             argv: list[str] | None = None) -> int:  # fmt: skip
    """A fuzz campaign's command line (``--n`` calls, default ``calls``, from seed
    ``--start``): every seed's ``run(seed)`` on one thread, then :func:`report`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--n", type=int, default=calls, help="calls")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    return report([(seed, *run(seed)) for seed in range(args.start, args.start + args.n)])


def report(rows: list[tuple[int, str, float, str]]) -> int:
    """Print the campaign's table of ``(seed, outcome, seconds, message)`` rows and its
    findings; the exit status (1 if any)."""
    counts = Counter(r[1] for r in rows)
    slowest = max((r[2] for r in rows if r[1] == "refused"), default=0.0)
    bad = [r for r in rows if finding(r[1], r[2])]
    print("| calls | results | slowest refusal | findings |\n|---|---|---|---|")
    text = ", ".join(f"{k} {v}" for k, v in counts.most_common())
    print(f"| {len(rows)} | {text} | {slowest * 1000:.0f} ms | {len(bad)} |")
    for seed, outcome, seconds, message in bad[:40]:
        print(f"- seed {seed}: {outcome} ({seconds:.2f} s) {message}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

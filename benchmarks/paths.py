"""Path following on the Digit arm: IKNet windowed sampling (Eq. 15), refinement, sequential IK.

Each smooth target sequence comes from moving the arm (torchik.paths.make_smooth_targets); for
each, IKNet draws --paths joint paths by windowed sampling with radius --radius, which are then
refined by LM freely or within the radius of the refined previous step (refine_path(radius=r)),
and the sequential numerical baseline solves every step seeded with the previous solution.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from common import Column, Report, Table, add_common_args, log, train_small_iknet

import torchik
from torchik.models import IKNet, load_pretrained
from torchik.paths import (
    DISTINCT_TOL,
    follow_path,
    make_smooth_targets,
    refine_path,
    sequential_ik_path,
)

ROBOT, LINK = "digit_arm", "left_hand"
GOAL_ERROR = 0.005  # m: the bound on a path's mean error


def get_model(args) -> tuple[IKNet, str]:
    """The IKNet of --model, else the bundled Digit model if it samples within windows, else
    an IKNet (small) trained here for --steps."""
    if args.model is not None:
        model = torchik.models.load(args.model)
        what = f"{type(model).__name__} checkpoint {args.model} (torchik.models.load)"
        return model, f"{what}, {getattr(model, 'config', '')}"
    try:
        model = load_pretrained(ROBOT).float()
        if hasattr(model, "sample_within"):
            return model, "pretrained (torchik.models.load_pretrained)"
        log(f"the pretrained {type(model).__name__} has no sample_within: training an IKNet")
    except (ValueError, FileNotFoundError, OSError) as err:
        log(f"no pretrained model ({err}): training one")
    robot = torchik.load_robot(ROBOT)
    data = torchik.make_dataset(robot, args.train_size, seed=0)
    model, seconds = train_small_iknet(data, args.steps)
    what = (
        f"IKNet (small) trained here: {args.train_size} uniform pairs, {args.steps} steps, "
        f"{seconds:.0f} s on 1 CPU thread"
    )
    return model, what


def _accumulate(store: dict, method: str, result, radius: float, seconds: float | None):
    s = result.summary()
    rows = store.setdefault(method, [])
    within = (result.max_jump <= radius + 1e-6).float()
    ok = (result.mean_error <= GOAL_ERROR).float()
    every = bool((ok * within).all())  # the goal, for this sequence
    rows.append({**s, "within_r": within.mean().item(), "under_5mm": ok.mean().item(),
                 "all_ok": float(every), "seconds": seconds})  # fmt: skip


def _timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def run_sequence(model, robot, q_true, target, args, gen, store) -> float:
    """Every method on one target sequence ``target (S, 3)``; returns the windowed error."""
    r, m = args.radius, args.candidates
    restarts = torch.Generator().manual_seed(int(torch.randint(2**31, (1,), generator=gen)))
    sampled = {}
    for name, candidates in (("IKNet windowed", 1), (f"IKNet windowed, best of {m}", m)):
        paths, t = _timed(follow_path, model, target.float(), args.paths, r, robot=robot,
                          generator=gen, candidates=candidates)  # fmt: skip
        _accumulate(store, name + (" per step" if candidates > 1 else ""), paths, r, t)
        sampled[name] = (paths, t)
    for name, (paths, t) in sampled.items():
        for what, radius in (("LM refinement", None), ("r-constrained LM refinement", r)):
            refined, t_refine = _timed(refine_path, robot, target, paths.q.double(), LINK,
                                       radius=radius, generator=restarts)  # fmt: skip
            _accumulate(store, f"{name} + {what}", refined, r, t + t_refine)
    for name, start in (("the neutral pose", robot.neutral()), ("the true start", q_true[0])):
        seq, t = _timed(sequential_ik_path, robot, target, start, LINK)
        _accumulate(store, f"sequential LM (from {name})", seq, r, t)
    return sampled["IKNet windowed"][0].mean_error.mean().item()


def run(args) -> tuple[dict, str]:
    model, what = get_model(args)
    model.eval()
    robot = torchik.load_robot(ROBOT, dtype=torch.float64)
    gen = torch.Generator().manual_seed(1)
    q_true, targets = make_smooth_targets(
        robot, LINK, steps=args.length, n_paths=args.sequences, max_move=args.max_move,
        generator=gen,
    )  # fmt: skip
    store: dict = {}
    for i in range(args.sequences):
        error = run_sequence(model, robot, q_true[i], targets[i], args, gen, store)
        if i % 10 == 0:
            log(f"sequence {i}: windowed {error * 100:.2f} cm")
    return store, what


def _mean(rows, key):
    values = [row[key] for row in rows if row[key] is not None]
    return sum(values) / len(values) if values else None


def table(store: dict, args) -> Table:
    cm = lambda x: f"{100 * x:.2f}"  # noqa: E731
    cm3 = lambda x: f"{100 * x:.3f}"  # noqa: E731
    pct = lambda x: f"{100 * x:.0f} %"  # noqa: E731
    pct1 = lambda x: f"{100 * x:.2f} %"  # noqa: E731
    t = Table(
        f"Digit arm, {args.sequences} smooth sequences of {args.length} targets, r = "
        f"{args.radius} rad",
        [
            Column("paths", "paths / sequence"),
            Column("mean_error", "mean error per path (cm)", cm3),
            Column("best_error", "best path (cm)", cm3),
            Column("worst_error", "worst path (cm)", cm),
            Column("under_5mm", "paths ≤ 0.5 cm", pct1),
            Column("max_jump", "max jump (rad)", lambda x: f"{x:.3f}"),
            Column("mean_jump", "mean jump (rad)", lambda x: f"{x:.4f}"),
            Column("within_r", "paths with no jump > r", pct1),
            Column("all_ok", "sequences with every path ≤ 0.5 cm, no jump > r", pct),
            Column("distinct", f"distinct paths ({DISTINCT_TOL:g} rad)", lambda x: f"{x:.1f}"),
            Column("seconds", "time / sequence", lambda x: f"{x:.2f} s"),
        ],
    )
    for method, rows in store.items():
        row = {k: _mean(rows, k) for k in rows[0]}
        row["max_jump"] = max(r["max_jump"] for r in rows)
        row["worst_error"] = max(r["worst_error"] for r in rows)
        t.add(method, **row)
    t.notes = [
        "Per sequence: mean error per path = mean over the sequence's steps of the distance "
        "(FK in float64) to the target; 'mean error' averages it over paths and sequences; "
        "'best path' is the mean over sequences of the best path's; 'worst path' the worst "
        "path over all sequences. Max jump: the largest change of any joint between two steps, "
        "over every path; mean jump: mean absolute joint change per step. 'Sequences with "
        "every path ...': the issue's goal, met by a sequence when all its paths are.",
        f"Distinct paths: greedy count (torchik.paths.count_distinct_paths) of paths whose "
        f"joints are at least {DISTINCT_TOL:g} rad apart on average over the steps (mean over "
        "steps of the joint-space Euclidean distance) from every path kept before; mean over "
        "sequences.",
        f"Targets: make_smooth_targets(max_move={args.max_move} rad, margin 0.1): every joint "
        "moves from a random start to a random end with a (1 - cos) profile; the true path's "
        f"largest step is {args.max_move} * pi / (2 * {args.length - 1}) rad.",
        "Windowed: step 0 sampled freely, then every joint drawn within r of the same path's "
        "previous value (IKNet.sample_within). 'best of m' draws m windowed candidates per path "
        "and step and keeps the nearest (uses FK in the loop).",
        "LM refinement: LM (position only, tol 1e-5 m, 30 iterations, no restarts) seeded with "
        "each step of the windowed paths, every step on its own: its jumps are not bounded by r. "
        "r-constrained: refine_path(radius=r), the steps in order, all paths of the sequence in "
        "one batch, step t solved within [q_{t-1} - r, q_{t-1} + r] ∩ joint limits (q_{t-1} the "
        "refined previous step; solve_ik(lower=, upper=)) seeded with the sampled step moved "
        "into that box, random restarts inside the box where that seed stalls (LM, tol 1e-5 m, "
        "30 iterations per step): no jump above r by construction. Step 0 is refined freely. "
        "Each path is refined forwards and backwards (last step first) and the direction with "
        "the lower mean error is kept (both_ways=True).",
        "Times: sampling plus refinement of all paths of a sequence (1 CPU thread).",
        "Sequential LM: torchik.solve_ik at each step seeded with the previous solution (tol "
        "1e-5 m, no restarts), one path per sequence; the paper's IKPy baseline reaches 3.0 cm.",
        "Paper (Digit arm, 100 generated paths): 3.0 cm average, 1.8 cm best path.",
    ]
    return t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    parser.add_argument("--sequences", type=int, default=100)
    parser.add_argument("--paths", type=int, default=100, help="IKNet paths per sequence")
    parser.add_argument("--length", type=int, default=50)
    parser.add_argument("--radius", type=float, default=0.1, help="window radius r (rad)")
    parser.add_argument("--candidates", type=int, default=10)
    parser.add_argument("--max-move", type=float, default=1.0)
    parser.add_argument("--model", type=Path, help="an IKNet checkpoint (torchik.models.load)")
    parser.add_argument("--steps", type=int, default=3000, help="training steps (no --model)")
    parser.add_argument("--train-size", type=int, default=20000)
    parser.add_argument("--note", action="append", default=[], help="a line for the intro")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # common sets all cores; this machine is shared
    report = Report("paths", "Path following (torchik.paths), Digit arm")
    store, what = run(args)
    report.intro = [f"Model: {what}.", *args.note]
    report.tables = [table(store, args)]
    md, _ = report.write(args.out)
    log(f"wrote {md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

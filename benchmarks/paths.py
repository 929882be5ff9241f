"""Path following on the Digit arm: IKNet windowed sampling (Eq. 15), refinement, sequential IK.

Each smooth target sequence comes from moving the arm (torchik.paths.make_smooth_targets); for
each, IKNet draws --paths joint paths by windowed sampling with radius --radius, and the
sequential numerical baseline solves every step seeded with the previous solution.
"""

from __future__ import annotations

import argparse
import time

import torch
from common import Column, Report, Table, add_common_args, log

import torchik
from torchik.models import IKNet, IKNetConfig, load_pretrained
from torchik.paths import follow_path, make_smooth_targets, refine_path, sequential_ik_path
from torchik.train import TrainConfig, train

ROBOT, LINK = "digit_arm", "left_hand"


def get_model(args) -> tuple[IKNet, str]:
    """The pretrained Digit model if bundled, else an IKNet (small) trained for --steps."""
    try:
        return load_pretrained(ROBOT).float(), "pretrained (torchik.models.load_pretrained)"
    except (ValueError, FileNotFoundError, OSError) as err:
        log(f"no pretrained model ({err}): training one")
    robot = torchik.load_robot(ROBOT)
    data = torchik.make_dataset(robot, args.train_size, seed=0)
    torch.manual_seed(0)
    model = IKNet(data.spec, IKNetConfig.small())
    config = TrainConfig(
        steps=args.steps, batch_size=256, lr=3e-3, warmup_steps=200, min_lr_ratio=0.02,
        grad_clip=0.3, log_every=max(1, args.steps // 10), val_every=0, checkpoint_every=0,
    )  # fmt: skip
    t0 = time.perf_counter()
    model = train(model, data, config=config).model
    what = (
        f"IKNet (small) trained here: {args.train_size} uniform pairs, {args.steps} steps, "
        f"{time.perf_counter() - t0:.0f} s on 1 CPU thread"
    )
    return model, what


def _accumulate(store: dict, method: str, result, radius: float | None, seconds: float):
    s = result.summary()
    rows = store.setdefault(method, [])
    within = (result.max_jump <= radius + 1e-6).float().mean().item() if radius else None
    ok = (result.mean_error <= 0.005).float().mean().item()
    rows.append({**s, "within_r": within, "under_5mm": ok, "seconds": seconds})


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
    r = args.radius
    for i in range(args.sequences):
        t0 = time.perf_counter()
        plain = follow_path(model, targets[i].float(), args.paths, r, robot=robot, generator=gen)
        t1 = time.perf_counter()
        _accumulate(store, "IKNet windowed", plain, r, t1 - t0)
        best = follow_path(model, targets[i].float(), args.paths, r, robot=robot, generator=gen,
                           candidates=args.candidates)  # fmt: skip
        t2 = time.perf_counter()
        _accumulate(store, f"IKNet windowed, best of {args.candidates} per step", best, r, t2 - t1)
        refined = refine_path(robot, targets[i], plain.q.double(), LINK)
        _accumulate(store, "IKNet windowed + LM refinement", refined, r, None)
        refined = refine_path(robot, targets[i], best.q.double(), LINK)
        t3 = time.perf_counter()
        name = f"IKNet windowed, best of {args.candidates} + LM refinement"
        _accumulate(store, name, refined, r, t3 - t2 + t1 - t0)
        seq = sequential_ik_path(robot, targets[i], robot.neutral(), LINK)
        t4 = time.perf_counter()
        _accumulate(store, "sequential LM (from the neutral pose)", seq, r, t4 - t3)
        seq_true = sequential_ik_path(robot, targets[i], q_true[i, 0], LINK)
        _accumulate(store, "sequential LM (from the true start)", seq_true, r, 0.0)
        if i % 10 == 0:
            log(f"sequence {i}: windowed {plain.mean_error.mean().item() * 100:.2f} cm")
    return store, what


def _mean(rows, key):
    values = [row[key] for row in rows if row[key] is not None]
    return sum(values) / len(values) if values else None


def table(store: dict, args) -> Table:
    cm = lambda x: f"{100 * x:.2f}"  # noqa: E731
    t = Table(
        f"Digit arm, {args.sequences} smooth sequences of {args.length} targets, r = "
        f"{args.radius} rad",
        [
            Column("paths", "paths / sequence"),
            Column("mean_error", "mean error per path (cm)", cm),
            Column("best_error", "best path (cm)", cm),
            Column("worst_error", "worst path (cm)", cm),
            Column("under_5mm", "paths ≤ 0.5 cm", lambda x: f"{100 * x:.0f} %"),
            Column("max_jump", "max jump (rad)", lambda x: f"{x:.3f}"),
            Column("mean_jump", "mean jump (rad)", lambda x: f"{x:.4f}"),
            Column("within_r", "paths with no jump > r", lambda x: f"{100 * x:.0f} %"),
            Column("distinct", "distinct paths (0.1 rad)", lambda x: f"{x:.1f}"),
            Column("seconds", "time / sequence", lambda x: f"{x:.2f} s"),
        ],
    )
    for method, rows in store.items():
        row = {k: _mean(rows, k) for k in rows[0]}
        row["max_jump"] = max(r["max_jump"] for r in rows)
        row["worst_error"] = max(r["worst_error"] for r in rows)
        row["seconds"] = row["seconds"] or None  # rows timed inside another row
        t.add(method, **row)
    t.notes = [
        "Per sequence: mean error per path = mean over the sequence's steps of the distance "
        "(FK in float64) to the target; 'mean error' averages it over paths and sequences; "
        "'best path' is the mean over sequences of the best path's; 'worst path' the worst "
        "path over all sequences. Max jump: the largest change of any joint between two steps, "
        "over every path; mean jump: mean absolute joint change per step.",
        f"Targets: make_smooth_targets(max_move={args.max_move} rad, margin 0.1): every joint "
        "moves from a random start to a random end with a (1 - cos) profile; the true path's "
        f"largest step is {args.max_move} * pi / (2 * {args.length - 1}) rad.",
        "Windowed: step 0 sampled freely, then every joint drawn within r of the same path's "
        "previous value (IKNet.sample_within). 'best of m' draws m windowed candidates per path "
        "and step and keeps the nearest (uses FK in the loop). Refinement: LM (position only, "
        "tol 1e-5 m, 30 iterations) seeded with each step of the windowed paths; its jumps are "
        "no longer bounded by r. Times: sampling (and refinement) of all paths of a sequence.",
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
    parser.add_argument("--steps", type=int, default=3000, help="training steps (no pretrained)")
    parser.add_argument("--train-size", type=int, default=20000)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # common sets all cores; this machine is shared
    report = Report("paths", "Path following (torchik.paths), Digit arm")
    store, what = run(args)
    report.intro = [f"Model: {what}."]
    report.tables = [table(store, args)]
    md, _ = report.write(args.out)
    log(f"wrote {md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

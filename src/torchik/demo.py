"""``make demo``: pretrained Panda IK in seconds on the CPU, nothing to train.

Loads the bundled full-pose Panda model (:func:`torchik.models.load_pretrained`), samples 100
joint configurations for each of a few random reachable poses and refines every sample, both in
one call (:func:`torchik.models.solve_with_model`, with the 7-pass sampler fitted to the model,
which ``load_pretrained`` gives it by default), prints a table (raw errors, success after
refinement, distinct solutions, time) and saves pictures to ``demo_output/``. Run with
``python -m torchik.demo [--poses N] [--samples N] [--out DIR]``.

``python -m torchik.demo --forum`` runs the earlier demo instead: a small MLP learns Panda
IK through differentiable forward kinematics (:func:`train_position_mlp`).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from torchik.files import save_figure
from torchik.ik.result import IKResult
from torchik.kinematics import native
from torchik.robot.robot import load_robot

LINK = "panda_hand"


# ---------------------------------------------------------------------------- pretrained demo
@dataclass
class PoseRow:
    """One target pose of the demo: raw samples, refined solutions and their errors."""

    pose: Tensor  # (4, 4)
    samples: Tensor  # (n, 7) raw model samples
    raw_errors: tuple[Tensor, Tensor]  # (n,) position (m) and rotation (rad) errors
    refined: IKResult  # refinement of every sample, (n, 7)
    distinct: int
    solve_ms: float  # sampling and refinement


def reachable_poses(robot, n: int, seed: int = 0) -> Tensor:
    """``(n, 4, 4)`` poses of the hand at uniformly random configurations (so reachable)."""
    gen = torch.Generator().manual_seed(seed)
    return robot.forward_kinematics(robot.random_configuration(n, generator=gen), LINK)


def solve_pose(model, robot, pose: Tensor, n: int, seed: int) -> PoseRow:
    """Sample ``n`` configurations for ``pose`` and refine each one (1 mm, 0.01 rad)."""
    from torchik.learn.data import encode_target
    from torchik.learn.evaluate import sample_errors
    from torchik.models import solve_with_model

    gen = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    out = solve_with_model(robot, model, pose, n, generator=gen, tol_rotation=0.01)
    solve_ms = 1000 * (time.perf_counter() - start)
    _, keep = out.result.distinct()
    with torch.no_grad():
        target = encode_target(pose, "pose")[None]
        pos, rot = sample_errors(robot, out.samples[None], target, model.spec)
    assert rot is not None  # pose targets
    return PoseRow(pose, out.samples, (pos[0], rot[0]), out.result, int(keep.sum()), solve_ms)


def print_table(rows: list[PoseRow]) -> None:
    """The demo's table, one line per pose."""
    n = len(rows[0].samples)
    print(f"\n{'pose':>4} | {'raw position':>12} | {'raw rotation':>12} | {'refined ok':>10} | "
          f"{'distinct':>8} | {f'sample + refine {n}':>20}")  # fmt: skip
    print("-" * 86)
    for i, r in enumerate(rows):
        ok = f"{int(r.refined.success.sum())}/{n}"
        mm, deg = 1000 * r.raw_errors[0].mean(), math.degrees(r.raw_errors[1].mean())
        print(f"{i:>4} | {mm:9.1f} mm | {deg:8.1f} deg | {ok:>10} | "
              f"{r.distinct:>8} | {r.solve_ms:17.0f} ms")  # fmt: skip
    print("raw: errors of the model's samples before refinement (mean over the samples);")
    print("refined ok: samples that refinement brought within 1 mm and 0.01 rad;")
    print("distinct: solutions more than 0.1 rad apart in joint space (IKResult.distinct).")


def save_plots(robot, rows: list[PoseRow], out: Path) -> list[Path]:
    """Pictures of the first pose's raw samples and refined solutions and of the errors of
    every pose; [] without matplotlib."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib is not installed: no pictures (pip install 'torchik[plot]')")
        return []
    from torchik.plot.arms import plot_arm_samples

    out.mkdir(parents=True, exist_ok=True)
    row = rows[0]
    figures = {
        "panda_raw_samples.png": (row.samples, "raw samples of the pretrained model"),
        "panda_refined.png": (
            row.refined.q[row.refined.success],
            "refined (within 1 mm and 0.01 rad)",
        ),
    }
    paths = []
    for name, (q, title) in figures.items():
        fig = plot_arm_samples(robot, q, row.pose[:3, 3], link=LINK)
        fig.suptitle(f"Panda, one target pose: {len(q)} configurations, {title}")
        paths.append(_save(fig, out / name))
    paths.append(_save(_error_histograms(rows), out / "panda_errors.png"))
    return paths


def _save(fig, path: Path) -> Path:
    save_figure(fig, path, dpi=80)
    return path


def _error_histograms(rows: list[PoseRow]):
    """Position and rotation errors of every sample, raw and refined, on log axes."""
    import numpy as np
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.6), layout="constrained")
    axes = fig.subplots(1, 2)
    raw = [torch.cat([r.raw_errors[i] for r in rows]) for i in (0, 1)]
    refined = [
        torch.cat([getattr(r.refined, name) for r in rows])
        for name in ("position_error", "rotation_error")
    ]
    units = (("position error (mm)", 1000.0, 1.0), ("rotation error (deg)", 180 / math.pi, 0.573))
    for ax, (label, scale, tol), before, after in zip(axes, units, raw, refined, strict=True):
        values = [scale * x.clamp_min(1e-12).numpy() for x in (before, after)]
        both = np.concatenate(values)
        bins = np.logspace(np.log10(both.min()), np.log10(both.max()), 60)
        ax.hist(values[0], bins, alpha=0.7, label="raw samples")
        ax.hist(values[1], bins, alpha=0.7, label="after refinement")
        ax.axvline(tol, color="k", ls="--", lw=1, label="tolerance")
        ax.set(xscale="log", xlabel=label, ylabel="samples")
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper left", fontsize="small")
    n = sum(len(r.samples) for r in rows)
    fig.suptitle(f"Panda, {len(rows)} target poses, {n} samples: errors before and after")
    return fig


def pretrained_demo(poses: int = 5, samples: int = 100, out: Path = Path("demo_output")) -> None:
    """The default demo (see the module docstring)."""
    from torchik.models import load_pretrained

    torch.set_num_threads(1)  # small batched operations: one thread is the fastest
    start = time.perf_counter()
    print("torchik demo: pretrained Panda IK (full pose), sampled then refined, on the CPU")
    model = load_pretrained("panda")
    robot = load_robot("panda", dtype=torch.float64)
    if native.available():  # not timed below: the first solve of a process loads it
        print("loading the compiled CPU IK loop (Numba: compiled once, then cached) ...")
        native.warm_up(robot.tree)
    rows = [
        solve_pose(model, robot, pose, samples, seed=i)
        for i, pose in enumerate(reachable_poses(robot, poses))
    ]
    print_table(rows)
    for path in save_plots(robot, rows, out):
        print(f"saved {path.resolve()}")
    print(f"done in {time.perf_counter() - start:.1f} s")


# ---------------------------------------------------------------------------- forum demo
def train_position_mlp(steps: int = 1000, batch: int = 256, seed: int = 0, log_every: int = 100):
    """Train ``target position -> joint angles`` through FK and return (model, robot, history)."""
    torch.manual_seed(seed)
    robot = load_robot("panda")
    net = nn.Sequential(
        nn.Linear(3, 256), nn.SiLU(), nn.Linear(256, 256), nn.SiLU(), nn.Linear(256, robot.dof)
    )

    def solve(target: torch.Tensor) -> torch.Tensor:
        # a sigmoid keeps every output joint inside its limits
        return robot.lower + (robot.upper - robot.lower) * torch.sigmoid(net(target))

    optimizer = torch.optim.Adam(net.parameters(), lr=2e-3)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    history, start = [], time.perf_counter()
    for step in range(1, steps + 1):
        with torch.no_grad():
            target = robot.link_positions(robot.random_configuration(batch), LINK)
        error = (robot.link_positions(solve(target), LINK) - target).norm(dim=-1)
        loss = error.mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % log_every == 0 or step == 1:
            history.append((step, loss.item()))
            print(
                f"step {step:5d}  mean distance {1000 * loss.item():7.1f} mm  "
                f"({time.perf_counter() - start:4.1f} s)",
                flush=True,
            )
    return solve, robot, history


def forum_demo(steps: int = 1000, seed: int = 0) -> None:
    """The FK-through-the-loss demo: train an MLP, report held-out errors."""
    print("torchik demo: an MLP learns Panda IK through differentiable FK (CPU)")
    solve, robot, _ = train_position_mlp(steps, seed=seed)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(12345)
        target = robot.link_positions(robot.random_configuration(2000, generator=gen), LINK)
        error = (robot.link_positions(solve(target), LINK) - target).norm(dim=-1)
    print(
        f"held-out targets: mean error {1000 * error.mean():.1f} mm, "
        f"median {1000 * error.median():.1f} mm"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--forum", action="store_true", help="the FK-through-the-loss demo")
    parser.add_argument("--poses", type=int, default=5)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("demo_output"))
    parser.add_argument("--steps", type=int, default=1000, help="training steps (--forum)")
    parser.add_argument("--seed", type=int, default=0, help="training seed (--forum)")
    args = parser.parse_args(argv)
    if args.forum:
        forum_demo(args.steps, args.seed)
    else:
        pretrained_demo(args.poses, args.samples, args.out)


if __name__ == "__main__":
    main()

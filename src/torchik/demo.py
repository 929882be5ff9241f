"""``make demo``: forward kinematics inside a loss, end to end, on the CPU in under a minute.

A small MLP maps random Panda target positions to joint angles; the loss is the distance
between the forward kinematics of its output and the target, so gradients flow back through
torchik's FK into the network. Run with ``python -m torchik.demo [--steps N] [--seed S]``.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from torchik import load_robot


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
            target = robot.link_positions(robot.random_configuration(batch), "panda_hand")
        error = (robot.link_positions(solve(target), "panda_hand") - target).norm(dim=-1)
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print("torchik demo: an MLP learns Panda IK through differentiable FK (CPU)")
    solve, robot, _ = train_position_mlp(args.steps, seed=args.seed)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(12345)
        target = robot.link_positions(robot.random_configuration(2000, generator=gen), "panda_hand")
        error = (robot.link_positions(solve(target), "panda_hand") - target).norm(dim=-1)
    print(
        f"held-out targets: mean error {1000 * error.mean():.1f} mm, "
        f"median {1000 * error.median():.1f} mm"
    )


if __name__ == "__main__":
    main()

"""experiments.iknet_prefix: exact samples stay feasible whatever is kept, uniformly random ones
rarely reach the target; re-solving the last joints of noisy samples brings them closer; the
last row is the samples' own error."""

from __future__ import annotations

import torch

import torchik
from experiments.iknet_prefix import TOL, prefix_rows, resolved_error


def _arm():
    robot = torchik.load_robot("snake4", dtype=torch.float64)
    q = robot.random_configuration(40, generator=torch.Generator().manual_seed(0))
    return robot, q, robot.link_positions(q, ["ee"])[:, 0]


def test_exact_samples_are_feasible_for_every_prefix():
    robot, q, target = _arm()
    rows = prefix_rows(robot, q, target, "ee", torch.Generator().manual_seed(1))
    assert [row["kept"] for row in rows] == list(range(robot.dof + 1))
    assert all(row["feasible"] == 1.0 and row["mean_cm"] < 0.1 for row in rows)
    assert rows[0]["uniform_feasible"] == 1.0  # nothing kept: the solver alone
    assert rows[-1]["uniform_feasible"] < 0.2  # everything random: rarely on the target


def test_kept_joints_stay_and_the_raw_row_is_the_samples_error():
    robot, q, target = _arm()
    noisy = q + 0.3 * torch.randn(
        q.shape, generator=torch.Generator().manual_seed(2), dtype=q.dtype
    )
    noisy = noisy.clamp(robot.lower, robot.upper)
    raw = (robot.link_positions(noisy, ["ee"])[:, 0] - target).norm(dim=-1)
    gen = torch.Generator().manual_seed(3)
    torch.testing.assert_close(resolved_error(robot, noisy, target, "ee", robot.dof, gen), raw)
    two = resolved_error(robot, noisy, target, "ee", 2, gen)  # two joints left: reachable often
    assert (two < TOL).double().mean() > (raw < TOL).double().mean()
    assert two.mean() < raw.mean()

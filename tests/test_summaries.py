"""Printing an IKResult or an IKDataset gives one short line, not every tensor."""

from __future__ import annotations

import torch

import torchik


def test_ik_result_prints_a_summary():
    robot = torchik.load_robot("snake2", dtype=torch.float64)
    targets = robot.link_positions(robot.random_configuration(300), "ee")
    targets[0] = torch.tensor([5.0, 5.0, 0.0], dtype=torch.float64)  # out of reach
    result = torchik.solve_ik(robot, targets, position_only=True, num_seeds=4, early_stop=False)
    text = repr(result)
    assert "\n" not in text and len(text) < 200
    assert text.startswith("IKResult(q (300, 4, 2): 300 target(s) x 4 slot(s) x 2 joints;")
    assert "299 of 300 solved within 1 mm;" in text and "tensor" not in text
    assert str(result.best()).startswith("IKResult(q (300, 1, 2)")
    pose = torchik.solve_ik(torchik.load_robot("ur5", dtype=torch.float64), torch.eye(4)[None])
    assert "within 1 mm / 1 deg" in repr(pose)


def test_ik_dataset_prints_a_summary():
    data = torchik.make_dataset(torchik.load_robot("panda"), 1000, seed=2)
    text = repr(data)
    assert text == (
        "IKDataset(1000 rows of panda panda_hand, position targets: q (1000, 7), "
        "target (1000, 3), torch.float32; sampler uniform, seed 2)"
    )
    assert repr(data.split()[0]).startswith("IKDataset(800 rows of panda")

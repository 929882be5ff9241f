"""experiments.wholebody: the G1 whole-body protocol (targets, success, rows, file)."""

from __future__ import annotations

import torch

import torchik
from experiments.wholebody import (
    FEET,
    HANDS,
    PATH_STEPS,
    arm_joints,
    floating_g1,
    path_configurations,
    quaternion_g1,
    run_anchor,
    run_floating,
    run_one_at_a_time,
    run_path,
    run_torchik,
    scene_g1,
    success,
    targets,
    wholebody_markdown,
)


def _g1():
    torch.set_num_threads(1)
    return torchik.load_robot("g1", dtype=torch.float64)


def test_success_is_judged_by_fk_and_limits():
    robot = _g1()
    q = robot.random_configuration(3, torch.Generator().manual_seed(0))
    poses = targets(robot, 3)
    assert success(robot, q, poses).all()
    moved = q.clone()
    moved[:, -1] += 0.2  # a wrist joint: the right hand moves
    assert not success(robot, moved, poses).any()
    beyond = q.clone()
    beyond[0, 0] = robot.upper[0] + 0.1
    assert success(robot, beyond, poses).tolist()[1:] == [True, True]


def test_rows_of_torchik_and_an_anchor():
    robot = _g1()
    poses = targets(robot, 3)
    row = run_torchik(robot, poses, num_seeds=2, repeats=1)
    assert row["targets"] == 3 and row["success"] == 1.0
    truth = robot.random_configuration(3, torch.Generator().manual_seed(0))
    answers = iter(truth)
    anchor = run_anchor(robot, poses, lambda q0, pose: next(answers), starts=2)
    assert anchor["success"] == 1.0 and anchor["starts_used"] == 3
    never = run_anchor(robot, poses[:1], lambda q0, pose: q0, starts=2)
    assert never["success"] == 0.0 and never["starts_used"] == 2
    one = run_one_at_a_time(robot, poses, num_seeds=2)
    assert one["targets"] == 3 and one["success"] == 1.0 and "99th" in one["settings"]


def test_the_arms_alone_row_holds_the_waist_and_legs_at_the_neutral():
    robot = _g1()
    arms = arm_joints(robot)
    assert len(arms) == 14 and all("waist" not in name and "hip" not in name for name in arms)
    poses = targets(robot, 3, arms)
    held = [name not in arms for name in robot.joint_names]
    q = robot.random_configuration(3, torch.Generator().manual_seed(0))
    q[:, held] = robot.neutral()[held]
    assert success(robot, q, poses).all()
    row = run_torchik(robot, poses, num_seeds=2, repeats=1, active=arms)
    assert row["success"] == 1.0 and "14 joints moved" in row["settings"]


def test_the_scene_row_is_the_g1_beside_a_free_box():
    robot, scene = _g1(), scene_g1()
    assert scene.floating_bases == 1 and scene.dof == robot.dof + 7
    assert scene.base_of("box") == 0 and scene.base_of(HANDS[0]) is None
    q = robot.random_configuration(2, torch.Generator().manual_seed(0))
    full = torch.cat((scene.neutral()[:7].expand(2, 7), q), dim=-1)
    assert torch.equal(scene.forward_kinematics(full, list(HANDS)),
                       robot.forward_kinematics(q, list(HANDS)))  # fmt: skip
    row = run_torchik(scene, targets(robot, 3), num_seeds=2, repeats=1)
    assert row["success"] == 1.0


def test_a_failed_path_call_is_retried_from_seeds_near_the_last_answer(monkeypatch):
    """``retry``: a call that fails (here: warm starts given no iteration) runs once more from
    8 seeds near the previous answer, and the successful slot nearest it is kept."""
    import experiments.wholebody as wholebody

    real, calls = wholebody.solve_wholebody, []

    def warm_starts_fail(robot, targets, seeds, **options):
        calls.append(seeds.shape[0])
        if len(seeds) == 1:  # no iteration, no settling: the previous answer as it is
            options.update(max_iters=0, posture_iters=0)
        return real(robot, targets, seeds=seeds, **options)

    monkeypatch.setattr(wholebody, "solve_wholebody", warm_starts_fail)
    row = wholebody.run_path(_g1(), HANDS, 4, away=True, retry=True)
    assert row["success"] == 1.0 and "retried from seeds near" in row["settings"]
    assert calls[0] == 1 and calls.count(8) == 3  # the path's start is its first answer
    assert row["largest_step"] < 1.0


def test_floating_base_rows_and_markdown():
    assert floating_g1().dof == _g1().dof + 6
    row = run_floating(3, num_seeds=2)
    assert row["targets"] == 3 and 0.0 <= row["success"] <= 1.0
    text = wholebody_markdown({"date": "d"}, {"x": row, "y": {"status": "failed: no"}})
    assert "| x | 3 |" in text and "failed: no" in text and text.startswith("# Whole-body")


def test_markdown_has_a_status_column_and_the_reports_stamp():
    """Every row says its status (a failed anchor in that column, not in the notes), and the
    stamp is written as every other report's: the command in backticks, the anchors' versions
    as text, and the loaded-machine flag when the load average passed the cores."""
    row = {"targets": 4, "success": 0.5, "cpu_s": 0.2, "settings": "s"}
    stamp = {
        "command": "python x.py",
        "cores": 2,
        "anchors": {"placo": "0.10.2"},
        "load_average_at_start": [0.5, 0.5, 0.5],
        "load_average_at_end": [3.5, 1.0, 1.0],
    }
    text = wholebody_markdown(stamp, {"x": row, "placo": {"status": "failed: no"}})
    assert "| notes | status |" in text
    assert "| x | 4 | 50.0 % | 0.200 s | 50.00 ms | s | ok |" in text
    assert "| placo | — | — | — | — | — | failed: no |" in text
    assert "| command | `python x.py` |" in text and "| anchors | placo 0.10.2 |" in text
    assert "**Loaded machine**" in text


def test_warm_started_path_rows():
    """The path moves by small steps between waypoints (a floating base's quaternion stays a
    unit one); each call of the row is seeded with the previous answer and solved."""
    robot = quaternion_g1()
    q = path_configurations(robot, PATH_STEPS + 5)
    torch.testing.assert_close(q[:, 3:7].norm(dim=-1), torch.ones(len(q), dtype=q.dtype))
    steps = (q[1:, 7:] - q[:-1, 7:]).abs().amax(-1)
    assert float(steps.max()) < 0.1 and float(steps.min()) > 0.0
    row = run_path(_g1(), HANDS, 4)
    assert row["targets"] == 4 and row["success"] == 1.0 and "warm-started" in row["settings"]
    assert row["mean_iterations"] <= 5
    floating = run_path(robot, [*FEET, *HANDS], 3, restarts=True)
    assert floating["success"] == 1.0 and "restarts=True" in floating["settings"]
    away = run_path(robot, [*FEET, *HANDS], 3, away=True)
    assert away["success"] == 1.0 and "away from the limits" in away["settings"]
    assert 0.0 < away["largest_step"] < 0.2

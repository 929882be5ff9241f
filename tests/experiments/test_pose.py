"""experiments.pose: the full-pose protocol on the pretrained Panda model, tiny sizes."""

import inspect

import pytest
import torch

import torchik
from experiments.numerical import problem
from experiments.pose import distinct_counts, passed, pose_table, sample
from torchik.models import FEW_PASSES, load_pretrained

SMALL = dict(n_poses=3, n_samples=6, many=10, timing_poses=2, one_each_samples=2,
             min_run_time=0.01)  # fmt: skip


@pytest.fixture(scope="module")
def robot():
    return torchik.load_robot("panda", dtype=torch.float64)


@pytest.fixture(scope="module")
def model():
    return load_pretrained("panda")


@pytest.fixture(scope="module")
def tables(robot, model):
    return pose_table(robot, model, **SMALL)


def test_four_tables_with_their_rows(tables):
    titles = [t.title for t in tables]
    assert titles[0] == "Raw samples (no refinement)" and titles[3].startswith("One solution")
    assert [len(t.rows) for t in tables] == [1, 2, 5, 2]
    assert all(row["status"] == "ok" for t in tables for row in t.rows)
    text = tables.markdown()
    assert text.count("## ") == 4 and "| fm | 3 × 6 |" in text


def test_raw_errors_agree_with_the_samples(tables, robot, model):
    raw = tables[0].rows[0]
    p = problem(robot, "panda_hand", 3, seed=2026, retries=0)
    q = sample(model, p.targets, 6, seed=0)
    pos = robot.forward_kinematics(q, "panda_hand")[..., :3, 3] - p.targets[:, None, :3, 3]
    assert raw["pos_mean_mm"] == pytest.approx(1000 * pos.norm(dim=-1).mean().item())
    assert raw["best_pos_only_mm"] <= raw["best_pos_mm"] <= raw["pos_mean_mm"] * 6
    assert 0 <= raw["outside_limits"] <= 1 and raw["diversity"] > 0 and raw["sample_s"] > 0
    assert 1 <= raw["distinct"] <= 6


def test_refinement_solves_and_keeps_distinct_solutions(tables):
    loose, strict = tables[1].rows
    assert loose["success_poses"] == 1.0 and loose["success_samples"] > 0.5
    assert 1 <= loose["distinct_min"] <= loose["distinct_mean"] <= 6
    assert strict["tolerance"] == "1e-05 m, 1e-05 rad" and strict["refine_s"] > 0
    assert loose["moved_mean"] > 0 and loose["iterations"] >= 1


def test_one_pose_and_one_each(tables):
    one_pose, one_each = tables[2], tables[3]
    for row in one_pose.rows:
        assert 0 <= row["solutions_min"] <= row["solutions"] <= 10 and row["poses"] == 2
        assert row["wall_s"] > 0 and row["cpu_s"] > 0
    topped = one_pose.rows[1]
    assert topped["solutions_min"] == 10 and topped["seeds"] >= 10
    assert one_each.row("no model: solve_ik, own seeding (defaults)")["success"] == 1.0


def test_many_options_add_a_raw_row_and_the_fast_many_rows(robot, model):
    options = {"sample_options": {"sampler": FEW_PASSES}, "max_iters": 15}
    tables = pose_table(robot, model, many_options=options, many_label="FEW_PASSES", **SMALL)
    raw, one_pose = tables[0], tables[2]
    assert [row["method"] for row in raw.rows] == ["fm", "fm, FEW_PASSES"]
    assert raw.rows[1]["pos_mean_mm"] > 0 and raw.rows[1]["samples"] == "3 × 6"
    names = [row["method"] for row in one_pose.rows]
    assert names[:3] == ["fm: 10 samples + solve_with_model",
                         "fm, FEW_PASSES: 10 samples + solve_with_model",
                         "fm, FEW_PASSES: samples + solve_with_model until 10 solve"]  # fmt: skip
    assert [row["model"] for row in one_pose.rows] == [True] * 3 + [False] * 3
    assert one_pose.rows[2]["solutions_min"] == 10 and one_pose.rows[1]["draw_s"] > 0


def test_check_judges_success(robot, model):
    def elsewhere(q):  # the poses of another robot: refinement on the Panda cannot reach them
        T = robot.forward_kinematics(q, "panda_hand").clone()
        T[..., 2, 3] += 5.0
        return T

    tables = pose_table(robot, model, check=elsewhere, **SMALL)
    assert tables[1].rows[0]["success_poses"] == 0.0
    assert tables[3].rows[1]["success"] == 0.0


def test_default_seed_is_the_pretrained_models_held_out_seed():
    from torchik.models.pretrained import TEST_SEED

    assert inspect.signature(pose_table).parameters["seed"].default == TEST_SEED


def test_passed_and_distinct_counts():
    errs = {
        "position": torch.tensor([[0.0, 0.0, 0.1]]),
        "rotation": torch.tensor([[0.0, 0.0, 0.0]]),
        "inside": torch.tensor([[True, False, True]]),
    }
    ok = passed(errs, 1e-3, 0.01)
    assert ok.tolist() == [[True, False, False]]
    q = torch.tensor([[[0.0, 0.0], [0.05, 0.0], [1.0, 0.0]]])
    every = torch.ones(1, 3, dtype=torch.bool)
    assert distinct_counts(q, every, errs, torch.zeros(2, dtype=torch.bool)).tolist() == [2]

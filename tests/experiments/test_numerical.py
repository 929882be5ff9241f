"""experiments.numerical: the numerical-IK table judges answers itself, on tiny problems."""

import math

import pytest
import torch

import torchik
from experiments.numerical import (
    Solver,
    check_answers,
    errors,
    float64,
    many_solutions_table,
    numerical_ik_table,
    problem,
    run_timed,
    torchik_solver,
)

FAST = dict(min_run_time=0.01)


@pytest.fixture(scope="module")
def snake():
    return torchik.load_robot("snake2", dtype=torch.float64)


@pytest.fixture(scope="module")
def panda():
    return torchik.load_robot("panda", dtype=torch.float64)


def _answers(robot, n, seed=0):
    """The configurations the problem's targets were made from."""
    return robot.random_configuration(n, torch.Generator().manual_seed(seed))


def test_problem_targets_are_fk_of_seeded_configurations(panda):
    p = problem(panda, "panda_hand", 5, seed=3, retries=4)
    q = _answers(panda, 5, seed=3)
    assert torch.allclose(p.targets, panda.forward_kinematics(q, "panda_hand"), atol=0)
    assert p.starts.shape == (5, 4, 7) and p.starts.dtype == torch.float64
    assert not torch.allclose(p.starts[:, 0], q)  # starts are never the answer
    assert p.solver_targets(2).shape == (2, 4, 4)


def test_check_answers_counts_pose_strict_and_limits(panda):
    p = problem(panda, "panda_hand", 6)
    q = _answers(panda, 6)
    exact = check_answers(p, q[:, None])
    assert exact == {"success": 1.0, "success_strict": 1.0, "success_ignoring_limits": 1.0,
                     "answered": 1.0}  # fmt: skip
    outside = q.clone()
    outside[:3, 0] = panda.upper[0] + 0.1  # joint 1 outside its limit (and the pose moves)
    moved = check_answers(p, outside[:, None])
    assert moved["success"] == 0.5 and moved["answered"] == 1.0
    nudged = q + 1e-4  # within 1 mm and 1°, not within 1e-5
    assert check_answers(p, nudged[:, None])["success_strict"] == 0.0
    assert check_answers(p, nudged[:, None])["success"] == 1.0
    missing = torch.full_like(q, math.nan)[:, None]
    assert check_answers(p, missing)["answered"] == 0.0
    # a target counts as solved when any of its candidates passes
    assert check_answers(p, torch.stack([missing[:, 0], q], dim=1))["success"] == 1.0


def test_errors_ignore_rotation_when_position_only(snake):
    p = problem(snake, None, 4, position_only=True)
    err = errors(p, _answers(snake, 4)[:, None])
    assert torch.all(err["rotation"] == 0) and torch.all(err["position"] < 1e-12)


def test_default_table_runs_torchik_solvers(snake):
    table = numerical_ik_table(snake, n_targets=6, position_only=True, **FAST)
    assert [r["method"] for r in table.rows] == ["torchik lm", "torchik dls", "torchik jt",
                                                 "torchik gd"]  # fmt: skip
    lm = table.row("torchik lm")
    assert lm["success"] == 1.0 and lm["targets"] == 6 and lm["starts"] == 2
    assert lm["wall_s"] > 0 and lm["per_target_s"] == pytest.approx(lm["wall_s"] / 6)
    assert "| torchik lm | 6 | 2 | 100.0 % |" in table.markdown()


def test_plain_callables_missing_rows_and_failures(snake):
    def starts_as_answer(targets, starts):
        return starts  # random configurations: almost never the answer

    def broken(targets, starts):
        raise RuntimeError("solver exploded")

    solvers = {
        "random": starts_as_answer,
        "subset": Solver(starts_as_answer, n_targets=3, starts=1, settings="three"),
        "gone": "missing: not installed",
        "broken": broken,
    }
    table = numerical_ik_table(snake, solvers, n_targets=5, retries=2, position_only=True, **FAST)
    assert table.row("random")["success"] < 1.0 and table.row("random")["starts"] == 2
    assert table.row("subset")["targets"] == 3 and table.row("subset")["settings"] == "three"
    assert table.row("gone")["status"] == "missing: not installed"
    assert table.row("broken")["status"].startswith("failed: RuntimeError: solver exploded")


def test_shared_starts_reach_the_solver(panda):
    p = problem(panda, "panda_hand", 4, retries=1)
    p.starts = _answers(panda, 4)[:, None]  # the answers as starts: one iteration is enough
    shared = torchik_solver(panda, "panda_hand", own_seeds=False, max_iters=1)
    own = torchik_solver(panda, "panda_hand")
    assert check_answers(p, shared.run(p.targets, p.starts))["success"] == 1.0
    ignored = torch.full_like(p.starts, math.nan)  # own seeding never reads the starts
    assert check_answers(p, own.run(p.targets, ignored))["success"] == 1.0
    assert shared.starts is None and own.starts == 2 and "float64" in own.settings


def test_check_makes_and_judges_the_targets(snake):
    def shifted(q):  # another robot's FK: the solver, on the real robot, cannot reach it
        T = snake.forward_kinematics(q, "ee").clone()
        T[..., 0, 3] += 10.0
        return T

    table = numerical_ik_table(snake, n_targets=3, position_only=True, check=shifted, **FAST)
    assert table.row("torchik lm")["success"] == 0.0


def test_many_solutions_are_distinct_and_checked(panda):
    p = problem(panda, "panda_hand", 1)
    table = many_solutions_table(p, slots=64, max_iters=40, **FAST)
    row = table.row("torchik (LM)")
    assert row["distinct"] >= 2 and row["min_gap"] > 0.1 and row["wall_s"] > 0


def test_run_timed_returns_the_last_answer_and_cpu_time():
    calls = []
    answer, timing, cpu = run_timed(lambda: calls.append(1) or len(calls), 0.01)
    assert answer == len(calls) and timing.median > 0 and cpu >= 0


def test_float64_copies_instead_of_converting_in_place():
    robot = torchik.load_robot("snake2")
    assert float64(robot).dtype == torch.float64 and robot.dtype == torch.float32
    same = float64(float64(robot))
    assert float64(same) is same


def test_torchik_rows_of_the_table():
    from experiments.numerical import LBFGSB_TARGETS, NOTES, torchik_rows

    rows = torchik_rows("snake2", "ee", position_only=True)
    assert list(rows)[:4] == ["torchik", "torchik (float64, tol 1e-5)", "torchik (own seeding)",
                              "torchik (own seeding, float64, tol 1e-5)"]  # fmt: skip
    assert rows["torchik lbfgsb (own seeding, float64)"].n_targets == LBFGSB_TARGETS
    assert rows["torchik dls (own seeding, float64)"].n_targets is None and len(rows) == 9
    assert rows["torchik (own seeding, host loop)"].settings.endswith("loop='host' (PyTorch "
                                                                      "operations)")  # fmt: skip
    assert NOTES[0].startswith("Success is decided here")


def test_batch_sizes_table_times_both_loops_on_one_and_every_core():
    """Both loops on one thread and on every core, and from warm starts on one thread."""
    import os

    import torchik
    from experiments.numerical import batch_sizes_table, problem

    robot = torchik.load_robot("snake2", dtype=torch.float64)
    p = problem(robot, "ee", 3, position_only=True)
    table = batch_sizes_table(p, torchik.load_robot("snake2", dtype=torch.float32), (1, 3),
                              min_run_time=0.01)  # fmt: skip
    threads = len({1, os.cpu_count() or 1})
    assert len(table.rows) == 2 * (2 * threads + 2)  # and a warm start per loop and size
    loops = {"compiled", "host", "compiled, warm", "host, warm"}
    assert {row["loop"] for row in table.rows} == loops
    assert all(row["success"] == 1.0 for row in table.rows)
    assert "batch sizes" in table.markdown()

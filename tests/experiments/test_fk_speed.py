"""experiments.fk_speed: FK timing and agreement tables for any FK implementations."""

from __future__ import annotations

import torch

import torchik
from experiments.fk_speed import (
    MIN_RUNS,
    Method,
    agreement_table,
    fk_timing_table,
    forward_op,
    torchik_methods,
    unavailable,
)


def _setup():
    robot = torchik.load_robot("snake2", dtype=torch.float64)
    q = robot.random_configuration(1024, torch.Generator().manual_seed(0))
    reversed_names = list(robot.joint_names)[::-1]  # the table's joint order differs from torchik's
    return robot, q[:, [1, 0]], reversed_names


def test_timing_table_rows_statuses_and_ratios():
    _, q, names = _setup()
    methods = [*torchik_methods("snake2", "ee", names), unavailable("other", "missing: x")]
    slow = Method("slow", {"FK": forward_op(lambda q: torch.linalg.matrix_exp(q[:, :1, None]))})
    table = fk_timing_table([*methods, slow], q, ("float64",), (1, 1024), 0.01, "t", ("torchik",))
    fk_rows = [r for r in table.rows if r.get("op") == "FK"]
    assert {r["method"] for r in fk_rows} == {"torchik", "torchik (native)", "slow"}
    assert len(fk_rows) == 6
    assert all(r["per_config_s"] > 0 for r in fk_rows)
    assert any(r["method"] == "other" and r["status"] == "missing: x" for r in table.rows)
    assert all(r["reps"] >= MIN_RUNS == 7 for r in table.rows if "reps" in r)  # the protocol's


def test_agreement_against_a_reference():
    robot, q, names = _setup()
    own = torchik_methods("snake2", "ee", names)[0]
    ref = Method("ref", {}, columns=own.columns, poses=own.poses, jacobian=own.jacobian)
    table = agreement_table([own, ref], q, ("missing", "ref"), "ref")
    by_dtype = {r["dtype"]: r for r in table.rows if r["method"] == "torchik"}
    assert by_dtype["float64"]["max_abs_pose_diff"] == 0.0
    assert 0 < by_dtype["float32"]["max_abs_pose_diff"] < 1e-5
    assert by_dtype["float64"]["max_abs_jacobian_diff"] == 0.0
    native = torchik_methods("snake2", "ee", names)[1]  # the compiled kernels: to rounding
    table = agreement_table([native, ref], q, ("missing", "ref"), "ref")
    row = next(r for r in table.rows if r["dtype"] == "float64")
    assert 0 <= row["max_abs_pose_diff"] < 1e-12 and row["max_abs_jacobian_diff"] < 1e-12
    empty = agreement_table([unavailable("x", "missing")], q, ("ref",), "ref")
    assert empty.notes[0].startswith("no float64 reference") and not empty.rows

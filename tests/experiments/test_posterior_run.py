"""experiments.posterior_run: the posterior report's experiment around posterior_table."""

from __future__ import annotations

import torch

from experiments.posterior_run import (
    PosteriorRun,
    arm_setup,
    default_families,
    posterior_tables,
    run_arm,
    scope_note,
)


def test_arms_are_the_reports():
    arm, robot, std = arm_setup("4")
    assert std == [0.2] * 4 and robot.dof == 4
    q = torch.randn(5, 4, dtype=torch.float64) * 0.3
    end = robot.to(torch.float64).forward_kinematics(q)[:, -1, :2, 3]  # the last link
    torch.testing.assert_close(arm.forward(q).to(end), end)
    _, rail, rail_std = arm_setup("rail")
    assert rail_std == [0.25, 0.5, 0.5, 0.5] and rail.dof == 4


def test_run_arm_rows_and_tables_do_not_consume_the_rows():
    settings = PosteriorRun(families=("mlp", "nope"), targets=2, samples=20, steps=2,
                            train_size=64, batch=32, preset="tiny")  # fmt: skip
    lines: list[str] = []
    rows, info = run_arm("4", settings, log=lines.append)
    assert [r["method"] for r in rows] == ["ground truth (2nd draw)", "prior", "mlp", "nope"]
    assert rows[2]["steps"] == 2 and rows[3]["status"].startswith("not available")
    assert rows[0]["mmd"] < rows[1]["mmd"] and lines
    truth, main = posterior_tables(rows, [info], settings.samples)
    assert len(main.rows) == 4 and len(truth.rows) == 1 and "method" in rows[0]
    assert "20 samples per target" in main.title


def test_scope_note_and_families():
    small = PosteriorRun(targets=20)
    assert scope_note(small, ["4"]).startswith("**Small run**")
    arms = ["4", "6", "8", "10", "rail"]
    assert scope_note(PosteriorRun(targets=100), arms).startswith("**Protocol table at CPU")
    assert scope_note(PosteriorRun(targets=1000, steps=5), arms).startswith("Full protocol run")
    assert default_families()[:2] == ("cvae", "inn")

"""experiments.gpu: the GPU runbook's FK and IK rows (run here on the CPU, tiny)."""

from __future__ import annotations

import torch

from experiments.gpu import fk_rows, gpu_table, ik_rows
from torchik import load_robot


def test_fk_and_ik_rows_and_table():
    torch.set_num_threads(1)
    robot = load_robot("snake2")
    rows = fk_rows(robot, "ee", [8], seconds=0.01)
    assert [(r["what"], r["path"]) for r in rows[:3]] == [
        ("FK pose", "reference"), ("FK + backward", "reference"), ("Jacobian", "reference")
    ]  # fmt: skip
    assert len(rows) == 6 and all(r["G_per_s"] > 0 and r["n"] == 8 for r in rows)
    assert robot.backend == "auto"  # the setting is put back
    rows += ik_rows(robot, "ee", [5], seconds=0.01)
    table = gpu_table(rows)
    assert len(table.rows) == 8 and table.rows[-1]["success"] == 1.0
    assert "| IK full pose | sync_every=auto | 5 |" in table.markdown()

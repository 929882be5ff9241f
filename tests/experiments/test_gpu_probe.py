"""experiments.gpu_probe's kernel table, run here in Triton's interpreter (tiny)."""

from __future__ import annotations

import pytest
import torch

from experiments.gpu_probe import host_profile, kernel_rows, kernel_table
from torchik import load_robot

pytest.importorskip("triton", reason="the fused kernels need Triton (the dev extra installs it)")


def test_every_store_style_writes_the_first_rows_values(monkeypatch):
    """Each kernel in each store style and shape, checked against its first row (tiles):
    the same values (0 difference), the module's settings put back; a row whose values
    differ says so in the table."""
    from torchik.kinematics import fused

    if torch.cuda.is_available():
        pytest.skip("on a GPU the probe runs at 4 M configurations (make gpu-check)")
    robot = load_robot("snake2", dtype=torch.float32)
    robot.backend = "fused"
    saved = fused.STORES, fused.BLOCK, fused.WARPS
    rows = kernel_rows(robot, "ee", 40, cuda=False)
    assert (fused.STORES, fused.BLOCK, fused.WARPS) == saved
    kernels = {"fk pose", "fk all links", "fk backward", "jacobian", "lm step"}
    assert {r["stores"] for r in rows} == {"tiles", "scalar", "whole", "rows"}
    assert {r["kernel"] for r in rows if r["stores"] == "rows"} == kernels
    assert all("error" not in r and r["max_diff"] == 0.0 for r in rows), rows
    rows[-1]["max_diff"] = float("nan")
    statuses = [row["status"] for row in kernel_table(rows).rows]
    assert statuses[-1] == "failed: values differ from the kernel's first row by nan"
    assert set(statuses[:-1]) == {"ok"}


def test_the_host_profile_names_the_solvers_functions():
    """``host_profile`` of ``solve_ik`` (one link) and of whole-body IK (a list of links)."""
    text = host_profile(load_robot("snake2"), "ee", [2], cuda=False)
    assert text.startswith("== ee n=2: 10 solves\nmedian ms by intra-op threads: 1: ")
    assert "solve_ik" in text
    g1 = load_robot("g1")
    text = host_profile(g1, ["left_rubber_hand", "right_rubber_hand"], [2], cuda=False)
    assert "n=2: 10 solves" in text and "solve_wholebody" in text
    assert text.endswith("synchronising lines: []")

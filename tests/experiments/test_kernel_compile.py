"""experiments.kernel_compile: the fused kernels a call launches, recorded in Triton's interpreter
and compiled for a GPU without one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from experiments.kernel_compile import loop_stats, recorded_kernels
from tests.conftest import REPO_ROOT
from tests.ik.test_wholebody import TWO_ARMS
from torchik import Robot

pytest.importorskip("triton", reason="the fused kernels need Triton")


def _fk_kernels():
    robot = Robot.from_urdf(TWO_ARMS, dtype=torch.float32, backend="fused")
    q = torch.zeros(3, robot.dof)
    return recorded_kernels(lambda: robot.forward_kinematics(q, ["left_hand", "right_hand"]))


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="records in the interpreter")
def test_a_call_s_kernels_are_recorded_once_each_with_their_argument_types():
    kernels = _fk_kernels()
    assert [k["name"] for k in kernels] == ["fk"]  # two calls of one kernel would be one entry
    entry = kernels[0]
    assert entry["source"].startswith("def fk(") and "tl.load" in entry["source"]
    assert entry["signature"] == {"q_ptr": "*fp32", "c_ptr": "*fp32", "out_ptr": "*fp32",
                                  "B": "i32", "BLOCK": "constexpr"}  # fmt: skip


def test_loop_stats_find_the_longest_loop_and_its_spills():
    sass = "\n".join([
        "        /*0000*/  LDG.E R0, [R2.64] ;",
        ".L_x_0:",
        "        /*0010*/  STL [R1], R0 ;",
        ".L_x_1:",
        "        /*0020*/  LDL R4, [R1] ;",
        "        /*0030*/  @P1 BRA `(.L_x_1) ;",  # the inner loop: 2 instructions
        "        /*0040*/  @P0 BRA `(.L_x_0) ;",  # the outer: 4
        "        /*0050*/  @P0 BRA `(.L_x_2) ;",  # forwards: no loop
        ".L_x_2:",
        "        /*0060*/  EXIT ;",
    ])  # fmt: skip
    assert loop_stats(sass) == dict(instructions=7, loop=4, loop_stl=1, loop_ldl=1, loop_ldg=0)
    assert loop_stats("        /*0000*/  EXIT ;")["loop"] == 0


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="records in the interpreter")
def test_a_recorded_kernel_compiles_for_hopper_without_a_gpu(tmp_path: Path):
    """In a process without the interpreter, with the compiler and ptxas Triton ships."""
    from experiments.kernel_compile import _tool

    if not _tool("nvdisasm").exists():
        pytest.skip("this Triton has no NVIDIA tools (ptxas, nvdisasm)")
    (tmp_path / "entry.json").write_text(json.dumps(_fk_kernels()[0]))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    script = REPO_ROOT / "benchmarks" / "kernel_compile.py"
    done = subprocess.run([sys.executable, str(script), "--compile", str(tmp_path / "entry.json"),
                           "90"], env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["seconds"] > 0 and "ttgir" in result["stages"]
    assert 0 < result["ptxas"]["registers"] <= 255 and result["ptxas"]["spill_stores"] == 0
    assert result["loop"]["instructions"] > 0

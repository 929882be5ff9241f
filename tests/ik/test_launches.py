"""How many kernels the one-graph programs launch on a GPU (issue 34: IK without launch
overhead). In a replayed CUDA graph each launch costs an H200 about 1.7 µs whatever it does:
a one-pose ``solve_ik`` took 1.06 ms there, 0.54 ms of it on the GPU. The counts here are taken
on the CPU (PyTorch's operations that launch a kernel, and the fused kernels' launches recorded
instead of run: the sequence of operations reads no value, so it is the GPU's): bounds that a
change may lower, and must not raise without saying why."""

from __future__ import annotations

import pytest
import torch

from tests.ik.recorder import Recorder
from tests.ik.test_wholebody import TWO_ARMS
from tests.ik.test_wholebody_captured import _rows
from torchik import Robot, load_robot
from torchik.ik import LevenbergMarquardt, captured
from torchik.ik.rounds import Run
from torchik.ik.wholebody import captured as wholebody_captured
from torchik.ik.wholebody import solve as wholebody
from torchik.ik.wholebody.solve import WholeBodyLM

pytest.importorskip("triton", reason="the fused kernels need Triton")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU: Triton's interpreter


def _counted(monkeypatch, program) -> tuple[int, int]:
    """``(kernels, fused launches)`` of the second call of ``program()`` (the first fills the
    caches a capture's warm-up fills), the fused kernels recorded instead of run."""
    from torchik.kinematics import fused

    launches: list[int] = []
    monkeypatch.setattr(fused, "_run", lambda *args: launches.append(1))
    program()
    launches.clear()
    with Recorder() as seen:
        program()
    assert not seen.reads()
    return len(seen.kernels()), len(launches)


@pytest.mark.parametrize(("restarts", "most"), [(False, 169), (True, 86)])
def test_a_one_pose_solve_launches_at_most(monkeypatch, restarts, most):
    """``solve_ik``'s program, one Panda pose, float32, 2 + 8 slots, 60 iterations: seeding, 6
    chunks of the loop kernel, the restarts and early stop between them (in the kernel with
    ``fused_restarts``), the check by FK and the best slots. 2026-11-28: 169 and 86 kernels
    (232 and 99 before the carry was made, written and finished in fewer kernels), and 8 fused
    launches (the seeds' FK, 6 chunks, the check's FK)."""
    robot = load_robot("panda", dtype=torch.float32, backend="fused").to(DEVICE)
    q = robot.random_configuration(1, torch.Generator().manual_seed(0))
    pose = load_robot("panda", dtype=torch.float32).forward_kinematics(q.cpu(), "panda_hand")
    pose = pose.to(DEVICE)
    solver = LevenbergMarquardt(loop="fixed", one_graph=True, fused_restarts=restarts)
    run = Run(solver, robot, "panda_hand", 1e-3, 0.0175, pose[:, :3, 3], pose[:, :3, :3], 2,
              restarts=True, seed_pool=256, generator=None)  # fmt: skip
    kernels, launches = _counted(monkeypatch, lambda: captured.program(run, run.position,
                                                                       run.rotmat))  # fmt: skip
    assert launches == 8 and kernels <= most, kernels


@pytest.mark.parametrize(("restarts", "most"), [(False, 324), (True, 105)])
def test_a_one_target_wholebody_solve_launches_at_most(monkeypatch, restarts, most):
    """Whole-body IK's program (``FUSED_LOOP``), one target of the two-arm tree's hands, 2
    slots, float32, 150 iterations: 14 chunks. 2026-11-28: 324 and 105 kernels (467 and 118
    before), and 16 fused launches (the seeds' FK, 14 chunks, the check's FK)."""
    monkeypatch.setattr(wholebody, "FUSED_LOOP", True)
    robot = Robot.from_urdf(TWO_ARMS, dtype=torch.float32, backend="fused").to(DEVICE)
    problem, _ = _rows(robot, 1, k=2)
    solver = WholeBodyLM(loop="fixed", max_iters=wholebody.MAX_ITERS, fused_restarts=restarts)
    assert solver._loop_kernel_serves(problem, problem.rest)
    kernels, launches = _counted(
        monkeypatch, lambda: wholebody_captured.program(solver, problem, 2, 256, None)
    )
    assert launches == 16 and kernels <= most, kernels

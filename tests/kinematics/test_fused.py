"""The fused Triton kernels (issue 19, part 1) equal torchik.kinematics, in Triton's interpreter.

CI has no GPU: ``TRITON_INTERPRET=1`` runs the generated kernels on the CPU with the same code
paths (loads, stores, masks, math). Fixture robots cover a tree, mimic joints, prismatic and
continuous joints and tilted axes; float64 to 1e-12, float32 to float32 rounding.
"""

from __future__ import annotations

import os

import pytest
import torch

from tests.paths import DATA
from torchik import Robot, load_robot
from torchik.kinematics import reference as kinematics

pytest.importorskip("triton", reason="the fused kernels need Triton (the dev extra installs it)")
if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip(
        "no GPU and TRITON_INTERPRET is not 1 (tests/conftest.py sets it)", allow_module_level=True
    )

DATA = DATA / "urdf"
ROBOTS = ["two_branches", "mimic", "prismatic_continuous", "tilted_axes", "panda"]


def _robot(name: str, dtype=torch.float64) -> Robot:
    if name == "panda":
        return load_robot("panda", dtype=dtype)
    return Robot.from_urdf(DATA / f"{name}.urdf", dtype=dtype)


@pytest.mark.parametrize("name", ROBOTS)
def test_fused_fk_jacobian_and_backward_equal_the_reference(name):
    from torchik.kinematics import fused

    robot = _robot(name)
    q = robot.random_configuration(150, generator=torch.Generator().manual_seed(0))  # 2 blocks
    links = tuple(range(len(robot.link_names)))
    ref = kinematics.forward_kinematics(q, robot.tree, links)
    torch.testing.assert_close(
        fused.forward_kinematics(q, robot.tree, links), ref, atol=1e-12, rtol=0
    )
    some = links[::2]
    torch.testing.assert_close(
        fused.forward_kinematics(q, robot.tree, some), ref[:, list(some)], atol=1e-12, rtol=0
    )
    for link in (links[-1], links[len(links) // 2]):
        jac, pose = fused.jacobian(q, robot.tree, link)
        jac_ref, pose_ref = kinematics.jacobian(q, robot.tree, link)
        torch.testing.assert_close(jac, jac_ref, atol=1e-12, rtol=0)
        torch.testing.assert_close(pose, pose_ref, atol=1e-12, rtol=0)
    weights = torch.randn(
        ref.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1)
    )
    q1, q2 = q.clone().requires_grad_(), q.clone().requires_grad_()
    (kinematics.forward_kinematics(q1, robot.tree, links) * weights).sum().backward()
    (fused.forward_kinematics(q2, robot.tree, links) * weights).sum().backward()
    torch.testing.assert_close(q2.grad, q1.grad, atol=1e-10, rtol=0)


def test_fused_gradcheck_and_float32():
    from torchik.kinematics import fused

    robot = _robot("mimic")
    q = robot.random_configuration(3, generator=torch.Generator().manual_seed(2))
    link = (len(robot.link_names) - 1,)
    q = q.requires_grad_()
    assert torch.autograd.gradcheck(lambda x: fused.forward_kinematics(x, robot.tree, link), (q,))
    robot32 = _robot("panda", torch.float32)
    q32 = robot32.random_configuration(40, generator=torch.Generator().manual_seed(3))
    links = tuple(range(len(robot32.link_names)))
    out = fused.forward_kinematics(q32, robot32.tree, links)
    assert out.dtype == torch.float32
    ref = kinematics.forward_kinematics(q32.double(), _robot("panda").tree, links)
    torch.testing.assert_close(out.double(), ref, atol=2e-6, rtol=0)


def test_fused_empty_batch_and_the_backend_choice(monkeypatch):
    from torchik.kinematics import fused

    robot = _robot("panda")
    assert fused.forward_kinematics(robot.neutral()[:0], robot.tree, (1,)).shape == (0, 1, 4, 4)
    q = robot.random_configuration(5, generator=torch.Generator().manual_seed(4))
    assert robot.backend == "auto" and robot._kernels(q, robot.tree) is kinematics  # CPU: ref
    robot.backend = "fused"  # in Triton's interpreter here
    assert robot._kernels(q, robot.tree) is fused
    fk = robot.forward_kinematics(q, "panda_hand")
    robot.backend = "reference"
    torch.testing.assert_close(fk, robot.forward_kinematics(q, "panda_hand"), atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="backend must be one of"):
        robot.backend = "triton"
    monkeypatch.delenv("TRITON_INTERPRET")
    robot.backend = "fused"
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="runs on CUDA tensors"):
            robot.forward_kinematics(q, "panda_hand")

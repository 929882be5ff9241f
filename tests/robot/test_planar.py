"""The planar report's vectorised FK against the generic Robot FK and closed forms."""

from __future__ import annotations

import math

import pytest
import torch

from torchik import load_robot
from torchik.description import RAIL_ARM_LENGTHS, planar_arm_urdf
from torchik.robot import PlanarArm


@pytest.mark.parametrize("n", [1, 2, 4, 6, 10])
def test_planar_arm_agrees_with_generic_robot(n):
    torch.manual_seed(n)
    lengths = (torch.rand(n) + 0.2).tolist()
    arm = PlanarArm(n, lengths).double()
    robot = arm.to_robot(dtype=torch.float64)
    theta = torch.randn(64, n, dtype=torch.float64)
    expected = robot.link_positions(theta, "ee")
    torch.testing.assert_close(arm(theta), expected[..., :2], atol=1e-12, rtol=0)
    assert expected[..., 2].abs().max() < 1e-12
    joints = arm.joint_positions(theta)
    assert joints.shape == (64, n + 1, 2)
    torch.testing.assert_close(joints[..., -1, :], arm(theta))


def test_rail_arm_agrees_with_generic_robot():
    arm = PlanarArm.rail_arm().double()
    robot = arm.to_robot(dtype=torch.float64)
    std = torch.tensor([0.25, 0.5, 0.5, 0.5], dtype=torch.float64)
    x = torch.randn(100, 4, dtype=torch.float64) * std
    torch.testing.assert_close(arm(x), robot.link_positions(x, "ee")[..., :2], atol=1e-12, rtol=0)
    assert arm.dof == 4 and tuple(arm.link_lengths.tolist()) == RAIL_ARM_LENGTHS


def test_closed_form_values():
    arm = PlanarArm(2, [1.0, 0.5]).double()
    q = torch.tensor([[0.0, 0.0], [math.pi / 2, 0.0], [0.0, math.pi / 2]], dtype=torch.float64)
    expected = torch.tensor([[1.5, 0.0], [0.0, 1.5], [1.0, 0.5]], dtype=torch.float64)
    torch.testing.assert_close(arm(q), expected, atol=1e-15, rtol=0)


def test_gradients_finite_for_straight_arm():
    arm = PlanarArm(6)
    q = torch.zeros(3, 6, requires_grad=True)
    arm(q).norm(dim=-1).sum().backward()
    assert torch.isfinite(q.grad).all()


def test_bad_arguments():
    with pytest.raises(ValueError, match="positive"):
        PlanarArm(3, [1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        PlanarArm(0)
    with pytest.raises(ValueError, match=r"shape \(\.\.\., 3\)"):
        PlanarArm(3)(torch.zeros(2, 4))
    # lengths torch cannot read, a list for n, a rail that is no bool: one line each (torch's
    # "Could not infer dtype of NoneType" and "'<' not supported" before)
    for args, error, match in (((2, [1.0, None]), ValueError, "2 positive finite numbers"),
                               ((2, [torch.float64, 1.0]), ValueError, "positive finite"),
                               (([1.0, 1.0],), TypeError, "n must be an int"),
                               ((2, None, "yes"), TypeError, "rail must be")):  # fmt: skip
        with pytest.raises(error, match=match):
            PlanarArm(*args)
    assert PlanarArm(2, [1, 2]).link_lengths.tolist() == [1.0, 2.0]  # ints are lengths


def test_load_robot_planar_and_options():
    robot = load_robot("planar", link_lengths=[1.0, 2.0])
    assert robot.dof == 2
    with pytest.raises(TypeError, match="takes no options"):
        load_robot("panda", link_lengths=[1.0])
    with pytest.raises(ValueError, match="panda"):
        load_robot("no_such_robot")
    with pytest.raises(TypeError, match="name must be a robot's name or a file's path, got int"):
        load_robot(2**63)  # an OverflowError ("fd is greater than maximum") before
    for bad in ("yes", 1, None):  # any value was read as true or false
        with pytest.raises(TypeError, match="floating_base must be True or False"):
            load_robot("panda", floating_base=bad)
    with pytest.raises(TypeError, match="enabled must be True or False"):
        robot.learnable_origins("no")


def test_load_robot_reads_urdf_and_mjcf_files(tmp_path):
    urdf = tmp_path / "arm.urdf"
    urdf.write_text(planar_arm_urdf([1.0, 0.5], name="arm"))
    robot = load_robot(urdf, dtype=torch.float64)
    assert (robot.name, robot.dof) == ("arm", 2)
    with pytest.raises(ValueError, match="no bundled robot named .* and no such file; bundled: "):
        load_robot(tmp_path / "missing.urdf")
    pytest.importorskip("mujoco", reason="MJCF files need the mjcf extra (mujoco)")
    mjcf = tmp_path / "arm.xml"
    mjcf.write_text(
        '<mujoco><worldbody><body name="a"><joint name="j" type="hinge" range="-1 1"/>'
        '<geom size="0.1"/></body></worldbody></mujoco>'
    )
    assert load_robot(mjcf).joint_names == ("j",)
    with pytest.raises(ValueError, match="floating_base is for URDF"):
        load_robot(mjcf, floating_base=True)

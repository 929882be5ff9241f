"""Floating bases (issue 17 section 2): FK against a hand-computed transform and Pinocchio's
FreeFlyer, Jacobian base columns against autograd through ``integrate``, and the helpers."""

from __future__ import annotations

import importlib.util
import json
import math
import sysconfig
from pathlib import Path

import pytest
import torch

import torchik
from tests.paths import DATA, ROBOT_FILES
from torchik import Robot, URDFError, load_robot
from torchik.geometry.floating import (
    base_pose,
    difference,
    integrate,
    normalize_bases,
    velocity_coordinates,
)

DATA = DATA / "urdf_lenient"
F64 = torch.float64
# where the example-robot-data wheel puts its descriptions, when it is installed
ROBOTS = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share/example-robot-data/robots"


def floater() -> Robot:
    return Robot.from_urdf(DATA / "floating.urdf", dtype=F64)


def random_q(robot: Robot, n: int, seed: int = 0) -> torch.Tensor:
    box = robot.with_limits({f"{robot.joint_names[0][:-2]}/{c}": (-2, 2) for c in "xyz"})
    return box.random_configuration(n, generator=torch.Generator().manual_seed(seed))


def test_layout_and_limits() -> None:
    robot = floater()
    assert robot.floating and (robot.nq, robot.nv, robot.dof) == (8, 7, 8)
    assert robot.root == "torso" and robot.link_names == ("torso", "arm", "tool")
    assert robot.joint_names[:7] == tuple(
        f"free/{c}" for c in ("x", "y", "z", "qw", "qx", "qy", "qz")
    )
    assert robot.lower.tolist() == [-math.inf] * 3 + [-1.0] * 4 + [-2.0]
    assert robot.neutral().tolist() == [0, 0, 0, 1, 0, 0, 0, 0]
    q = robot.random_configuration(100, generator=torch.Generator().manual_seed(0))
    assert bool((q[:, :3] == 0).all())  # an infinite range is sampled at 0
    torch.testing.assert_close(q[:, 3:7].norm(dim=-1), torch.ones(100, dtype=F64))
    assert float(q[:, 3:7].abs().min()) < 0.1 and bool((q[:, 7].abs() <= 2).all())


def test_fk_matches_a_hand_computed_transform() -> None:
    s = math.sqrt(0.5)  # base at (1, 2, 3) turned 90 degrees about x, shoulder at 0.5 rad
    q = torch.tensor([1.0, 2.0, 3.0, s, s, 0.0, 0.0, 0.5], dtype=F64)
    # origin: yaw 90 degrees at (0, 0, 1), so torso = Rz(90) Rx(90) at (0, 0, 1) + Rz(90) (1, 2, 3)
    r_torso = torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=F64)
    p_torso = torch.tensor([-2.0, 1.0, 4.0], dtype=F64)
    c, n = math.cos(0.5), math.sin(0.5)
    rz = torch.tensor([[c, -n, 0.0], [n, c, 0.0], [0.0, 0.0, 1.0]], dtype=F64)
    poses = floater().forward_kinematics(q, ["torso", "tool"])
    torch.testing.assert_close(poses[0, :3, :3], r_torso, atol=1e-15, rtol=0)
    torch.testing.assert_close(poses[0, :3, 3], p_torso, atol=1e-15, rtol=0)
    local = torch.tensor([0.2 + 0.5 * c, 0.5 * n, 0.0], dtype=F64)
    torch.testing.assert_close(poses[1, :3, 3], p_torso + r_torso @ local, atol=1e-15, rtol=0)
    torch.testing.assert_close(poses[1, :3, :3], r_torso @ rz, atol=1e-15, rtol=0)
    scaled = q.clone()
    scaled[3:7] *= 3.0  # any nonzero quaternion norm: the unit quaternion is used
    torch.testing.assert_close(floater().forward_kinematics(scaled, "tool"), poses[1])


def test_matches_pinocchio_reference_numbers() -> None:
    ref = json.loads((DATA / "floating_reference.json").read_text())
    robot = floater()
    q = torch.tensor(ref["q"], dtype=F64)
    assert list(robot.link_names) == ref["links"]
    torch.testing.assert_close(robot.forward_kinematics(q), torch.tensor(ref["poses"], dtype=F64))
    jac = torch.stack([robot.jacobian(q, link) for link in robot.link_names], dim=1)
    torch.testing.assert_close(jac, torch.tensor(ref["jacobians"], dtype=F64))


@pytest.mark.parametrize("link", ["torso", "arm", "tool"])
def test_jacobian_is_the_derivative_along_integrate(link: str) -> None:
    robot = floater()
    for q in random_q(robot, 3, seed=1):
        jac = robot.jacobian(q, link)

        def pose_after(v: torch.Tensor, q: torch.Tensor = q) -> torch.Tensor:
            return robot.forward_kinematics(robot.integrate(q, v), link)

        d = torch.autograd.functional.jacobian(pose_after, torch.zeros(7, dtype=F64))
        rot = robot.forward_kinematics(q, link)[:3, :3]
        omega = torch.einsum("ijk,jl->ilk", d[:3, :3], rot.T)  # dR R^T = [w]x per column
        angular = torch.stack((omega[2, 1], omega[0, 2], omega[1, 0]))
        torch.testing.assert_close(jac[:3], d[:3, 3], atol=1e-12, rtol=0)
        torch.testing.assert_close(jac[3:], angular, atol=1e-12, rtol=0)


def test_gradients_reach_the_base_pose() -> None:
    robot = floater()
    q = random_q(robot, 2, seed=2).requires_grad_()
    assert torch.autograd.gradcheck(lambda x: robot.forward_kinematics(x, "tool"), (q,))
    batch = random_q(robot, 40, seed=3).requires_grad_()  # the analytic backward's batch sizes
    assert torch.autograd.gradcheck(lambda x: robot.link_positions(x), (batch,), fast_mode=True)


def test_integrate_and_difference_are_inverse() -> None:
    robot = floater()
    q0, q1 = random_q(robot, 20, seed=4), random_q(robot, 20, seed=5)
    v = robot.difference(q0, q1)
    assert v.shape == (20, 7)
    torch.testing.assert_close(
        robot.forward_kinematics(robot.integrate(q0, v)), robot.forward_kinematics(q1)
    )
    step = torch.randn(20, 7, dtype=F64, generator=torch.Generator().manual_seed(6))
    torch.testing.assert_close(robot.difference(q0, robot.integrate(q0, step)), step)
    fixed = load_robot("panda", dtype=F64)
    a = fixed.random_configuration(3)
    torch.testing.assert_close(fixed.integrate(a, fixed.difference(a, 2 * a)), 2 * a)
    assert (fixed.nq, fixed.nv, fixed.floating) == (7, 7, False)


def test_normalize_bases_keeps_positions_and_joints() -> None:
    q = torch.tensor([[1.0, 2.0, 3.0, 0.0, 0.0, 3.0, 4.0, 7.0, 8.0, 9.0, 2.0, 0.0, 0.0, 0.0, 0.5]])
    out = normalize_bases(q, 2)
    want = [1.0, 2.0, 3.0, 0.0, 0.0, 0.6, 0.8, 7.0, 8.0, 9.0, 1.0, 0.0, 0.0, 0.0, 0.5]
    torch.testing.assert_close(out, torch.tensor([want]))
    assert normalize_bases(q, 0) is q
    with pytest.raises(ValueError, match="quaternion of floating base 1 is zero"):
        normalize_bases(torch.cat((q[:, :10], torch.zeros(1, 4), q[:, 14:]), dim=-1), 2)
    robot = load_robot("g1", floating_base=True)
    assert torch.equal(robot.default_configuration(), robot.neutral())  # a URDF: no file pose


def test_pure_functions_on_batches() -> None:
    q = torch.tensor([[0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]], dtype=F64).expand(4, 2, 7)
    assert base_pose(q).shape == (4, 2, 4, 4)
    v = torch.zeros(4, 2, 6, dtype=F64)
    assert integrate(q, v, True).shape == (4, 2, 7) and difference(q, q, True).shape == (4, 2, 6)


def test_several_bases_step_each_in_its_own_frame() -> None:
    g = torch.Generator().manual_seed(3)
    quats = torch.randn(5, 2, 4, dtype=F64, generator=g)
    blocks = torch.cat((torch.randn(5, 2, 3, dtype=F64, generator=g), quats), dim=-1)
    q = torch.cat((blocks.reshape(5, 14), torch.randn(5, 3, dtype=F64, generator=g)), dim=-1)
    v = torch.randn(5, 15, dtype=F64, generator=g) / 3
    stepped = integrate(q, v, 2)
    for k in range(2):  # base k moves as a single base would, by its own 6 entries
        one = integrate(q[:, 7 * k : 7 * k + 7], v[:, 6 * k : 6 * k + 6], 1)
        torch.testing.assert_close(stepped[:, 7 * k : 7 * k + 7], one)
    torch.testing.assert_close(stepped[:, 14:], q[:, 14:] + v[:, 12:])
    torch.testing.assert_close(difference(q, stepped, 2), v)
    assert velocity_coordinates(15, 2).tolist() == [-1] * 12 + [14, 15, 16]
    with pytest.raises(ValueError, match=r"v must have shape \(..., 15\)"):
        integrate(q, v[:, :14], 2)


def test_floating_base_option_on_a_fixed_description() -> None:
    fixed = load_robot("panda", dtype=F64)
    text = ROBOT_FILES / "panda.urdf"
    robot = Robot.from_urdf(text, dtype=F64, floating_base=True)
    assert robot.joint_names[:7] == tuple(
        f"root_joint/{c}" for c in ("x", "y", "z", "qw", "qx", "qy", "qz")
    )
    q = random_q(robot, 5, seed=7)
    base = base_pose(q[:, :7])
    expected = base @ fixed.forward_kinematics(q[:, 7:], "panda_hand")
    torch.testing.assert_close(robot.forward_kinematics(q, "panda_hand"), expected)
    assert robot.jacobian(q, "panda_hand").shape == (5, 6, 13)
    with pytest.raises(URDFError, match="floating.urdf: <joint name='free'> is floating already"):
        Robot.from_urdf(DATA / "floating.urdf", floating_base=True)


def test_save_and_load_keep_infinite_limits() -> None:
    robot = floater()
    other = floater()
    other.load_state_dict(robot.state_dict())
    assert other.lower.tolist()[:3] == [-math.inf] * 3
    moved = floater().to(torch.float32)
    assert moved.forward_kinematics(moved.neutral(), "tool").dtype == torch.float32


def _example_robot(relative: str) -> Path | None:
    return ROBOTS / relative if (ROBOTS / relative).is_file() else None


@pytest.mark.parametrize(
    "relative",
    [
        "g1_description/urdf/g1_29dof_rev_1_0.urdf",
        "talos_data/robots/talos_reduced.urdf",
        "solo_description/robots/solo12.urdf",
    ],
)
def test_free_flyer_matches_pinocchio(relative: str) -> None:
    if importlib.util.find_spec("pinocchio") is None:
        pytest.skip("needs pin (pip install torch==2.13.0 pin example-robot-data)")
    path = _example_robot(relative)
    if path is None:
        pytest.skip(f"needs example-robot-data's {relative} (pip install example-robot-data)")
    from tests.robot.pinocchio_floating import compare

    fk_err, jac_err = compare(path, free_flyer=True, n=3)
    assert fk_err < 1e-12 and jac_err < 1e-12


def test_solve_ik_refuses_a_floating_base_clearly() -> None:
    import torchik

    robot = floater()
    target = robot.forward_kinematics(robot.neutral(), "tool")
    with pytest.raises(ValueError, match="floating-base.*accepted: solve_wholebody.*chain"):
        torchik.solve_ik(robot, target, "tool")


def test_load_robot_takes_floating_base():
    robot = torchik.load_robot("panda", dtype=torch.float64, floating_base=True)
    fixed = torchik.load_robot("panda", dtype=torch.float64)
    assert (robot.nq, robot.nv) == (fixed.nq + 7, fixed.nv + 6)
    q = torch.cat(
        [torch.tensor([[0.0, 0, 0, 1, 0, 0, 0]], dtype=torch.float64), fixed.neutral()[None]], -1
    )
    torch.testing.assert_close(
        robot.forward_kinematics(q), fixed.forward_kinematics(fixed.neutral()[None])
    )
    with pytest.raises(TypeError, match="takes no options"):
        torchik.load_robot("panda", link_lengths=[1.0])


def test_urdf_warning_is_public():
    assert torchik.URDFWarning is torchik.description.URDFWarning

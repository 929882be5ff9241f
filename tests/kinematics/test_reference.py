"""Forward kinematics and Jacobians vs Pinocchio reference values, autograd and closed forms."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.paths import DATA
from torchik import Robot, load_robot
from torchik.description import URDFError, URDFWarning
from torchik.kinematics import reference as kinematics

DATA = DATA
REFERENCE = json.loads((DATA / "fk_reference.json").read_text())["robots"]
THIRD_PARTY = {"urdf/panda.urdf", "urdf/ur5_robot.urdf"}


def reference_robot(name: str, shared: Path | None) -> Robot:
    rel = REFERENCE[name]["urdf"]
    if rel in THIRD_PARTY:
        if shared is None:
            pytest.skip(f"{rel} is third-party and read from ../shared, which is absent here")
        return Robot.from_urdf(shared / rel, dtype=torch.float64)
    return Robot.from_urdf(DATA / rel, dtype=torch.float64)


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_fk_matches_pinocchio(name, shared_fixtures_dir):
    robot = reference_robot(name, shared_fixtures_dir)
    entry = REFERENCE[name]
    assert list(robot.joint_names) == entry["joints"]
    samples = entry["samples"]
    q = torch.tensor([[s["q"][j] for j in robot.joint_names] for s in samples], dtype=torch.float64)
    poses = robot.forward_kinematics(q)  # (S, L, 4, 4), every link
    worst = 0.0
    for i, sample in enumerate(samples):
        for link, ref in sample["links"].items():
            pose = poses[i, robot.link_index(link)]
            worst = max(
                worst,
                (pose[:3, 3] - torch.tensor(ref["xyz"], dtype=torch.float64)).abs().max().item(),
            )
            worst = max(
                worst,
                (pose[:3, :3] - torch.tensor(ref["rotation"], dtype=torch.float64))
                .abs()
                .max()
                .item(),
            )
            assert pose[3].tolist() == [0.0, 0.0, 0.0, 1.0]
    assert set(sample["links"]) <= set(robot.link_names)
    assert worst <= 1e-9, f"max deviation from Pinocchio {worst:.2e}"


@pytest.mark.parametrize("urdf", ["tilted_axes", "prismatic_continuous", "two_branches", "mimic"])
def test_jacobian_matches_autograd_and_finite_differences(urdf):
    robot = Robot.from_urdf(DATA / "urdf" / f"{urdf}.urdf", dtype=torch.float64)
    q = robot.random_configuration(5, generator=torch.Generator().manual_seed(1))
    link = robot.link_names[-1]
    jac = robot.jacobian(q, link)
    assert jac.shape == (5, 6, robot.dof)

    def position(qi):
        return robot.link_positions(qi, link)

    lin = torch.func.vmap(torch.func.jacrev(position))(q)
    torch.testing.assert_close(jac[:, :3], lin, atol=1e-12, rtol=0)
    # angular rows from finite differences of the rotation: dR R^T = [ω]x
    eps = 1e-6
    for d in range(robot.dof):
        dq = torch.zeros(robot.dof, dtype=torch.float64)
        dq[d] = eps
        r_plus = robot.forward_kinematics(q + dq, link)[:, :3, :3]
        r_minus = robot.forward_kinematics(q - dq, link)[:, :3, :3]
        r = robot.forward_kinematics(q, link)[:, :3, :3]
        w = (r_plus - r_minus) / (2 * eps) @ r.transpose(-1, -2)
        omega = torch.stack((w[:, 2, 1], w[:, 0, 2], w[:, 1, 0]), dim=-1)
        torch.testing.assert_close(jac[:, 3:, d], omega, atol=1e-8, rtol=0)


@pytest.mark.parametrize("urdf", ["tilted_axes", "prismatic_continuous", "two_branches", "mimic"])
def test_analytic_backward_equals_autograd(urdf):
    robot = Robot.from_urdf(DATA / "urdf" / f"{urdf}.urdf", dtype=torch.float64)
    q = robot.random_configuration(7, generator=torch.Generator().manual_seed(2))
    links = tuple(range(len(robot.link_names)))
    weights = torch.randn(7, len(links), 4, 4, dtype=torch.float64)
    q1 = q.clone().requires_grad_()
    (kinematics.forward_kinematics(q1, robot.tree, links) * weights).sum().backward()
    q2 = q.clone().requires_grad_()
    plain = kinematics.forward_kinematics(q2, robot.tree, links, analytic=False)
    (plain * weights).sum().backward()
    torch.testing.assert_close(q1.grad, q2.grad, atol=1e-12, rtol=0)


@pytest.mark.parametrize("urdf", ["tilted_axes", "mimic", "prismatic_continuous"])
def test_gradcheck(urdf):
    robot = Robot.from_urdf(DATA / "urdf" / f"{urdf}.urdf", dtype=torch.float64)
    q = robot.random_configuration(3, generator=torch.Generator().manual_seed(3))
    q.requires_grad_()
    assert torch.autograd.gradcheck(lambda x: robot.forward_kinematics(x), (q,))
    assert torch.autograd.gradcheck(lambda x: robot.jacobian(x, robot.link_names[-1]), (q,))


def _finite_grad(robot: Robot, q: torch.Tensor, link: str) -> torch.Tensor:
    q = q.clone().requires_grad_()
    pose = robot.forward_kinematics(q, link)
    (pose.sum() + robot.link_positions(q, link).norm(dim=-1).sum()).backward()
    return q.grad


def test_gradients_finite_at_singular_configurations():
    straight = load_robot("planar", link_lengths=[1.0, 1.0, 1.0, 1.0], dtype=torch.float64)
    assert torch.isfinite(
        _finite_grad(straight, torch.zeros(1, 4, dtype=torch.float64), "ee")
    ).all()
    pc = Robot.from_urdf(DATA / "urdf" / "prismatic_continuous.urdf", dtype=torch.float64)
    for spin in (math.pi, -math.pi):
        q = torch.tensor([[0.3, spin, 0.0]], dtype=torch.float64)
        assert torch.isfinite(_finite_grad(pc, q, "flange")).all()
    mimic = Robot.from_urdf(DATA / "urdf" / "mimic.urdf", dtype=torch.float64)
    assert torch.isfinite(_finite_grad(mimic, mimic.neutral()[None], "finger_b")).all()
    # Panda with joint 6 at zero: the axes of joints 5 and 7 are aligned (a wrist singularity)
    panda = load_robot("panda", dtype=torch.float32)
    for batch in (1, kinematics.SMALL_BATCH + 1):
        q = panda.neutral().expand(batch, 7).clone()
        q[:, 5] = 0.0
        assert torch.isfinite(_finite_grad(panda, q, "panda_hand")).all()


def test_batch_shapes_and_links_argument():
    robot = Robot.from_urdf(DATA / "urdf" / "two_branches.urdf", dtype=torch.float64)
    q = robot.random_configuration(6).reshape(2, 3, robot.dof)
    assert robot.forward_kinematics(q).shape == (2, 3, len(robot.link_names), 4, 4)
    assert robot.forward_kinematics(q[0, 0]).shape == (len(robot.link_names), 4, 4)
    end = robot.link_names[-1]
    assert robot.forward_kinematics(q, end).shape == (2, 3, 4, 4)
    assert robot.forward_kinematics(q, [end, robot.root]).shape == (2, 3, 2, 4, 4)
    assert robot.jacobian(q, end).shape == (2, 3, 6, robot.dof)
    both = robot.forward_kinematics(q, [end, robot.root])
    torch.testing.assert_close(both[..., 0, :, :], robot.forward_kinematics(q, end))
    torch.testing.assert_close(
        both[..., 1, :, :], torch.eye(4, dtype=torch.float64).expand(2, 3, 4, 4)
    )


def test_float32_agrees_with_float64():
    robot64 = Robot.from_urdf(DATA / "urdf" / "digit_arm.urdf", dtype=torch.float64)
    robot32 = Robot.from_urdf(DATA / "urdf" / "digit_arm.urdf").to(torch.float32)
    assert robot32.dtype == torch.float32
    q = robot64.random_configuration(50)
    diff = robot32.forward_kinematics(q.float()).double() - robot64.forward_kinematics(q)
    assert diff.abs().max() < 1e-5


def test_bad_inputs_give_clear_errors():
    robot = Robot.from_urdf(DATA / "urdf" / "tilted_axes.urdf", dtype=torch.float64)
    with pytest.raises(ValueError, match=r"shape \(\.\.\., 3\)"):
        robot.forward_kinematics(torch.zeros(4, 2, dtype=torch.float64))
    with pytest.raises(TypeError, match="dtype"):
        robot.forward_kinematics(torch.zeros(4, 3, dtype=torch.float32))
    with pytest.raises(TypeError, match="torch.Tensor"):
        robot.forward_kinematics(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="unknown link 'nope'"):
        robot.forward_kinematics(torch.zeros(4, 3, dtype=torch.float64), "nope")
    with pytest.raises(ValueError, match="unknown link"):
        robot.jacobian(torch.zeros(3, dtype=torch.float64), "nope")
    with pytest.raises(TypeError, match="link must be a link's name, a sequence of names"):
        robot.link_positions(torch.zeros(3, dtype=torch.float64), 3)  # "'int' is not iterable"
    for link in (3, None, torch.zeros(2, 3)):  # one line, a tensor's rows too
        with pytest.raises(TypeError, match=r"^a link is named by a str, got \w+ [^\n]+$"):
            robot.jacobian(torch.zeros(3, dtype=torch.float64), link)
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="device"):
            robot.forward_kinematics(torch.zeros(4, 3, dtype=torch.float64, device="cuda"))


def test_spherical_joint_is_not_supported():
    text = """<robot name="f"><link name="a"/><link name="b"/>
      <joint name="ball" type="spherical"><parent link="a"/><child link="b"/></joint></robot>"""
    with pytest.raises(URDFError, match="'ball' has type 'spherical'.*accepted: revolute"):
        Robot.from_urdf(text)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_learnable_origins_receive_gradients_and_match(dtype):
    robot = Robot.from_urdf(DATA / "urdf" / "tilted_axes.urdf", dtype=dtype)
    q = robot.random_configuration(4, generator=torch.Generator().manual_seed(5))
    before = robot.forward_kinematics(q)
    robot.learnable_origins(True)
    assert robot.learnable and {n for n, _ in robot.named_parameters()} == {
        "origin_xyz",
        "origin_rpy",
    }
    calls = []
    constants = robot._constants
    robot._constants = lambda *a: calls.append(1) or constants(*a)  # count the builds
    after = robot.forward_kinematics(q)
    robot.jacobian(q.detach(), robot.link_names[-1])
    assert len(calls) == 2  # once per call: FK and the Jacobian
    del robot._constants
    torch.testing.assert_close(
        before, after, atol=1e-12 if dtype == torch.float64 else 1e-5, rtol=0
    )
    after[..., :3, 3].sum().backward()
    assert robot.origin_xyz.grad is not None and robot.origin_xyz.grad.abs().sum() > 0
    with torch.no_grad():
        robot.origin_xyz[-1, 0] += 0.5
    robot.learnable_origins(False)
    assert not robot.learnable
    moved = robot.forward_kinematics(q)
    assert (moved - before).abs().max() > 0.1
    # the frozen values survive a change of dtype
    other = torch.float32 if dtype == torch.float64 else torch.float64
    again = robot.to(other).forward_kinematics(q.to(other)).to(dtype)
    torch.testing.assert_close(again, moved, atol=1e-5, rtol=0)


# ------------------------------------------------------------------ random chains (hypothesis)
def _rot(axis: np.ndarray, angle: float) -> np.ndarray:
    axis = axis / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * k @ k


def _rpy(r: float, p: float, y: float) -> np.ndarray:
    ex, ey, ez = np.eye(3)
    return _rot(ez, y) @ _rot(ey, p) @ _rot(ex, r)


finite = st.floats(-2.0, 2.0, allow_nan=False)
joint_strategy = st.tuples(
    st.sampled_from(["revolute", "continuous", "prismatic", "fixed"]),
    st.tuples(finite, finite, finite),  # xyz
    st.tuples(finite, finite, finite),  # rpy
    st.tuples(finite, finite, finite).filter(lambda a: np.linalg.norm(a) > 0.1),  # axis
    finite,  # joint value
)


@settings(max_examples=40, deadline=None)
@given(st.lists(joint_strategy, min_size=1, max_size=7))
def test_random_chains_match_naive_product(chain):
    parts, expected, q = ['<robot name="r"><link name="l0"/>'], np.eye(4), []
    for i, (kind, xyz, rpy, axis, value) in enumerate(chain):
        origin = np.eye(4)
        origin[:3, :3], origin[:3, 3] = _rpy(*rpy), xyz
        motion = np.eye(4)
        if kind in ("revolute", "continuous"):
            motion[:3, :3] = _rot(np.array(axis), value)
        elif kind == "prismatic":
            motion[:3, 3] = value * np.array(axis) / np.linalg.norm(axis)
        expected = expected @ origin @ motion
        if kind != "fixed":
            q.append(value)
        limit = '<limit lower="-3" upper="3"/>' if kind in ("revolute", "prismatic") else ""
        parts.append(
            f'<link name="l{i + 1}"/><joint name="j{i}" type="{kind}"><parent link="l{i}"/>'
            f'<child link="l{i + 1}"/><origin xyz="{" ".join(map(repr, xyz))}" '
            f'rpy="{" ".join(map(repr, rpy))}"/><axis xyz="{" ".join(map(repr, axis))}"/>'
            f"{limit}</joint>"
        )
    robot = Robot.from_urdf("".join(parts) + "</robot>", dtype=torch.float64)
    pose = robot.forward_kinematics(torch.tensor(q, dtype=torch.float64), f"l{len(chain)}")
    np.testing.assert_allclose(pose.numpy(), expected, atol=1e-10)


def test_jacobian_can_return_the_pose():
    robot = Robot.from_urdf(DATA / "urdf" / "two_branches.urdf", dtype=torch.float64)
    q = robot.random_configuration(4)
    end = robot.link_names[-1]
    jac, pose = robot.jacobian(q, end, return_pose=True)
    torch.testing.assert_close(jac, robot.jacobian(q, end))
    torch.testing.assert_close(pose, robot.forward_kinematics(q, end))


@pytest.mark.parametrize("urdf", ["tilted_axes", "mimic", "prismatic_continuous", "two_branches"])
def test_small_batch_path_agrees_with_batched_kernel(urdf):
    robot = Robot.from_urdf(DATA / "urdf" / f"{urdf}.urdf", dtype=torch.float64)
    n = kinematics.SMALL_BATCH + 4
    q = robot.random_configuration(n, generator=torch.Generator().manual_seed(6))
    for link in robot.link_names:
        big = robot.forward_kinematics(q, link)
        small = torch.cat([robot.forward_kinematics(q[i : i + 4], link) for i in range(0, n, 4)])
        torch.testing.assert_close(small, big, atol=1e-13, rtol=0)
    # the analytic backward of a single link over a large batch
    qg = q.clone().requires_grad_()
    end = robot.link_names[-1]
    assert torch.autograd.gradcheck(lambda x: robot.forward_kinematics(x, end), (qg,))


def test_link_poses_position_and_quaternion():
    from torchik.geometry import quat_to_rotmat

    robot = load_robot("ur5", dtype=torch.float64)
    q = robot.random_configuration(20, generator=torch.Generator().manual_seed(7))
    q.requires_grad_()
    position, quat = robot.link_poses(q, "ee_link")
    pose = robot.forward_kinematics(q, "ee_link")
    torch.testing.assert_close(position, pose[..., :3, 3])
    torch.testing.assert_close(quat_to_rotmat(quat), pose[..., :3, :3])
    assert (quat[..., 0] >= 0).all()
    (position.sum() + quat.sum()).backward()
    assert torch.isfinite(q.grad).all()


def test_empty_batch_and_joint_type_masks():
    robot = Robot.from_urdf(DATA / "urdf" / "prismatic_continuous.urdf", dtype=torch.float64)
    assert robot.joint_types == ("prismatic", "continuous", "revolute")
    assert robot.prismatic.tolist() == [True, False, False]
    assert robot.continuous.tolist() == [False, True, False]
    empty = torch.zeros(0, robot.dof, dtype=torch.float64)
    assert robot.forward_kinematics(empty, "flange").shape == (0, 4, 4)
    assert robot.jacobian(empty, "flange").shape == (0, 6, robot.dof)


@pytest.mark.parametrize("urdf", ["tilted_axes", "mimic", "prismatic_continuous", "two_branches"])
def test_small_batch_jacobian_agrees_with_batched_kernel(urdf):
    robot = Robot.from_urdf(DATA / "urdf" / f"{urdf}.urdf", dtype=torch.float64)
    n = kinematics.SMALL_BATCH + 4
    q = robot.random_configuration(n, generator=torch.Generator().manual_seed(8))
    for link in robot.link_names:
        big, big_pose = robot.jacobian(q, link, return_pose=True)
        parts = [robot.jacobian(q[i : i + 4], link, return_pose=True) for i in range(0, n, 4)]
        torch.testing.assert_close(torch.cat([p[0] for p in parts]), big, atol=1e-13, rtol=0)
        torch.testing.assert_close(torch.cat([p[1] for p in parts]), big_pose, atol=1e-13, rtol=0)


def test_chain_and_model():
    robot = Robot.from_urdf(DATA / "urdf" / "two_branches.urdf", dtype=torch.float64)
    end = robot.link_names[-1]
    chain = robot.links_to(end)
    assert chain[0] == robot.root and chain[-1] == end
    assert robot.links_to(robot.root) == (robot.root,)
    assert robot.model.links == robot.link_names
    with pytest.raises(ValueError, match="unknown link"):
        robot.links_to("nope")


def test_float32_robot_moved_to_float64_keeps_full_precision():
    exact = load_robot("panda", dtype=torch.float64)
    moved = load_robot("panda", dtype=torch.float32).to(torch.float64)
    q = exact.random_configuration(64, generator=torch.Generator().manual_seed(9))
    diff = moved.forward_kinematics(q) - exact.forward_kinematics(q)
    assert diff.abs().max() < 1e-14
    torch.testing.assert_close(moved.lower, exact.lower, atol=0, rtol=0)


@pytest.mark.parametrize("name", ["panda", "mimic"])
def test_a_learnable_float32_robot_moved_to_float64_keeps_full_precision(name):
    """Its unlearned origins and its other constants (a mimic joint's offset) come back from
    the float64 description; a learned origin keeps its value."""

    def load(dtype):
        if name == "panda":
            return load_robot("panda", dtype=dtype)
        return Robot.from_urdf(DATA / "urdf/mimic.urdf", dtype=dtype)

    exact, moved = load(torch.float64), load(torch.float32).learnable_origins()
    with torch.no_grad():
        moved.origin_xyz[0, 0] += 0.125  # learned
    learned = moved.origin_xyz[0, 0].item()
    moved = moved.to(torch.float64)
    assert moved.origin_xyz[0, 0].item() == learned
    with torch.no_grad():
        moved.origin_xyz[0, 0] = exact.origin_xyz[0, 0]
    q = exact.random_configuration(64, generator=torch.Generator().manual_seed(9))
    diff = moved.forward_kinematics(q) - exact.forward_kinematics(q)
    assert diff.abs().max() < 1e-14
    torch.testing.assert_close(moved._offset, exact._offset, atol=0, rtol=0)


# --------------------------------------------------------------------------- hardened inputs


def _fk_positions(robot: Robot, link: str):
    return lambda q: robot.forward_kinematics(q, link)[..., :3, 3]


@pytest.mark.parametrize("batch", [1, kinematics.SMALL_BATCH + 16])
@pytest.mark.parametrize("urdf", ["mimic", "two_branches"])
def test_second_derivatives_at_every_batch_size(urdf, batch):
    robot = Robot.from_urdf(DATA / "urdf" / f"{urdf}.urdf", dtype=torch.float64)
    q = robot.random_configuration(batch, generator=torch.Generator().manual_seed(3))
    for links in (robot.link_names[-1], None):  # the small-batch path and the analytic kernel
        assert torch.autograd.gradgradcheck(
            lambda q, links=links: robot.forward_kinematics(q, links),
            (q.requires_grad_(),),
            fast_mode=True,
        )


def test_hessian_and_jvp_through_torch_func():
    robot = load_robot("panda", dtype=torch.float64)
    q = robot.random_configuration(40, generator=torch.Generator().manual_seed(4))
    tangent = torch.randn(q.shape, generator=torch.Generator().manual_seed(5), dtype=q.dtype)
    jac = robot.jacobian(q, "panda_hand")[..., :3, :]
    expected = (jac @ tangent[..., None])[..., 0]
    _, out = torch.func.jvp(_fk_positions(robot, "panda_hand"), (q,), (tangent,))
    torch.testing.assert_close(out, expected)
    with torch.autograd.forward_ad.dual_level():
        dual = torch.autograd.forward_ad.make_dual(q, tangent)
        pose = robot.forward_kinematics(dual, "panda_hand")[..., :3, 3]
        torch.testing.assert_close(torch.autograd.forward_ad.unpack_dual(pose).tangent, expected)

    def height(q):  # summed over the batch, so its Hessian is block diagonal
        return robot.forward_kinematics(q, "panda_hand")[..., 2, 3].sum()

    hess = torch.func.hessian(height)(q)
    by_backward = torch.autograd.functional.hessian(height, q)  # the analytic kernel's path
    torch.testing.assert_close(hess, by_backward)


def test_empty_batch_backward_and_meta_device():
    robot = load_robot("panda", dtype=torch.float64)
    q = torch.zeros(0, robot.dof, dtype=torch.float64, requires_grad=True)
    for links in ("panda_hand", None):
        robot.forward_kinematics(q, links).sum().backward()
        assert q.grad.shape == (0, robot.dof)
    meta = load_robot("panda").to("meta")
    for batch in (3, 40):
        q = torch.zeros(batch, meta.dof, device="meta")
        assert meta.forward_kinematics(q).shape == (batch, len(meta.link_names), 4, 4)
        assert meta.jacobian(q, "panda_hand").shape == (batch, 6, meta.dof)


def test_unsupported_dtypes_are_refused_clearly():
    with pytest.raises(TypeError, match="float32.*float64.*not torch.float16"):
        load_robot("panda", dtype=torch.float16)
    robot = load_robot("panda", dtype=torch.float32)
    with pytest.raises(TypeError, match="bfloat16"):
        robot.to(torch.bfloat16)
    assert robot.dtype == torch.float32  # refused before any buffer was converted


def test_robot_without_moving_joints():
    text = (
        '<robot name="r"><link name="a"/><link name="b"/><joint name="j" type="fixed">'
        '<parent link="a"/><child link="b"/><origin xyz="1 0 0"/></joint></robot>'
    )
    robot = Robot.from_urdf(text, dtype=torch.float64)
    q = torch.zeros(3, 0, dtype=torch.float64, requires_grad=True)
    assert robot.forward_kinematics(q, "b")[:, 0, 3].tolist() == [1.0, 1.0, 1.0]
    robot.forward_kinematics(q).sum().backward()
    assert robot.jacobian(q, "b").shape == (3, 6, 0)
    assert robot.random_configuration(2).shape == (2, 0)


def test_the_robot_is_callable_and_functional_call_takes_its_origins():
    """``robot(q, link)`` is FK; ``torch.func.functional_call`` with other origins (and vmap
    over them: a calibration per sample) gives FK of those origins, not of the kept ones."""
    from torchik.kinematics import native

    robot = load_robot("panda", dtype=torch.float64)
    native.warm_up(robot.tree)  # loaded: "auto" takes it, unless the constants are transformed
    q = robot.random_configuration(3, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(robot(q, "panda_hand"), robot.forward_kinematics(q, "panda_hand"))
    robot.learnable_origins()
    params = {name: value.detach() for name, value in robot.named_parameters()}
    moved = {name: value + 0.01 for name, value in params.items()}
    other = load_robot("panda", dtype=torch.float64).learnable_origins()
    with torch.no_grad():
        other.origin_xyz += 0.01
        other.origin_rpy += 0.01
    want = other.forward_kinematics(q, "panda_hand")
    got = torch.func.functional_call(robot, moved, (q, "panda_hand"))
    torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    stacked = {name: torch.stack((params[name], moved[name])) for name in params}
    per_sample = torch.func.vmap(lambda p: torch.func.functional_call(robot, p, (q, "panda_hand")))(
        stacked
    )
    torch.testing.assert_close(per_sample[1], want, atol=1e-12, rtol=0)
    torch.testing.assert_close(per_sample[0], robot(q, "panda_hand"), atol=1e-12, rtol=0)


def test_functional_call_takes_the_buffers_of_a_fixed_robot():
    """A robot whose origins are buffers: ``functional_call`` with other origins (alone, or
    every buffer of a fleet of calibrated robots, ``stack_module_state`` under ``vmap``) gives
    FK of those, not of the robot's cached tree, and the robot's own FK is unchanged after."""
    base = load_robot("ur5", dtype=torch.float64)
    fleet = []
    for k in range(3):
        robot = load_robot("ur5", dtype=torch.float64)
        state = robot.state_dict()
        state["origin_xyz"] = state["origin_xyz"] + 0.01 * (k + 1)
        state["origin_rpy"] = state["origin_rpy"] - 0.02 * k
        robot.load_state_dict(state)
        fleet.append(robot)
    q = base.random_configuration(5, generator=torch.Generator().manual_seed(8))
    own = base(q, "ee_link")  # fills the cache
    moved = fleet[0].origin_xyz
    got = torch.func.functional_call(base, {"origin_xyz": moved}, (q, "ee_link"))
    torch.testing.assert_close(got, fleet[0](q, "ee_link"), atol=1e-12, rtol=0)
    params, buffers = torch.func.stack_module_state(fleet)
    per_robot = torch.func.vmap(
        lambda p, b: torch.func.functional_call(base, (p, b), (q, "ee_link"))
    )(params, buffers)
    want = torch.stack([robot(q, "ee_link") for robot in fleet])
    torch.testing.assert_close(per_robot, want, atol=1e-12, rtol=0)
    torch.testing.assert_close(base(q, "ee_link"), own, atol=0, rtol=0)


def test_calibration_survives_load_state_dict():
    calibrated = load_robot("panda", dtype=torch.float64).learnable_origins()
    with torch.no_grad():
        calibrated.origin_xyz[3] += 0.01
    calibrated.learnable_origins(False)
    fresh = load_robot("panda", dtype=torch.float64)
    q = fresh.random_configuration(8, generator=torch.Generator().manual_seed(6))
    fresh.forward_kinematics(q)  # fills the caches that loading must refresh
    fresh.load_state_dict(calibrated.state_dict())
    torch.testing.assert_close(fresh.forward_kinematics(q), calibrated.forward_kinematics(q))
    moved = fresh.to(torch.float32).to(torch.float64)  # the float64 truth is the loaded one
    torch.testing.assert_close(moved.forward_kinematics(q), calibrated.forward_kinematics(q))
    state = calibrated.state_dict()
    state["origin_rpy"][0, 0] = math.nan
    with pytest.raises(ValueError, match="origin_rpy.*non-finite"):
        fresh.load_state_dict(state)


def test_extreme_accepted_numbers_give_finite_float32_fk():
    body = '<axis xyz="1e200 1e200 1e200"/><limit lower="-1e9" upper="1e9"/>'
    big = '<origin xyz="1e9 -1e9 1e9" rpy="1e9 1e9 1e9"/>'
    text = (
        '<robot name="r"><link name="a"/><link name="b"/><link name="c"/>'
        f'<joint name="j" type="prismatic"><parent link="a"/><child link="b"/>{big}{body}</joint>'
        '<joint name="k" type="revolute"><parent link="b"/><child link="c"/>'
        f'<axis xyz="1e-200 0 1e-200"/>{body}<mimic joint="j" multiplier="1e9"/></joint></robot>'
    )
    with pytest.warns(URDFWarning, match="'k' mimics 'j': its own limits"):  # j's range x 1e9
        robot = Robot.from_urdf(text, dtype=torch.float32)
    q = torch.cat((robot.random_configuration(64), robot.upper[None], robot.lower[None]))
    assert torch.isfinite(q).all()
    assert torch.isfinite(robot.forward_kinematics(q)).all()


def test_large_trees_load_quickly():
    count = 3000  # the dense ancestor matrix took about 15 s for this chain
    links = "".join(f'<link name="l{i}"/>' for i in range(count))
    joints = "".join(
        f'<joint name="j{i}" type="continuous"><parent link="l{i - 1}"/><child link="l{i}"/>'
        '<origin xyz="0 0 0.01"/></joint>'
        for i in range(1, count)
    )
    start = time.perf_counter()
    robot = Robot.from_urdf(f'<robot name="r">{links}{joints}</robot>', dtype=torch.float64)
    assert time.perf_counter() - start < 10.0  # loose guard; benchmarks/urdf_load.py times it
    pose = robot.forward_kinematics(torch.zeros(1, robot.dof, dtype=torch.float64), "l2999")
    assert pose[0, 2, 3].item() == pytest.approx(29.99)


def test_from_urdf_size_limit(tmp_path):
    path = tmp_path / "snake.urdf"
    path.write_text(Path(DATA / "urdf" / "mimic.urdf").read_text())
    with pytest.raises(URDFError, match="snake.urdf: .* bytes, over the limit of 100"):
        Robot.from_urdf(path, max_bytes=100)
    assert Robot.from_urdf(path, max_bytes=None).dof == Robot.from_urdf(path).dof


def test_a_tree_keeps_what_is_derived_from_it():
    tree = load_robot("panda", dtype=torch.float64).tree
    calls = []

    def build():
        calls.append(1)
        return torch.zeros(3)

    first = tree.cached(("test", 1), build)
    assert tree.cached(("test", 1), build) is first and len(calls) == 1
    assert tree.plan((3,)) is tree.plan((3,))
    assert tree.plan((3,)).index.device == tree.w_joint.device


TWO_FREE_BODIES = """<mujoco><worldbody>
  <body name="box" pos="0 0 0.5"><freejoint name="box_free"/><geom type="box" size=".1 .1 .1"/>
    <body name="lid" pos="0 0 0.1"><joint name="hinge" axis="0 1 0"/><geom size=".05"/></body>
  </body>
  <body name="ball" pos="1 0 0.1"><freejoint name="ball_free"/><geom size=".05"/></body>
</worldbody></mujoco>"""


@pytest.mark.parametrize("which", ["panda", "g1 floating", "two free bodies"])
def test_gradients_after_a_first_call_in_inference_mode(which):
    """FK in a loss after the robot was first used inside ``torch.inference_mode()`` (an
    evaluation loop, then training): the constants cached at that first call must not be
    inference tensors, which autograd may not save ("Inference tensors cannot be saved for
    backward" from the reference FK's plan, and from the index of a scene's free bodies). The
    gradients equal a fresh robot's."""
    from torchik.description.bundled import bundled_urdf

    if which == "two free bodies":
        pytest.importorskip("mujoco", reason="the optional mjcf extra (mujoco) is not installed")

    def make() -> Robot:
        if which == "panda":
            return load_robot("panda", dtype=torch.float64)
        if which == "g1 floating":
            return Robot.from_urdf(bundled_urdf("g1"), dtype=torch.float64, floating_base=True)
        return Robot.from_mjcf(TWO_FREE_BODIES, dtype=torch.float64)

    used, fresh = make(), make()
    links = list(used.link_names[-3:])
    q = used.random_configuration(3, torch.Generator().manual_seed(1))
    with torch.inference_mode():
        used.forward_kinematics(q, links[0]), used.forward_kinematics(q, links)
        used.forward_kinematics(q), used.jacobian(q, links[0])
    grads = []
    for robot in (used, fresh):
        qg = q.clone().requires_grad_()
        loss = robot.forward_kinematics(qg, links).sum() + robot.forward_kinematics(qg).sum()
        loss = loss + robot.jacobian(qg, links[0]).sum()
        loss.backward()
        grads.append(qg.grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=0, atol=0)

"""native.forward_kinematics and native.jacobian, the CPU's FK compiled by Numba: equal to the
reference (float64 to 1e-12) on the test robots (prismatic, continuous and mimic joints,
branches, tilted axes), on every link and on random trees, in parallel parts too; and
``Robot.backend``'s choice of them (``"native"``, and ``"auto"`` once they are loaded)."""

from __future__ import annotations

import math

import pytest
import torch

from tests.kinematics.lm_cases import case_robot
from tests.kinematics.test_native import random_robot
from torchik import Robot, load_robot
from torchik.kinematics import native
from torchik.kinematics import reference as kinematics

pytest.importorskip("numba", reason="the CPU's compiled kinematics need Numba (a dependency)")

ROBOTS = ["panda", "ur5", "prismatic_continuous", "mimic", "two_branches", "tilted_axes"]


def _q(robot: Robot, n: int, seed: int = 0) -> torch.Tensor:
    q = robot.random_configuration(n, generator=torch.Generator().manual_seed(seed))
    return q + 0.3 * robot.continuous * torch.sign(q) * math.pi  # continuous joints past ±π


@pytest.mark.parametrize("name", ROBOTS)
def test_poses_and_jacobians_equal_the_reference(name):
    robot = case_robot(name)
    q, links = _q(robot, 50), tuple(range(len(robot.link_names)))
    expected = kinematics.forward_kinematics(q, robot.tree, links)
    got = native.forward_kinematics(q, robot.tree, links)
    assert got.dtype == q.dtype and got.shape == expected.shape
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)
    for link in (links[-1], links[len(links) // 2], 0):  # the tip, a middle link, the root
        jac, pose = native.jacobian(q, robot.tree, link)
        jac_ref, pose_ref = kinematics.jacobian(q, robot.tree, link)
        torch.testing.assert_close(jac, jac_ref, atol=1e-12, rtol=0)
        torch.testing.assert_close(pose, pose_ref, atol=1e-12, rtol=0)


def test_float32_parts_in_parallel_and_an_empty_batch(monkeypatch):
    robot = load_robot("panda")
    q = _q(robot, 1000, seed=1)
    link = robot.link_index("panda_hand")
    whole = native.forward_kinematics(q, robot.tree, (link,))
    assert whole.dtype == torch.float32
    expected = kinematics.forward_kinematics(q.double(), load_robot("panda", torch.float64).tree,
                                             (link,))  # fmt: skip
    torch.testing.assert_close(whole.double(), expected, atol=1e-6, rtol=0)
    monkeypatch.setattr(native, "FK_ROWS_PER_THREAD", 100)
    threads = torch.get_num_threads()
    torch.set_num_threads(4)  # four parts, whatever the cores: the same rows
    try:
        assert len(native._parts(1000, native.FK_ROWS_PER_THREAD)) == 4
        assert torch.equal(native.forward_kinematics(q, robot.tree, (link,)), whole)
        jac = native.jacobian(q, robot.tree, link)[0]
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(jac, native.jacobian(q, robot.tree, link)[0])
    assert native.forward_kinematics(q[:0], robot.tree, (link,)).shape == (0, 1, 4, 4)
    # a strided q (a slice of a wider tensor) reads the right values
    wide = torch.cat([q, q], dim=1)[:, :7]
    assert torch.equal(native.forward_kinematics(wide, robot.tree, (link,)), whole)


def test_random_trees_equal_the_reference():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
    @given(st.data())
    def check(data):
        robot = random_robot(data)
        q, links = _q(robot, 8), tuple(range(len(robot.link_names)))
        torch.testing.assert_close(native.forward_kinematics(q, robot.tree, links),
                                   kinematics.forward_kinematics(q, robot.tree, links),
                                   atol=1e-12, rtol=0)  # fmt: skip
        link = data.draw(st.sampled_from(links))
        for got, ref in zip(native.jacobian(q, robot.tree, link),
                            kinematics.jacobian(q, robot.tree, link), strict=True):  # fmt: skip
            torch.testing.assert_close(got, ref, atol=1e-12, rtol=0)

    check()


def test_the_backend_takes_them_where_no_gradient_is_asked(monkeypatch):
    robot = load_robot("panda", dtype=torch.float64)
    q = _q(robot, 4)
    robot.backend = "native"
    assert robot._kernels(q, robot.tree) is native
    with torch.no_grad():
        assert robot._kernels(q.requires_grad_(), robot.tree) is native
    assert robot._kernels(q, robot.tree) is kinematics  # a gradient is asked: the reference
    pose = robot.forward_kinematics(q, "panda_hand")
    (pose[..., :3, 3].sum()).backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()
    q = q.detach()
    jvp = torch.func.jacfwd(lambda x: robot.forward_kinematics(x, "panda_hand"))(q[0])
    assert jvp.shape == (4, 4, 7)  # torch.func sees the reference
    robot.backend = "auto"
    monkeypatch.setattr(native, "loaded", lambda: False)
    assert robot._kernels(q, robot.tree) is kinematics  # a few FK calls: no 0.6 s load
    monkeypatch.setattr(native, "loaded", lambda: True)
    assert robot._kernels(q, robot.tree) is native
    floating = load_robot("panda", dtype=torch.float64, floating_base=True)
    floating.backend = "native"
    qf = floating.random_configuration(3, generator=torch.Generator().manual_seed(2))
    native_pose = floating.forward_kinematics(qf, "panda_hand")
    floating.backend = "reference"
    torch.testing.assert_close(native_pose, floating.forward_kinematics(qf, "panda_hand"),
                               atol=1e-12, rtol=0)  # fmt: skip
    robot.backend = "native"
    with pytest.raises(ValueError, match="native backend runs on CPU tensors"):
        robot._kernels(q.to("meta"), robot.tree)


def test_torch_compile_of_a_native_robot_traces_the_reference_without_warnings():
    """Tracing takes the reference path, and does not reach ``native.available`` (a
    ``functools.cache``: Dynamo warned of "silent incorrectness" once per process)."""
    import warnings

    from torch._dynamo import utils as dynamo_utils

    robot = load_robot("panda", dtype=torch.float64, backend="native")
    q = _q(robot, 20, seed=3)
    torch._dynamo.reset()
    getattr(dynamo_utils, "warn_once_cache", set()).clear()  # warned in an earlier test
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pose = torch.compile(robot.forward_kinematics, fullgraph=True)(q, "panda_hand")
    robot.backend = "reference"
    torch.testing.assert_close(pose, robot.forward_kinematics(q, "panda_hand"))
    assert not [w for w in caught if "lru_cache" in str(w.message)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_link_features_equal_those_of_the_links_poses(dtype):
    """``native.link_features``: the seeding features of several links (poses and positions)
    in one pass, the float32 values :func:`torchik.ik.seeding.link_features` makes of the
    compiled FK's poses, bit for bit; ``Robot.takes_native`` says where the FK is compiled."""
    from torchik.ik.seeding import link_features

    robot = case_robot("two_branches").to(dtype)
    robot.backend = "native"
    links = list(robot.link_names[-2:]) + [robot.link_names[1]]
    q = _q(robot, 300, seed=3)
    assert robot.takes_native(q) and not robot.takes_native(q.requires_grad_())
    q = q.detach()
    posed = (True, False, True)
    poses = robot.forward_kinematics(q, links)
    expected = torch.cat([link_features(poses[:, i], p) for i, p in enumerate(posed)], dim=-1)
    index = tuple(robot.link_index(link) for link in links)
    got = native.link_features(q, robot.tree, index, posed)
    assert got.dtype == torch.float32 and got.shape == (300, 13 + 4 + 13)
    assert torch.equal(got, expected)
    floating = load_robot("panda", dtype=dtype, floating_base=True)
    floating.backend = "native"
    assert not floating.takes_native(floating.random_configuration(2))  # its bases: not here


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_link_errors_equal_those_of_the_links_poses(dtype, monkeypatch):
    """``native.link_errors``: every link's position error and geodesic rotation error (0 for
    a position) against its targets, and whether each row is within the limits, in one pass:
    the values of the reference FK's poses with ``geodesic_distance`` (float64 to 1e-12; near
    the target too, where an arccos would lose half the digits)."""
    from torchik.geometry.rotations import geodesic_distance

    robot = case_robot("two_branches").to(dtype)
    links = list(robot.link_names[-2:]) + [robot.link_names[1]]
    index = tuple(robot.link_index(link) for link in links)
    q = _q(robot, 300, seed=4)
    q[::5, 0] = robot.upper[0] + 0.01  # some rows outside the limits
    aim = robot.forward_kinematics(_q(robot, 300, seed=5), links)
    aim[:100] = robot.forward_kinematics(q[:100] + 1e-7, links)  # and targets a hair away
    posed = (True, False, True)
    got_p, got_r, within = native.link_errors(
        q, robot.tree, index, aim[..., :3, 3], aim[..., :3, :3], posed, robot.lower, robot.upper
    )
    poses = kinematics.forward_kinematics(q, robot.tree, index)
    want_p = (poses[..., :3, 3] - aim[..., :3, 3]).norm(dim=-1)
    want_r = geodesic_distance(poses[..., :3, :3], aim[..., :3, :3]) * torch.tensor(posed)
    assert got_p.dtype == dtype and got_p.shape == got_r.shape == (300, 3)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(got_p, want_p, atol=tol, rtol=0)
    torch.testing.assert_close(got_r, want_r, atol=tol, rtol=0)
    if dtype == torch.float64:  # near the targets: relative precision kept
        torch.testing.assert_close(got_r[:100], want_r[:100], atol=0, rtol=1e-6)
    assert torch.equal(within, ((q >= robot.lower) & (q <= robot.upper)).all(-1))
    assert not within[::5].any() and within.sum() > 100
    monkeypatch.setattr(native, "FK_ROWS_PER_THREAD", 64)  # in parts on threads: the same
    threads = torch.get_num_threads()
    torch.set_num_threads(4)
    try:
        parts = native.link_errors(q, robot.tree, index, aim[..., :3, 3], aim[..., :3, :3],
                                   posed, robot.lower, robot.upper)  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(a, b) for a, b in zip(parts, (got_p, got_r, within), strict=True))

"""Tests for torchik.geometry: closed forms, round trips, SciPy as a reference, gradients."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from torchik import geometry as rot

F64 = torch.float64
PI = math.pi
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
AXIS = torch.tensor([2.0, -3.0, 6.0], dtype=F64) / 7.0  # a unit axis with no zero component
# Angles from the identity to a half turn, including the places where formulas go singular.
ANGLES = [0.0, 1e-12, 1e-8, 1e-4, 0.05, 0.3, 1.0, 2.5, PI - 1e-3, PI - 1e-7]


def random_rotmats(shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    """Uniformly random rotation matrices ``shape + (3, 3)`` from SciPy (independent of torchik)."""
    n = math.prod(shape)
    mats = Rotation.random(max(n, 1), random_state=seed).as_matrix()[:n]
    return torch.tensor(mats, dtype=F64).reshape(*shape, 3, 3)


def random_vectors(shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    return torch.randn(shape, dtype=F64, generator=torch.Generator().manual_seed(seed))


def about_axis(axis: int, angle: float) -> torch.Tensor:
    """The elementary rotation ``R_axis(angle)`` written out by hand."""
    c, s = math.cos(angle), math.sin(angle)
    mats = {
        0: [[1, 0, 0], [0, c, -s], [0, s, c]],
        1: [[c, 0, s], [0, 1, 0], [-s, 0, c]],
        2: [[c, -s, 0], [s, c, 0], [0, 0, 1]],
    }
    return torch.tensor(mats[axis], dtype=F64)


def assert_rotation(mats: torch.Tensor, atol: float = 1e-12) -> None:
    eye = torch.eye(3, dtype=mats.dtype, device=mats.device)
    torch.testing.assert_close(
        mats.transpose(-1, -2) @ mats, eye.expand_as(mats), atol=atol, rtol=0
    )
    det = torch.linalg.det(mats)
    torch.testing.assert_close(det, torch.ones_like(det), atol=atol, rtol=0)


def assert_finite_grad(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Backpropagates a random weighting of ``fn(x)`` and checks the gradient is finite."""
    x = x.clone().requires_grad_(True)
    out = fn(x)
    weights = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(3))
    (grad,) = torch.autograd.grad((out * weights).sum(), x)
    assert torch.isfinite(out).all() and torch.isfinite(grad).all()
    return grad


# --------------------------------------------------------------------------------- skew


def test_skew_is_cross_product_and_unskew_inverts() -> None:
    v, u = random_vectors((7, 3), 0), random_vectors((7, 3), 1)
    torch.testing.assert_close((rot.skew(v) @ u[..., None])[..., 0], torch.linalg.cross(v, u))
    torch.testing.assert_close(rot.skew(v), -rot.skew(v).transpose(-1, -2))
    assert torch.equal(rot.unskew(rot.skew(v)), v)


# ---------------------------------------------------------------------------- roll-pitch-yaw


@pytest.mark.parametrize(
    ("rpy", "axis", "angle"),
    [
        ((0.0, 0.0, PI / 2), 2, PI / 2),
        ((PI / 2, 0.0, 0.0), 0, PI / 2),
        ((0.0, PI / 2, 0.0), 1, PI / 2),
        ((0.0, 0.0, -0.7), 2, -0.7),
        ((1.2, 0.0, 0.0), 0, 1.2),
        ((0.0, -0.4, 0.0), 1, -0.4),
    ],
)
def test_rpy_single_axis_closed_forms(rpy: tuple, axis: int, angle: float) -> None:
    mat = rot.rpy_to_rotmat(torch.tensor(rpy, dtype=F64))
    torch.testing.assert_close(mat, about_axis(axis, angle), atol=1e-15, rtol=0)


def test_rpy_of_quarter_yaw_is_exact_matrix() -> None:
    mat = rot.rpy_to_rotmat(torch.tensor([0.0, 0.0, PI / 2], dtype=F64))
    expected = torch.tensor([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], dtype=F64)
    torch.testing.assert_close(mat, expected, atol=1e-16, rtol=0)
    torch.testing.assert_close(
        rot.rotmat_to_rpy(expected), torch.tensor([0.0, 0.0, PI / 2], dtype=F64)
    )


def test_rpy_is_fixed_axis_composition() -> None:
    r, p, y = 0.3, -0.5, 1.1
    expected = about_axis(2, y) @ about_axis(1, p) @ about_axis(0, r)
    torch.testing.assert_close(rot.rpy_to_rotmat(torch.tensor([r, p, y], dtype=F64)), expected)


def test_rpy_matches_scipy_extrinsic_xyz() -> None:
    rpy = random_vectors((50, 3), 2)
    expected = Rotation.from_euler("xyz", rpy.numpy()).as_matrix()
    torch.testing.assert_close(rot.rpy_to_rotmat(rpy), torch.tensor(expected))


def test_rpy_round_trip_away_from_gimbal_lock() -> None:
    gen = torch.Generator().manual_seed(4)
    rpy = (torch.rand(200, 3, dtype=F64, generator=gen) * 2 - 1) * torch.tensor([PI, 1.5, PI])
    torch.testing.assert_close(rot.rotmat_to_rpy(rot.rpy_to_rotmat(rpy)), rpy)
    mats = random_rotmats((200,), 5)
    rpy = rot.rotmat_to_rpy(mats)
    torch.testing.assert_close(rot.rpy_to_rotmat(rpy), mats)
    torch.testing.assert_close(rpy, torch.tensor(Rotation.from_matrix(mats).as_euler("xyz")))


@pytest.mark.parametrize("pitch", [PI / 2, -PI / 2, PI / 2 - 1e-9, -PI / 2 + 1e-12])
def test_rotmat_to_rpy_near_gimbal_lock_reproduces_matrix(pitch: float) -> None:
    mats = rot.rpy_to_rotmat(torch.tensor([[0.4, pitch, -1.3], [-2.0, pitch, 0.2]], dtype=F64))
    rpy = rot.rotmat_to_rpy(mats)
    torch.testing.assert_close(rot.rpy_to_rotmat(rpy), mats, atol=1e-14, rtol=0)
    assert (rpy[:, 1].abs() <= PI / 2 + 1e-15).all()
    if abs(abs(pitch) - PI / 2) < 1e-15:  # exactly locked: documented convention yaw = 0
        assert torch.equal(rpy[:, 2], torch.zeros(2, dtype=F64))
    assert_finite_grad(rot.rotmat_to_rpy, mats)


# ------------------------------------------------------------------------ axis-angle, rotvec


@pytest.mark.parametrize("angle", [-2.0, 0.0, 0.3, PI / 2, PI])
def test_axis_angle_about_z_is_rz(angle: float) -> None:
    axis = torch.tensor([0.0, 0.0, 1.0], dtype=F64)
    mat = rot.axis_angle_to_rotmat(axis, torch.tensor(angle, dtype=F64))
    torch.testing.assert_close(mat, about_axis(2, angle), atol=1e-15, rtol=0)


def test_axis_angle_agrees_with_rotvec_and_scipy() -> None:
    axis = rot.quat_normalize(random_vectors((20, 3), 6))
    angle = random_vectors((20,), 7) * 2
    mat = rot.axis_angle_to_rotmat(axis, angle)
    torch.testing.assert_close(mat, rot.rotvec_to_rotmat(axis * angle[:, None]))
    expected = Rotation.from_rotvec((axis * angle[:, None]).numpy()).as_matrix()
    torch.testing.assert_close(mat, torch.tensor(expected))
    assert_rotation(mat)


@pytest.mark.parametrize("angle", ANGLES)
def test_rotvec_round_trip(angle: float) -> None:
    rotvec = AXIS * angle
    mat = rot.rotvec_to_rotmat(rotvec)
    torch.testing.assert_close(mat, torch.tensor(Rotation.from_rotvec(rotvec).as_matrix()))
    back = rot.rotmat_to_rotvec(mat)
    # Relative accuracy even for tiny angles (an acos-based log would return 0 below ~1e-8).
    torch.testing.assert_close(back, rotvec, atol=1e-15, rtol=1e-12)
    torch.testing.assert_close(
        back, torch.tensor(Rotation.from_matrix(mat).as_rotvec()), atol=1e-15, rtol=1e-9
    )


def test_rotmat_to_rotvec_random_and_at_half_turn() -> None:
    mats = random_rotmats((100,), 8)
    rotvec = rot.rotmat_to_rotvec(mats)
    assert (rotvec.norm(dim=-1) <= PI).all()
    torch.testing.assert_close(rot.rotvec_to_rotmat(rotvec), mats)
    half_turn = rot.axis_angle_to_rotmat(AXIS, torch.tensor(PI, dtype=F64))
    rotvec = rot.rotmat_to_rotvec(half_turn)
    torch.testing.assert_close(rotvec.norm(), torch.tensor(PI, dtype=F64))
    torch.testing.assert_close(rot.rotvec_to_rotmat(rotvec), half_turn)


def test_rotvec_beyond_pi_wraps_to_equivalent_rotation() -> None:
    rotvec = AXIS * 4.0
    back = rot.rotmat_to_rotvec(rot.rotvec_to_rotmat(rotvec))
    torch.testing.assert_close(back, AXIS * (4.0 - 2 * PI))


# ---------------------------------------------------------------------------------- quaternions


def to_scipy_quat(quat: torch.Tensor) -> np.ndarray:
    return quat[..., [1, 2, 3, 0]].numpy()


def from_scipy_quat(quat: np.ndarray) -> torch.Tensor:
    return torch.tensor(quat[..., [3, 0, 1, 2]], dtype=F64)


def test_quat_to_rotmat_matches_scipy_and_ignores_scale() -> None:
    quat = random_vectors((50, 4), 9)
    expected = torch.tensor(Rotation.from_quat(to_scipy_quat(quat)).as_matrix())
    torch.testing.assert_close(rot.quat_to_rotmat(quat), expected)  # not unit: rotation of q/|q|
    torch.testing.assert_close(rot.quat_to_rotmat(rot.quat_normalize(quat)), expected)
    assert_rotation(rot.quat_to_rotmat(quat))


@pytest.mark.parametrize("angle", ANGLES + [PI])
def test_rotmat_to_quat_including_identity_and_half_turn(angle: float) -> None:
    mats = random_rotmats((4,), 10) @ rot.axis_angle_to_rotmat(AXIS, torch.tensor(angle, dtype=F64))
    quat = rot.rotmat_to_quat(mats)
    torch.testing.assert_close(quat.norm(dim=-1), torch.ones(4, dtype=F64))
    assert (quat[..., 0] >= 0).all()
    torch.testing.assert_close(rot.quat_to_rotmat(quat), mats, atol=1e-15, rtol=0)
    expected = rot.quat_canonical(from_scipy_quat(Rotation.from_matrix(mats).as_quat()))
    torch.testing.assert_close(quat, expected, atol=1e-15, rtol=0)


def test_rotmat_to_quat_exact_elementary_half_turns() -> None:
    for axis in range(3):
        quat = rot.rotmat_to_quat(about_axis(axis, PI))
        expected = torch.zeros(4, dtype=F64)
        expected[axis + 1] = 1.0
        torch.testing.assert_close(quat, expected, atol=1e-16, rtol=0)
    assert torch.equal(
        rot.rotmat_to_quat(torch.eye(3, dtype=F64)), torch.tensor([1.0, 0, 0, 0]).to(F64)
    )


def test_quat_multiply_composes_rotations() -> None:
    q1, q2 = (rot.quat_normalize(random_vectors((30, 4), s)) for s in (11, 12))
    product = rot.quat_multiply(q1, q2)
    torch.testing.assert_close(
        rot.quat_to_rotmat(product), rot.quat_to_rotmat(q1) @ rot.quat_to_rotmat(q2)
    )
    expected = Rotation.from_quat(to_scipy_quat(q1)) * Rotation.from_quat(to_scipy_quat(q2))
    torch.testing.assert_close(product, from_scipy_quat(expected.as_quat(canonical=False)))
    identity = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=F64).expand(30, 4)
    torch.testing.assert_close(rot.quat_multiply(q1, rot.quat_conjugate(q1)), identity)


def test_quat_canonical_signs() -> None:
    quat = torch.tensor(
        [
            [-0.5, 0.5, 0.5, -0.5],
            [0.0, -1.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, -1.0],
            [0.0, 0.0, 0.6, -0.8],
        ],
        dtype=F64,
    )
    out = rot.quat_canonical(quat)
    expected = torch.tensor(
        [[0.5, -0.5, -0.5, 0.5], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.6, -0.8]],
        dtype=F64,
    )
    assert torch.equal(out, expected)
    assert torch.equal(rot.quat_canonical(out), out)


def test_quat_rotvec_round_trip() -> None:
    rotvec = random_vectors((40, 3), 13)
    rotvec = rotvec * (PI * 0.999 / rotvec.norm(dim=-1, keepdim=True).clamp_min(PI))
    quat = rot.rotvec_to_quat(rotvec)
    torch.testing.assert_close(quat.norm(dim=-1), torch.ones(40, dtype=F64))
    torch.testing.assert_close(rot.quat_to_rotvec(quat), rotvec)
    torch.testing.assert_close(rot.quat_to_rotvec(-quat), rotvec)  # sign of q does not matter


def test_quat_normalize_zero_is_finite() -> None:
    out = rot.quat_normalize(torch.zeros(4, dtype=F64))
    assert torch.equal(out, torch.zeros(4, dtype=F64))
    assert_finite_grad(rot.quat_normalize, torch.zeros(4, dtype=F64))


# ------------------------------------------------------------------------------------------ 6d


def test_sixd_round_trip_and_gram_schmidt() -> None:
    mats = random_rotmats((25,), 14)
    sixd = rot.rotmat_to_6d(mats)
    assert sixd.shape == (25, 6)
    torch.testing.assert_close(rot.sixd_to_rotmat(sixd), mats)
    raw = random_vectors((25, 6), 15)
    out = rot.sixd_to_rotmat(raw)
    assert_rotation(out)
    torch.testing.assert_close(out[..., 0], raw[:, :3] / raw[:, :3].norm(dim=-1, keepdim=True))
    # The second column lies in the plane of the two input vectors.
    normal = torch.linalg.cross(raw[:, :3], raw[:, 3:])
    torch.testing.assert_close((out[..., 1] * normal).sum(-1), torch.zeros(25, dtype=F64))


# ------------------------------------------------------------------------------------ geodesic


@pytest.mark.parametrize("angle", ANGLES + [PI])
def test_geodesic_distance_known_angle(angle: float) -> None:
    mats = random_rotmats((6,), 16)
    other = mats @ rot.axis_angle_to_rotmat(AXIS, torch.tensor(angle, dtype=F64))
    dist = rot.geodesic_distance(mats, other)
    torch.testing.assert_close(dist, torch.full((6,), angle, dtype=F64), atol=2e-15, rtol=1e-7)
    torch.testing.assert_close(rot.geodesic_distance(other, mats), dist)


def test_geodesic_distance_1e8_is_accurate() -> None:
    mat = rot.axis_angle_to_rotmat(AXIS, torch.tensor(1e-8, dtype=F64))
    dist = rot.geodesic_distance(torch.eye(3, dtype=F64), mat)
    assert abs(dist.item() - 1e-8) < 1e-15


# ---------------------------------------------------------------------------------------- poses


def test_pose_matrix_round_trip_and_inverse() -> None:
    position, mats = random_vectors((8, 3), 17), random_rotmats((8,), 18)
    transform = rot.pose_to_matrix(position, mats)
    assert transform.shape == (8, 4, 4)
    torch.testing.assert_close(
        transform[:, 3], torch.tensor([0.0, 0, 0, 1], dtype=F64).expand(8, 4)
    )
    p, r = rot.matrix_to_pose(transform)
    assert torch.equal(p, position) and torch.equal(r, mats)
    inv = rot.invert_transform(transform)
    eye = torch.eye(4, dtype=F64).expand(8, 4, 4)
    torch.testing.assert_close(transform @ inv, eye)
    torch.testing.assert_close(inv, torch.linalg.inv(transform))
    # Batch dims of position and rotation broadcast.
    assert rot.pose_to_matrix(position, mats[0]).shape == (8, 4, 4)


def test_pose_error_zero_at_target_and_signs() -> None:
    transform = rot.pose_to_matrix(random_vectors((5, 3), 19), random_rotmats((5,), 20))
    torch.testing.assert_close(rot.pose_error(transform, transform), torch.zeros(5, 6, dtype=F64))
    shift = torch.tensor([0.1, -0.2, 0.3], dtype=F64)
    delta = rot.pose_to_matrix(shift, about_axis(2, 0.25))
    # A target moved by +shift and turned by +0.25 rad about the root z axis.
    target = delta @ transform
    err = rot.pose_error(transform, target)
    position = transform[:, :3, 3]
    expected_pos = (about_axis(2, 0.25) @ position[..., None])[..., 0] + shift - position
    torch.testing.assert_close(err[:, :3], expected_pos)
    torch.testing.assert_close(err[:, 3:], torch.tensor([0.0, 0.0, 0.25], dtype=F64).expand(5, 3))
    # The rotation part is the left (root-frame) increment: R_target = exp(e) R.
    torch.testing.assert_close(
        rot.rotvec_to_rotmat(err[:, 3:]) @ transform[:, :3, :3], target[:, :3, :3]
    )
    assert_finite_grad(lambda t: rot.pose_error(t, transform), transform)


# ---------------------------------------------------------------------------------------- wrap


@pytest.mark.parametrize(
    ("angle", "expected"),
    [
        (-PI, PI),
        (PI, PI),
        (0.0, 0.0),
        (2 * PI, 0.0),
        (-2 * PI, 0.0),
        (PI / 2, PI / 2),
        (4 * PI, 0.0),
    ],
)
def test_wrap_angle_exact_edges(angle: float, expected: float) -> None:
    assert rot.wrap_angle(torch.tensor(angle, dtype=F64)).item() == expected


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_wrap_angle_range_and_gradient(dtype: torch.dtype) -> None:
    x = torch.cat(
        (torch.linspace(-40, 40, 2001, dtype=dtype), torch.tensor([-PI, PI], dtype=dtype))
    )
    x.requires_grad_(True)
    y = rot.wrap_angle(x)
    pi = torch.tensor(PI, dtype=dtype)
    assert ((y > -pi) & (y <= pi)).all()
    assert y[-2] == pi and y[-1] == pi
    turns = (x - y) / (2 * PI)
    torch.testing.assert_close(turns, turns.round(), atol=1e-5, rtol=0)
    (grad,) = torch.autograd.grad(y.sum(), x)
    assert torch.equal(grad, torch.ones_like(x))
    assert rot.wrap_angle(torch.tensor(PI + 0.1, dtype=F64)).item() == pytest.approx(-PI + 0.1)


# ------------------------------------------------------------------------------ shapes, dtypes


def _rotvec_input(shape: tuple[int, ...]) -> torch.Tensor:
    return random_vectors((*shape, 3), 21)


CASES = {
    "rpy_to_rotmat": (rot.rpy_to_rotmat, lambda s: random_vectors((*s, 3)), (3, 3)),
    "rotmat_to_rpy": (rot.rotmat_to_rpy, random_rotmats, (3,)),
    "rotvec_to_rotmat": (rot.rotvec_to_rotmat, _rotvec_input, (3, 3)),
    "rotmat_to_rotvec": (rot.rotmat_to_rotvec, random_rotmats, (3,)),
    "rotvec_to_quat": (rot.rotvec_to_quat, _rotvec_input, (4,)),
    "quat_to_rotvec": (rot.quat_to_rotvec, lambda s: random_vectors((*s, 4)), (3,)),
    "quat_to_rotmat": (rot.quat_to_rotmat, lambda s: random_vectors((*s, 4)), (3, 3)),
    "rotmat_to_quat": (rot.rotmat_to_quat, random_rotmats, (4,)),
    "quat_normalize": (rot.quat_normalize, lambda s: random_vectors((*s, 4)), (4,)),
    "quat_canonical": (rot.quat_canonical, lambda s: random_vectors((*s, 4)), (4,)),
    "quat_conjugate": (rot.quat_conjugate, lambda s: random_vectors((*s, 4)), (4,)),
    "rotmat_to_6d": (rot.rotmat_to_6d, random_rotmats, (6,)),
    "sixd_to_rotmat": (rot.sixd_to_rotmat, lambda s: random_vectors((*s, 6)), (3, 3)),
    "skew": (rot.skew, _rotvec_input, (3, 3)),
    "unskew": (rot.unskew, random_rotmats, (3,)),
    "invert_transform": (
        rot.invert_transform,
        lambda s: rot.pose_to_matrix(random_vectors((*s, 3)), random_rotmats(s)),
        (4, 4),
    ),
    "wrap_angle": (rot.wrap_angle, lambda s: random_vectors(s) * 10, ()),
    "axis_angle_to_rotmat": (
        lambda a: rot.axis_angle_to_rotmat(rot.quat_normalize(a), a[..., 0]),
        _rotvec_input,
        (3, 3),
    ),
    "quat_multiply": (
        lambda q: rot.quat_multiply(q, q.flip(-1)),
        lambda s: random_vectors((*s, 4)),
        (4,),
    ),
    "geodesic_distance": (lambda r: rot.geodesic_distance(r, r @ r), random_rotmats, ()),
    "pose_error": (
        lambda t: rot.pose_error(t, t @ t),
        lambda s: rot.pose_to_matrix(random_vectors((*s, 3)), random_rotmats(s)),
        (6,),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("shape", [(), (5,), (2, 3)])
def test_batch_shapes(name: str, shape: tuple[int, ...]) -> None:
    fn, make, out_shape = CASES[name]
    x = make(shape)
    out = fn(x)
    assert out.shape == (*shape, *out_shape)
    # Batch elements are independent: the flattened batch gives the same numbers.
    flat = fn(x.reshape(-1, *x.shape[len(shape) :]))
    torch.testing.assert_close(out.reshape(flat.shape), flat)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("device", DEVICES)
def test_float32_and_device(name: str, device: str) -> None:
    fn, make, _ = CASES[name]
    x64 = make((4,)).to(device)
    out32 = fn(x64.float())
    assert out32.dtype == torch.float32 and out32.device.type == device
    torch.testing.assert_close(out32.double(), fn(x64), atol=2e-5, rtol=1e-4)


def test_rotation_outputs_are_orthonormal() -> None:
    assert_rotation(rot.rpy_to_rotmat(random_vectors((50, 3), 22) * 3))
    assert_rotation(rot.rotvec_to_rotmat(random_vectors((50, 3), 23) * 3))
    assert_rotation(rot.quat_to_rotmat(random_vectors((50, 4), 24)))
    assert_rotation(rot.sixd_to_rotmat(random_vectors((50, 6), 25)))
    axis = rot.quat_normalize(random_vectors((50, 3), 26))
    assert_rotation(rot.axis_angle_to_rotmat(axis, random_vectors((50,), 27) * 3))


# ------------------------------------------------------------------------------------ gradients


def _near_pi_rotmats() -> torch.Tensor:
    return rot.axis_angle_to_rotmat(AXIS, torch.tensor([PI - 1e-3, 2.0], dtype=F64))


GRADCHECK = {
    "rpy_to_rotmat": (rot.rpy_to_rotmat, lambda: random_vectors((3, 3), 28)),
    "rotmat_to_rpy": (rot.rotmat_to_rpy, lambda: random_rotmats((3,), 29)),
    "axis_angle_to_rotmat": (
        lambda a: rot.axis_angle_to_rotmat(a[..., :3], a[..., 3]),
        lambda: random_vectors((3, 4), 30),
    ),
    "rotvec_to_rotmat": (rot.rotvec_to_rotmat, lambda: random_vectors((3, 3), 31)),
    "rotvec_to_rotmat_at_zero": (rot.rotvec_to_rotmat, lambda: torch.zeros(2, 3, dtype=F64)),
    "rotvec_to_rotmat_tiny": (rot.rotvec_to_rotmat, lambda: AXIS * 1e-3),
    "rotmat_to_rotvec": (rot.rotmat_to_rotvec, lambda: random_rotmats((3,), 32)),
    "rotmat_to_rotvec_at_identity": (rot.rotmat_to_rotvec, lambda: torch.eye(3, dtype=F64)),
    "rotmat_to_rotvec_near_pi": (rot.rotmat_to_rotvec, _near_pi_rotmats),
    "rotvec_to_quat": (rot.rotvec_to_quat, lambda: random_vectors((3, 3), 33)),
    "quat_to_rotvec": (rot.quat_to_rotvec, lambda: random_vectors((3, 4), 34)),
    "quat_to_rotmat": (rot.quat_to_rotmat, lambda: random_vectors((3, 4), 35)),
    "rotmat_to_quat": (rot.rotmat_to_quat, lambda: random_rotmats((3,), 36)),
    "quat_multiply": (
        lambda q: rot.quat_multiply(q[..., :4], q[..., 4:]),
        lambda: random_vectors((3, 8), 37),
    ),
    "quat_normalize": (rot.quat_normalize, lambda: random_vectors((3, 4), 38)),
    "sixd_to_rotmat": (rot.sixd_to_rotmat, lambda: random_vectors((3, 6), 39)),
    "rotmat_to_6d": (rot.rotmat_to_6d, lambda: random_rotmats((3,), 40)),
    "geodesic_distance": (
        lambda r: rot.geodesic_distance(r[0], r[1]),
        lambda: random_rotmats((2, 3), 41),
    ),
    "invert_transform": (
        rot.invert_transform,
        lambda: rot.pose_to_matrix(random_vectors((3, 3), 42), random_rotmats((3,), 43)),
    ),
    "pose_error": (
        lambda t: rot.pose_error(t[0], t[1]),
        lambda: rot.pose_to_matrix(random_vectors((2, 3, 3), 44), random_rotmats((2, 3), 45)),
    ),
    "wrap_angle": (rot.wrap_angle, lambda: random_vectors((5,), 46) * 10),
}


@pytest.mark.parametrize("name", sorted(GRADCHECK))
def test_gradcheck(name: str) -> None:
    fn, make = GRADCHECK[name]
    x = make().clone().requires_grad_(True)
    assert torch.autograd.gradcheck(fn, (x,), eps=1e-6, atol=1e-6, rtol=1e-5)


def _identity_and_half_turns() -> torch.Tensor:
    half_turns = [about_axis(i, PI) for i in range(3)]
    return torch.stack([torch.eye(3, dtype=F64), *half_turns, _near_pi_rotmats()[0]])


SINGULAR = {
    "rotvec_to_rotmat_zero": (rot.rotvec_to_rotmat, lambda: torch.zeros(3, dtype=F64)),
    "rotvec_to_quat_zero": (rot.rotvec_to_quat, lambda: torch.zeros(3, dtype=F64)),
    "rotvec_to_rotmat_pi": (rot.rotvec_to_rotmat, lambda: AXIS * PI),
    "rotmat_to_rotvec": (rot.rotmat_to_rotvec, _identity_and_half_turns),
    "rotmat_to_quat": (rot.rotmat_to_quat, _identity_and_half_turns),
    "rotmat_to_rpy": (rot.rotmat_to_rpy, _identity_and_half_turns),
    "quat_to_rotvec": (
        rot.quat_to_rotvec,
        lambda: torch.tensor([[1.0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0.6, 0.8]], dtype=F64),
    ),
    "geodesic_same": (lambda r: rot.geodesic_distance(r, r.detach()), _identity_and_half_turns),
    "geodesic_both_args": (lambda r: rot.geodesic_distance(r, r), _identity_and_half_turns),
    "geodesic_pi": (
        lambda r: rot.geodesic_distance(torch.eye(3, dtype=F64), r),
        _identity_and_half_turns,
    ),
    "sixd_degenerate": (
        rot.sixd_to_rotmat,
        lambda: torch.tensor([1.0, 0, 0, 2.0, 0, 0], dtype=F64),
    ),
    "pose_error_at_target": (
        lambda t: rot.pose_error(t, torch.eye(4, dtype=F64)),
        lambda: torch.eye(4, dtype=F64),
    ),
}


@pytest.mark.parametrize("name", sorted(SINGULAR))
def test_gradients_finite_at_singular_points(name: str) -> None:
    fn, make = SINGULAR[name]
    assert_finite_grad(fn, make())


def test_exp_map_jacobian_at_zero_is_skew_generators() -> None:
    jac = torch.autograd.functional.jacobian(rot.rotvec_to_rotmat, torch.zeros(3, dtype=F64))
    generators = rot.skew(torch.eye(3, dtype=F64)).permute(1, 2, 0)
    torch.testing.assert_close(jac, generators)


def test_geodesic_gradient_at_identical_inputs_is_zero() -> None:
    grad = assert_finite_grad(
        lambda r: rot.geodesic_distance(r, r.detach()), random_rotmats((3,), 47)
    )
    assert torch.equal(grad, torch.zeros_like(grad))


def test_geodesic_distance_without_grad_mode_gives_the_same_values() -> None:
    """Without grad mode the norm of the angle's sine skips its gradient guard (three
    operations, not seven): the same values bit for bit, zero angles included."""
    r1, r2 = random_rotmats((64,), 48), random_rotmats((64,), 49)
    r2[:8] = r1[:8]  # zero angles
    with_grad = rot.geodesic_distance(r1, r2)
    with torch.no_grad():
        without = rot.geodesic_distance(r1, r2)
    assert torch.equal(with_grad, without) and bool((without[:8] == 0).all())


WRONG_SHAPES = [  # (function, the arguments' shapes, the one refused (the first bad), its shape)
    ("skew", [(5, 4)], "v", "(..., 3)"),
    ("unskew", [(5, 4, 4)], "m", "(..., 3, 3)"),
    ("rpy_to_rotmat", [(5, 2)], "rpy", "(..., 3)"),
    ("rotmat_to_rpy", [(5, 9)], "rotmat", "(..., 3, 3)"),
    ("axis_angle_to_rotmat", [(5, 4), (5,)], "axis", "(..., 3)"),
    ("rotvec_to_quat", [(5, 4)], "rotvec", "(..., 3)"),
    ("quat_to_rotvec", [(5, 5)], "quat", "(..., 4)"),
    ("rotvec_to_rotmat", [(5, 4)], "rotvec", "(..., 3)"),
    ("rotmat_to_rotvec", [(5, 3, 4)], "rotmat", "(..., 3, 3)"),
    ("quat_to_rotmat", [(5, 3)], "quat", "(..., 4)"),
    ("quat_to_rotmat", [()], "quat", "(..., 4)"),
    ("rotmat_to_quat", [(5, 4, 4)], "rotmat", "(..., 3, 3)"),
    ("quat_multiply", [(5, 4), (5, 3)], "q2", "(..., 4)"),
    ("quat_conjugate", [(5, 3)], "quat", "(..., 4)"),
    ("quat_canonical", [(4, 5)], "quat", "(..., 4)"),
    ("rotmat_to_6d", [(5, 4, 4)], "rotmat", "(..., 3, 3)"),
    ("sixd_to_rotmat", [(5, 9)], "sixd", "(..., 6)"),
    ("geodesic_distance", [(5, 3, 3), (5, 4, 4)], "rotmat2", "(..., 3, 3)"),
    ("pose_error", [(5, 4, 4), (5, 3, 4)], "target", "(..., 4, 4)"),
    ("pose_to_matrix", [(5, 3), (5, 3, 4)], "rotmat", "(..., 3, 3)"),
    ("matrix_to_pose", [(5, 3, 4)], "transform", "(..., 4, 4)"),
    ("invert_transform", [(3, 3)], "transform", "(..., 4, 4)"),
]


@pytest.mark.parametrize(("name", "shapes", "argument", "needed"), WRONG_SHAPES)
def test_a_wrong_trailing_shape_is_refused_in_one_line(name, shapes, argument, needed):
    """Not an unpacking, indexing or broadcasting error from deep inside, nor (a larger matrix)
    an answer read from its corner: a ValueError naming the function, argument and shape."""
    args = [torch.zeros(shape, dtype=F64) for shape in shapes]
    with pytest.raises(ValueError) as info:
        getattr(rot, name)(*args)
    wrong = shapes[0] if name == "axis_angle_to_rotmat" else shapes[-1]  # axis, else the last
    assert str(info.value) == f"{name}: {argument} must have shape {needed}, got {wrong}"

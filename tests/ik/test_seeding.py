"""The pose-space seeding features: one formula for every seeder."""

from __future__ import annotations

import torch

from torchik.ik.seeding import link_features, nearest_member, target_features
from torchik.robot import load_robot


def _distance(pose, position, rotmat, w):
    """``|p - p_t|² + w² (3 - tr(R_tᵀ R))`` of every target (rows) and pose (columns)."""
    p = pose[None, :, :3, 3] - position[:, None]
    trace = (rotmat[:, None].transpose(-1, -2) @ pose[None, :, :3, :3]).diagonal(0, -2, -1).sum(-1)
    return (p * p).sum(-1) + w**2 * (3.0 - trace)


def test_features_dot_is_the_weighted_pose_distance_up_to_a_constant_per_target():
    robot = load_robot("panda", dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    poses = robot.forward_kinematics(robot.random_configuration(7, g), "panda_hand")
    targets = robot.forward_kinematics(robot.random_configuration(5, g), "panda_hand")
    position, rotmat, w, weight = targets[:, :3, 3], targets[:, :3, :3], 0.3, 2.5
    a = target_features(position, rotmat, w, weight)
    b = link_features(poses, rotations=True)
    assert a.dtype == b.dtype == torch.float32 and a.shape == (5, 13) and b.shape == (7, 13)
    expected = weight * _distance(poses, position, rotmat, w)
    gap = a.double() @ b.double().T - expected  # the constant: weight (|p_t|² ... ) per row
    assert torch.allclose(gap, gap[:, :1].expand_as(gap), atol=1e-5)
    # positions only: 4 features, the position distance
    a, b = target_features(position, None, w), link_features(poses, rotations=False)
    assert a.shape == (5, 4) and b.shape == (7, 4)
    gap = a.double() @ b.double().T - (poses[None, :, :3, 3] - position[:, None]).square().sum(-1)
    assert torch.allclose(gap, gap[:, :1].expand_as(gap), atol=1e-5)


def test_nearest_member_picks_the_smallest_product_in_each_rows_pool():
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    b = torch.tensor([[[3.0, 0.0], [-1.0, 0.0]], [[0.0, -2.0], [0.0, 5.0]]])
    which = torch.tensor([0, 1])
    for batched in (True, False):
        assert nearest_member(a, b, which, batched).tolist() == [1, 0]


def test_the_pools_argmin_is_torchs_on_ties_and_nans():
    """``_argmin`` (``torch.min``'s indices, faster on the CPU) gives ``argmin``'s: the first of
    equal minima, a NaN's index where a row holds one, along any dimension."""
    from torchik.ik.seeding import _argmin

    g = torch.Generator().manual_seed(3)
    x = torch.randint(0, 3, (4, 300, 64), generator=g).double()  # many ties
    x[0, 5, 7] = x[1, :, 2] = x[2, 9, 1] = x[2, 9, 60] = float("nan")
    for dim in (0, 1, 2, -1):
        assert torch.equal(_argmin(x, dim), x.argmin(dim=dim)), dim

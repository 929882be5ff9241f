"""The viewer's pure parts: poses, sticks, ghosts, URDF visuals and inputs (no server)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from torchik.description import read_visuals
from torchik.description.visuals import origin_matrix, resolve_mesh
from torchik.geometry import geodesic_distance, quat_to_rotmat
from torchik.learn import PathResult
from torchik.robot import load_robot
from torchik.viewer.scene import (
    bone_pairs,
    bone_poses,
    link_poses,
    load_solutions,
    playback_frames,
    pose_text,
    resolve_model,
    solve_ghosts,
    to_wxyz_position,
)

STL = """solid t
facet normal 0 0 1
outer loop
vertex 0 0 0
vertex 1 0 0
vertex 0 1 0
endloop
endfacet
endsolid t
"""


def _urdf(mesh: str) -> str:
    return f"""<robot name="vis">
  <material name="red"><color rgba="1 0 0 1"/></material>
  <link name="base"><visual><origin xyz="0 0 0.1" rpy="0 0 1.5707963"/>
    <geometry><box size="0.1 0.2 0.3"/></geometry><material name="red"/></visual></link>
  <link name="arm">
    <visual><geometry><cylinder radius="0.02" length="0.4"/></geometry></visual>
    <visual><geometry><sphere radius="0.05"/></geometry></visual>
    <visual><geometry><mesh filename="{mesh}" scale="2 2 2"/></geometry></visual>
    <visual><geometry><mesh filename="missing.stl"/></geometry></visual>
  </link>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/>
    <origin xyz="0 0 0.2"/><axis xyz="0 1 0"/><limit lower="-2" upper="2"/></joint>
</robot>"""


@pytest.fixture(scope="module")
def panda():
    return load_robot("panda", dtype=torch.float64)


def test_link_poses_and_wxyz_are_the_fk(panda):
    q = panda.random_configuration(1, torch.Generator().manual_seed(0))[0]
    poses = link_poses(panda, q)
    torch.testing.assert_close(torch.as_tensor(poses), panda.forward_kinematics(q))
    wxyz, xyz = to_wxyz_position(poses)
    torch.testing.assert_close(
        quat_to_rotmat(torch.as_tensor(wxyz)), torch.as_tensor(poses)[..., :3, :3]
    )
    np.testing.assert_allclose(xyz, poses[:, :3, 3])


def test_sticks_join_parent_and_child_origins(panda):
    poses = link_poses(panda, panda.random_configuration(1, torch.Generator().manual_seed(1))[0])
    pairs = bone_pairs(panda)
    assert len(pairs) == len(panda.link_names) - 1
    sticks, lengths = bone_poses(poses, pairs)
    for (parent, child), stick, length in zip(pairs, sticks, lengths, strict=True):
        start, end = poses[parent, :3, 3], poses[child, :3, 3]
        np.testing.assert_allclose(stick[:3, 3], (start + end) / 2, atol=1e-12)
        np.testing.assert_allclose(length, np.linalg.norm(end - start), atol=1e-12)
        np.testing.assert_allclose(stick[:3, :3] @ stick[:3, :3].T, np.eye(3), atol=1e-12)
        if length > 1e-9:  # the cylinder's z axis runs along the stick
            np.testing.assert_allclose(stick[:3, 2] * length, end - start, atol=1e-12)


def test_pose_text_reads_out_position_and_angles():
    pose = origin_matrix((0.1, -0.2, 0.3), (0.0, 0.0, math.pi / 2))
    assert pose_text(pose) == "xyz (m): 0.100 -0.200 0.300 | rpy (deg): 0.0 0.0 90.0"


@pytest.mark.parametrize("position_only", [False, True])
def test_numerical_ghosts_meet_the_target_and_are_distinct(panda, position_only):
    q = panda.random_configuration(1, torch.Generator().manual_seed(2))[0]
    pose = panda.forward_kinematics(q, "panda_hand")
    target = pose[:3, 3] if position_only else pose
    found = solve_ghosts(panda, target, "panda_hand", 8, position_only=position_only)
    assert 2 <= len(found.q) <= 8 and found.seconds > 0
    reached = panda.forward_kinematics(found.q, "panda_hand")
    assert (reached[:, :3, 3] - pose[:3, 3]).norm(dim=-1).max() < 1e-3
    if not position_only:
        assert geodesic_distance(
            reached[:, :3, :3], pose[:3, :3].expand(len(found.q), 3, 3)
        ).max() < math.radians(1)
    torch.testing.assert_close(found.position_error, (reached[:, :3, 3] - pose[:3, 3]).norm(dim=-1))
    gaps = torch.cdist(found.q, found.q) + 10 * torch.eye(len(found.q))
    assert gaps.min() > 0.1  # distinct solutions, not one solution many times
    assert f"{len(found.q)} solutions" in found.summary()


@pytest.mark.parametrize("refine", [False, True])
def test_model_ghosts_are_its_samples_raw_or_refined(refine):
    from torchik.models import load_pretrained

    robot = load_robot("snake2", dtype=torch.float64)
    model = resolve_model("pretrained", robot)
    assert model.spec.robot == "snake2" and isinstance(model, type(load_pretrained("snake2")))
    target = torch.tensor([0.1, 0.05, 0.0], dtype=torch.float64)
    found = solve_ghosts(
        robot, target, model.spec.link, 6, position_only=True, model=model, refine=refine
    )
    assert found.q.shape == (6, 2) and found.rotation_error is None
    assert found.source == f"{model.family} samples" + (" + refinement" if refine else "")
    reached = robot.forward_kinematics(found.q, model.spec.link)[:, :3, 3]
    torch.testing.assert_close(found.position_error, (reached - target).norm(dim=-1))
    if refine:
        assert found.position_error.max() < 1e-3


def test_unknown_or_mismatched_models_are_clear_errors():
    snake = load_robot("snake2", dtype=torch.float64)
    with pytest.raises(ValueError, match="unknown model 'nope'.*pretrained"):
        resolve_model("nope", snake)
    with pytest.raises(ValueError, match="is for robot 'snake4', not 'snake2'"):
        resolve_model("snake4", snake)
    assert resolve_model(None, snake) is None


def test_saved_solutions_and_paths_become_frames(panda, tmp_path):
    q = panda.random_configuration(3, torch.Generator().manual_seed(3))
    records = [
        dict(zip(panda.joint_names, row.tolist(), strict=True)) | {"success": True} for row in q
    ]
    (tmp_path / "s.json").write_text(json.dumps(records))
    torch.testing.assert_close(load_solutions(tmp_path / "s.json", panda), q)
    torch.save({"q": q[None].expand(2, 3, 7)}, tmp_path / "p.pt")
    paths = load_solutions(tmp_path / "p.pt", panda)
    assert playback_frames(paths).shape == (3, 2, 7)
    assert playback_frames(q).shape == (3, 1, 7)
    result = PathResult(paths, torch.zeros(2, 3), panda.continuous)  # what learn.paths returns
    torch.testing.assert_close(playback_frames(result), paths.transpose(0, 1))
    torch.save(torch.zeros(4, 3), tmp_path / "bad.pt")
    with pytest.raises(ValueError, match=r"expected configurations \(\.\.\., 7\) of panda"):
        load_solutions(tmp_path / "bad.pt", panda)
    (tmp_path / "bad.json").write_text('[{"x": 1}]')
    with pytest.raises(ValueError, match="not solutions of panda"):
        load_solutions(tmp_path / "bad.json", panda)
    with pytest.raises(ValueError, match="expected"):
        playback_frames(torch.zeros(7))


def test_urdf_visuals_are_read_and_meshes_found(tmp_path, monkeypatch):
    pkg = tmp_path / "ws" / "my_robot"
    (pkg / "urdf").mkdir(parents=True)
    (pkg / "meshes").mkdir()
    (pkg / "meshes" / "tri.stl").write_text(STL)
    urdf = pkg / "urdf" / "vis.urdf"
    urdf.write_text(_urdf("package://my_robot/meshes/tri.stl"))
    visuals, skipped = read_visuals(urdf)
    assert [(v.link, v.shape) for v in visuals] == [
        ("base", "box"), ("arm", "cylinder"), ("arm", "sphere"), ("arm", "mesh")
    ]  # fmt: skip
    box, cylinder, sphere, mesh = visuals
    assert box.size == (0.1, 0.2, 0.3) and box.color == (255, 0, 0)
    np.testing.assert_allclose(box.origin, origin_matrix((0, 0, 0.1), (0, 0, 1.5707963)))
    assert cylinder.size == (0.02, 0.4) and sphere.size == (0.05,) and mesh.size == (2, 2, 2)
    assert mesh.path == pkg / "meshes" / "tri.stl"
    assert skipped == ["link 'arm': mesh 'missing.stl' not found"]
    # next to the URDF, and through ROS_PACKAGE_PATH
    assert resolve_mesh("../meshes/tri.stl", pkg / "urdf") == pkg / "urdf" / "../meshes/tri.stl"
    monkeypatch.setenv("ROS_PACKAGE_PATH", str(tmp_path / "ws"))
    assert resolve_mesh("package://my_robot/meshes/tri.stl", None) == pkg / "meshes" / "tri.stl"
    assert resolve_mesh("package://other/tri.stl", pkg / "urdf") is None

"""torchik.robot.tree: the floating-base split (one base that becomes the root, or free bodies
beside the root's tree) and its one-line refusals (never a KeyError), for models built by hand
as the MJCF reader builds them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from torchik import Robot, URDFError
from torchik.description import Joint, Origin, URDFModel
from torchik.robot.tree import base_owners, flatten_tree, split_floating


def _model(*joints: Joint, root: str = "world") -> URDFModel:
    return URDFModel("hand_built", root, (root, *(j.child for j in joints)), joints)


BASE = Joint("base_free", "floating", "world", "base")
HINGE = Joint("hinge", "revolute", "base", "arm", axis=(0.0, 0.0, 1.0), lower=-1.0, upper=1.0)


def test_one_floating_root_joint_is_split_off():
    fixed, bases = split_floating(_model(BASE, HINGE), floating_base=False)
    assert bases == (BASE,) and fixed.root == "base" and fixed.links == ("base", "arm")
    assert base_owners(fixed, bases) == (0, 0)
    fixed, added = split_floating(_model(HINGE, root="base"), floating_base=True)
    assert [b.name for b in added] == ["root_joint"] and fixed.joints == (HINGE,)


def test_floating_joints_beside_others_become_free_bodies():
    table = Joint("table", "fixed", "world", "table")
    obj = Joint("obj", "floating", "world", "obj", origin=Origin((1.0, 0.0, 0.0)))
    fixed, bases = split_floating(_model(BASE, HINGE, table, obj), floating_base=False)
    assert bases == (BASE, obj) and fixed.root == "world"
    assert [j.type for j in fixed.joints] == ["fixed", "revolute", "fixed", "fixed"]
    assert fixed.joints[3].origin == Origin()  # the origin goes in front of the body's pose
    assert base_owners(fixed, bases) == (-1, 0, 0, -1, 1)  # world, base, arm, table, obj
    with pytest.raises(URDFError, match="'base_free'> is floating already"):
        split_floating(_model(BASE, table), floating_base=True)


def test_a_floating_joint_below_the_root_is_refused_in_one_line():
    joints = (Joint("j", "fixed", "world", "base"), Joint("f", "floating", "base", "o"))
    words = "joint 'f' is floating but hangs from link 'base', not from the root link 'world'"
    for floating_base in (False, True):
        with pytest.raises(URDFError, match=words) as info:
            split_floating(_model(*joints), floating_base)
        assert "\n" not in str(info.value)
    with pytest.raises(URDFError, match=words):
        Robot(_model(*joints))


def test_flatten_tree_refuses_a_joint_whose_parent_is_not_above_it():
    arm = Joint("elbow", "revolute", "arm", "hand", axis=(0.0, 1.0, 0.0), lower=-1.0, upper=1.0)
    plan = flatten_tree("base", (HINGE, arm), ("base", "arm", "hand"))
    assert plan["parent"] == (-1, 0) and plan["link_joint"] == (-1, 0, 1)
    with pytest.raises(URDFError, match="joint 'elbow' hangs from link 'arm', which is not above"):
        flatten_tree("base", (arm, HINGE), ("base", "hand", "arm"))


def _scene() -> URDFModel:
    """A free ``base`` carrying an arm, a free ``obj`` and a post hinged on the world: the
    bodies of a MuJoCo scene (free joints from the root beside a fixed tree)."""
    from torchik.description import Mimic

    post = Joint("post", "revolute", "world", "post", origin=Origin((0.0, 1.0, 0.5)),
                 axis=(0.0, 1.0, 0.0), lower=-2.0, upper=2.0)  # fmt: skip
    cap = Joint("cap", "revolute", "post", "cap", origin=Origin((0.0, 0.0, 0.3)),
                axis=(1.0, 0.0, 0.0), mimic=Mimic("post", 2.0, 0.1))  # fmt: skip
    obj = Joint("obj", "floating", "world", "obj", origin=Origin((1.0, 0.0, 0.0)))
    return _model(BASE, HINGE, post, cap, obj)


def test_body_model_keeps_one_body_of_a_scene():
    from torchik.description import Mimic
    from torchik.robot.tree import body_model

    scene = _scene()
    fixed = body_model(scene, None)
    assert fixed.root == "world" and fixed.links == ("world", "post", "cap")
    assert [j.name for j in fixed.joints] == ["post", "cap"]
    floating = body_model(scene, "base_free")
    assert floating.links == ("world", "base", "arm") and floating.joints == (BASE, HINGE)
    assert body_model(scene, "obj").links == ("world", "obj")
    across = replace(HINGE, mimic=Mimic("post", 1.0, 0.0))
    with pytest.raises(ValueError, match="'hinge' mimics 'post', which moves another body"):
        body_model(_model(BASE, across, *scene.joints[2:]), "base_free")


def test_a_scene_body_is_a_robot_with_the_scenes_coordinates_and_limits():
    import torch

    scene = Robot(_scene(), dtype=torch.float64)
    assert scene.floating_bases == 2 and scene.dof == 16  # 2 x 7, the hinge, the post
    assert scene.n_joints == 2  # after the bases' 14: the hinge, the post
    assert [scene.scene_body(b)[0].n_joints for b in (None, 0, 1)] == [1, 1, 0]
    assert scene.scene and not scene.scene_body(0)[0].scene and not scene.scene_body(None)[0].scene
    q = scene.random_configuration(6, torch.Generator().manual_seed(0))
    floating = [*scene.joint_names[:7], "hinge"]
    for base, links, names in ((None, ["post", "cap"], ["post"]), (0, ["base", "arm"], floating)):
        part, kept = scene.scene_body(base)
        assert list(part.joint_names) == names == [scene.joint_names[i] for i in kept]
        assert part.floating_bases == (base is not None) and part.dtype == torch.float64
        fk = part.forward_kinematics(q[:, kept], links)
        torch.testing.assert_close(fk, scene.forward_kinematics(q, links), atol=1e-14, rtol=0)
        assert torch.equal(part.lower, scene.lower[kept]) and scene.scene_body(base)[0] is part
    narrow = scene.with_limits({"hinge": (-0.5, 0.25)})
    part, kept = narrow.scene_body(0)
    assert part.lower[-1] == -0.5 and part.upper[-1] == 0.25
    with torch.no_grad():
        narrow.upper[narrow.joint_names.index("hinge")] = 0.2  # in place: the body made again
    assert float(narrow.scene_body(0)[0].upper[-1]) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="no base 2"):
        scene.scene_body(2)
    for k in (True, 1.0, torch.tensor([[0], [1]])):  # not an index: one line, a tensor's too
        with pytest.raises(ValueError, match=r"^'\w+' has 2 floating bases, no base [^\n]+$"):
            scene.base_link(k)
    table = Joint("table", "fixed", "world", "table")
    objects = Robot(_model(table, *_scene().joints[4:]), dtype=torch.float64)  # no moving joint
    part, kept = objects.scene_body(None)  # beside the free object (its index raised)
    assert part.dof == 0 and kept.dtype == torch.long and kept.shape == (0,)
    for plain in (Robot(_model(HINGE, root="base")), Robot(_model(BASE, HINGE))):
        assert not plain.scene
        with pytest.raises(ValueError, match="is not a scene of free bodies beside a fixed tree"):
            plain.scene_body(None)

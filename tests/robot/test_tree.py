"""torchik.robot.tree: the floating-base split (one base that becomes the root, or free bodies
beside the root's tree) and its one-line refusals (never a KeyError), for models built by hand
as the MJCF reader builds them."""

from __future__ import annotations

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

"""torchik.robot.tree: the floating-base split refuses what torchik's q cannot hold, in one line
(never a KeyError), for models built by hand as the MJCF reader builds them."""

from __future__ import annotations

import pytest

from torchik import Robot, URDFError
from torchik.description import Joint, URDFModel
from torchik.robot.tree import flatten_tree, split_floating


def _model(*joints: Joint, root: str = "world") -> URDFModel:
    return URDFModel("hand_built", root, (root, *(j.child for j in joints)), joints)


BASE = Joint("base_free", "floating", "world", "base")
HINGE = Joint("hinge", "revolute", "base", "arm", axis=(0.0, 0.0, 1.0), lower=-1.0, upper=1.0)


def test_one_floating_root_joint_is_split_off():
    fixed, base = split_floating(_model(BASE, HINGE), floating_base=False)
    assert base is BASE and fixed.root == "base" and fixed.links == ("base", "arm")
    fixed, added = split_floating(_model(HINGE, root="base"), floating_base=True)
    assert added is not None and added.name == "root_joint" and fixed.joints == (HINGE,)


@pytest.mark.parametrize(
    "joints, words",
    [
        (  # a floating joint that is not the root link's first joint (an arm, then a free object)
            (Joint("post", "fixed", "world", "post"), Joint("obj", "floating", "world", "obj")),
            "joint 'obj' is floating but is not the only joint of the root link 'world'",
        ),
        (  # a second top-level body beside the floating base: its parent would be dropped
            (BASE, HINGE, Joint("table", "fixed", "world", "table")),
            "joint 'table' hangs from the root link 'world' beside the floating joint 'base_free'",
        ),
        (  # a floating joint deeper in the tree
            (Joint("j", "fixed", "world", "base"), Joint("f", "floating", "base", "o")),
            "joint 'f' is floating",
        ),
    ],
)
def test_any_other_floating_joint_is_refused_in_one_line(joints, words):
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

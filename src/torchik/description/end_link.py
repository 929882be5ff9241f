"""The rule that picks the link IK, data sets and models place when none is named."""

from __future__ import annotations

import re
from typing import Any

from torchik.description.bundled import END_LINKS

__all__ = ["TOOL_FRAME", "default_end_link"]

TOOL_FRAME = re.compile(
    r"(?:^|[_\-./:])(?:end_?effector|eef?|tcp|tool\d*|grasp(?:ing)?(?:_?(?:center|frame|point))?)"
    r"(?:_?(?:link|frame))?$",
    re.IGNORECASE,
)
"""A tool frame's name: one that ends in ``end_effector``, ``ee``, ``eef``, ``tcp``, ``tool``,
``tool0`` (any digits), ``grasp``/``grasping`` (``_center``, ``_frame``, ``_point``), each
optionally followed by ``_link`` or ``_frame`` (``panda_hand_tcp``, ``ee_link``,
``j2s6s200_end_effector``, ``arm_tool_link``, ``grasp_center_link``; not ``toolbox``)."""


def default_end_link(robot: Any) -> str:
    """The link IK, data sets and models place when none is named: the one rule of torchik.

    1. :data:`END_LINKS` of the robot's name when the robot has that link (planar arms: any
       name starting with ``planar``): the bundled robots' documented tips.
    2. Otherwise the longest chains: the leaf links with the most moving joints (mimic joints
       included) between them and the root. A link with no moving joint above it is never
       chosen.
    3. Their *branching link*: the deepest link above all of them (the leaf itself for one
       chain). Where the chains have different last moving joints, they are the fingers of a
       hand when each has fewer moving joints below the branching link than above it; chains
       that split into limbs as long as the chain above (two arms, four legs, a hand without
       an arm) are refused.
    4. The end link is the tool frame of the branching link: it or a link fixed below it
       (through fixed joints only) named like :data:`TOOL_FRAME` (``end_effector``, ``ee``,
       ``tcp``, ``tool0``, ...), the deepest, the first in tree order on a tie. Without one:
       the branching link itself for a hand, else the deepest of the leaves (frames of one
       body; the first in tree order on a tie).

    So a Kinova arm ends at ``j2s6s200_end_effector``, not at a fingertip; a gripper whose
    fingers move ends at its tool frame (``..._tcp``, ``grasp_center_link``) or, without one,
    at the link the fingers branch from; a UR at ``ee_link``.

    Args:
        robot: a :class:`torchik.Robot` or a :class:`torchik.description.URDFModel`.

    Returns:
        The link name.

    Raises:
        ValueError: the robot has no moving joint, or the longest chains end in different
            bodies that are not the fingers of one hand (two arms, legs); the message lists
            the candidate leaves.

    Example:
        >>> from torchik.description import parse_urdf, planar_arm_urdf
        >>> default_end_link(parse_urdf(planar_arm_urdf([1.0, 1.0], name="arm")))
        'ee'
    """
    model = getattr(robot, "model", robot)
    key = "planar" if model.name.startswith("planar") else model.name
    if END_LINKS.get(key) in model.links:
        return END_LINKS[key]
    tree = _Tree(model)
    parents = {joint.parent for joint in model.joints}
    leaves = [link for link in model.links if link not in parents]
    most = max(tree.moving[link] for link in leaves)
    if most == 0:
        raise ValueError(f"robot {model.name!r} has no moving joint: there is no end link to place")
    candidates = [link for link in leaves if tree.moving[link] == most]
    branching = tree.branching_link(candidates)
    hand = len({tree.last[link] for link in candidates}) > 1
    if hand and most - tree.moving[branching] >= tree.moving[branching]:  # limbs, not fingers
        raise ValueError(
            f"robot {model.name!r} has no single end link: the longest chains ({most} moving "
            f"joints) end in {candidates}; name one (link=... in Python, --link in the shell)"
        )
    tools = [link for link in tree.fixed_below(branching) if TOOL_FRAME.search(link)]
    if tools:
        return max(tools, key=lambda link: tree.depth[link])  # max keeps the first on a tie
    return branching if hand else max(candidates, key=lambda link: tree.depth[link])


class _Tree:
    """Per link of a model (joints parents first): moving joints and joints above it, its last
    moving joint, its parent link and whether the joint into it is fixed."""

    def __init__(self, model: Any) -> None:
        self.model = model
        root = model.root
        self.moving, self.depth = {root: 0}, {root: 0}
        self.last: dict[str, str | None] = {root: None}
        self.parent: dict[str, str] = {}
        self.fixed: dict[str, bool] = {}
        for joint in model.joints:
            moves = joint.type != "fixed"
            self.moving[joint.child] = self.moving[joint.parent] + moves
            self.depth[joint.child] = self.depth[joint.parent] + 1
            self.last[joint.child] = joint.name if moves else self.last[joint.parent]
            self.parent[joint.child], self.fixed[joint.child] = joint.parent, not moves

    def path(self, link: str) -> list[str]:
        """The links from the root down to ``link``."""
        out = [link]
        while out[-1] in self.parent:
            out.append(self.parent[out[-1]])
        return out[::-1]

    def branching_link(self, links: list[str]) -> str:
        """The deepest link above all ``links``."""
        paths = [self.path(link) for link in links]
        common = 1  # the root is above every link
        while all(len(p) > common and p[common] == paths[0][common] for p in paths):
            common += 1
        return paths[0][common - 1]

    def fixed_below(self, link: str) -> list[str]:
        """``link`` and the links fixed below it (through fixed joints only), in tree order."""
        below = {link}
        for joint in self.model.joints:
            if joint.type == "fixed" and joint.parent in below:
                below.add(joint.child)
        return [name for name in self.model.links if name in below]

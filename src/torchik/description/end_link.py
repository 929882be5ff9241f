"""The rule that picks the link IK, data sets and models place when none is named."""

from __future__ import annotations

from typing import Any

from torchik.description.bundled import END_LINKS

__all__ = ["default_end_link"]


def default_end_link(robot: Any) -> str:
    """The link IK, data sets and models place when none is named: the one rule of torchik.

    :data:`END_LINKS` of the robot's name when the robot has that link (planar arms: any name
    starting with ``planar``); otherwise the deepest leaf of the longest movable chain: among the
    leaf links, those with the most moving joints (mimic joints included) between them and the
    root; if they all hang from the same last moving joint (frames of one body, such as UR's
    ``ee_link`` and ``tool0``) the one with the most joints above it, the first in tree order on
    a tie. A link with no moving joint above it is never chosen.

    Args:
        robot: a :class:`torchik.Robot` or a :class:`torchik.description.URDFModel`.

    Returns:
        The link name.

    Raises:
        ValueError: the robot has no moving joint, or the longest chains end in different
            bodies (two fingers, two arms); the message lists the candidate leaves.

    Example:
        >>> from torchik.description import parse_urdf, planar_arm_urdf
        >>> default_end_link(parse_urdf(planar_arm_urdf([1.0, 1.0], name="arm")))
        'ee'
    """
    model = getattr(robot, "model", robot)
    key = "planar" if model.name.startswith("planar") else model.name
    if END_LINKS.get(key) in model.links:
        return END_LINKS[key]
    moving, depth, last = {model.root: 0}, {model.root: 0}, {model.root: None}
    for joint in model.joints:  # parents first
        moves = joint.type != "fixed"
        moving[joint.child] = moving[joint.parent] + moves
        depth[joint.child] = depth[joint.parent] + 1
        last[joint.child] = joint.name if moves else last[joint.parent]
    parents = {joint.parent for joint in model.joints}
    leaves = [link for link in model.links if link not in parents]
    most = max(moving[link] for link in leaves)
    if most == 0:
        raise ValueError(f"robot {model.name!r} has no moving joint: there is no end link to place")
    candidates = [link for link in leaves if moving[link] == most]
    if len({last[link] for link in candidates}) > 1:
        raise ValueError(
            f"robot {model.name!r} has no single end link: the longest chains ({most} moving "
            f"joints) end in {candidates}; name one (link=... in Python, --link in the shell)"
        )
    return max(candidates, key=lambda link: depth[link])  # max keeps the first on a tie

"""Pure helpers on a URDF description that :class:`torchik.robot.Robot` is built from: the
frames that align each joint axis with z, the origin transforms, the description of one
chain cut out of a tree, planar joints as three simple ones, and the split of a floating
base. No state; float64 in, float64 out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch
from torch import Tensor

from torchik.description.reading import URDFError
from torchik.description.urdf import Joint, Origin, URDFModel
from torchik.geometry.rotations import rpy_to_rotmat

__all__ = [
    "axis_alignments",
    "base_owners",
    "body_model",
    "expand_planar",
    "flatten_tree",
    "origin_matrices",
    "path_model",
    "split_floating",
]


def axis_alignments(axes: Sequence[Sequence[float]]) -> Tensor:
    """Rotations ``(N, 4, 4)`` (homogeneous, float64) whose z columns are the unit ``axes``."""
    z = torch.tensor(axes, dtype=torch.float64).reshape(-1, 3)
    unit_x = z.new_tensor([1.0, 0.0, 0.0]).expand_as(z)
    helper = torch.where(z[:, :1].abs() < 0.9, unit_x, unit_x.roll(1, dims=-1))
    x = torch.linalg.cross(helper, z)
    x = x / x.norm(dim=-1, keepdim=True)
    out = torch.eye(4, dtype=torch.float64).repeat(z.shape[0], 1, 1)
    out[:, :3, :3] = torch.stack((x, torch.linalg.cross(z, x), z), dim=-1)
    return out


def origin_matrices(xyz: Tensor, rpy: Tensor) -> Tensor:
    """``(N, 4, 4)`` transforms from translations ``(N, 3)`` and roll-pitch-yaw ``(N, 3)``."""
    top = torch.cat((rpy_to_rotmat(rpy), xyz[..., None]), dim=-1)
    bottom = xyz.new_tensor([0.0, 0.0, 0.0, 1.0]).expand(xyz.shape[0], 1, 4)
    return torch.cat((top, bottom), dim=-2)


def path_model(model: URDFModel, base: str, tip: str) -> URDFModel:
    """The description of the joints from ``base`` down to ``tip``, rooted at ``base``."""
    parent_joint = {joint.child: joint for joint in model.joints}
    path, link = [], tip
    while link != base:
        if link not in parent_joint:
            raise ValueError(f"link {base!r} is not on the path from the root to {tip!r}")
        path.append(parent_joint[link])
        link = path[-1].parent
    path.reverse()
    on_path = {joint.name for joint in path}
    for joint in path:
        if joint.mimic is not None and joint.mimic.joint not in on_path:
            raise ValueError(
                f"joint {joint.name!r} mimics {joint.mimic.joint!r}, which is not between "
                f"{base!r} and {tip!r}"
            )
    return URDFModel(model.name, base, (base, *(joint.child for joint in path)), tuple(path))


def body_model(model: URDFModel, base: str | None) -> URDFModel:
    """The description of one body of a scene whose free bodies are floating joints from the
    root beside other joints (a MuJoCo scene): the floating joint ``base`` and the links below
    it, from the root (a floating robot), or with ``None`` the links that hang from the root
    through no floating joint (a fixed robot).

    Raises:
        ValueError: a joint of the body that mimics one off it.
    """
    above: dict[str, str | None] = {model.root: None}  # link -> the floating joint above it
    for joint in model.joints:  # parents first
        above[joint.child] = joint.name if joint.type == "floating" else above[joint.parent]
    kept = tuple(joint for joint in model.joints if above[joint.child] == base)
    names = {joint.name for joint in kept}
    for joint in kept:
        if joint.mimic is not None and joint.mimic.joint not in names:
            raise ValueError(f"joint {joint.name!r} mimics {joint.mimic.joint!r}, which moves "
                             "another body of the scene")  # fmt: skip
    return URDFModel(model.name, model.root, (model.root, *(j.child for j in kept)), kept)


Vector = tuple[float, float, float]


def _plane_basis(axis: Sequence[float]) -> tuple[Vector, Vector]:
    """Two unit vectors ``(e1, e2)`` spanning the plane normal to the unit ``axis``: ``e1`` the
    projection of x (of y when the axis is nearly x) and ``e2 = axis x e1``; for ``z``, x and y."""
    a = torch.tensor(axis, dtype=torch.float64)
    helper = torch.tensor([1.0, 0.0, 0.0] if abs(axis[0]) < 0.9 else [0.0, 1.0, 0.0])
    e1 = helper.double() - (helper.double() @ a) * a
    e1 = e1 / e1.norm()
    e2 = torch.linalg.cross(a, e1)
    (x1, y1, z1), (x2, y2, z2) = e1.tolist(), e2.tolist()
    return (x1, y1, z1), (x2, y2, z2)


def expand_planar(model: URDFModel) -> URDFModel:
    """Each planar joint ``p`` as three: prismatic ``p/x`` and ``p/y`` along the in-plane basis
    of :func:`_plane_basis`, then continuous ``p/theta`` about the normal, through the links
    ``p/x`` and ``p/y`` (exact, no singularity: ``q`` holds ``x, y, θ``)."""
    if all(joint.type != "planar" for joint in model.joints):
        return model
    known = set(model.links)
    joints: list[Joint] = []
    for joint in model.joints:
        if joint.type != "planar":
            joints.append(joint)
            continue
        names = [f"{joint.name}/x", f"{joint.name}/y", f"{joint.name}/theta"]
        if known & set(names[:2]):
            raise URDFError(
                f"<joint name={joint.name!r} type='planar'> needs the links {names[:2]} for its "
                "x and y steps, and the description has one; accepted: other link names"
            )
        e1, e2 = _plane_basis(joint.axis)
        joints += [
            replace(joint, name=names[0], type="prismatic", child=names[0], axis=e1),
            Joint(names[1], "prismatic", names[0], names[1], axis=e2),
            Joint(names[2], "continuous", names[1], joint.child, axis=joint.axis),
        ]
    links = (model.root, *(joint.child for joint in joints))
    return URDFModel(model.name, model.root, links, tuple(joints))


def split_floating(
    model: URDFModel, floating_base: bool, where: str = "the URDF text"
) -> tuple[URDFModel, tuple[Joint, ...]]:
    """The fixed part of ``model`` and its floating joints, each of which hangs from the root.

    - A floating joint that is the root link's only joint (the usual ``world -> base``) goes,
      with the root link: the base link becomes the root, and every link moves with the base.
    - Floating joints from the root beside other joints (the free bodies of a MuJoCo scene: an
      object beside an arm, several robots) each become a fixed joint with the identity origin:
      the tree gives each link's pose relative to its free body, whose pose (the joint's
      origin, then the body's pose in ``q``) the robot puts in front.

    ``floating_base=True`` adds one, ``root_joint`` from ``world``, to a description without.

    Raises:
        URDFError: a floating joint that does not hang from the root link, or
            ``floating_base=True`` for a description that has one.
    """
    floating = tuple(j for j in model.joints if j.type == "floating")
    _check_floating(model, floating)
    if floating_base and floating:
        raise URDFError(
            f"{where}: <joint name={floating[0].name!r}> is floating already; accepted: "
            "floating_base=True only for a description without a floating joint"
        )
    if floating_base:
        return model, (Joint("root_joint", "floating", "world", model.root),)
    if not floating:
        return model, ()
    from_root = [j for j in model.joints if j.parent == model.root]
    if from_root == list(floating) and len(floating) == 1 and model.joints[0] is floating[0]:
        first = floating[0]
        return URDFModel(model.name, first.child, model.links[1:], model.joints[1:]), floating
    fixed = tuple(
        replace(j, type="fixed", origin=Origin()) if j.type == "floating" else j
        for j in model.joints
    )
    return replace(model, joints=fixed), floating


def base_owners(model: URDFModel, bases: tuple[Joint, ...]) -> tuple[int, ...]:
    """Per link of ``model`` (the fixed part from :func:`split_floating`), the index of the
    floating base it moves with, ``-1`` for none: every link, for a floating base that became
    the root; the links below each free body's joint, for free bodies beside a fixed tree."""
    if len(bases) == 1 and all(j.name != bases[0].name for j in model.joints):
        return (0,) * len(model.links)  # the base link is the root: everything moves with it
    index = {j.name: k for k, j in enumerate(bases)}
    owner = {model.root: -1}
    for joint in model.joints:  # parents first
        owner[joint.child] = index.get(joint.name, owner[joint.parent])
    return tuple(owner[link] for link in model.links)


def _check_floating(model: URDFModel, floating: tuple[Joint, ...]) -> None:
    """Refuse a floating joint that does not hang from the root link: its pose in ``q`` is in
    the world (the root's frame), as MuJoCo's free joints are."""
    for joint in floating:
        if joint.parent != model.root:
            raise URDFError(
                f"joint {joint.name!r} is floating but hangs from link {joint.parent!r}, not "
                f"from the root link {model.root!r}; accepted: floating joints from the root"
            )


def flatten_tree(root: str, joints: Sequence[Joint], link_names: Sequence[str]) -> dict[str, tuple]:
    """Index plans of a tree (joints in topological order), linear in its size (a 10 000-link
    chain loads in well under a second: no joints x links matrix is ever built).

    ``parent``: per moving joint, the moving joint it hangs from (-1: the root); ``link_joint``:
    the same per link. The constant frames are grouped by their number of fixed joints below the
    moving joint (or the root) they hang from: level 0 is the root and the children of moving
    joints (slot ``1 + m`` for moving joint ``m``); each later level is one batched product with
    the previous one, ``S_child = S_parent @ origin`` (``levels``: per level >= 1, its joints and
    their parents' positions). ``link_slot``, ``moving_parent_slot``: slots of the links and of
    the moving joints' parent links in all levels concatenated; ``moving_at``: positions of the
    moving joints in ``joints``.
    """
    slot = {root: (0, 0)}  # link -> (level, position in level)
    link_joint = {root: -1}
    levels: list[tuple[list[int], list[int]]] = []
    parent: list[int] = []
    for k, joint in enumerate(joints):
        if joint.parent not in link_joint:  # a hand-built model out of order, never a KeyError
            raise URDFError(
                f"joint {joint.name!r} hangs from link {joint.parent!r}, which is not above it "
                f"in the tree rooted at {root!r}"
            )
        if joint.type != "fixed":
            parent.append(link_joint[joint.parent])
            link_joint[joint.child] = len(parent) - 1
            slot[joint.child] = (0, len(parent))
            continue
        link_joint[joint.child] = link_joint[joint.parent]
        level, position = slot[joint.parent]
        if len(levels) <= level:
            levels.append(([], []))
        slot[joint.child] = (level + 1, len(levels[level][0]))
        levels[level][0].append(k)
        levels[level][1].append(position)
    sizes = [1 + len(parent)] + [len(j) for j, _ in levels]
    start = [sum(sizes[:i]) for i in range(len(sizes))]
    moving = [(k, j) for k, j in enumerate(joints) if j.type != "fixed"]
    at = {name: start[level] + position for name, (level, position) in slot.items()}
    return {
        "parent": tuple(parent),
        "link_joint": tuple(link_joint[name] for name in link_names),
        "levels": tuple((tuple(j), tuple(p)) for j, p in levels),
        "link_slot": tuple(at[n] for n in link_names),
        "moving_at": tuple(k for k, _ in moving),
        "moving_parent_slot": tuple(at[j.parent] for _, j in moving),
    }

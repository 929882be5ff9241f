"""URDF text -> plain dataclasses (no torch).

The parser is the only place that reads XML. It never resolves entities or external
resources and turns every malformed description into a :class:`URDFError` whose
message names the problem and the joint or link concerned.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace

from torchik.description.reading import (
    MAX_MAGNITUDE,
    MAX_URDF_BYTES,
    URDFError,
    brief,
    parse_xml,
    read_number,
    read_source,
    read_vector,
)

__all__ = [
    "URDFWarning",
    "Origin",
    "Mimic",
    "Joint",
    "URDFModel",
    "parse_urdf",
]

JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")
UNSUPPORTED_TYPES = ("spherical",)
BOUNDED_TYPES = ("revolute", "prismatic")  # those whose <limit lower upper> are read


class URDFWarning(UserWarning):
    """A description loaded leniently (limits missing or reversed); silence it with
    ``warnings.filterwarnings("ignore", category=torchik.description.URDFWarning)``."""


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _warn_at_user(message: str, category: type[Warning]) -> None:
    """Warn at the first caller outside torchik: the user's ``load_robot(...)`` or
    ``parse_urdf(...)`` line, however many torchik frames lie between (a fixed ``stacklevel``
    points at torchik's own call for all but one entry point). Python 3.12's
    ``skip_file_prefixes`` does this too; the floor is 3.10, so the frames are counted here."""
    frame, level = sys._getframe(1), 2  # level 2: the frame that called this function
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


@dataclass(frozen=True)
class Origin:
    """A rigid transform given as translation (m) and fixed-axis roll-pitch-yaw (rad)."""

    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Mimic:
    """``q = multiplier * q[joint] + offset``."""

    joint: str
    multiplier: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True)
class Joint:
    """One URDF joint. ``axis`` is unit length (a planar joint's plane normal); limits are
    ``None`` when the joint is unlimited (continuous, floating, planar, or a revolute or
    prismatic joint whose ``<limit>`` gives no bound or ``lower > upper``). ``rest``: a
    floating joint's pose in the file, ``(x, y, z, qw, qx, qy, qz)`` (an MJCF free body's
    place, MuJoCo's ``qpos0``), where the description gives one; ``None``: the origin."""

    name: str
    type: str
    parent: str
    child: str
    origin: Origin = field(default_factory=Origin)
    axis: tuple[float, float, float] = (1.0, 0.0, 0.0)
    lower: float | None = None
    upper: float | None = None
    mimic: Mimic | None = None
    rest: tuple[float, ...] | None = None


@dataclass(frozen=True)
class URDFModel:
    """A validated kinematic tree: joints in topological order (parents first)."""

    name: str
    root: str
    links: tuple[str, ...]
    joints: tuple[Joint, ...]


_SHOWN = 5  # items listed in an error message before "..."


def parse_urdf(
    source: str | os.PathLike, root: str | None = None, max_bytes: int | None = MAX_URDF_BYTES
) -> URDFModel:
    """Read a URDF robot description into a validated kinematic tree.

    Visual, collision, inertial, transmission, gazebo and any other unknown tags or attributes
    are ignored. Mimic chains (``c`` mimics ``b`` which mimics ``a``) are resolved so that
    every :class:`Mimic` refers to a joint that is not itself a mimic.

    Args:
        source: A path to a ``.urdf`` file, or the XML text itself. A ``str`` is taken as text
            when it starts with ``<`` (after leading whitespace) or contains ``<robot``; an
            ``os.PathLike`` is always a path.
        root: The link to start the tree at. ``None`` requires the description to have exactly
            one root link; a name keeps only the subtree reachable from that link.
        max_bytes: The largest file (or text, in characters) accepted, checked before reading;
            ``None`` for no limit. Only regular files are read (never a FIFO or a device).

    Returns:
        The model, with ``links`` and ``joints`` in depth-first order (children in file order),
        so ``links[0]`` is the root and ``joints[i].child == links[i + 1]``.

    Raises:
        URDFError: If the file is missing, not a regular file, too large, is not safe
            well-formed XML (any DOCTYPE or entity declaration is refused), or describes
            something that is not a valid tree of revolute, continuous, prismatic, fixed,
            floating and planar joints (``spherical`` is refused; a floating joint must be the
            root link's only joint), or has a number beyond ``MAX_MAGNITUDE`` (``1e9``). File
            errors start with the path.

    Warns:
        URDFWarning: limits loaded leniently (see ``_parse_limits``), or a mimic joint's own
            limits that its driver's range leaves (not enforced: the driver's limits bound
            it), one warning per file.

    Example:
        >>> model = parse_urdf('<robot name="r"><link name="a"/><link name="b"/>'
        ...     '<joint name="j" type="continuous"><parent link="a"/><child link="b"/>'
        ...     '<axis xyz="0 0 2"/></joint></robot>')
        >>> model.root, model.joints[0].axis
        ('a', (0.0, 0.0, 1.0))
    """
    data, label = read_source(source, max_bytes)
    notes: list[str] = []
    try:
        model = _build_model(parse_xml(data), root, notes)
    except URDFError as err:
        if label is None:
            raise
        raise URDFError(f"{label}: {err}") from None
    if notes:
        shown = "; ".join(notes[:_SHOWN]) + ("; ..." if len(notes) > _SHOWN else "")
        where = "the URDF text" if label is None else label
        _warn_at_user(f"{where}: {shown}", URDFWarning)
    return model


# --------------------------------------------------------------------------- elements -> values


def _build_model(robot: ET.Element, root: str | None, notes: list[str]) -> URDFModel:
    """Validate the ``<robot>`` element and order its tree from ``root``."""
    if robot.tag == "mujoco":
        raise URDFError(
            "the root element is <mujoco>: this is MJCF (MuJoCo), not URDF; load it with "
            "Robot.from_mjcf"
        )
    if robot.tag != "robot":
        raise URDFError(f"the root element is <{robot.tag}>, expected <robot>")
    name = _required(robot, "name", "<robot>")
    links = _parse_links(robot, name)
    joints = _parse_joints(robot, notes)
    _check_joint_links(joints, links)
    _check_acyclic(links, joints)
    parent_joint = _parent_joints(joints)
    root = _choose_root(links, parent_joint, root, name)
    order = _depth_first(root, joints)
    _check_floating(order, root)
    _check_mimics(joints, order, root)
    resolved = _resolve_mimics(joints, order)
    kept = tuple(
        replace(joint, mimic=resolved[joint.name]) if joint.mimic else joint for joint in order
    )
    _note_mimic_limits(kept, notes)
    return URDFModel(name, root, (root, *(joint.child for joint in kept)), kept)


def _required(element: ET.Element, attribute: str, where: str) -> str:
    value = element.get(attribute)
    if not value:
        raise URDFError(f"{where} has no {attribute!r} attribute")
    return value


def _parse_links(robot: ET.Element, robot_name: str) -> list[str]:
    links: dict[str, None] = {}  # a dict: ordered, with constant-time membership
    for index, element in enumerate(robot.iterfind("link")):
        name = _required(element, "name", f"<link> number {index + 1}")
        if name in links:
            raise URDFError(f"duplicate link name {brief(name)}")
        links[name] = None
    if not links:
        raise URDFError(f"robot {brief(robot_name)} has no links")
    return list(links)


def _parse_joints(robot: ET.Element, notes: list[str]) -> dict[str, Joint]:
    """Return the joints by name, in file order."""
    joints: dict[str, Joint] = {}
    for index, element in enumerate(robot.iterfind("joint")):
        name = _required(element, "name", f"<joint> number {index + 1}")
        if name in joints:
            raise URDFError(f"duplicate joint name {brief(name)}")
        joints[name] = _parse_joint(element, name, notes)
    return joints


def _parse_joint(element: ET.Element, name: str, notes: list[str]) -> Joint:
    where = f"joint {brief(name)}"
    kind = _required(element, "type", where)
    if kind in UNSUPPORTED_TYPES:
        raise URDFError(
            f"{where} has type {brief(kind)}, which torchik does not support; "
            f"accepted: {', '.join(JOINT_TYPES)}"
        )
    if kind not in JOINT_TYPES:
        raise URDFError(f"{where} has unknown type {brief(kind)}; expected one of {JOINT_TYPES}")
    parent = _link_reference(element, "parent", where)
    child = _link_reference(element, "child", where)
    if parent == child:
        raise URDFError(f"{where} has the same parent and child link {brief(parent)}")
    if kind in ("fixed", "floating"):  # axis, limits and mimic mean nothing for these
        return Joint(name, kind, parent, child, _parse_origin(element, where))
    if kind == "planar" and element.find("mimic") is not None:
        raise URDFError(f"{where} (planar) has a <mimic>; accepted: a <mimic> on a 1-DoF joint")
    lower, upper = _parse_limits(element, kind, where, notes)
    return Joint(
        name,
        kind,
        parent,
        child,
        origin=_parse_origin(element, where),
        axis=_parse_axis(element, where),
        lower=lower,
        upper=upper,
        mimic=_parse_mimic(element, where),
    )


def _link_reference(element: ET.Element, tag: str, where: str) -> str:
    reference = element.find(tag)
    if reference is None or not reference.get("link"):
        raise URDFError(f"{where} has no <{tag} link=...>")
    return reference.get("link", "")


def _parse_origin(element: ET.Element, where: str) -> Origin:
    origin = element.find("origin")
    if origin is None:
        return Origin()
    xyz = read_vector(origin.get("xyz", "0 0 0"), f"{where}: <origin xyz>")
    rpy = read_vector(origin.get("rpy", "0 0 0"), f"{where}: <origin rpy>")
    return Origin(xyz, rpy)


def _parse_axis(element: ET.Element, where: str) -> tuple[float, float, float]:
    axis = element.find("axis")
    if axis is None:
        return (1.0, 0.0, 0.0)
    x, y, z = read_vector(axis.get("xyz", "1 0 0"), f"{where}: <axis xyz>", limit=math.inf)
    # Scale by the largest component first: the squares of 1e200 overflow and those of 1e-200
    # underflow, while every nonzero finite vector has a well-defined direction.
    scale = max(abs(x), abs(y), abs(z))
    if scale == 0.0:
        raise URDFError(f"{where} has a zero-length axis ({x:g} {y:g} {z:g})")
    x, y, z = x / scale, y / scale, z / scale
    norm = math.sqrt(x * x + y * y + z * z)
    return (x / norm, y / norm, z / norm)


def _parse_limits(
    element: ET.Element, kind: str, where: str, notes: list[str]
) -> tuple[float | None, float | None]:
    """``(lower, upper)`` of a revolute or prismatic joint, ``(None, None)`` when unlimited.

    Lenient where real files are (urdfdom and Pinocchio load them), each case noted for a
    :class:`URDFWarning`: a ``<limit>`` with neither bound is unlimited (wheels; the spec's 0..0
    would lock the joint); with one bound, the other is the spec's default 0; ``lower > upper``
    (pybullet) or a bound beyond ``MAX_MAGNITUDE`` (gazebo's ``1e16``) means unlimited. A
    missing ``<limit>`` element stays an error, and so does a number that is not finite.
    """
    if kind not in BOUNDED_TYPES:
        return None, None
    limit = element.find("limit")
    if limit is None:
        raise URDFError(
            f"{where} ({kind}) has no <limit>; accepted: <limit lower=... upper=...> "
            "(either bound may be left out), or type 'continuous' for no limits"
        )
    given = {side: limit.get(side) for side in ("lower", "upper")}
    if given["lower"] is None and given["upper"] is None:
        notes.append(f"{where} ({kind}): <limit> has no lower/upper, loaded as unlimited")
        return None, None
    lower, upper = (
        0.0 if text is None else read_number(text, f"{where}: <limit {side}>", math.inf)
        for side, text in given.items()
    )
    missing = [side for side, text in given.items() if text is None]
    if missing:
        notes.append(f"{where}: <limit> has no {missing[0]}, which defaults to 0 (the spec)")
    if lower > upper or max(-lower, upper) > MAX_MAGNITUDE:  # 1e16 is gazebo's "unlimited"
        notes.append(f"{where}: <limit lower={lower:g} upper={upper:g}>, loaded as unlimited")
        return None, None
    return lower, upper


def _parse_mimic(element: ET.Element, where: str) -> Mimic | None:
    mimic = element.find("mimic")
    if mimic is None:
        return None
    return Mimic(
        joint=_required(mimic, "joint", f"{where}: <mimic>"),
        multiplier=read_number(mimic.get("multiplier", "1"), f"{where}: <mimic multiplier>"),
        offset=read_number(mimic.get("offset", "0"), f"{where}: <mimic offset>"),
    )


# --------------------------------------------------------------------------- tree checks


def _check_joint_links(joints: dict[str, Joint], links: list[str]) -> None:
    known = set(links)
    for joint in joints.values():
        for role, link in (("parent", joint.parent), ("child", joint.child)):
            if link not in known:
                raise URDFError(
                    f"joint {brief(joint.name)} has {role} link {brief(link)}, which is not a link"
                )


def _check_acyclic(links: list[str], joints: dict[str, Joint]) -> None:
    """Raise if the joints form a directed cycle; iterative so long chains cannot overflow."""
    children: dict[str, list[str]] = {link: [] for link in links}
    for joint in joints.values():
        children[joint.parent].append(joint.child)
    state = dict.fromkeys(links, 0)  # 0 unseen, 1 on the current path, 2 done
    for start in links:
        if state[start]:
            continue
        path, stack = [start], [iter(children[start])]
        state[start] = 1
        while stack:
            link = next(stack[-1], None)
            if link is None:
                state[path.pop()] = 2
                stack.pop()
            elif state[link] == 1:
                loop = path[path.index(link) :] + [link]
                raise URDFError(
                    "the joints form a cycle through links " + " -> ".join(map(repr, loop))
                )
            elif state[link] == 0:
                state[link] = 1
                path.append(link)
                stack.append(iter(children[link]))


def _parent_joints(joints: dict[str, Joint]) -> dict[str, Joint]:
    """Map each child link to the one joint whose child it is."""
    parent_joint: dict[str, Joint] = {}
    for joint in joints.values():
        other = parent_joint.get(joint.child)
        if other is not None:
            raise URDFError(
                f"link {brief(joint.child)} has two parent joints, "
                f"{brief(other.name)} and {brief(joint.name)}"
            )
        parent_joint[joint.child] = joint
    return parent_joint


def _choose_root(
    links: list[str], parent_joint: dict[str, Joint], root: str | None, robot: str
) -> str:
    if root is not None:
        if root not in links:
            raise URDFError(f"root link {brief(root)} is not a link of robot {brief(robot)}")
        return root
    roots = [link for link in links if link not in parent_joint]
    if len(roots) > 1:  # at least one exists: the joints form no cycle
        shown = ", ".join(map(brief, roots[:_SHOWN])) + (", ..." if len(roots) > _SHOWN else "")
        raise URDFError(
            f"robot {brief(robot)} has {len(roots)} root links [{shown}]; "
            "connect them or pass root="
        )
    return roots[0]


def _depth_first(root: str, joints: dict[str, Joint]) -> list[Joint]:
    """Joints reachable from ``root``, parents first, siblings in file order."""
    below: dict[str, list[Joint]] = {}
    for joint in joints.values():
        below.setdefault(joint.parent, []).append(joint)
    order: list[Joint] = []
    stack = list(reversed(below.get(root, [])))
    while stack:
        joint = stack.pop()
        order.append(joint)
        stack.extend(reversed(below.get(joint.child, [])))
    return order


def _check_floating(order: list[Joint], root: str) -> None:
    """A floating joint must join the root link to the rest (the usual ``world -> base``)."""
    for joint in order:
        if joint.type == "floating" and (joint is not order[0] or _has_sibling(order, root)):
            raise URDFError(
                f"<joint name={brief(joint.name)} type='floating'> is not the only joint of "
                f"the root link {brief(root)}; accepted: one floating joint, from the root "
                "link to the base"
            )


def _has_sibling(order: list[Joint], root: str) -> bool:
    return sum(joint.parent == root for joint in order) > 1


# --------------------------------------------------------------------------- mimic joints


def _check_mimics(joints: dict[str, Joint], kept: list[Joint], root: str) -> None:
    in_tree = {joint.name for joint in kept}
    for joint in kept:
        if joint.mimic is None:
            continue
        target = joints.get(joint.mimic.joint)
        where = f"joint {brief(joint.name)} mimics {brief(joint.mimic.joint)}"
        if target is None:
            raise URDFError(f"{where}, which is not a joint")
        if target.type not in ("revolute", "continuous", "prismatic"):
            raise URDFError(
                f"{where}, which is a {target.type} joint; accepted: a revolute, continuous "
                "or prismatic joint"
            )
        if target.name not in in_tree:
            raise URDFError(f"{where}, which is outside the tree rooted at link {brief(root)}")


def _resolve_mimics(joints: dict[str, Joint], kept: list[Joint]) -> dict[str, Mimic]:
    """Resolved mimic maps of the ``kept`` joints (checked by :func:`_check_mimics`): each
    chain followed to a joint that mimics nothing, composing the affine maps.

    Linear in the number of joints: each chain is walked once and every joint on it is given
    its resolved map on the way back (memoised), so a 2000-joint chain is not walked 2000 times.
    """
    resolved: dict[str, Mimic] = {}
    for joint in kept:
        if joint.mimic is None or joint.name in resolved:
            continue
        path, on_path = [joint.name], {joint.name}
        head = joint.mimic.joint
        while head not in resolved and joints[head].mimic is not None:
            if head in on_path:
                loop = path[path.index(head) :] + [head]
                raise URDFError("mimic joints form a cycle: " + " -> ".join(map(brief, loop)))
            path.append(head)
            on_path.add(head)
            head = joints[head].mimic.joint  # type: ignore[union-attr]
        # q_head = q_head (identity), or the resolved map of an already resolved joint
        done = resolved.get(head, Mimic(head))
        for name in reversed(path):
            own = joints[name].mimic  # q_name = m * q_next + o, and q_next = M * q_end + O
            assert own is not None
            done = Mimic(
                done.joint,
                own.multiplier * done.multiplier,
                own.multiplier * done.offset + own.offset,
            )
            _check_composed_mimic(name, done)
            resolved[name] = done
    return resolved


def _note_mimic_limits(kept: tuple[Joint, ...], notes: list[str]) -> None:
    """Note each mimic joint whose own ``<limit>`` its driver's range can leave: a mimic
    joint's value is the driver's map (outside ``q``), so only the driver's limits bound it
    (as in urdfdom's and Pinocchio's models), and IK's answers may put it beyond its own."""
    by_name = {joint.name: joint for joint in kept}
    for joint in kept:
        if joint.mimic is None or joint.lower is None or joint.upper is None:
            continue
        driver, m, o = by_name[joint.mimic.joint], joint.mimic.multiplier, joint.mimic.offset
        low = -math.inf if driver.lower is None else driver.lower
        high = math.inf if driver.upper is None else driver.upper
        ends = (o, o) if m == 0 else sorted((m * low + o, m * high + o))
        slack = 1e-9 * max(1.0, abs(joint.lower), abs(joint.upper))
        if ends[0] < joint.lower - slack or ends[1] > joint.upper + slack:
            notes.append(
                f"joint {brief(joint.name)} mimics {brief(driver.name)}: its own limits "
                f"[{joint.lower:g}, {joint.upper:g}] are not enforced, the driver's limits "
                f"give it [{ends[0]:g}, {ends[1]:g}]"
            )


def _check_composed_mimic(name: str, mimic: Mimic) -> None:
    for what, value in (("multiplier", mimic.multiplier), ("offset", mimic.offset)):
        if not abs(value) <= MAX_MAGNITUDE:  # also catches inf and nan
            raise URDFError(
                f"joint {brief(name)} mimics {brief(mimic.joint)} through a chain whose "
                f"composed {what} {value:g} is beyond the supported ±{MAX_MAGNITUDE:g}"
            )

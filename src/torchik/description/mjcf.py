"""MJCF (MuJoCo) models -> :class:`torchik.description.URDFModel`, through the ``mujoco`` package.

MuJoCo compiles the file (includes, defaults, ``<compiler angle=...>``, ``ref`` values), and
this module reads the compiled body tree: every body is a link named after it (the world body is
the root link ``"world"``), every hinge or slide joint a torchik joint of the same name. So
``q`` is MuJoCo's ``qpos`` for those joints (``ref`` is folded into the origins), in MuJoCo's
order; :func:`qpos_index` picks them out of a ``qpos`` that also holds free joints.

How a body becomes links:

- no joint (or only a free joint, with ``free_joint="fixed"``): a fixed joint, named
  ``"<body>_fixed"``, from the parent body at the body's ``pos``/``quat``;
- one joint whose ``pos`` is zero: a joint from the parent body to the body itself;
- several joints, or a hinge with a ``pos`` offset: a chain through one zero-mass link per joint,
  ``"<body>/<joint>"``, placed at that joint's anchor, and a last fixed joint ``"<body>_fixed"``
  back to the body's frame where needed. MuJoCo applies a body's joints in order, each about its
  anchor, and so does the chain.

A joint equality (active at the start, linear, between two joints: what MuJoCo makes of a URDF
``<mimic>``) makes its first joint a mimic joint of the second, outside ``q``; other equality
constraints are left out (their joints stay coordinates of ``q``).

Every free joint is a floating base (``free_joint="floating"``, the default): ``q`` starts with
its 7 coordinates (``qpos``: position, then quaternion ``w, x, y, z``, in the world), in
MuJoCo's order, then the hinges and slides (:mod:`torchik.geometry.floating`). When the free
body is the world's only child, it becomes the root link and sites fixed to the world are left
out (the world is not a link of a floating robot); otherwise (an arm beside free objects, several
robots) the world stays the root and each free body moves with its own 7 coordinates.
``free_joint="fixed"`` keeps every free body at its pose in the file (MuJoCo's ``qpos0``).

Every number read from the compiled model (positions, orientations, axes, ``ref``, ranges,
joint-equality coefficients, ``limits=``) must be finite and within ``MAX_MAGNITUDE``
(``1e9``), as in a URDF; a file that MuJoCo would wait on forever (an ``<include>`` or asset
``file`` that is a FIFO or a device) is refused before MuJoCo opens it.

Sites become links fixed to their bodies (``sites=False`` leaves them out). Unnamed bodies,
joints and sites are called ``"body<id>"``, ``"joint<id>"`` and ``"site<id>"`` (MuJoCo ids); a
made-up name, or a site's, that a link or joint already holds gets a ``_1``, ``_2``, ... suffix.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from torchik.description.reading import MAX_MAGNITUDE, MAX_URDF_BYTES, URDFError, xml_root_tag
from torchik.description.urdf import (
    Joint,
    Mimic,
    Origin,
    URDFModel,
    URDFWarning,
    _note_mimic_limits,
    _warn_at_user,
)
from torchik.files import FileRefused, read_regular_file
from torchik.geometry.floating import BASE_COORDINATES
from torchik.geometry.rotations import quat_to_rotmat, rotmat_to_rpy

__all__ = [
    "MJCFError",
    "MJCFWarning",
    "parse_mjcf",
    "qpos_index",
    "mjcf_names",
    "is_mjcf",
    "FREE_JOINT_OPTIONS",
]

FREE_JOINT_OPTIONS = ("floating", "fixed", "error")
_ACCEPTED = "hinge, slide and free joints"
_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3  # mujoco.mjtJoint values
_EQ_JOINT = 2  # mujoco.mjtEq.mjEQ_JOINT


class MJCFError(URDFError):
    """An MJCF model that torchik cannot load; the message names the file and the element."""


class MJCFWarning(URDFWarning):
    """A warning of MuJoCo's while it compiles a model, naming the file (MuJoCo itself would
    append it to ``MUJOCO_LOG.TXT`` in the current folder)."""


def parse_mjcf(
    source: str | os.PathLike | Any,
    free_joint: str = "floating",
    limits: Mapping[str, tuple[float, float]] | None = None,
    sites: bool = True,
) -> URDFModel:
    """Read an MJCF model (a path, or the XML text) into the kinematic tree torchik builds on.

    Args:
        source: A path to an MJCF file (its ``<include>`` and asset paths resolved by MuJoCo),
            the XML text itself (a ``str`` starting with ``<``), or a compiled
            ``mujoco.MjModel`` (full precision: a saved XML rounds to 6 digits).
        free_joint: ``"floating"`` makes each free joint a floating base (its 7 ``qpos``,
            position and quaternion ``w, x, y, z`` in the world, named ``<joint>/x`` ...
            ``<joint>/qz`` in ``q``); ``"fixed"`` keeps every free body fixed at its pose in
            the file (MuJoCo's ``qpos0``); ``"error"`` refuses free joints.
        limits: ``{joint: (lower, upper)}`` overriding the file's ranges (in radians or metres,
            in ``qpos`` units); required for a slide joint that has no range.
        sites: Whether each ``<site>`` becomes a link (fixed to its body, named after the site,
            or ``"site<id>"``): end-effector frames such as Menagerie's ``attachment_site``.
            A floating robot leaves out the sites fixed to the world.

    Returns:
        The model: links are the bodies (and the helper links above) in MuJoCo's body order,
        then the sites.

    Warns:
        MJCFWarning: MuJoCo's warnings, and a follower joint of a joint equality whose own
            range its leader's can leave (torchik keeps the leader's range only; MuJoCo
            enforces both).

    Raises:
        ImportError: If the ``mujoco`` package is missing (``pip install torchik[mjcf]``).
        MJCFError: If the file is a URDF, or refers to a file that is not a regular file,
            MuJoCo refuses it, or it has a ball joint, a free joint with
            ``free_joint="error"``, a slide joint with no range, a number that is not finite
            or beyond ``1e9``, or ``limits`` names an unknown joint or a free joint; the message
            names the file and the element.
    """
    if free_joint not in FREE_JOINT_OPTIONS:
        raise ValueError(f"free_joint must be one of {FREE_JOINT_OPTIONS}, not {free_joint!r}")
    model, label, said = _compile(source)
    try:
        parsed = _build(model, free_joint, dict(limits or {}), sites)
    except MJCFError as err:
        raise MJCFError(f"{label}: {err}") from None
    for message in said:  # MuJoCo's warnings, once the model loads (a refusal says enough)
        _warn_at_user(f"{label}: MuJoCo: {message}", MJCFWarning)
    notes: list[str] = []
    _note_mimic_limits(parsed.joints, notes)  # MuJoCo holds both; torchik the leader's only
    if notes:
        _warn_at_user(f"{label}: {'; '.join(notes)}", MJCFWarning)
    return parsed


def qpos_index(model: Any, joint_names: tuple[str, ...] | list[str]) -> list[int]:
    """Where each joint of ``joint_names`` sits in MuJoCo's ``qpos``.

    Args:
        model: the ``mujoco.MjModel`` the robot was loaded from.
        joint_names: torchik joint names, e.g. ``robot.joint_names``.

    Returns:
        Indices into ``qpos``: ``q = qpos[..., index]`` (a ``list``, for numpy or torch).
    """
    _, joints = mjcf_names(model)
    where = {name: int(model.jnt_qposadr[j]) for j, name in enumerate(joints)}
    for j, name in enumerate(joints):  # a free joint's 7 coordinates, as torchik names them
        if int(model.jnt_type[j]) == _FREE:
            for k, coordinate in enumerate(BASE_COORDINATES):
                where[f"{name}/{coordinate}"] = int(model.jnt_qposadr[j]) + k
    missing = [name for name in joint_names if name not in where]
    if missing:
        raise ValueError(f"joints {missing} are not joints of this MuJoCo model")
    return [where[name] for name in joint_names]


def is_mjcf(source: str | os.PathLike) -> bool:
    """Whether ``source`` (XML text or a file) is MJCF: its root element is ``<mujoco>``.

    Reads the root element only (:func:`torchik.description.reading.xml_root_tag`: a regular
    file, never a FIFO) and needs no ``mujoco``: what tells an MJCF file from a URDF before
    choosing the reader.

    Example:
        >>> is_mjcf("<mujoco model='arm'><worldbody/></mujoco>"), is_mjcf("<robot name='r'/>")
        (True, False)
    """
    try:
        return xml_root_tag(source) == "mujoco"
    except URDFError:  # unreadable, not XML, a FIFO: not an MJCF file to load
        return False


# --------------------------------------------------------------------------- compiling


def _import_mujoco() -> Any:
    try:
        import mujoco
    except ImportError as err:
        raise ImportError(
            "reading MJCF needs the mujoco package: pip install 'torchik[mjcf]'"
        ) from err
    return mujoco


def _compile(source: str | os.PathLike | Any) -> tuple[Any, str, list[str]]:
    """``(mujoco.MjModel, label for messages, MuJoCo's warnings while compiling)``."""
    mujoco = _import_mujoco()
    if isinstance(source, mujoco.MjModel):
        return source, "the MjModel", []
    text = isinstance(source, str) and source.lstrip().startswith("<")
    label = "the MJCF text" if text else ascii(str(source))[1:-1]
    if text:
        _check_text(str(source), Path.cwd(), label)
    else:
        _check_text(_read(Path(source), label), Path(source).parent, label)
    said: list[str] = []
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(said.append)  # not a MUJOCO_LOG.TXT in the user's folder
    try:
        if text:
            model = mujoco.MjModel.from_xml_string(str(source))
        else:
            model = mujoco.MjModel.from_xml_path(str(source))
    except ValueError as err:
        message = " ".join(str(err).split())  # MuJoCo's message may span lines
        model = _without_asset_files(mujoco, source, text) if "opening file" in message else None
        if model is None:
            raise MJCFError(f"{label}: MuJoCo cannot compile it: {message}") from None
        said.append(
            f"{message.removeprefix('Error: ')}: its meshes and height fields became small "
            "spheres and its textures were left out (kinematics needs none of them)"
        )
    finally:
        mujoco.set_mju_user_warning(previous)
    return model, label, list(dict.fromkeys(" ".join(m.split()) for m in said))


def _without_asset_files(mujoco: Any, source: Any, text: bool) -> Any:
    """``source`` compiled without its mesh, height-field, texture and skin files (absent ones
    stop MuJoCo; body and site frames do not depend on them), or None if it still fails."""
    try:
        spec = (mujoco.MjSpec.from_string(source) if text  # <include> files are read here
                else mujoco.MjSpec.from_file(str(source)))  # fmt: skip
        kinds = mujoco.mjtGeom
        for geom in spec.geoms:
            if geom.type in (kinds.mjGEOM_MESH, kinds.mjGEOM_HFIELD, kinds.mjGEOM_SDF):
                geom.type, geom.size = kinds.mjGEOM_SPHERE, [0.01, 0, 0]  # a body keeps a mass
                geom.meshname = geom.hfieldname = ""
        for material in spec.materials:
            material.textures = [""] * len(material.textures)
        for asset in [*spec.meshes, *spec.hfields, *spec.textures, *spec.skins]:
            spec.delete(asset)
        return spec.compile()
    except (ValueError, AttributeError):  # AttributeError: a MuJoCo before MjSpec (3.2)
        return None


def _read(path: Path, label: str) -> str:
    """The text of a regular file (never a FIFO: MuJoCo would wait for a writer forever)."""
    try:
        return read_regular_file(path, MAX_URDF_BYTES).decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise MJCFError(f"MJCF file not found: {label}") from None
    except (FileRefused, OSError, ValueError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else err
        raise MJCFError(f"cannot read MJCF file {label}: {reason}") from None


_FILE = re.compile(r"""<\s*([\w:.-]+)\s[^>]*?\bfile\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_DIR = re.compile(r"""\b(meshdir|texturedir|assetdir)\s*=\s*(?:"([^"]*)"|'([^']*)')""")


def _check_text(text: str, folder: Path, label: str) -> None:
    """Refuse a URDF, and a referenced file MuJoCo would block on, before MuJoCo opens it:
    every ``file=`` (``<include>``, meshes, textures), resolved against the including file's
    folder, the main file's and the compiler's ``meshdir``/``texturedir``/``assetdir``, must be
    a regular file where it exists; included files are followed."""
    if _root_tag(text) == "robot":
        raise MJCFError(
            f"{label} is a URDF (its root element is <robot>), not MJCF: load it with "
            "Robot.from_urdf"
        )
    pending, seen = [(text, folder)], set()
    while pending:
        text, here = pending.pop()
        prefixes = {""} | {a or b for _, a, b in _DIR.findall(text)}
        for tag, double, single in _FILE.findall(text):
            name = double or single
            for path in {d / p / name for d in (here, folder) for p in prefixes}:
                if not _exists(path):
                    continue
                if not stat.S_ISREG(path.stat().st_mode):
                    raise MJCFError(
                        f"{label}: <{tag} file={name!r}> is not a regular file (a FIFO or a "
                        "device is never read)"
                    )
                if tag == "include" and path.resolve() not in seen:
                    seen.add(path.resolve())
                    pending.append((_read(path, ascii(str(path))[1:-1]), path.parent))


def _root_tag(text: str) -> str | None:
    try:
        return xml_root_tag(text)
    except URDFError:  # not well-formed: MuJoCo says why
        return None


def _exists(path: Path) -> bool:
    try:
        path.stat()
    except (OSError, ValueError):  # missing (MuJoCo says so), or a NUL in the name
        return False
    return True


# --------------------------------------------------------------------------- body tree -> model


def mjcf_names(model: Any) -> tuple[list[str], list[str]]:
    """The names torchik gives MuJoCo's bodies and joints: the link and joint names of
    :func:`parse_mjcf`'s model, by MuJoCo id.

    Args:
        model: a compiled ``mujoco.MjModel``.

    Returns:
        ``(bodies, joints)``: body 0 is ``"world"`` when unnamed; other unnamed bodies and
        joints are ``"body<id>"`` and ``"joint<id>"`` (suffixed ``_1``, ... when taken).
    """
    bodies = [model.body(b).name for b in range(model.nbody)]
    joints = [model.joint(j).name for j in range(model.njnt)]
    bodies[0] = bodies[0] or "world"
    for names, stem in ((bodies, "body"), (joints, "joint")):
        taken = set(names)
        for i, name in enumerate(names):
            if not name:
                names[i] = _fresh(f"{stem}{i}", taken)
    return bodies, joints


def _fresh(name: str, taken: set[str]) -> str:
    """``name``, or ``name_1``, ``name_2``, ... : the first not in ``taken`` (then added)."""
    candidate, k = name, 0
    while candidate in taken:
        k += 1
        candidate = f"{name}_{k}"
    taken.add(candidate)
    return candidate


def _build(
    model: Any, free_joint: str, limits: dict[str, tuple[float, float]], sites: bool
) -> URDFModel:
    bodies, joint_names = mjcf_names(model)
    unknown = sorted(set(limits) - set(joint_names))
    if unknown:
        raise MJCFError(f"limits= names {unknown}, which are not joints of the model")
    free = sorted(n for j, n in enumerate(joint_names) if int(model.jnt_type[j]) == _FREE)
    if free_named := sorted(set(limits) & set(free)):
        raise MJCFError(
            f"limits= names the free joints {free_named}: a free body's pose takes no range "
            "(with_limits bounds its position coordinates, <joint>/x ...)"
        )
    floating = free_joint == "floating" and _floating_base(model)
    builder = _Builder(model, bodies, joint_names, free_joint, limits)
    builder.mimics = _joint_mimics(model, joint_names)
    for body in range(1, model.nbody):  # ids are depth-first: parents come first
        builder.add_body(body)
    for site in range(model.nsite if sites else 0):
        if not (floating and int(model.site_bodyid[site]) == 0):  # the world is no link then
            builder.add_site(site)
    return URDFModel(model.names.split(b"\0")[0].decode() or "mjcf", bodies[0], *builder.done())


def _floating_base(model: Any) -> bool:
    """Whether the model's only free joint is in the world's only child body: a floating base,
    which becomes the root link (the world, and the sites fixed to it, are then no links)."""
    top = [b for b in range(1, model.nbody) if int(model.body_parentid[b]) == 0]
    free = [j for j in range(model.njnt) if int(model.jnt_type[j]) == _FREE]
    return len(free) == 1 and top == [int(model.jnt_bodyid[free[0]])]


def _checked(values: Any, what: str) -> Tensor:
    """``values`` as float64, refused unless finite and within ``MAX_MAGNITUDE``: the URDF
    reader's rule, so that poses and limits stay finite even in float32."""
    out = torch.as_tensor(values, dtype=torch.float64)
    shown = " ".join(f"{v:g}" for v in out.reshape(-1).tolist())
    if not bool(torch.isfinite(out).all()):
        raise MJCFError(f"{what} is not finite: {shown}")
    if bool((out.abs() > MAX_MAGNITUDE).any()):
        raise MJCFError(f"{what} is {shown}, beyond the supported ±{MAX_MAGNITUDE:g}")
    return out


def _joint_mimics(model: Any, joint_names: list[str]) -> dict[int, Mimic]:
    """Linear joint equalities as mimics, by follower joint id: MuJoCo's
    ``y - y0 = a0 + a1 (x - x0)`` (``y0``, ``x0`` the joints' ``qpos0``) is
    ``y = a1 x + (y0 + a0 - a1 x0)``."""
    mimics: dict[int, Mimic] = {}
    for e in range(model.neq):
        follower, leader = int(model.eq_obj1id[e]), int(model.eq_obj2id[e])
        a0, a1, *higher = (float(c) for c in model.eq_data[e, :5])
        if model.eq_type[e] != _EQ_JOINT or not model.eq_active0[e] or leader < 0 or any(higher):
            continue
        if follower in mimics:
            raise MJCFError(f"joint {joint_names[follower]!r} is in two joint equalities")
        y0, x0 = (float(model.qpos0[model.jnt_qposadr[j]]) for j in (follower, leader))
        what = f"the joint equality of {joint_names[follower]!r} and {joint_names[leader]!r}"
        a0, a1 = _checked([a0, a1], f"{what} (polycoef)").tolist()
        offset = float(_checked(y0 + a0 - a1 * x0, f"{what} (its offset)"))
        mimics[follower] = Mimic(joint_names[leader], a1, offset)
    for follower, mimic in mimics.items():
        if joint_names.index(mimic.joint) in mimics:
            raise MJCFError(
                f"joint {joint_names[follower]!r} follows {mimic.joint!r}, which follows another "
                "joint; torchik accepts joint equalities whose second joint is free of any"
            )
    return mimics


def _pair(values: Any, what: str) -> tuple[float, float]:
    """``(lower, upper)`` from a user's pair of numbers, checked as :func:`_checked` does."""
    try:
        lower, upper = (float(v) for v in values)
    except (TypeError, ValueError):
        raise MJCFError(f"{what} must be a pair of numbers (lower, upper)") from None
    _checked([lower, upper], what)
    return lower, upper


def _translation(xyz: Any) -> Tensor:
    out = torch.eye(4, dtype=torch.float64)
    out[:3, 3] = torch.as_tensor(xyz, dtype=torch.float64)
    return out


def _pose(pos: Any, quat: Any) -> Tensor:
    """The homogeneous transform of a MuJoCo ``pos`` and ``quat`` (w, x, y, z)."""
    out = _translation(pos)
    out[:3, :3] = quat_to_rotmat(torch.as_tensor(quat, dtype=torch.float64))
    return out


def _motion(kind: int, axis: Tensor, value: float) -> Tensor:
    """The homogeneous transform of a hinge (rotation) or slide joint moved by ``value``."""
    if kind == _SLIDE:
        return _translation(axis * value)
    half = torch.as_tensor(value / 2, dtype=torch.float64)
    quat = torch.cat((half.cos()[None], half.sin() * axis))
    out = torch.eye(4, dtype=torch.float64)
    out[:3, :3] = quat_to_rotmat(quat)
    return out


def _vec3(values: Tensor) -> tuple[float, float, float]:
    x, y, z = values.tolist()
    return (x, y, z)


def _origin(transform: Tensor) -> Origin:
    """Translation and roll-pitch-yaw; :func:`rotmat_to_rpy` reproduces the matrix to rounding
    error even next to gimbal lock (FK agrees with MuJoCo to 1e-15, not 1e-8)."""
    return Origin(_vec3(transform[:3, 3]), _vec3(rotmat_to_rpy(transform[:3, :3])))


class _Builder:
    """Collects links and joints body by body (a small accumulator, not a public object)."""

    def __init__(self, model, bodies, joint_names, free_joint, limits):
        self.model, self.bodies, self.joint_names = model, bodies, joint_names
        self.free_joint, self.limits = free_joint, limits
        self.links: list[str] = [bodies[0]]
        self.joints: list[Joint] = []
        self.taken_links, self.taken_joints = set(bodies), set(joint_names)
        self.mimics: dict[int, Mimic] = {}

    def done(self) -> tuple[tuple[str, ...], tuple[Joint, ...]]:
        return tuple(self.links), tuple(self.joints)

    def add_body(self, body: int) -> None:
        m, name = self.model, self.bodies[body]
        pos = _checked(m.body_pos[body], f"body {name!r} pos")
        quat = _checked(m.body_quat[body], f"body {name!r} orientation (quat w x y z)")
        pending = _pose(pos, quat)  # parent frame -> next joint frame
        parent = self.bodies[int(m.body_parentid[body])]
        first = int(m.body_jntadr[body])
        moving = [j for j in range(first, first + int(m.body_jntnum[body])) if self._moves(j)]
        for k, j in enumerate(moving):
            kind = int(m.jnt_type[j])
            if kind == _FREE:  # qpos is the body's pose in the world: a floating base
                self._add_floating(j, parent, name)
                parent, pending = name, torch.eye(4, dtype=torch.float64)
                continue
            what = f"joint {self.joint_names[j]!r} in body {name!r}"
            axis = _checked(m.jnt_axis[j], f"{what}: axis")
            anchor = _checked(m.jnt_pos[j], f"{what}: pos")
            if kind == _SLIDE:
                anchor = torch.zeros(3, dtype=torch.float64)  # a translation has no centre
            ref = float(
                _checked(m.qpos0[m.jnt_qposadr[j]], f"{what}: ref")
            )  # moves by qpos - qpos0
            origin = pending @ _translation(anchor) @ _motion(kind, axis, -ref)
            last = k == len(moving) - 1 and not anchor.any()
            child = name if last else _fresh(f"{name}/{self.joint_names[j]}", self.taken_links)
            self._add_joint(j, kind, parent, child, origin, axis)
            parent, pending = child, _translation(-anchor)
        if parent != name:
            self._add_fixed(parent, name, pending)

    def add_site(self, site: int) -> None:
        m = self.model
        name = _fresh(m.site(site).name or f"site{site}", self.taken_links)
        parent = self.bodies[int(m.site_bodyid[site])]
        pos = _checked(m.site_pos[site], f"site {name!r} pos")
        quat = _checked(m.site_quat[site], f"site {name!r} orientation (quat w x y z)")
        self._add_fixed(parent, name, _pose(pos, quat))

    def _add_fixed(self, parent: str, child: str, origin: Tensor) -> None:
        fixed = _fresh(f"{child}_fixed", self.taken_joints)
        self.links.append(child)
        self.joints.append(Joint(fixed, "fixed", parent, child, _origin(origin)))

    def _moves(self, j: int) -> bool:
        """Whether joint ``j`` is a hinge or slide; free joints are dropped or refused."""
        kind = int(self.model.jnt_type[j])
        where = f"joint {self.joint_names[j]!r} in body {self.bodies[self.model.jnt_bodyid[j]]!r}"
        if kind == _BALL:
            raise MJCFError(f"{where} is a ball joint; torchik accepts {_ACCEPTED}")
        if kind == _FREE and self.free_joint == "error":
            raise MJCFError(
                f"{where} is a free joint (a floating base), refused by free_joint='error'; "
                "accepted: free_joint='floating' (a floating base) or 'fixed'"
            )
        return kind in (_HINGE, _SLIDE) or (kind == _FREE and self.free_joint == "floating")

    def _add_floating(self, j: int, parent: str, child: str) -> None:
        self.links.append(child)  # MuJoCo allows free joints in top-level bodies only
        name, at = self.joint_names[j], int(self.model.jnt_qposadr[j])
        rest = _checked(self.model.qpos0[at : at + 7], f"free joint {name!r}: its pose")
        self.joints.append(Joint(name, "floating", parent, child, rest=tuple(rest.tolist())))

    def _add_joint(self, j, kind, parent, child, origin, axis) -> None:
        name = self.joint_names[j]
        lower, upper = self._limits(j, kind)
        if kind == _SLIDE:
            urdf_type = "prismatic"
        else:
            urdf_type = "continuous" if lower is None else "revolute"
        mimic = self.mimics.get(j)
        self.links.append(child)
        self.joints.append(
            Joint(name, urdf_type, parent, child, _origin(origin), _vec3(axis), lower, upper, mimic)
        )

    def _limits(self, j: int, kind: int) -> tuple[float | None, float | None]:
        name = self.joint_names[j]
        if name in self.limits:
            lower, upper = _pair(self.limits[name], f"limits= for joint {name!r}")
            if not lower <= upper:
                raise MJCFError(f"limits= gives joint {name!r} lower {lower:g} > upper {upper:g}")
            return lower, upper
        if self.model.jnt_limited[j]:
            where = f"joint {name!r} in body {self.bodies[self.model.jnt_bodyid[j]]!r}: range"
            lower, upper = _checked(self.model.jnt_range[j], where).tolist()
            return lower, upper
        if kind == _SLIDE and j not in self.mimics:  # a mimic's own limits are never used
            raise MJCFError(
                f"slide joint {name!r} in body {self.bodies[self.model.jnt_bodyid[j]]!r} has "
                f"no range; give it range='lower upper' in the file or pass "
                f"limits={{{name!r}: (lower, upper)}}"
            )
        return None, None

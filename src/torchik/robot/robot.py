"""The robot model: a URDF kinematic tree flattened into buffers of an ``nn.Module``."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from torchik.checks import check_bool, short_repr
from torchik.description.mjcf import is_mjcf, parse_mjcf
from torchik.description.reading import MAX_URDF_BYTES, looks_like_xml
from torchik.description.urdf import URDFModel, parse_urdf
from torchik.geometry import floating as flt
from torchik.geometry.rotations import rotmat_to_quat
from torchik.kinematics import fused, native
from torchik.kinematics import reference as kin
from torchik.robot import configuration as robot_config
from torchik.robot.tree import (
    axis_alignments,
    base_owners,
    body_model,
    expand_planar,
    flatten_tree,
    origin_matrices,
    path_model,
    split_floating,
)

__all__ = ["Robot", "load_robot"]

LinkSpec = str | Sequence[str] | None


SUPPORTED_DTYPES = (torch.float32, torch.float64)


_REPLACEABLE = ("origin_xyz", "origin_rpy", "_w_joint", "_w_link")
"""The buffers that the flattened tree is made of, which ``torch.func.functional_call`` may
replace (see :meth:`Robot._replaced`)."""


BACKENDS = ("auto", "reference", "fused", "native")
"""The values of :attr:`Robot.backend`."""


def _check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")
    return backend


def _check_dtype(dtype: torch.dtype) -> None:
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"a Robot supports the dtypes {SUPPORTED_DTYPES}, not {dtype} (whose range or "
            "precision is too small for kinematics)"
        )


class Robot(nn.Module):
    """A robot's kinematic tree with batched, differentiable forward kinematics.

    Build one with :meth:`from_urdf` or :func:`load_robot`. Everything numeric lives in buffers
    (parameters when link origins are made learnable), so ``robot.to(device, dtype)`` moves it.
    ``q`` must have the robot's dtype and device; its last dimension follows ``joint_names``.

    A floating base (a ``floating`` joint from the root link, or ``floating_base=True``) puts
    its pose first in ``q`` (:mod:`torchik.geometry.floating`); poses are then in the world frame
    (the floating joint's parent), and Jacobians have ``nv = nq - 1`` columns. Several floating
    joints from the root (the free bodies of a MuJoCo scene) put ``K`` poses first: ``nv = nq -
    K``, each link moving with its own body (:attr:`floating_bases`). A planar joint ``p`` is the
    coordinates ``p/x``, ``p/y``, ``p/theta`` (links ``p/x``, ``p/y`` between).

    Attributes:
        model: the parsed description (:class:`torchik.description.URDFModel`, immutable).
        name: the URDF robot name.
        root: the root link (the base link of a floating robot).
        joint_names: the names of ``q``'s coordinates: actuated joints (mimic and fixed joints
            excluded), after a floating base's ``<joint>/x`` ... ``<joint>/qz``.
        joint_types: their types (revolute, continuous, prismatic, floating).
        link_names: every link, in topological order (root first).
        lower, upper: ``(nq,)`` limits, see :mod:`torchik.robot.configuration`; continuous
            joints get ``(-π, π]`` and are marked in the ``continuous`` mask; ``prismatic`` marks
            coordinates in metres.

    Example:
        >>> robot = load_robot("panda")
        >>> q = robot.random_configuration(8)
        >>> robot.forward_kinematics(q, "panda_hand").shape
        torch.Size([8, 4, 4])
    """

    lower: Tensor
    upper: Tensor
    continuous: Tensor
    prismatic: Tensor
    origin_xyz: Tensor
    origin_rpy: Tensor
    _source: Tensor
    _multiplier: Tensor
    _offset: Tensor
    _align: Tensor
    _w_joint: Tensor
    _w_link: Tensor
    _base_origin: Tensor
    _tree_cache: kin.KinematicTree | None

    def __init__(
        self,
        model: URDFModel,
        dtype: torch.dtype | None = None,
        floating_base: bool = False,
        backend: str = "auto",
    ):
        super().__init__()
        self._master: dict[str, Tensor] = {}  # float64 CPU truth of every floating buffer
        self._tree_cache: kin.KinematicTree | None = None  # derived; see _derive
        self._learnable = False  # the origins are parameters (learnable_origins)
        self._backend = _check_backend(backend)
        self.model = model
        fixed, self._bases = split_floating(expand_planar(model), floating_base)
        self.name, self.root, self.link_names = fixed.name, fixed.root, tuple(fixed.links)
        self._joints = tuple(fixed.joints)
        self._owner = base_owners(fixed, self._bases)  # per link: its floating base, or -1
        self._owner_index: dict[tuple, Tensor] = {}  # links -> owner + 1 on the device
        self._link_index = {name: i for i, name in enumerate(self.link_names)}
        self._init_joints()
        self._init_tree()
        xyz = torch.tensor([j.origin.xyz for j in self._joints], dtype=torch.float64)
        rpy = torch.tensor([j.origin.rpy for j in self._joints], dtype=torch.float64)
        self.register_buffer("origin_xyz", xyz.reshape(-1, 3))
        self.register_buffer("origin_rpy", rpy.reshape(-1, 3))
        self._refresh_constants()
        self._master = {
            name: buf.detach().to("cpu", torch.float64, copy=True)
            for name, buf in self.named_buffers()
            if buf.is_floating_point()
        }
        dtype = dtype or torch.get_default_dtype()
        _check_dtype(dtype)
        self.to(dtype)

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_urdf(
        cls,
        source: str | os.PathLike,
        root: str | None = None,
        dtype: torch.dtype | None = None,
        link: str | None = None,
        max_bytes: int | None = MAX_URDF_BYTES,
        floating_base: bool = False,
        backend: str = "auto",
    ) -> Robot:
        """Read a URDF file or text (see :func:`torchik.description.parse_urdf`); with ``link``,
        only the chain from the root to ``link`` (see :meth:`chain`), e.g. one arm of a
        humanoid; ``max_bytes=None`` lifts the size limit for a genuinely huge file;
        ``floating_base=True`` adds a floating joint ``root_joint`` above the root link (a
        chain to ``link`` always has a fixed base: its first link); ``backend``: see
        :attr:`backend`."""
        check_bool("floating_base", floating_base)
        model = parse_urdf(source, root=root, max_bytes=max_bytes)
        if floating_base and link is None:
            text = isinstance(source, str) and looks_like_xml(source)
            where = "the URDF text" if text else ascii(str(source))[1:-1]
            split_floating(model, True, where)  # a clear error naming the file
        floating = floating_base and link is None
        robot = cls(model, dtype=dtype, floating_base=floating, backend=backend)
        return robot if link is None else robot.chain(robot.root, link)

    @classmethod
    def from_mjcf(
        cls,
        source: str | os.PathLike | Any,
        dtype: torch.dtype | None = None,
        free_joint: str = "floating",
        limits: Mapping[str, tuple[float, float]] | None = None,
        sites: bool = True,
        backend: str = "auto",
    ) -> Robot:
        """A robot from a MuJoCo model, through the optional ``mujoco`` package (imported only
        when called).

        Args:
            source: A path to an MJCF file, the XML text, or a compiled ``mujoco.MjModel``.
            dtype: The robot's floating dtype (default: torch's default dtype).
            free_joint, limits, sites: See :func:`torchik.description.mjcf.parse_mjcf`.
            backend: See :attr:`backend`.

        Returns:
            The robot; its ``q`` is MuJoCo's ``qpos`` of its hinge and slide joints
            (:func:`torchik.description.mjcf.qpos_index`).
        """
        return cls(parse_mjcf(source, free_joint, limits, sites), dtype=dtype, backend=backend)

    def _init_joints(self) -> None:
        moving = [j for j in self._joints if j.type != "fixed"]
        actuated = [j for j in moving if j.mimic is None]
        limits = robot_config.limits_of(actuated, self._bases)
        self.joint_names, self.joint_types = tuple(limits["names"]), tuple(limits["types"])
        index = {j.name: i for i, j in enumerate(actuated)}
        # the parser resolves mimic chains: every mimic names an actuated joint
        resolved = [
            (j.name, 1.0, 0.0)
            if j.mimic is None
            else (j.mimic.joint, j.mimic.multiplier, j.mimic.offset)
            for j in moving
        ]
        self._moving, self._n_joints = tuple(j.name for j in moving), len(actuated)
        f64 = torch.float64
        for name in ("lower", "upper"):
            self.register_buffer(name, torch.tensor(limits[name], dtype=f64))
        for name in ("continuous", "prismatic"):
            self.register_buffer(name, torch.tensor(limits[name], dtype=torch.bool))
        self.register_buffer(
            "_source", torch.tensor([index[r[0]] for r in resolved], dtype=torch.long), False
        )
        self.register_buffer(
            "_multiplier", torch.tensor([r[1] for r in resolved], dtype=f64), False
        )
        self.register_buffer("_offset", torch.tensor([r[2] for r in resolved], dtype=f64), False)
        self._identity_map = len(moving) == len(actuated) and all(
            r[0] == j.name for r, j in zip(resolved, moving, strict=True)
        )
        self._kind = tuple(kin.PRISMATIC if j.type == "prismatic" else kin.REVOLUTE for j in moving)
        xyz = torch.tensor([b.origin.xyz for b in self._bases], dtype=f64).reshape(-1, 3)
        rpy = torch.tensor([b.origin.rpy for b in self._bases], dtype=f64).reshape(-1, 3)
        self.register_buffer("_base_origin", origin_matrices(xyz, rpy), False)  # (K, 4, 4)

    def _init_tree(self) -> None:
        """Which moving joint each joint and link hangs from, and the plan of the constants
        (see :func:`torchik.robot.tree.flatten_tree`); linear in the tree."""
        plan = flatten_tree(self.root, self._joints, self.link_names)
        self._parent, self._link_joint = plan["parent"], plan["link_joint"]
        self._levels, self._link_slot = plan["levels"], plan["link_slot"]
        self._moving_at, self._moving_parent_slot = plan["moving_at"], plan["moving_parent_slot"]
        align = axis_alignments([j.axis for j in self._joints if j.type != "fixed"])
        self.register_buffer("_align", align, False)

    def _constants(
        self, xyz: Tensor | None = None, rpy: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """``w_joint (J, 4, 4)`` and ``w_link (L, 4, 4)`` from joint origins (default: the
        current ones), in their dtype and on their device; differentiable in the origins."""
        xyz = self.origin_xyz if xyz is None else xyz
        origins = origin_matrices(xyz, self.origin_rpy if rpy is None else rpy)
        align = self._master.get("_align", self._align).to(origins.device, origins.dtype)
        device = origins.device
        eye = torch.eye(4, dtype=origins.dtype, device=device)
        frames = [torch.cat((eye[None], align.transpose(-1, -2)))]  # level 0, see _init_levels
        for joints, parents in self._levels:
            joints_t = torch.tensor(joints, dtype=torch.long, device=device)
            parents_t = torch.tensor(parents, dtype=torch.long, device=device)
            frames.append(frames[-1][parents_t] @ origins[joints_t])
        static = torch.cat(frames)
        w_link = static[list(self._link_slot)].transpose(-1, -2)
        if not self._moving:
            return eye.new_zeros(0, 4, 4), w_link
        at = torch.tensor(self._moving_at, dtype=torch.long, device=device)
        base = static[list(self._moving_parent_slot)] @ origins[at]
        return (base @ align).transpose(-1, -2), w_link

    def _refresh_constants(self) -> None:
        with torch.no_grad():
            w_joint, w_link = self._constants()
        self.register_buffer("_w_joint", w_joint.contiguous(), False)
        self.register_buffer("_w_link", w_link.contiguous(), False)

    # ---------------------------------------------------------------- properties
    def links_to(self, link: str) -> tuple[str, ...]:
        """The link names from the root to ``link``, both included.

        Raises:
            ValueError: an unknown link (the message lists the links).

        Example:
            >>> load_robot("panda").links_to("panda_link2")
            ('panda_link0', 'panda_link1', 'panda_link2')
        """
        parent = {j.child: j.parent for j in self._joints}
        names = [self.link_names[self.link_index(link)]]
        while names[-1] != self.root:
            names.append(parent[names[-1]])
        return tuple(reversed(names))

    def chain(self, base: str, link: str) -> Robot:
        """The robot of the joints between ``base`` and ``link`` alone.

        The sub-robot is rooted at ``base``; its ``q`` holds the actuated joints on the path,
        in this robot's order, and its FK of any link on the path equals
        ``inv(T_root_base) @ T_root_link`` of this robot. It is built from :attr:`model` (the
        description: learned origins are not carried over), with this robot's dtype, device,
        backend and limits (also where :meth:`with_limits` changed them).

        Raises:
            ValueError: an unknown link, ``base`` not on the path from the root to ``link``, or
                a mimic joint on the path following a joint off it.

        Example:
            >>> arm = load_robot("panda").chain("panda_link2", "panda_hand")
            >>> arm.root, arm.dof
            ('panda_link2', 5)
        """
        for name in (base, link):
            self.link_index(name)  # a clear error for an unknown name
        return self._part(path_model(self.model, base, link))[0]

    def _part(self, model: URDFModel) -> tuple[Robot, list[int]]:
        """A robot of ``model``, a part of this robot's description, with this robot's dtype,
        device, backend and limits (also where :meth:`with_limits` or an edit changed them),
        and the coordinates of this robot's ``q`` its ``q`` holds."""
        part = Robot(model, dtype=self.dtype, backend=self.backend).to(self.device)
        index = [self.joint_names.index(n) for n in part.joint_names]
        with torch.no_grad():
            part.continuous.copy_(self.continuous[index])
        part._adopt({"lower": self.lower[index], "upper": self.upper[index]})
        return part, index

    def scene_body(self, base: int | None) -> tuple[Robot, Tensor]:
        """One body of a scene (free bodies beside a fixed tree: a MuJoCo scene) as a robot
        of its own: free body ``base`` and what hangs from it, a floating robot, or with
        ``None`` what hangs from the world through no free joint, a fixed robot.

        Its coordinates are those of this robot's ``q`` named the same, with this robot's
        limits (also where :meth:`with_limits` changed them), dtype, device and backend; FK of
        its links equals this robot's. Learned origins are not carried over. Made once per
        body and state of the limits, kept with the tree (what IK on one body of a scene
        runs on).

        Returns:
            The robot and ``(nq',)`` long, the coordinates of this robot's ``q`` its ``q``
            holds.

        Raises:
            ValueError: a robot without free bodies beside a fixed tree, ``base`` not the
                index of a floating base, or a joint of the body that mimics one off it.
        """
        if not self.scene:
            raise ValueError(f"{self.name!r} is not a scene of free bodies beside a fixed tree")
        name = None
        if base is not None:
            self.base_link(base)  # a clear error for an index that is not a base's
            name = self._bases[base].name

        def build() -> tuple[Robot, Tensor]:
            part, index = self._part(body_model(self.model, name))
            return part, torch.tensor(index, dtype=torch.long, device=self.device)

        return self.tree.cached(("scene_body", base, self._limits_stamp()), build)

    def _limits_stamp(self) -> tuple:
        """What tells a change of :attr:`lower`, :attr:`upper` or :attr:`continuous` apart,
        in place too (``robot.lower[0] = 0.5``): their storage and version counters. What is
        made of the limits and kept with the tree (the uniform draw's box, the neutral
        configuration, a scene's bodies) is kept under it."""
        return tuple((b.data_ptr(), b._version) for b in (self.lower, self.upper, self.continuous))

    @property
    def dof(self) -> int:
        """The size of ``q``'s last dimension: the number of actuated joints of a fixed-base
        robot, ``7 K +`` that of one with ``K`` floating bases (``nq``)."""
        return len(self.joint_names)

    @property
    def nq(self) -> int:
        """The size of a configuration ``q`` (``dof``)."""
        return self.dof

    @property
    def nv(self) -> int:
        """The size of a velocity or step ``v``, and the width of Jacobians: ``nq - K`` with
        ``K`` floating bases (a 6-D twist for each one's 7 coordinates)."""
        return self.dof - len(self._bases)

    @property
    def n_joints(self) -> int:
        """The joint coordinates of ``q``, after the floating bases' ``7 K``: ``dof - 7 K``
        (``dof`` on a fixed base; 0 for a free body alone). ``q[..., -n_joints:]`` are the
        joints (with ``n_joints`` > 0)."""
        return self._n_joints

    @property
    def floating(self) -> bool:
        """Whether base poses are part of ``q`` (see :mod:`torchik.geometry.floating`)."""
        return bool(self._bases)

    @property
    def scene(self) -> bool:
        """Whether this robot is a scene: free bodies (floating joints from the root) beside a
        fixed tree, as a MuJoCo scene loads; :meth:`scene_body` takes one body of it. A
        floating robot (its base carries everything) is not one."""
        return bool(self._bases) and self.base_of(self.root) is None

    @property
    def floating_bases(self) -> int:
        """``K``, the floating bases whose poses start ``q`` (7 coordinates each): 1 for a
        floating base, several for the free bodies of a MuJoCo scene, 0 for a fixed base."""
        return len(self._bases)

    def base_link(self, k: int) -> str:
        """The link that floating base ``k`` carries (its free body): coordinates ``7 k`` to
        ``7 k + 6`` of ``q`` place it.

        Raises:
            ValueError: ``k`` is not the index of a floating base.
        """
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(self._bases):
            raise ValueError(f"{self.name!r} has {len(self._bases)} floating bases, no base "
                             f"{short_repr(k)}")  # fmt: skip
        return self._bases[k].child

    def base_of(self, link: str) -> int | None:
        """Which floating base moves ``link``: its index ``k`` (coordinates ``7 k`` to ``7 k + 6``
        of ``q``), or ``None`` for a link fixed in the root frame (a fixed base, or the world
        and what hangs from it beside the free bodies of a MuJoCo scene).

        Raises:
            ValueError: ``link`` is not a link of the robot.
        """
        owner = self._owner[self.link_index(link)]
        return None if owner < 0 else owner

    @property
    def dtype(self) -> torch.dtype:
        return self.lower.dtype

    @property
    def device(self) -> torch.device:
        return self.lower.device

    @property
    def learnable(self) -> bool:
        """Whether the joint origins are parameters (see :meth:`learnable_origins`); also
        while ``torch.func.functional_call`` puts plain tensors in their place."""
        flag = self.__dict__.get("_learnable")  # None: a robot pickled before the flag
        return isinstance(self.origin_xyz, nn.Parameter) if flag is None else flag

    def learnable_origins(self, enabled: bool = True) -> Robot:
        """Turn the joint origins (``origin_xyz``, ``origin_rpy``, ``(N, 3)`` over every URDF
        joint in topological order) into parameters, so gradients reach link lengths and offsets;
        ``enabled=False`` freezes their current values again. Returns ``self``."""
        check_bool("enabled", enabled)
        if enabled == self.learnable:
            return self
        for name in ("origin_xyz", "origin_rpy"):
            value = getattr(self, name).detach().clone()
            delattr(self, name)
            if enabled:
                self.register_parameter(name, nn.Parameter(value))
            else:
                self.register_buffer(name, value)
        self._learnable = enabled
        if not enabled:  # the learned values are the truth now: new float64 constants
            self._adopt({"origin_xyz": self.origin_xyz, "origin_rpy": self.origin_rpy})
        self._invalidate()
        return self

    def _adopt(self, values: dict[str, Tensor]) -> None:
        """Make ``values`` (of ``origin_xyz``, ``origin_rpy``, ``lower``, ``upper``) the float64
        truth, rebuild the constants from the origins (unless they are learnable), and
        :meth:`_derive` the buffers from it."""
        master = self._master
        for name, value in values.items():
            if value.device.type != "meta":
                master[name] = value.detach().to("cpu", torch.float64, copy=True)
        if not self.learnable and self.device.type != "meta":
            with torch.no_grad():
                w_joint, w_link = self._constants(master["origin_xyz"], master["origin_rpy"])
            master["_w_joint"], master["_w_link"] = w_joint, w_link
        self._derive()

    def _derive(self) -> None:
        """The one invalidation: every floating buffer (not a learnable parameter) is its
        float64 master in the robot's dtype and device, and the flattened tree is rebuilt on
        its next use. A robot built in float32 and moved to float64 so gets float64 constants
        back, not float32 roundings of them (2e-8 m off instead of 1e-15)."""
        if self.device.type != "meta":
            params = dict(self.named_parameters(recurse=False))
            for name, value in self._master.items():
                if name not in params:
                    buf = getattr(self, name)
                    setattr(self, name, value.to(buf.device, buf.dtype))
        self._invalidate()

    def _invalidate(self) -> None:
        """Drop the flattened tree (rebuilt on its next use) and note which tensors are now the
        robot's own origins and constants, which :meth:`_replaced` compares with."""
        self._tree_cache = None
        self._own = {name: self._buffers.get(name) for name in _REPLACEABLE}

    def _replaced(self, *names: str) -> bool:
        """Whether other tensors are in the place of the buffers ``names`` than the robot's own
        (``torch.func.functional_call(robot, buffers, ...)``, ``stack_module_state`` of a
        fleet of calibrated robots); never on a robot pickled before the check."""
        own = self.__dict__.get("_own", {})
        return any(name in own and self._buffers.get(name) is not own[name] for name in names)

    def _keep_edited_limits(self) -> None:
        """Limits edited in place (``robot.lower[0] = 0.5``): the entries that differ from
        their float64 truth in the robot's dtype become the truth, so that a change of dtype
        keeps them rather than restoring the old (the others keep their float64 values)."""
        if self.lower.device.type == "meta":
            return
        for name in ("lower", "upper"):
            value = getattr(self, name).detach().to("cpu")
            master = self._master[name]
            edited = value != master.to(value.dtype)
            if bool(edited.any()):
                self._master[name] = torch.where(edited, value.to(torch.float64), master)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        """Load as ``nn.Module`` does, refusing non-finite values, then rebuild the cached
        transforms from the loaded origins: a saved calibration takes effect."""
        loaded = {}
        for name in ("origin_xyz", "origin_rpy", "lower", "upper"):
            value = state_dict.get(prefix + name)
            if not isinstance(value, Tensor) or value.shape != getattr(self, name).shape:
                continue  # nn.Module reports missing keys and wrong shapes
            bad = value.isnan() if name in ("lower", "upper") else ~torch.isfinite(value)
            if value.device.type != "meta" and bool(bad.any()):  # infinite limits are fine
                raise ValueError(f"state_dict entry {prefix + name!r} has non-finite values")
            loaded[name] = value
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._adopt(loaded)

    def _apply(self, fn, recurse=True):
        _check_dtype(fn(self.lower).dtype)  # refuse float16 & co. before anything is converted
        before = self.lower.dtype
        self._keep_edited_limits()
        out = super()._apply(fn, recurse)
        if self.lower.dtype != before:
            self._derive()  # values from the float64 masters, not roundings of the old dtype
            self._unround_origins(before)
        self._invalidate()  # buffers moved or changed dtype: rebuild the flattened tree
        return out

    def _unround_origins(self, before: torch.dtype) -> None:
        """Learnable origins after a change of dtype from ``before``: the entries still at
        their float64 truth (rounded to ``before``) get it back, learned ones keep their value
        (a float32 robot made learnable and moved to float64 was 1e-8 m off)."""
        if not self.learnable or self.device.type == "meta":
            return
        with torch.no_grad():
            for name in ("origin_xyz", "origin_rpy"):
                param = getattr(self, name)
                master = self._master[name].to(param.device)
                kept = param == master.to(before).to(param.dtype)
                param.copy_(torch.where(kept, master.to(param.dtype), param))

    @property
    def tree(self) -> kin.KinematicTree:
        """The flattened tree that the pure functions of :mod:`torchik.kinematics` take.

        Cached (with its per-request index plans) unless the origins are learnable, in which
        case the constants are recomputed from the parameters at every call, and so they are
        from the origins (or made of the constants) that ``torch.func.functional_call`` puts in
        the place of the buffers (a robot per sample under ``vmap``: a fleet's calibrations).
        """
        if self.learnable or self._replaced("origin_xyz", "origin_rpy"):
            return self._make_tree(*self._constants())
        if self._replaced("_w_joint", "_w_link"):
            return self._make_tree(self._w_joint, self._w_link)
        if self._tree_cache is None:
            self._tree_cache = self._make_tree(self._w_joint, self._w_link)
        return self._tree_cache

    def _make_tree(self, w_joint: Tensor, w_link: Tensor) -> kin.KinematicTree:
        return kin.KinematicTree(
            parent=self._parent,
            kind=self._kind,
            w_joint=w_joint,
            link_joint=self._link_joint,
            w_link=w_link,
            source=self._source,
            multiplier=self._multiplier,
            offset=self._offset,
            dof=self._n_joints,
            identity_map=self._identity_map,
        )

    # ---------------------------------------------------------------- configurations
    def neutral(self) -> Tensor:
        """``(nq,)`` see :func:`torchik.robot.configuration.neutral`."""
        return robot_config.neutral(self)

    def default_configuration(self) -> Tensor:
        """``(nq,)`` see :func:`torchik.robot.configuration.default_configuration`."""
        return robot_config.default_configuration(self)

    def random_configuration(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """``(n, nq)`` see :func:`torchik.robot.configuration.random_configuration`."""
        return robot_config.random_configuration(self, n, generator)

    def with_limits(self, limits: dict[str, tuple[float, float]]) -> Robot:
        """A copy with ``{name: (lower, upper)}``, see
        :func:`torchik.robot.configuration.with_limits`."""
        return robot_config.with_limits(self, limits)

    def integrate(self, q: Tensor, v: Tensor) -> Tensor:
        """``q ⊕ v (..., nq)`` for a step ``v (..., nv)``, see
        :func:`torchik.geometry.floating.integrate`."""
        return flt.integrate(q, v, len(self._bases))

    def difference(self, q0: Tensor, q1: Tensor) -> Tensor:
        """``(..., nv)`` step from ``q0`` to ``q1``, see
        :func:`torchik.geometry.floating.difference`."""
        return flt.difference(q0, q1, len(self._bases))

    # ---------------------------------------------------------------- checks
    def _check_q(self, q: Tensor) -> Tensor:
        """Validate ``q (..., dof)`` and flatten it to ``(B, dof)``."""
        return robot_config.check_q(self, q)

    def link_index(self, link: str) -> int:
        """Index of ``link`` in ``link_names``; a clear error for unknown names.

        Raises:
            ValueError: an unknown name (the message lists the links).
            TypeError: ``link`` not a str.
        """
        if not isinstance(link, str):
            raise TypeError(f"a link is named by a str, got {type(link).__name__} "
                            f"{short_repr(link)}")  # fmt: skip
        try:
            return self._link_index[link]
        except KeyError:
            raise ValueError(
                f"unknown link {link!r}; the links of '{self.name}' are {list(self.link_names)}"
            ) from None

    def _links(self, link: LinkSpec) -> tuple[tuple[int, ...], bool]:
        if link is None:
            return tuple(range(len(self.link_names))), False
        if isinstance(link, str):
            return (self.link_index(link),), True
        if not isinstance(link, Sequence | set):
            raise TypeError(f"link must be a link's name, a sequence of names or None, got "
                            f"{type(link).__name__} {short_repr(link)}")  # fmt: skip
        idx = tuple(self.link_index(name) for name in link)
        if not idx:
            raise ValueError("link must name at least one link")
        return idx, False

    # ---------------------------------------------------------------- backend
    @property
    def backend(self) -> str:
        """Which FK and Jacobian code runs: ``"auto"`` (default), ``"reference"``, ``"fused"``
        or ``"native"``.

        ``"reference"`` is :mod:`torchik.kinematics.reference` (pure PyTorch, any device,
        ``torch.func`` and ``torch.compile`` friendly). ``"fused"`` is the generated Triton
        kernels of :mod:`torchik.kinematics.fused` (CUDA tensors, or Triton's interpreter
        with ``TRITON_INTERPRET=1``; an error elsewhere). ``"native"`` is the CPU's kernels
        compiled by Numba (:func:`torchik.kinematics.native.forward_kinematics`; the FK
        benchmark, float32 on 2 cores: a Panda pose in 23 µs against 67 µs on the reference
        path, 65 536 in 2.8 ms against 7.6 ms), where no gradient is asked (an error on other
        devices). ``"auto"`` takes the fused kernels for
        CUDA tensors when Triton is installed, and on the CPU the native ones once this
        process has loaded them (:func:`~torchik.kinematics.native.loaded`: the CPU's IK
        loop does; a first load takes about 0.6 s, more than a few FK calls save); the
        reference otherwise. All fall back to the reference where the kernels cannot serve
        (``torch.func`` transforms, forward-mode AD, ``torch.compile`` tracing, learnable
        origins; a gradient asked of the native ones or of a fused Jacobian; Numba missing).
        Set it on a robot (``robot.backend = "reference"``) or pass it to a constructor.
        """
        return self._backend

    @backend.setter
    def backend(self, value: str) -> None:
        self._backend = _check_backend(value)

    def takes_fused(self, q: Tensor) -> bool:
        """Whether FK and Jacobians of ``q (B, dof)`` run on the fused kernels (see
        :attr:`backend`): what a caller of :mod:`torchik.kinematics.fused` checks first."""
        return self._kernels(q, self.tree) is fused

    def takes_native(self, q: Tensor) -> bool:
        """Whether FK of ``q (B, dof)`` runs on :mod:`torchik.kinematics.native` (see
        :attr:`backend`): a fixed base, the CPU, Numba loaded or asked for, no gradient."""
        return not self._bases and self._kernels(q, self.tree) is native

    def _kernels(self, q: Tensor, tree: kin.KinematicTree) -> Any:
        """The module whose ``forward_kinematics`` / ``jacobian`` serve ``q``."""
        if self._backend == "reference":
            return kin
        if self._backend == "native" or (self._backend == "auto" and not q.is_cuda):
            return self._native(q, tree)
        if fused.supports(q, tree):
            return fused
        if self._backend == "fused" and not fused.runs_on(q):
            raise ValueError(
                f"the fused backend runs on CUDA tensors (or in Triton's interpreter, "
                f"TRITON_INTERPRET=1), not on {q.device}; use robot.backend = 'reference'"
            )
        return kin

    def _native(self, q: Tensor, tree: kin.KinematicTree) -> Any:
        """:mod:`~torchik.kinematics.native` where it serves ``q`` (``"auto"``: once loaded in
        this process), else the reference; ``"native"`` refuses other devices."""
        if self._backend == "native" and q.device.type != "cpu":
            raise ValueError(f"the native backend runs on CPU tensors, not on {q.device}; "
                             "use robot.backend = 'auto'")  # fmt: skip
        wanted = self._backend == "native" or native.loaded()
        return native if wanted and native.serves(q, tree) else kin

    # ---------------------------------------------------------------- kinematics
    def forward(self, q: Tensor, link: LinkSpec = None) -> Tensor:
        """:meth:`forward_kinematics`: ``robot(q, link)``, and what
        ``torch.func.functional_call(robot, params, (q, link))`` calls (a calibration's
        origins per sample, with :meth:`learnable_origins`).

        Example:
            >>> robot = load_robot("panda")
            >>> robot(robot.neutral(), "panda_hand").shape
            torch.Size([4, 4])
        """
        return self.forward_kinematics(q, link)

    def forward_kinematics(self, q: Tensor, link: LinkSpec = None) -> Tensor:
        """Poses of links in the root frame, ``T_root_link``.

        Args:
            q: ``(..., dof)`` joint values.
            link: a link name, a sequence of names, or ``None`` for every link.

        Returns:
            ``(..., 4, 4)`` for a single name, else ``(..., L, 4, 4)``, in the robot's dtype
            also under ``torch.autocast`` (kinematics runs with it off).
        """
        idx, single = self._links(link)
        flat = self._check_q(q)
        joints = flat[:, self.dof - self._n_joints :]  # after a floating base's 7
        tree = self.tree  # once: learnable origins build their constants at every access
        with kin.without_autocast(flat.device):  # the robot's dtype inside autocast too
            poses = self._kernels(flat, tree).forward_kinematics(joints, tree, idx)
            if self._bases:
                poses = self._with_bases(flat, poses, idx)
        poses = poses.reshape(*q.shape[:-1], len(idx), 4, 4)
        return poses[..., 0, :, :] if single else poses

    def link_positions(self, q: Tensor, link: LinkSpec = None) -> Tensor:
        """Positions of link origins in the root frame: ``(..., 3)`` or ``(..., L, 3)``."""
        return self.forward_kinematics(q, link)[..., :3, 3]

    def link_poses(self, q: Tensor, link: LinkSpec = None) -> tuple[Tensor, Tensor]:
        """Positions ``(..., [L,] 3)`` and unit quaternions ``(..., [L,] 4)`` (w, x, y, z; w >= 0)
        of link origins in the root frame: a compact pose for losses."""
        pose = self.forward_kinematics(q, link)
        return pose[..., :3, 3], rotmat_to_quat(pose[..., :3, :3])

    def jacobian(self, q: Tensor, link: str, return_pose: bool = False):
        """Geometric Jacobian ``(..., 6, nv)`` of ``link``'s origin, linear rows first, in the
        root frame (see :func:`torchik.kinematics.jacobian`); a floating base's 6 columns are
        those of its twist in its own frame (see :func:`torchik.geometry.floating.base_jacobian`).

        With ``return_pose=True`` also returns the link pose ``(..., 4, 4)``, computed on the way
        (what numerical IK needs at every iteration).
        """
        idx = self.link_index(link)
        flat = self._check_q(q)
        tree = self.tree
        kernels = self._kernels(flat, tree) if not flat.requires_grad else kin  # no fused backward
        joints = flat[:, self.dof - self._n_joints :]
        with kin.without_autocast(flat.device):  # the robot's dtype inside autocast too
            jac, pose = kernels.jacobian(joints, tree, idx)
            if self._bases:
                jac, pose = self._base_jacobian(flat, jac, pose, self._owner[idx])
        jac = jac.reshape(*q.shape[:-1], 6, self.nv)
        return (jac, pose.reshape(*q.shape[:-1], 4, 4)) if return_pose else jac

    def _with_bases(self, flat: Tensor, poses: Tensor, idx: tuple[int, ...]) -> Tensor:
        """``poses (B, L', 4, 4)`` relative to their floating bases -> in the root frame."""
        k = len(self._bases)
        bases = flt.base_pose(flat[:, : 7 * k].reshape(-1, k, 7), self._base_origin)
        owners = {self._owner[i] for i in idx}
        if len(owners) == 1 and min(owners) >= 0:  # one base moves them all (a floating base)
            return bases[:, min(owners), None] @ poses
        index = self._owner_index.get(idx)
        if index is None or index.device != flat.device:  # made once per links and device
            with torch.inference_mode(False):  # not an inference tensor: autograd may save it
                index = torch.tensor([self._owner[i] + 1 for i in idx], device=flat.device)
            self._owner_index[idx] = index
        eye = torch.eye(4, dtype=poses.dtype, device=poses.device).expand(flat.shape[0], 1, 4, 4)
        return torch.cat((eye, bases), dim=1)[:, index] @ poses

    def _base_jacobian(
        self, flat: Tensor, jac: Tensor, pose: Tensor, owner: int
    ) -> tuple[Tensor, Tensor]:
        """The ``(B, 6, nv)`` Jacobian and root-frame pose of a link whose joints' Jacobian
        and pose relative to its floating base ``owner`` (-1: none) are ``jac``, ``pose``."""
        k, zeros = len(self._bases), jac.new_zeros(jac.shape[0], 6, 6)
        if owner < 0:
            return torch.cat((*(zeros,) * k, jac), dim=-1), pose
        q_base = flat[:, 7 * owner : 7 * owner + 7]
        full, world = flt.base_jacobian(q_base, self._base_origin[owner], jac, pose)
        if k == 1:
            return full, world
        blocks = [zeros] * owner + [full[..., :6]] + [zeros] * (k - owner - 1)
        return torch.cat((*blocks, full[..., 6:]), dim=-1), world

    def extra_repr(self) -> str:
        backend = "" if self._backend == "auto" else f", backend={self._backend!r}"
        return (
            f"name={self.name!r}, dof={self.dof}, floating={self.floating}, "
            f"links={len(self.link_names)}, "
            f"dtype={self.dtype}, learnable={self.learnable}{backend}"
        )


def load_robot(
    name: str | os.PathLike,
    dtype: torch.dtype | None = None,
    *,
    link_lengths: Sequence[float] | None = None,
    lower: float = -math.pi,
    upper: float = math.pi,
    limits: bool = True,
    floating_base: bool = False,
    backend: str = "auto",
) -> Robot:
    """A robot by name (bundled with torchik, no download), or from a description file.

    Args:
        name: a bundled robot (:func:`torchik.list_robots`: ``"panda"``, ``"ur5"``,
            ``"digit_arm"``, ``"snake2"``, ``"snake4"``, ``"rail_arm"``, ``"g1"``),
            ``"planar"`` (with ``link_lengths``), or the path of a URDF or MJCF file (told
            apart by their root element; :meth:`Robot.from_urdf` and :meth:`Robot.from_mjcf`
            take more options).
        dtype: floating dtype of the robot (default: torch's default dtype).
        link_lengths: the links of a ``"planar"`` arm (m), with the joint limits ``lower``
            and ``upper`` (rad); ``limits=False`` makes its joints continuous instead.
        floating_base: a quaternion floating base above the root link (bundled robots and
            URDF files, as in :meth:`Robot.from_urdf`).
        backend: see :attr:`Robot.backend`.

    Raises:
        ValueError: an unknown name that is no file either (the message lists the bundled
            names), or a planar arm without ``link_lengths``.
        TypeError: planar options for another robot, a name that is not a str or a path,
            ``floating_base`` not a bool.

    Example:
        >>> load_robot("planar", link_lengths=[1.0, 0.5]).dof
        2
    """
    from torchik.description import bundled

    if not isinstance(name, str | os.PathLike):
        raise TypeError(f"name must be a robot's name or a file's path, got "
                        f"{type(name).__name__} {short_repr(name)}")  # fmt: skip
    check_bool("floating_base", floating_base)
    planar = link_lengths is not None or (lower, upper, limits) != (-math.pi, math.pi, True)
    if planar and name != "planar":
        raise TypeError(f"robot {name!r} takes no options: link_lengths, lower, upper, limits are "
                        "for 'planar'")  # fmt: skip
    if name == "planar":
        if link_lengths is None:
            raise ValueError("a 'planar' arm needs link_lengths=[...]")
        urdf = bundled.planar_arm_urdf(link_lengths, lower, upper, limits=limits)
    elif isinstance(name, str) and name in bundled.BUNDLED:
        urdf = bundled.bundled_urdf(name)
    else:
        return _load_file(name, dtype, floating_base, backend)
    return Robot.from_urdf(urdf, dtype=dtype, floating_base=floating_base, backend=backend)


def _load_file(path: str | os.PathLike, dtype, floating_base: bool, backend: str) -> Robot:
    """:func:`load_robot` of a name that is not bundled: a URDF or MJCF file."""
    from torchik.description.bundled import list_robots

    if not os.path.isfile(path):
        raise ValueError(
            f"no bundled robot named {ascii(str(path))[1:-1]!r} and no such file; bundled: "
            f"{', '.join(list_robots())} (or 'planar' with link_lengths=...)"
        )
    if is_mjcf(path):
        if floating_base:
            raise ValueError("floating_base is for URDF files: an MJCF file's free joint is one")
        return Robot.from_mjcf(path, dtype=dtype, backend=backend)
    return Robot.from_urdf(path, dtype=dtype, floating_base=floating_base, backend=backend)

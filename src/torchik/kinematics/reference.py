"""Forward kinematics and geometric Jacobians of a kinematic tree: pure functions on tensors.

Layout (why it is fast). A batch of B rigid transforms ``[R | p]`` is stored
structure-of-arrays as a tensor ``(4, 3, B)``: block ``k`` is column ``k`` of the 3x4 matrix
(``k = 0, 1, 2`` the rotation columns, ``k = 3`` the translation), each a contiguous ``(3, B)``
array. Composing with a constant transform ``C`` on the right, ``F @ C``, is then one small GEMM
``C^T @ F.view(4, 3 * B)``, and a rotation about the frame's own z axis only mixes blocks 0
and 1 with ``cos`` and ``sin`` of the joint angle: two fused multiply-adds on contiguous memory.

Every joint axis is made the z axis by a constant alignment rotation that the robot folds into
the constant transforms on both sides of the joint (see :mod:`torchik.robot`), and chains of fixed
joints are multiplied out once. What remains per moving joint is one 4x4 GEMM and a planar
rotation (revolute) or an axpy (prismatic).

Gradients. :func:`forward_kinematics` has an analytic backward when only ``q`` needs a gradient:
for a revolute joint with world axis ``a`` through point ``o``, ``dT/dθ = [a]x T`` on rotation
columns and ``a x (p - o)`` on the position, so ``dL/dθ = a . (Σ_l Σ_k c_k(T_l) x c_k(G_l)
- o x Σ_l g_l)`` summed over the links ``l`` below the joint (``c_k`` the columns of the pose and
of the upstream gradient ``G``, ``g_l`` its translation part). Those sums over subtrees are one
matrix product with the 0/1 subtree matrix of the request. When the robot's link origins are
learnable the plain autograd graph is used instead, and so it is under ``torch.func`` transforms
and forward-mode AD; a backward with ``create_graph=True`` recomputes the plain graph, so second
derivatives are exact at every batch size.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import torch
from torch import Tensor
from torch.autograd import forward_ad

__all__ = [
    "KinematicTree",
    "forward_kinematics",
    "jacobian",
    "frames_to_matrix",
    "recording",
    "without_autocast",
]

REVOLUTE = 0
PRISMATIC = 1


@dataclass(frozen=True)
class KinematicTree:
    """A kinematic tree flattened into index tuples and constant tensors.

    ``J`` moving joints (revolute or prismatic, mimic joints included) in topological order,
    ``L`` links, ``D`` independent joint values (``dof``).

    Attributes:
        parent: ``J`` ints, the moving joint whose frame each joint hangs from (``-1``: the root).
        kind: ``J`` ints, ``REVOLUTE`` or ``PRISMATIC``.
        w_joint: ``(J, 4, 4)``, transpose of the constant transform from the parent joint's
            frame (or the root) to this joint's frame at zero, axis aligned with z.
        link_joint: ``L`` ints, the moving joint each link's frame hangs from (``-1``: the root).
        w_link: ``(L, 4, 4)``, transpose of the constant transform from that joint's frame to the
            link frame (from the root for links with ``link_joint == -1``).
        source: ``(J,)`` long, the entry of ``q`` that drives each joint.
        multiplier: ``(J,)`` and ``offset``: ``(J,)``, ``θ_j = multiplier_j * q[source_j] +
            offset_j`` (``1`` and ``0`` for every joint but mimic joints).
        dof: number of independent joint values.
        identity_map: ``True`` when ``θ == q`` (no mimic joints), to skip the gather.

    A tree's constants are never changed in place (a :class:`~torchik.robot.Robot` builds a new
    tree when its constants change), so what is derived from them is cached with the tree:
    the index plans of :meth:`plan` and whatever :meth:`cached` is asked to keep (the fused
    kernels' constant tables). Every tensor a plan holds lives on the tree's device, so a call
    after the first copies nothing from the host and never waits on the device.
    """

    parent: tuple[int, ...]
    kind: tuple[int, ...]
    w_joint: Tensor
    link_joint: tuple[int, ...]
    w_link: Tensor
    source: Tensor
    multiplier: Tensor
    offset: Tensor
    dof: int
    identity_map: bool
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def plan(self, links: tuple[int, ...]) -> _Plan:
        """What computing ``links`` needs (cached per request, see :meth:`cached`)."""
        return self.cached(("plan", links), lambda: _Plan.make(self, links))

    def cached(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """``build()``, kept with the tree under ``key`` and returned by later calls.

        Not cached while ``torch.compile`` traces (it cannot replay the cache's mutation).
        Built outside inference mode: a value made inside it would be an inference tensor,
        which no later computation with gradients may save (FK in a loss after one call in
        ``torch.inference_mode()`` raised).

        Args:
            key: what the value is, e.g. ``("plan", links)``; callers prefix their own name.
            build: computes the value from the tree's (immutable) constants.

        Returns:
            The value.
        """
        if key not in self._cache:
            if torch.compiler.is_compiling():
                return build()
            with torch.inference_mode(False):
                self._cache[key] = build()
        return self._cache[key]


@dataclass(frozen=True)
class _Plan:
    """Index data for one request of links: the joints that move them and their subtree sums.

    ``n`` needed joints (ancestors of the requested links, topological order). Building one is
    linear in ``n`` plus the number of links; the subtree matrix, which the analytic backward
    alone needs, is built on first use.
    """

    needed: tuple[int, ...]  # joint indices
    parent_pos: tuple[int, ...]  # position of each needed joint's parent in ``needed`` (-1: root)
    link_pos: tuple[int, ...]  # position of each requested link's joint in ``needed`` (-1: root)
    index: Tensor  # (n,) long, ``needed`` on the tree's device (a gather without a host copy)
    revolute: Tensor  # (n,) bool
    all_revolute: bool  # every needed joint revolute (known on the host: no device read)
    links: tuple[int, ...]  # the requested links
    tree: KinematicTree = field(repr=False, compare=False)
    to_q: Tensor | None  # (n, D) chain rule from joint values to q; None when it is the identity
    c_joint: Tensor  # (n, 1, 16) constant transforms C of the needed joints, flattened
    c_motion: Tensor  # (n, 3, 16): C @ motion(θ) = C + [cos θ - 1, sin θ, θ] @ c_motion
    c_link: Tensor  # (L', 4, 4) constant transforms of the requested links

    @staticmethod
    def make(tree: KinematicTree, links: tuple[int, ...]) -> _Plan:
        needed = _ancestors(tree, links)
        pos = {j: i for i, j in enumerate(needed)}
        pos[-1] = -1
        like = tree.w_joint
        idx = torch.tensor(needed, dtype=torch.long, device=like.device)
        direct = tree.identity_map and needed == tuple(range(tree.dof))
        c_joint = tree.w_joint[idx].transpose(-1, -2)
        patterns = _motion_patterns([tree.kind[j] for j in needed], like).view(-1, 3, 4, 4)
        kinds = [tree.kind[j] == REVOLUTE for j in needed]
        return _Plan(
            needed=needed,
            parent_pos=tuple(pos[tree.parent[j]] for j in needed),
            link_pos=tuple(pos[tree.link_joint[link]] for link in links),
            index=idx,
            revolute=torch.tensor(kinds, dtype=torch.bool, device=like.device),
            all_revolute=all(kinds),
            links=links,
            tree=tree,
            to_q=None if direct else _chain_rule(tree, idx),
            c_joint=c_joint.reshape(-1, 1, 16),
            c_motion=torch.einsum("nij,nkjl->nkil", c_joint, patterns).reshape(-1, 3, 16),
            c_link=tree.w_link[list(links)].transpose(-1, -2),
        )

    @cached_property
    def subtree(self) -> Tensor:
        """``(n, L')`` 0/1: needed joint ``i`` moves requested link ``l``.

        Row ``i`` of the ancestor matrix is its parent's row plus ``i`` (parents come first):
        one row copy per joint, not one element per (link, ancestor) pair, so a 2000-joint
        chain takes milliseconds instead of a Python loop over two million entries.
        """
        n = len(self.needed)
        ancestors = torch.zeros(n + 1, n, dtype=torch.bool)  # row -1 (the root): no joint
        for i, p in enumerate(self.parent_pos):
            ancestors[i] = ancestors[p]
            ancestors[i, i] = True
        like = self.tree.w_joint
        rows = ancestors[list(self.link_pos)].T.to(like.device, like.dtype)
        return rows.contiguous()


def _ancestors(tree: KinematicTree, links: tuple[int, ...]) -> tuple[int, ...]:
    """The moving joints that move any of ``links``, sorted (topological order); each joint is
    visited once, so the cost is linear in the tree whatever its depth."""
    seen: set[int] = set()
    for link in links:
        j = tree.link_joint[link]
        while j >= 0 and j not in seen:
            seen.add(j)
            j = tree.parent[j]
    return tuple(sorted(seen))


def _chain_rule(tree: KinematicTree, idx: Tensor) -> Tensor:
    """``(n, D)``: ``dθ_j/dq`` of the joints ``idx`` (the mimic multipliers)."""
    to_q = tree.w_joint.new_zeros(len(idx), tree.dof)
    to_q[torch.arange(len(idx), device=idx.device), tree.source[idx]] = tree.multiplier[idx]
    return to_q


def _motion_patterns(kinds: list[int], like: Tensor) -> Tensor:
    """``(n, 3, 16)``: ``Rz(θ) = I + (cos θ - 1)(E00 + E11) + sin θ (E10 - E01)`` for a revolute
    joint, ``Tz(θ) = I + θ E23`` for a prismatic one, as rows of flattened 4x4 patterns."""
    revolute, prismatic = like.new_zeros(3, 16), like.new_zeros(3, 16)
    revolute[0, 0] = revolute[0, 5] = revolute[1, 4] = 1.0
    revolute[1, 1] = -1.0
    prismatic[2, 11] = 1.0
    mask = torch.tensor([kind == REVOLUTE for kind in kinds], dtype=torch.bool, device=like.device)
    return torch.where(mask[:, None, None], revolute, prismatic)


def without_autocast(device: torch.device) -> contextlib.AbstractContextManager:
    """A context in which a caller's ``torch.autocast`` is off on ``device``'s type, so that
    kinematics runs in the robot's dtype (float32 or float64) inside a mixed-precision loss too.

    Under CPU bfloat16 autocast the matrix products of FK and of its backward ran in bfloat16:
    a Jacobian 6e-3 off and a gradient 2e-2 off in float32, a batch of up to 16 poses returned
    as bfloat16, and its Jacobian raised. A no-op (no context entered) where autocast is off.

    Args:
        device: the device of the configurations.

    Returns:
        ``torch.autocast(device.type, enabled=False)``, or a null context.
    """
    try:
        enabled = torch.is_autocast_enabled(device.type)
    except TypeError:  # pragma: no cover (torch < 2.4 takes no device type: just enter it)
        enabled = True
    except RuntimeError:  # a device type that autocast does not know (meta)
        enabled = False
    return torch.autocast(device.type, enabled=False) if enabled else contextlib.nullcontext()


SMALL_BATCH = 16  # up to this batch size, per-op overhead dominates: see :func:`_path_pose`


def _local_transforms(q: Tensor, tree: KinematicTree, plan: _Plan) -> Tensor:
    """``C_j M_j(θ_j)`` of every needed joint, ``(n, B, 4, 4)``, from one ``baddbmm``."""
    theta = _joint_values(q, tree)
    if plan.to_q is not None:  # not every joint is needed, or mimic joints
        theta = theta[plan.index]
    features = torch.stack((torch.cos(theta) - 1.0, torch.sin(theta), theta), dim=-1)
    return torch.baddbmm(plan.c_joint, features, plan.c_motion).view(-1, q.shape[0], 4, 4)


def _path_pose(q: Tensor, tree: KinematicTree, plan: _Plan) -> Tensor:
    """Pose ``(B, 4, 4)`` of one link with a handful of batched 4x4 products (plain autograd).

    For tiny batches the structure-of-arrays kernel spends its time launching ops. The joints
    that move one link form a path, so its pose is the product ``C_1 M_1 ... C_n M_n S``: all
    local transforms come from one ``baddbmm``, and the product is reduced pairwise, in
    ``log2(n + 1)`` matrix products.
    """
    batch = q.shape[0]
    local = _local_transforms(q, tree, plan)
    factors = torch.cat((local, plan.c_link[:, None].expand(1, batch, 4, 4)))
    while factors.shape[0] > 1:
        if factors.shape[0] % 2:
            factors = torch.cat((factors[:-2], factors[-2:-1] @ factors[-1:]))
        else:
            factors = factors[0::2] @ factors[1::2]
    return factors[0]


def _path_frames(q: Tensor, tree: KinematicTree, plan: _Plan) -> tuple[Tensor, Tensor]:
    """Frames ``(n, B, 4, 4)`` of the joints on the path to one link, and its pose ``(B, 4, 4)``
    (the small-batch counterpart of :func:`_frames` for Jacobians)."""
    local = _local_transforms(q, tree, plan)
    frames = [local[0]]
    for i in range(1, local.shape[0]):
        frames.append(frames[-1] @ local[i])
    return torch.stack(frames), frames[-1] @ plan.c_link[0]


def _cross(a: Tensor, b: Tensor) -> Tensor:
    """Cross product along dim ``-2`` of ``(..., 3, B)`` arrays.

    Written out with slices: ``torch.linalg.cross`` over a non-last dim is several times slower
    on this layout.
    """
    a0, a1, a2 = a.unbind(-2)
    b0, b1, b2 = b.unbind(-2)
    return torch.stack((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), dim=-2)


def _joint_values(q: Tensor, tree: KinematicTree) -> Tensor:
    """Joint values ``θ (J, B)`` from ``q (B, D)``, mimic joints resolved."""
    if tree.identity_map:
        return q.T
    return q.T[tree.source] * tree.multiplier[:, None] + tree.offset[:, None]


def _compose(w: Tensor, frame: Tensor | None, batch: int) -> Tensor:
    """``frame @ C`` for ``w = C^T (4, 4)``; ``frame (4, 3, B)`` or ``None`` for the root."""
    if frame is None:
        return w[:, :3, None].expand(4, 3, batch)  # the constant itself, broadcast
    return (w @ frame.reshape(4, -1)).view(frame.shape)


def _move(a: Tensor, kind: int, theta: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Apply the joint motion about/along the local z axis to ``a (4, 3, B)`` (out of place)."""
    if kind == REVOLUTE:
        return torch.stack((cos * a[0] + sin * a[1], cos * a[1] - sin * a[0], a[2], a[3]))
    return torch.stack((a[0], a[1], a[2], a[3] + theta * a[2]))


def _move_(f: Tensor, kind: int, theta: Tensor, cos: Tensor, sin: Tensor) -> None:
    """:func:`_move` in place on a frame ``f (4, 3, B)`` that autograd does not track."""
    if kind == REVOLUTE:
        c0, c1 = f[0], f[1]
        s0 = c0 * sin
        c0.mul_(cos).addcmul_(c1, sin)
        c1.mul_(cos).sub_(s0)
    else:
        f[3].addcmul_(f[2], theta)


def _frames(q: Tensor, tree: KinematicTree, plan: _Plan, links: tuple[int, ...]):
    """Frames of the needed joints ``(n, 4, 3, B)`` and of ``links`` ``(L', 4, 3, B)``.

    When autograd records (learnable origins, or ``analytic=False``), each frame is a new tensor;
    otherwise they are written in place into two buffers (no copies, no graph).
    """
    batch = q.shape[0]
    theta = _joint_values(q, tree)
    cos, sin = torch.cos(theta), torch.sin(theta)
    if recording(q, tree):
        joints: list[Tensor] = []
        for i, j in enumerate(plan.needed):
            p = plan.parent_pos[i]
            a = _compose(tree.w_joint[j], joints[p] if p >= 0 else None, batch)
            joints.append(_move(a, tree.kind[j], theta[j], cos[j], sin[j]))
        out = [
            _compose(tree.w_link[link], joints[p] if p >= 0 else None, batch)
            for link, p in zip(links, plan.link_pos, strict=True)
        ]
        return (torch.stack(joints) if joints else q.new_zeros(0, 4, 3, batch)), torch.stack(out)
    jf = q.new_empty(len(plan.needed), 4, 3, batch)
    for i, j in enumerate(plan.needed):
        _place(tree.w_joint[j], jf, plan.parent_pos[i], jf[i])
        _move_(jf[i], tree.kind[j], theta[j], cos[j], sin[j])
    lf = q.new_empty(len(links), 4, 3, batch)
    for i, (link, p) in enumerate(zip(links, plan.link_pos, strict=True)):
        _place(tree.w_link[link], jf, p, lf[i])
    return jf, lf


def recording(q: Tensor, tree: KinematicTree) -> bool:
    """Whether autograd, forward-mode AD or a ``torch.func`` transform watches FK of ``q``
    (then nothing may be in place here, and :mod:`torchik.kinematics.native` does not serve)."""
    if torch.is_grad_enabled() and (q.requires_grad or tree.w_joint.requires_grad):
        return True
    if _is_functorch_wrapped(q) or _is_dual(q):
        return True
    # the constants too, under vmap over a learnable robot's origins (functional_call): once
    # per tree (a learnable robot's is new at every call), kept with it
    watched = tree._cache.get(_TRANSFORMED)
    if watched is None:
        constants = (tree.w_joint, tree.w_link)
        watched = tree._cache[_TRANSFORMED] = any(
            _is_functorch_wrapped(c) or _is_dual(c) for c in constants
        )
    return watched


_TRANSFORMED = ("constants transformed",)


def _is_dual(x: Tensor) -> bool:
    """Whether ``x`` carries a forward-mode tangent (``torch.autograd.forward_ad``)."""
    return forward_ad.unpack_dual(x).tangent is not None


def _is_functorch_wrapped(x: Tensor) -> bool:
    if torch.compiler.is_compiling():  # torch.compile traces the plain out-of-place ops
        return True
    try:  # private but long-standing; without it we would only lose the in-place fast path
        return bool(torch._C._functorch.is_functorch_wrapped_tensor(x))
    except AttributeError:  # pragma: no cover
        return True


def _place(w: Tensor, jf: Tensor, parent: int, out: Tensor) -> None:
    """Write ``jf[parent] @ C`` (``w = C^T``; the constant itself for the root) into ``out``."""
    if parent < 0:
        out.copy_(w[:, :3, None].expand_as(out))
    else:
        torch.mm(w, jf[parent].view(4, -1), out=out.view(4, -1))


def frames_to_matrix(frames: Tensor) -> Tensor:
    """Structure-of-arrays frames ``(L, 4, 3, B)`` -> homogeneous matrices ``(B, L, 4, 4)``."""
    n_links, _, _, batch = frames.shape
    out = frames.new_empty(batch, n_links, 4, 4)
    out[:, :, :3, :].copy_(frames.permute(3, 0, 2, 1))
    out[:, :, 3, :3].zero_()  # fill_, not ``= 0.0``: no scalar tensor made from host data
    out[:, :, 3, 3].fill_(1.0)
    return out


class _AnalyticFK(torch.autograd.Function):
    """FK with the Jacobian-based backward described in the module docstring.

    The forward also returns, as non-differentiable extra outputs (so that ``setup_context`` can
    save them and ``torch.func`` transforms work), the link frames and the Plücker coordinates
    of the needed joint axes: direction ``a`` and moment ``m = o x a``. Then, for a revolute
    joint, ``a . (u - o x g) = a . u + m . g``: the backward is two dot products per joint.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(q: Tensor, tree: KinematicTree, links: tuple[int, ...]):
        jf, lf = _frames(q, tree, tree.plan(links), links)
        axis, origin = jf[:, 2], jf[:, 3]
        return frames_to_matrix(lf), lf, axis.contiguous(), _cross(origin, axis)

    @staticmethod
    def setup_context(ctx, inputs, output):
        q, tree, links = inputs
        _, lf, axis, moment = output
        ctx.mark_non_differentiable(lf, axis, moment)
        ctx.set_materialize_grads(False)  # the extra outputs' gradients are never used
        ctx.save_for_backward(q, lf, axis, moment)
        ctx.tree, ctx.links = tree, links

    @staticmethod
    def backward(ctx, grad: Tensor | None, *_unused):
        q, lf, axis, moment = ctx.saved_tensors
        plan: _Plan = ctx.tree.plan(ctx.links)
        batch = lf.shape[3]
        if grad is None or not plan.needed or batch == 0:
            return lf.new_zeros(batch, ctx.tree.dof), None, None
        with without_autocast(q.device):  # a backward called inside autocast too
            if torch.is_grad_enabled():  # create_graph=True: the gradient must be differentiable
                pose = frames_to_matrix(_frames(q, ctx.tree, plan, ctx.links)[1])
                return torch.autograd.grad(pose, q, grad, create_graph=True)[0], None, None
            return _analytic_gradient(plan, grad, lf, axis, moment), None, None


def _analytic_gradient(plan: _Plan, grad: Tensor, lf: Tensor, axis: Tensor, moment: Tensor):
    """``dL/dq (B, D)`` from the upstream gradient ``grad (B, L', 4, 4)`` of the poses, the
    link frames ``lf (L', 4, 3, B)`` and the joints' Plücker axes ``(n, 3, B)`` (see
    :class:`_AnalyticFK`)."""
    n_links, batch = lf.shape[0], lf.shape[3]
    g = grad[..., :3, :].permute(1, 3, 2, 0).contiguous()  # (L, 4 columns, 3 rows, B)
    u = _cross(lf, g).sum(dim=1)  # Σ_k c_k(T) x c_k(G): (L, 3, B)
    g_p = g[:, 3]
    if n_links == 1:  # every needed joint moves the one link: no subtree sums
        u_sum, g_sum = u, g_p
    else:
        u_sum = (plan.subtree @ u.view(n_links, -1)).view(-1, 3, batch)
        g_sum = (plan.subtree @ g_p.reshape(n_links, -1)).view(-1, 3, batch)
    rev = plan.revolute[:, None]
    dtheta = torch.where(rev, (axis * u_sum).sum(1) + (moment * g_sum).sum(1), 0.0)
    if not plan.all_revolute:
        dtheta = dtheta + torch.where(rev, 0.0, (axis * g_sum).sum(1))
    dq = dtheta if plan.to_q is None else plan.to_q.T @ dtheta  # (D, B)
    return dq.T


def forward_kinematics(
    q: Tensor, tree: KinematicTree, links: tuple[int, ...], analytic: bool = True
) -> Tensor:
    """Poses of ``links`` in the root frame.

    Args:
        q: ``(B, D)`` joint values (rad or m).
        tree: the flattened robot.
        links: link indices.
        analytic: use the analytic backward when only ``q`` needs a gradient (``False``: record
            the plain autograd graph, which also supports higher derivatives).

    Returns:
        ``(B, L', 4, 4)`` homogeneous transforms ``T_root_link``, in ``q``'s dtype also under
        ``torch.autocast`` (see :func:`without_autocast`).
    """
    with without_autocast(q.device):
        return _poses(q, tree, links, analytic)


def _poses(q: Tensor, tree: KinematicTree, links: tuple[int, ...], analytic: bool) -> Tensor:
    """:func:`forward_kinematics` with autocast off."""
    plan = tree.plan(links)
    transformed = _is_functorch_wrapped(q) or _is_dual(q)  # plain differentiable ops only
    if len(links) == 1 and plan.needed and 0 < q.shape[0] <= SMALL_BATCH and not transformed:
        return _path_pose(q, tree, plan)[:, None]
    constants_need_grad = tree.w_joint.requires_grad or tree.w_link.requires_grad
    analytic = analytic and not transformed and not constants_need_grad
    if analytic and q.requires_grad and torch.is_grad_enabled():
        return _AnalyticFK.apply(q, tree, links)[0]
    return frames_to_matrix(_frames(q, tree, plan, links)[1])


def jacobian(q: Tensor, tree: KinematicTree, link: int) -> tuple[Tensor, Tensor]:
    """Geometric Jacobian of the origin of ``link``, in the root frame, and the link's pose.

    Args:
        q: ``(B, D)`` joint values.
        tree: the flattened robot.
        link: link index.

    Returns:
        ``(B, 6, D)``: rows 0-2 the linear velocity of the link origin, rows 3-5 the angular
        velocity, both in the root frame, per unit joint velocity; and the pose ``(B, 4, 4)``
        (computed on the way); in ``q``'s dtype also under ``torch.autocast``.
    """
    with without_autocast(q.device):
        return _jacobian(q, tree, link)


def _jacobian(q: Tensor, tree: KinematicTree, link: int) -> tuple[Tensor, Tensor]:
    """:func:`jacobian` with autocast off."""
    plan = tree.plan((link,))
    batch = q.shape[0]
    if not plan.needed:
        pose = frames_to_matrix(_frames(q, tree, plan, (link,))[1])[:, 0]
        return q.new_zeros(batch, 6, tree.dof), pose
    if 0 < batch <= SMALL_BATCH and not _is_functorch_wrapped(q):
        jf, pose = _path_frames(q, tree, plan)  # (n, B, 4, 4)
        axis, origin = jf[..., :3, 2].transpose(1, 2), jf[..., :3, 3].transpose(1, 2)
        end = pose[:, :3, 3].T
    else:
        jf, lf = _frames(q, tree, plan, (link,))
        pose = frames_to_matrix(lf)[:, 0]
        axis, origin, end = jf[:, 2], jf[:, 3], lf[0, 3]  # (n, 3, B), (3, B)
    rev = plan.revolute[:, None, None]
    linear = torch.where(rev, _cross(axis, end - origin), axis)
    angular = torch.where(rev, axis, torch.zeros_like(axis))
    j_theta = torch.cat((linear, angular), dim=1)  # (n, 6, B)
    if plan.to_q is not None:
        j_theta = (plan.to_q.T @ j_theta.reshape(len(plan.needed), -1)).view(tree.dof, 6, batch)
    return j_theta.permute(2, 1, 0), pose

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
matrix product with the ancestor matrix. When the robot's link origins are learnable the plain
autograd graph is used instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = [
    "KinematicTree",
    "forward_kinematics",
    "jacobian",
    "frames_to_matrix",
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
        ancestors: ``(J, L)`` 0/1 matrix, ``1`` where joint ``j`` moves link ``l``.
        dof: number of independent joint values.
        identity_map: ``True`` when ``θ == q`` (no mimic joints), to skip the gather.
    """

    parent: tuple[int, ...]
    kind: tuple[int, ...]
    w_joint: Tensor
    link_joint: tuple[int, ...]
    w_link: Tensor
    source: Tensor
    multiplier: Tensor
    offset: Tensor
    ancestors: Tensor
    dof: int
    identity_map: bool

    def needed_joints(self, links: tuple[int, ...]) -> tuple[int, ...]:
        """Moving joints that move at least one of ``links``, in topological order."""
        mask = self.ancestors[:, list(links)].sum(dim=1) > 0
        return tuple(int(j) for j in torch.nonzero(mask).flatten().tolist())


def _joint_values(q_t: Tensor, tree: KinematicTree) -> Tensor:
    """Joint values ``θ (J, B)`` from ``q_t (D, B)``, mimic joints resolved."""
    if tree.identity_map:
        return q_t
    return q_t[tree.source] * tree.multiplier[:, None] + tree.offset[:, None]


def _compose(w: Tensor, frame: Tensor | None) -> Tensor:
    """``frame @ C`` for ``w = C^T (4, 4)``; ``frame (4, 3, B)`` or ``None`` for the root."""
    if frame is None:
        return w[:, :3, None]  # the constant itself, (4, 3, 1), broadcast over the batch
    return (w @ frame.reshape(4, -1)).view(frame.shape)


def _move(a: Tensor, kind: int, theta: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Apply the joint motion about/along the local z axis to ``a (4, 3, B or 1)``."""
    if kind == REVOLUTE:
        c0 = cos * a[0] + sin * a[1]
        c1 = cos * a[1] - sin * a[0]
        return torch.stack((c0, c1, a[2].expand_as(c0), a[3].expand_as(c0)))
    c3 = a[3] + theta * a[2]
    return torch.stack((a[0].expand_as(c3), a[1].expand_as(c3), a[2].expand_as(c3), c3))


def joint_frames(theta: Tensor, tree: KinematicTree, needed: tuple[int, ...]) -> dict[int, Tensor]:
    """Frames ``(4, 3, B)`` of the ``needed`` joints (ancestors must be included).

    Args:
        theta: ``(J, B)`` joint values.
        tree: the flattened robot.
        needed: joints to compute, in topological order, closed under ``parent``.

    Returns:
        A dict joint index -> frame in the root frame, in the structure-of-arrays layout.
    """
    cos, sin = torch.cos(theta), torch.sin(theta)
    frames: dict[int, Tensor] = {}
    for j in needed:
        p = tree.parent[j]
        a = _compose(tree.w_joint[j], frames[p] if p >= 0 else None)
        frames[j] = _move(a, tree.kind[j], theta[j], cos[j], sin[j])
    return frames


def link_frames(
    frames: dict[int, Tensor], tree: KinematicTree, links: tuple[int, ...], batch: int
) -> Tensor:
    """Frames ``(L', 4, 3, B)`` of ``links`` from the joint frames."""
    out = []
    for link in links:
        j = tree.link_joint[link]
        f = _compose(tree.w_link[link], frames[j] if j >= 0 else None)
        out.append(f.expand(4, 3, batch))
    return torch.stack(out)


def frames_to_matrix(frames: Tensor) -> Tensor:
    """Structure-of-arrays frames ``(L, 4, 3, B)`` -> homogeneous matrices ``(B, L, 4, 4)``."""
    n_links, _, _, batch = frames.shape
    top = frames.permute(3, 0, 2, 1)  # (B, L, 3 rows, 4 columns)
    bottom = frames.new_tensor([0.0, 0.0, 0.0, 1.0]).expand(batch, n_links, 1, 4)
    return torch.cat((top, bottom), dim=2)


def _compute(q: Tensor, tree: KinematicTree, links: tuple[int, ...]):
    needed = tree.needed_joints(links)
    theta = _joint_values(q.T, tree)
    frames = joint_frames(theta, tree, needed)
    return needed, frames, link_frames(frames, tree, links, q.shape[0])


class _AnalyticFK(torch.autograd.Function):
    """FK with the Jacobian-based backward described in the module docstring.

    The joint and link frames are returned as extra (non-differentiable) outputs so that
    ``setup_context`` can save them; this form also works under ``torch.func`` transforms.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(q: Tensor, tree: KinematicTree, links: tuple[int, ...]):
        needed, frames, lf = _compute(q, tree, links)
        jf = torch.stack([frames[j] for j in needed]) if needed else lf[:0]
        return frames_to_matrix(lf), jf, lf

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, tree, links = inputs
        _, jf, lf = output
        ctx.mark_non_differentiable(jf, lf)
        ctx.save_for_backward(jf, lf)
        ctx.tree, ctx.links, ctx.needed = tree, links, tree.needed_joints(links)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor, _jf_grad: Tensor, _lf_grad: Tensor):
        jf, lf = ctx.saved_tensors
        tree, needed = ctx.tree, list(ctx.needed)
        batch = grad.shape[0]
        if not needed:
            return grad.new_zeros(batch, tree.dof), None, None
        g = grad[..., :3, :].permute(1, 3, 2, 0)  # (L, 4 columns, 3 rows, B)
        u = torch.linalg.cross(lf, g, dim=2).sum(dim=1)  # (L, 3, B)
        sub = tree.ancestors[needed][:, list(ctx.links)]  # (n, L)
        u_sum = (sub @ u.reshape(len(ctx.links), -1)).view(-1, 3, batch)
        g_sum = (sub @ g[:, 3].reshape(len(ctx.links), -1)).view(-1, 3, batch)
        axis, origin = jf[:, 2], jf[:, 3]
        revolute = torch.tensor([tree.kind[j] == REVOLUTE for j in needed], device=grad.device)
        moment = torch.where(
            revolute[:, None, None], u_sum - torch.linalg.cross(origin, g_sum, dim=1), g_sum
        )
        dtheta = (axis * moment).sum(dim=1)  # (n, B)
        dq = _theta_to_q(tree, needed).T @ dtheta  # (D, B)
        return dq.T, None, None


def _theta_to_q(tree: KinematicTree, needed: list[int]) -> Tensor:
    """``(n, D)`` matrix mapping joint-value derivatives to ``q`` derivatives (chain rule)."""
    m = tree.multiplier.new_zeros(len(needed), tree.dof)
    rows = torch.arange(len(needed), device=m.device)
    m[rows, tree.source[needed]] = tree.multiplier[needed]
    return m


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
        ``(B, L', 4, 4)`` homogeneous transforms ``T_root_link``.
    """
    constants_need_grad = tree.w_joint.requires_grad or tree.w_link.requires_grad
    if analytic and q.requires_grad and not constants_need_grad:
        return _AnalyticFK.apply(q, tree, links)[0]
    return frames_to_matrix(_compute(q, tree, links)[2])


def jacobian(q: Tensor, tree: KinematicTree, link: int) -> tuple[Tensor, Tensor]:
    """Geometric Jacobian of the origin of ``link``, in the root frame, and the link's pose.

    Args:
        q: ``(B, D)`` joint values.
        tree: the flattened robot.
        link: link index.

    Returns:
        ``(B, 6, D)``: rows 0-2 the linear velocity of the link origin, rows 3-5 the angular
        velocity, both in the root frame, per unit joint velocity; and the pose ``(B, 4, 4)``
        (computed on the way).
    """
    needed, frames, lf = _compute(q, tree, (link,))
    batch = q.shape[0]
    pose = frames_to_matrix(lf)[:, 0]
    if not needed:
        return q.new_zeros(batch, 6, tree.dof), pose
    jf = torch.stack([frames[j] for j in needed])  # (n, 4, 3, B)
    axis, origin = jf[:, 2], jf[:, 3]
    revolute = torch.tensor([tree.kind[j] == REVOLUTE for j in needed], device=q.device)
    rev = revolute[:, None, None]
    linear = torch.where(rev, torch.linalg.cross(axis, lf[0, 3] - origin, dim=1), axis)
    angular = torch.where(rev, axis, torch.zeros_like(axis))
    j_theta = torch.cat((linear, angular), dim=1)  # (n, 6, B)
    to_q = _theta_to_q(tree, list(needed))  # (n, D)
    j_q = (to_q.T @ j_theta.reshape(len(needed), -1)).view(tree.dof, 6, batch)
    return j_q.permute(2, 1, 0), pose

"""The Numba code of :mod:`torchik.kinematics.native` (imported on first use: Numba loads LLVM).

One row at a time, its state in local variables and small scratch arrays, the tree walked from
arrays of constants (not generated per robot, so one compiled kernel per dtype serves every
robot and is cached on disk by Numba, see :data:`CACHE`). The arithmetic is
:func:`torchik.kinematics.fused.lm_step`'s in the same order where it matters (the Cholesky
factorisation, the projection); no ``fastmath``, so NaN and infinity behave as in the reference
path.
"""

from __future__ import annotations

import math

import numba
import numpy as np

TWO_PI = 2.0 * math.pi


def _probe() -> int:
    return 0


def _caching() -> bool:
    """Whether Numba can keep this module's compiled kernels on disk (beside it, or in the
    user's cache folder): it looks for a writable place when a function is decorated, and
    refuses (``RuntimeError``) where there is none, e.g. a read-only install without a home
    folder. Then they are compiled in every process instead (about 5 s per dtype)."""
    try:
        numba.njit(cache=True)(_probe)
    except RuntimeError:
        return False
    return True


CACHE = _caching()
"""Whether the kernels are kept in Numba's cache on disk (see :func:`_caching`)."""
_kernel = numba.njit(cache=CACHE, nogil=True)
_inlined = numba.njit(cache=CACHE, nogil=True, inline="always")  # a row's helpers: one function


@_inlined
def _place(out, k, parent, frames, c):
    """``frames[k] = frames[parent] @ C`` for the 3x4 constant ``c`` (``C``'s last row
    ``[0, 0, 0, 1]``); the constant itself where ``parent < 0`` (the root)."""
    for a in range(3):
        for col in range(4):
            if parent < 0:
                out[k, a, col] = c[a, col]
            else:
                s = frames[parent, a, 0] * c[0, col] + frames[parent, a, 1] * c[1, col]
                s += frames[parent, a, 2] * c[2, col]
                if col == 3:
                    s += frames[parent, a, 3]
                out[k, a, col] = s


@_inlined
def _walk(q, row, frames, parent, kind, source, mult, offset, c_joint, c_link, link_pos):
    """Frames of the needed joints ``frames[:n]`` and of the link ``frames[n]``."""
    n = parent.shape[0]
    for i in range(n):
        _place(frames, i, parent[i], frames, c_joint[i])
        t = mult[i] * q[row, source[i]] + offset[i]
        if kind[i] == 0:  # revolute about z: columns 0 and 1 turn
            co, si = math.cos(t), math.sin(t)
            for a in range(3):
                f0, f1 = frames[i, a, 0], frames[i, a, 1]
                frames[i, a, 0] = co * f0 + si * f1
                frames[i, a, 1] = co * f1 - si * f0
        else:  # prismatic along z
            for a in range(3):
                frames[i, a, 3] = frames[i, a, 3] + t * frames[i, a, 2]
    _place(frames, n, link_pos, frames, c_link)


@_inlined
def _jacobian(jac, frames, kind, source, mult, m):
    """Rows ``0..m-1`` of the geometric Jacobian of the link (``frames[n]``) into ``jac``."""
    n = kind.shape[0]
    for r in range(m):
        for c in range(jac.shape[1]):
            jac[r, c] = 0.0
    ex, ey, ez = frames[n, 0, 3], frames[n, 1, 3], frames[n, 2, 3]
    for i in range(n):
        ax, ay, az = frames[i, 0, 2], frames[i, 1, 2], frames[i, 2, 2]
        k, c = mult[i], source[i]
        if kind[i] == 0:
            dx, dy, dz = ex - frames[i, 0, 3], ey - frames[i, 1, 3], ez - frames[i, 2, 3]
            jac[0, c] += k * (ay * dz - az * dy)
            jac[1, c] += k * (az * dx - ax * dz)
            jac[2, c] += k * (ax * dy - ay * dx)
            if m == 6:
                jac[3, c] += k * ax
                jac[4, c] += k * ay
                jac[5, c] += k * az
        else:
            jac[0, c] += k * ax
            jac[1, c] += k * ay
            jac[2, c] += k * az


@_inlined
def _residual(err, frames, n, position, rotmat, row, m):
    """``err = [p_t - p, log(R_t Rᵀ)]`` of the link (:func:`torchik.ik.base.pose_residual`)."""
    for x in range(3):
        err[x] = position[row, x] - frames[n, x, 3]
    if m == 3:
        return
    trace = 0.0
    for x in range(3):  # vee(R_t Rᵀ) = sin θ u = ½ Σ_k r_k x t_k
        y, z = (x + 1) % 3, (x + 2) % 3
        s = 0.0
        for k in range(3):
            s += frames[n, y, k] * rotmat[row, z, k] - frames[n, z, k] * rotmat[row, y, k]
            trace += frames[n, x, k] * rotmat[row, x, k]
        err[3 + x] = 0.5 * s
    sin = math.sqrt(err[3] * err[3] + err[4] * err[4] + err[5] * err[5])
    angle = math.atan2(sin, 0.5 * (trace - 1.0))
    scale = angle / sin if sin > 0 else 1.0
    for x in range(3, 6):
        err[x] *= scale


@_inlined
def _step(out, q, row, jac, err, w, m, lam, chol, y, lower, upper, cont, turn, box):
    """``out = q + Jwᵀ (Jw Jwᵀ + λI)⁻¹ W^½ e``, projected (``jac`` already ``W^½ J``, with the
    columns of blocked joints zeroed): :func:`torchik.ik.lm.damped_step` by Cholesky, then
    :meth:`torchik.ik.base.JointLimits.project`."""
    dof = out.shape[0]
    for i in range(m):
        for j in range(i + 1):
            s = 0.0
            for c in range(dof):
                s += jac[i, c] * jac[j, c]
            for k in range(j):
                s -= chol[i, k] * chol[j, k]
            chol[i, j] = math.sqrt(s + lam) if i == j else s / chol[j, j]
    for i in range(m):  # L z = W^½ e, then Lᵀ y = z
        s = w[i] * err[i]
        for k in range(i):
            s -= chol[i, k] * y[k]
        y[i] = s / chol[i, i]
    for i in range(m - 1, -1, -1):
        s = y[i]
        for k in range(i + 1, m):
            s -= chol[k, i] * y[k]
        y[i] = s / chol[i, i]
    for c in range(dof):
        s = q[row, c]
        for i in range(m):
            s += jac[i, c] * y[i]
        out[c] = _project(s, lower[c], upper[c], cont[c], turn[c], box)


@_inlined
def _wrap(a):
    """``a`` into (-π, π] (:func:`torchik.geometry.joints.wrap_angle`)."""
    a = a - TWO_PI * math.ceil((a - math.pi) / TWO_PI)
    if a <= -math.pi:
        a += TWO_PI
    if a > math.pi:
        a -= TWO_PI
    return a


@_inlined
def _project(v, lower, upper, cont, turn, box):
    """One joint value into its limits (:meth:`torchik.ik.base.JointLimits.project`): with
    shared limits as :func:`torchik.geometry.joints.project_to_limits`; in a row's ``box``,
    a periodic joint moved by whole turns nearest the box's centre, then every joint clamped."""
    if box:
        if cont or turn:
            centre = 0.5 * (lower + upper)
            v = centre + _wrap(v - centre)
        return min(max(v, lower), upper)
    if cont:
        return _wrap(v)
    if turn:  # whole turns into the range: lower + ((v - lower) mod 2π), Python's sign
        v = lower + (v - lower) % TWO_PI
    return min(max(v, lower), upper)


@_inlined
def _iteration(q, row, out, frames, jac, err, chol, y, tree, target, limits, w, m, mu, floor):
    """The residual and cost at ``q[row]`` and the projected next ``out``; returns the cost."""
    parent, kind, source, mult, offset, c_joint, c_link, link_pos = tree
    position, rotmat = target
    boxes, tops, cont, turn, box = limits
    lower, upper = boxes[row if box else 0], tops[row if box else 0]
    n = parent.shape[0]
    _walk(q, row, frames, parent, kind, source, mult, offset, c_joint, c_link, link_pos)
    _jacobian(jac, frames, kind, source, mult, m)
    _residual(err, frames, n, position, rotmat, row, m)
    cost = 0.0
    for r in range(m):
        cost += (w[r] * err[r]) ** 2
    for c in range(q.shape[1]):  # free_limit_columns: clamped joints pushed out of a limit
        g = 0.0
        for r in range(m):
            g += jac[r, c] * (w[r] * (w[r] * err[r]))
        out_low, out_high = q[row, c] <= lower[c] and g < 0, q[row, c] >= upper[c] and g > 0
        blocked = (box or not (cont[c] or turn[c])) and (out_low or out_high)  # the clamped
        for r in range(m):
            jac[r, c] = 0.0 if blocked else w[r] * jac[r, c]
    _step(out, q, row, jac, err, w, m, mu * (cost + floor), chol, y, lower, upper, cont, turn, box)
    return cost


@_kernel
def lm_loop(q, state, tree, target, limits, w, reals, ints):
    """``n_iters`` iterations of every row of ``q``, in place (see
    :func:`torchik.kinematics.native.lm_loop`): rows one after another, a finished row stops.

    Args:
        q: ``(B, D)``.
        state: ``(best_q, best_cost, iterations, finished, seed_cost, stall, age, stalled)``.
        tree: ``(parent, kind, source, multiplier, offset, c_joint, c_link, link_pos)`` of the
            link's needed joints (:func:`torchik.kinematics.native._tree_arrays`).
        target: ``(position (B, 3), rotmat (B, 3, 3))``.
        limits: ``(lower, upper, continuous, full_turn, box)``: ``lower`` and ``upper``
            ``(1, D)`` shared by the rows or ``(B, D)`` one box per row (``box`` true, see
            :meth:`torchik.ik.base.JointLimits.within`), the masks ``(D,)``.
        w: ``(m,)`` square roots of the residual weights.
        reals: ``(damping, damping_floor, tol_position, tol_rotation, 1 - min_improvement)``.
        ints: ``(it, n_iters, max_iters, patience, attempt_iters, track, m)``.
    """
    best_q, best_cost, iterations, finished, seed_cost, stall, age, stalled = state
    mu, floor, tol_p, tol_r, keep = reals
    it0, n_iters, max_iters, patience, attempt_iters, track, m = ints
    dof, n = q.shape[1], tree[0].shape[0]
    frames, jac = np.empty((n + 1, 3, 4), q.dtype), np.empty((6, dof), q.dtype)
    err, y, chol = np.empty(6, q.dtype), np.empty(6, q.dtype), np.empty((6, 6), q.dtype)
    out = np.empty(dof, q.dtype)
    for row in range(q.shape[0]):
        done, i = finished[row], 0
        while i < n_iters and not done:
            cost = _iteration(q, row, out, frames, jac, err, chol, y, tree, target, limits, w,
                              m, mu, floor)  # fmt: skip
            conv = math.sqrt(err[0] ** 2 + err[1] ** 2 + err[2] ** 2) < tol_p
            if m == 6:
                conv = conv and math.sqrt(err[3] ** 2 + err[4] ** 2 + err[5] ** 2) < tol_r
            if cost < best_cost[row] or conv:
                for c in range(dof):
                    best_q[row, c] = q[row, c]
                best_cost[row] = cost
            if conv and it0 + i < max_iters:
                iterations[row] = it0 + i
            if track:
                progress = cost < keep * seed_cost[row]
                seed_cost[row] = cost if progress else seed_cost[row]
                stall[row] = 0 if progress else stall[row] + 1
                age[row] += 1
            if conv:
                done = True
            else:
                for c in range(dof):
                    q[row, c] = out[c]
            i += 1
        finished[row] = done
        if track:  # a finished row's cost no longer falls: its counters run on
            stall[row] += n_iters - i
            age[row] += n_iters - i
            late = stall[row] >= patience or (attempt_iters > 0 and age[row] >= attempt_iters)
            stalled[row] = late and not done

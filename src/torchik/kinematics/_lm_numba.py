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
    folder. Then they are compiled in every process instead (about 10 s per dtype and kernel)."""
    try:
        numba.njit(cache=True)(_probe)
    except RuntimeError:
        return False
    return True


CACHE = _caching()
"""Whether the kernels are kept in Numba's cache on disk (see :func:`_caching`)."""
_kernel = numba.njit(cache=CACHE, nogil=True)
_inlined = numba.njit(cache=CACHE, nogil=True, inline="always")  # a row's helpers: one function
_called = numba.njit(cache=CACHE, nogil=True)  # the rarer paths' helpers, compiled once each


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
def _walk(q, row, frames, parent, kind, source, mult, offset, c_joint, c_link, link_pos, shift):
    """Frames of the needed joints ``frames[:n]`` and of the links ``frames[n + t]``; joint
    values from ``q[row, shift:]`` (after a floating base's 7), the root's frame where a
    ``parent`` says so (``frames[n + T]``, a floating base, set before)."""
    n = parent.shape[0]
    for i in range(n):
        _place(frames, i, parent[i], frames, c_joint[i])
        t = mult[i] * q[row, shift + source[i]] + offset[i]
        if kind[i] == 0:  # revolute about z: columns 0 and 1 turn
            co, si = math.cos(t), math.sin(t)
            for a in range(3):
                f0, f1 = frames[i, a, 0], frames[i, a, 1]
                frames[i, a, 0] = co * f0 + si * f1
                frames[i, a, 1] = co * f1 - si * f0
        else:  # prismatic along z
            for a in range(3):
                frames[i, a, 3] = frames[i, a, 3] + t * frames[i, a, 2]
    for t in range(link_pos.shape[0]):
        _place(frames, n + t, link_pos[t], frames, c_link[t])


@_inlined
def _jacobian(jac, frames, kind, source, mult, chain, sizes, floating, slot):
    """The geometric Jacobians of the links (``frames[n + t]``), stacked: rows ``o..o+s-1`` of
    link ``t`` (``s = sizes[t]``, 3 or 6) from the joints of its ``chain[t]``; with a
    ``floating`` base (``frames[n + T]``) first its 6 twist columns
    (:func:`torchik.geometry.floating.base_jacobian`), then the joints'; in ``jac``'s own
    columns: column ``c`` of the full Jacobian is ``jac[:, slot[c]]``, only the columns that
    some joint of the links' chains moves kept (the G1's two hands: 17 of its 29 joints)."""
    n, links = kind.shape[0], sizes.shape[0]
    for r in range(jac.shape[0]):
        for c in range(jac.shape[1]):
            jac[r, c] = 0.0
    o, shift = 0, 6 if floating else 0
    for t in range(links):
        ex, ey, ez = frames[n + t, 0, 3], frames[n + t, 1, 3], frames[n + t, 2, 3]
        six = sizes[t] == 6
        if floating:
            _base_columns(jac, frames, n + links, o, six, ex, ey, ez)
        for i in range(n):
            if not chain[t, i]:
                continue
            ax, ay, az = frames[i, 0, 2], frames[i, 1, 2], frames[i, 2, 2]
            k, c = mult[i], slot[shift + source[i]]
            if kind[i] == 0:
                dx, dy, dz = ex - frames[i, 0, 3], ey - frames[i, 1, 3], ez - frames[i, 2, 3]
                jac[o, c] += k * (ay * dz - az * dy)
                jac[o + 1, c] += k * (az * dx - ax * dz)
                jac[o + 2, c] += k * (ax * dy - ay * dx)
                if six:
                    jac[o + 3, c] += k * ax
                    jac[o + 4, c] += k * ay
                    jac[o + 5, c] += k * az
            else:
                jac[o, c] += k * ax
                jac[o + 1, c] += k * ay
                jac[o + 2, c] += k * az
        o += sizes[t]


@_called
def _base_columns(jac, frames, b, o, six, ex, ey, ez):
    """A floating base's 6 columns of the link rows from ``o`` (its origin at ``(ex, ey,
    ez)``; the base's frame ``frames[b]``): linear rows ``[R, -[x - p]x R]``, angular rows
    ``[0, R]`` (:func:`torchik.geometry.floating.base_jacobian`)."""
    d0, d1, d2 = ex - frames[b, 0, 3], ey - frames[b, 1, 3], ez - frames[b, 2, 3]
    for k in range(3):
        r0, r1, r2 = frames[b, 0, k], frames[b, 1, k], frames[b, 2, k]
        jac[o, k], jac[o + 1, k], jac[o + 2, k] = r0, r1, r2
        jac[o, 3 + k] = r1 * d2 - r2 * d1
        jac[o + 1, 3 + k] = r2 * d0 - r0 * d2
        jac[o + 2, 3 + k] = r0 * d1 - r1 * d0
        if six:
            jac[o + 3, 3 + k], jac[o + 4, 3 + k], jac[o + 5, 3 + k] = r0, r1, r2


@_called
def _base(q, row, frames, b, origin, rot):
    """A floating base's frame ``frames[b] = origin @ [R(quat) | p]`` from ``q[row, :7]``, and
    ``rot = R(quat)`` (:func:`_quat_rotation`)."""
    _quat_rotation(q, row, rot)
    for a in range(3):
        for col in range(4):
            s = origin[a, 3] if col == 3 else 0.0
            for k in range(3):
                s += origin[a, k] * (q[row, k] if col == 3 else rot[k, col])
            frames[b, a, col] = s


@_inlined
def _quat_rotation(q, row, rot):
    """``rot = R(quat)`` of the quaternion ``q[row, 3:7]``
    (:func:`torchik.geometry.rotations.quat_to_rotmat`: ``q / |q|``'s)."""
    w, x, y, z = q[row, 3], q[row, 4], q[row, 5], q[row, 6]
    s = 2.0 / (w * w + x * x + y * y + z * z)
    rot[0, 0], rot[0, 1], rot[0, 2] = (
        1 - s * (y * y + z * z),
        s * (x * y - w * z),
        s * (x * z + w * y),
    )
    rot[1, 0], rot[1, 1], rot[1, 2] = (
        s * (x * y + w * z),
        1 - s * (x * x + z * z),
        s * (y * z - w * x),
    )
    rot[2, 0], rot[2, 1], rot[2, 2] = (
        s * (x * z - w * y),
        s * (y * z + w * x),
        1 - s * (x * x + y * y),
    )


@_inlined
def _residual(err, frames, n, position, rotmat, row, sizes):
    """``err = [p_t - p, log(R_t Rᵀ)]`` of every link, stacked
    (:func:`torchik.ik.base.pose_residual`)."""
    o = 0
    for t in range(sizes.shape[0]):
        f = n + t
        for x in range(3):
            err[o + x] = position[row, t, x] - frames[f, x, 3]
        if sizes[t] == 6:
            trace = 0.0
            for x in range(3):  # vee(R_t Rᵀ) = sin θ u = ½ Σ_k r_k x t_k
                y, z = (x + 1) % 3, (x + 2) % 3
                s = 0.0
                for k in range(3):
                    a, b = frames[f, y, k] * rotmat[row, t, z, k], frames[f, z, k]
                    s += a - b * rotmat[row, t, y, k]
                    trace += frames[f, x, k] * rotmat[row, t, x, k]
                err[o + 3 + x] = 0.5 * s
            e3, e4, e5 = err[o + 3], err[o + 4], err[o + 5]
            sin = math.sqrt(e3 * e3 + e4 * e4 + e5 * e5)
            angle = math.atan2(sin, 0.5 * (trace - 1.0))
            scale = angle / sin if sin > 0 else 1.0
            for x in range(3, 6):
                err[o + x] *= scale
        o += sizes[t]


@_inlined
def _converged(err, sizes, tol_p, tol_r):
    """Every link's position error under ``tol_p`` and (poses) its angle under ``tol_r``."""
    o = 0
    for t in range(sizes.shape[0]):
        if not math.sqrt(err[o] ** 2 + err[o + 1] ** 2 + err[o + 2] ** 2) < tol_p:
            return False
        if sizes[t] == 6:
            if not math.sqrt(err[o + 3] ** 2 + err[o + 4] ** 2 + err[o + 5] ** 2) < tol_r:
                return False
        o += sizes[t]
    return True


@_inlined
def _solve(jac, rhs, lam, chol, y):
    """``y = (Jw Jwᵀ + λI)⁻¹ rhs`` by Cholesky (``jac`` is ``Jw``, ``m x D``)."""
    m, dof = rhs.shape[0], jac.shape[1]
    for i in range(m):
        for j in range(i + 1):
            s = 0.0
            for c in range(dof):
                s += jac[i, c] * jac[j, c]
            for k in range(j):
                s -= chol[i, k] * chol[j, k]
            chol[i, j] = math.sqrt(s + lam) if i == j else s / chol[j, j]
    for i in range(m):  # L z = rhs, then Lᵀ y = z
        s = rhs[i]
        for k in range(i):
            s -= chol[i, k] * y[k]
        y[i] = s / chol[i, i]
    for i in range(m - 1, -1, -1):
        s = y[i]
        for k in range(i + 1, m):
            s -= chol[k, i] * y[k]
        y[i] = s / chol[i, i]


@_inlined
def _plain_step(out, q, row, jac, err, w, lam, work, lower, upper, cont, turn, box, used):
    """``out = q + Jwᵀ (Jw Jwᵀ + λI)⁻¹ W^½ e`` projected, on a fixed base without posture: the
    step of :func:`torchik.ik.lm.damped_step` by Cholesky (``jac`` already ``W^½ J``, blocked
    columns zeroed; its column ``k`` is joint ``used[k]``'s, the other joints do not move),
    then :meth:`torchik.ik.base.JointLimits.project`."""
    chol, rhs, y = work[0], work[1], work[2]
    m = err.shape[0]
    for i in range(m):
        rhs[i] = w[i] * err[i]
    _solve(jac, rhs, lam, chol, y)
    for c in range(out.shape[0]):
        out[c] = _project(q[row, c], lower[c], upper[c], cont[c], turn[c], box)
    for k in range(used.shape[0]):
        c = used[k]
        s = q[row, c]
        for i in range(m):
            s += jac[i, k] * y[i]
        out[c] = _project(s, lower[c], upper[c], cont[c], turn[c], box)


@_called
def _step(dv, q, row, jac, err, w, lam, eps, work, posture, shift, used):
    """The step ``dv = Jwᵀ (Jw Jwᵀ + λI)⁻¹ W^½ e`` (``jac`` already ``W^½ J``, with the
    columns of blocked joints zeroed): :func:`torchik.ik.lm.damped_step` by Cholesky. With a
    posture gain, the step towards rest ``z`` (joints only, after ``shift`` twist columns) is
    added minus its part in the row space of ``Jw`` (``λ = eps`` there), as
    :class:`torchik.ik.wholebody.WholeBodyLM` does. ``jac``'s column ``k`` is column
    ``used[k]`` of the step (the others are zero)."""
    chol, rhs, y, y2, z = work
    rest, columns, gain, max_step = posture
    m, nv = err.shape[0], dv.shape[0]
    for i in range(m):
        rhs[i] = w[i] * err[i]
    _solve(jac, rhs, lam, chol, y)
    dv[:] = 0.0
    for k in range(used.shape[0]):
        s = 0.0
        for i in range(m):
            s += jac[i, k] * y[i]
        dv[used[k]] = s
    if gain > 0.0:
        norm, lift = 0.0, 1 if shift else 0  # column c moves q[c + 1] after a floating base
        for c in range(nv):
            moved = columns[c] and c >= shift
            z[c] = gain * (rest[row, c + lift] - q[row, c + lift]) if moved else 0.0
            norm += z[c] * z[c]
        scale = max_step / max(math.sqrt(norm), max_step)  # at most max_step long
        for c in range(nv):
            z[c] *= scale
        for i in range(m):
            s = 0.0
            for k in range(used.shape[0]):
                s += jac[i, k] * z[used[k]]
            rhs[i] = s
        _solve(jac, rhs, eps, chol, y2)
        for c in range(nv):
            dv[c] = dv[c] + z[c]
        for k in range(used.shape[0]):
            s = 0.0
            for i in range(m):
                s += jac[i, k] * y2[i]
            dv[used[k]] = dv[used[k]] - s


@_called
def _advance(out, q, row, dv, rot, lower, upper, cont, turn, box, floating, moves):
    """``out = q ⊕ dv`` projected into the limits
    (:meth:`torchik.ik.base.JointLimits.project`): a floating base moved by its twist
    (:func:`torchik.geometry.floating.integrate`) and, when it ``moves``, its quaternion
    normalised (:meth:`torchik.ik.wholebody.WholeBodyProblem.project`)."""
    if not floating:
        for c in range(out.shape[0]):
            out[c] = _project(q[row, c] + dv[c], lower[c], upper[c], cont[c], turn[c], box)
        return
    for a in range(3):  # p + R v
        s = rot[a, 0] * dv[0] + rot[a, 1] * dv[1] + rot[a, 2] * dv[2]
        out[a] = q[row, a] + s
    h = 0.5 * math.sqrt(dv[3] * dv[3] + dv[4] * dv[4] + dv[5] * dv[5])  # exp(w / 2)
    cw, sc = math.cos(h), (0.5 * (math.sin(h) / h) if h > 0.0 else 0.5)
    ex, ey, ez = sc * dv[3], sc * dv[4], sc * dv[5]
    w, x, y, z = q[row, 3], q[row, 4], q[row, 5], q[row, 6]
    qw = w * cw - x * ex - y * ey - z * ez
    qx = w * ex + x * cw + y * ez - z * ey
    qy = w * ey - x * ez + y * cw + z * ex
    qz = w * ez + x * ey - y * ex + z * cw
    _unit(out, qw, qx, qy, qz)
    for c in range(7, out.shape[0]):
        out[c] = q[row, c] + dv[c - 1]
    for c in range(out.shape[0]):
        out[c] = _project(out[c], lower[c], upper[c], cont[c], turn[c], box)
    if moves:
        _unit(out, out[3], out[4], out[5], out[6])


@_inlined
def _unit(out, w, x, y, z):
    """``out[3:7]`` the quaternion ``(w, x, y, z)`` normalised (zero stays zero)."""
    norm = max(math.sqrt(w * w + x * x + y * y + z * z), 1e-154)
    out[3], out[4], out[5], out[6] = w / norm, x / norm, y / norm, z / norm


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


@_called
def _iteration(q, row, out, frames, jac, err, work, tree, target, limits, posture, base, w, mu,
               floor, floating):  # fmt: skip
    """The residual and cost at ``q[row]`` and the projected next ``out``; returns the cost.
    A function of its own, compiled once per value of ``floating`` (a literal of each kernel:
    the other's branches compiled out), not inlined: the kernels then compile in about the
    time one link's took."""
    parent, kind, source, mult, offset, c_joint, c_link, link_pos, chain, used, slot = tree
    position, rotmat, sizes = target
    boxes, tops, cont, turn, box = limits
    moves, origin, rot, dv = base
    columns = posture[1]
    lower, upper = boxes[row if box else 0], tops[row if box else 0]
    n, m = parent.shape[0], err.shape[0]
    shift = 6 if floating else 0  # twist columns before the joints'
    if floating:
        _base(q, row, frames, n + sizes.shape[0], origin, rot)
    _walk(q, row, frames, parent, kind, source, mult, offset, c_joint, c_link, link_pos,
          7 if floating else 0)  # fmt: skip
    _jacobian(jac, frames, kind, source, mult, chain, sizes, floating, slot)
    _residual(err, frames, n, position, rotmat, row, sizes)
    cost = 0.0
    for r in range(m):
        cost += (w[r] * err[r]) ** 2
    for k in range(jac.shape[1]):  # free_limit_columns: clamped joints pushed out of a limit
        c = used[k]
        g = 0.0
        for r in range(m):
            g += jac[r, k] * (w[r] * (w[r] * err[r]))
        x = c + 1 if floating else c  # the coordinate of q it moves
        out_low, out_high = q[row, x] <= lower[x] and g < 0, q[row, x] >= upper[x] and g > 0
        blocked = (box or not (cont[x] or turn[x])) and (out_low or out_high) and c >= shift
        blocked = blocked or not columns[c]  # a joint the solve holds
        for r in range(m):
            jac[r, k] = 0.0 if blocked else w[r] * jac[r, k]
    lam = mu * (cost + floor)
    if not floating and posture[2] == 0.0:
        _plain_step(out, q, row, jac, err, w, lam, work, lower, upper, cont, turn, box, used)
        return cost
    _step(dv, q, row, jac, err, w, lam, mu * floor, work, posture, shift, used)
    _advance(out, q, row, dv, rot, lower, upper, cont, turn, box, floating, moves)
    return cost


@_kernel
def lm_loop(q, state, tree, target, limits, posture, base, w, reals, ints, restart):
    """``n_iters`` iterations of every row of ``q`` on a fixed base, in place: see
    :func:`_loop` (the floating base's code compiled out)."""
    _loop(q, state, tree, target, limits, posture, base, w, reals, ints, restart, False)


@_kernel
def lm_loop_floating(q, state, tree, target, limits, posture, base, w, reals, ints, restart):
    """:func:`lm_loop` with a floating base first in ``q``."""
    _loop(q, state, tree, target, limits, posture, base, w, reals, ints, restart, True)


@_called
def _reseed(q, row, restart, scores, taken, fit, floating):
    """A stalled row's next seed, in place: its attempt ``a`` (one more than
    ``attempt[row]``) takes the member of rank ``⌊(a - 1) / R⌋`` (0: the nearest) in pose
    distance to its targets (``aims[row] · features``) of sub-pool ``(slot[row] + a) mod k`` of
    pool ``(a - 1) mod R``; a moving ``floating`` base is then placed where the links best fit
    the row's targets (:func:`_fit_base`, ``fit`` its arguments). Returns ``False`` (nothing
    done) once the ranks run out."""
    configs, features, aims, slot, attempt, sizes = restart
    k, size, pools = sizes[0], sizes[1], sizes[2]
    a = attempt[row] + 1
    rank = (a - 1) // pools
    if rank >= size:
        return False
    start = ((a - 1) % pools * k + (slot[row] + a) % k) * size
    for j in range(size):
        total = np.float32(0.0)
        for f in range(features.shape[1]):
            total += aims[row, f] * features[start + j, f]
        scores[j], taken[j] = total, False
    best = 0
    for _ in range(rank + 1):  # the rank-th smallest: the smallest left, rank + 1 times
        best = -1
        for j in range(size):
            if not taken[j] and (best < 0 or scores[j] < scores[best]):
                best = j
        taken[best] = True
    for c in range(q.shape[1]):
        q[row, c] = configs[start + best, c]
    if floating and fit[4][0]:  # a moving base
        frames, tree, target, w, base = fit
        _fit_base(q, row, frames, tree, target, w, base[1], base[2])
    attempt[row] = a
    return True


@_called
def _fit_base(q, row, frames, tree, target, w, origin, rot):
    """The floating base of ``q[row]`` (its 7 coordinates overwritten) moved to where the links
    best fit the row's targets, in place: the weighted fit of
    :func:`torchik.ik.wholebody.fit_base` (position weights ``w[o]²``, rotation weights
    ``w[o + 3]²``: the target's weight, times ``ρ²``), its rotation by Horn's method instead
    of the SVD, the same maximiser of ``tr(Rᵀ M)`` over rotations: the unit quaternion of the
    largest eigenvalue of a symmetric 4x4 matrix (:func:`_top_eigenvector`)."""
    parent, kind, source, mult, offset, c_joint, c_link, link_pos = tree[:8]
    position, rotmat, sizes = target
    n, links = parent.shape[0], sizes.shape[0]
    for c in range(7):  # the neutral base: the links' frames X_i
        q[row, c] = 1.0 if c == 3 else 0.0
    _base(q, row, frames, n + links, origin, rot)
    _walk(q, row, frames, parent, kind, source, mult, offset, c_joint, c_link, link_pos, 7)
    x_mean, p_mean, m = np.zeros(3), np.zeros(3), np.zeros((3, 3))
    total, o = 0.0, 0
    for t in range(links):
        weight = w[o] * w[o]
        total += weight
        for a in range(3):
            x_mean[a] += weight * frames[n + t, a, 3]
            p_mean[a] += weight * position[row, t, a]
        o += sizes[t]
    x_mean /= total
    p_mean /= total
    o = 0
    for t in range(links):
        weight, turn = w[o] * w[o], w[o + 3] * w[o + 3] if sizes[t] == 6 else 0.0
        for a in range(3):
            for b in range(3):
                m[a, b] += (
                    weight * (position[row, t, a] - p_mean[a]) * (frames[n + t, b, 3] - x_mean[b])
                )
                for k in range(3):  # R_t R_iᵀ
                    m[a, b] += turn * rotmat[row, t, a, k] * frames[n + t, b, k]
        o += sizes[t]
    _place_fitted(q, row, m, x_mean, p_mean, origin, rot)


@_called
def _place_fitted(q, row, m, x_mean, p_mean, origin, rot):
    """``q[row]``'s base the rotation ``R`` maximising ``tr(Rᵀ m)`` and ``t = p̄ - R x̄``,
    taken into the base's joint frame: ``origin⁻¹ [R | t] origin``."""
    u = _top_eigenvector(_quaternion_form(m, 0.0))  # tr(R(u)ᵀ m) = uᵀ form u for unit u
    for c in range(4):
        q[row, 3 + c] = u[c]
    _quat_rotation(q, row, rot)  # R(u)
    world = np.empty((3, 4))  # [R | t] origin, then origin⁻¹ of it
    for a in range(3):
        shift = p_mean[a]
        for k in range(3):
            shift -= rot[a, k] * x_mean[k]
        for c in range(4):
            s = shift if c == 3 else 0.0
            for k in range(3):
                s += rot[a, k] * origin[k, c]
            world[a, c] = s
    for a in range(3):
        for c in range(4):
            s = 0.0
            for k in range(3):
                s += origin[k, a] * (world[k, c] - (origin[k, 3] if c == 3 else 0.0))
            if c == 3:
                q[row, a] = s
            else:
                rot[a, c] = s
    _quaternion(rot, q, row)


@_called
def _quaternion_form(m, one):
    """The symmetric 4x4 ``one I + F(m)`` with ``uᵀ F(m) u = tr(R(u)ᵀ m)`` for unit quaternions
    ``u = (w, x, y, z)`` and a 3x3 ``m`` (float64): Horn's matrix with ``one = 0``; for a
    rotation ``m = R(u)`` and ``one = 1`` it is ``4 u uᵀ`` (Shepperd's)."""
    f = np.empty((4, 4))
    f[0, 0] = one + m[0, 0] + m[1, 1] + m[2, 2]
    f[1, 1] = one + m[0, 0] - m[1, 1] - m[2, 2]
    f[2, 2] = one - m[0, 0] + m[1, 1] - m[2, 2]
    f[3, 3] = one - m[0, 0] - m[1, 1] + m[2, 2]
    f[0, 1] = f[1, 0] = m[2, 1] - m[1, 2]
    f[0, 2] = f[2, 0] = m[0, 2] - m[2, 0]
    f[0, 3] = f[3, 0] = m[1, 0] - m[0, 1]
    f[1, 2] = f[2, 1] = m[0, 1] + m[1, 0]
    f[1, 3] = f[3, 1] = m[0, 2] + m[2, 0]
    f[2, 3] = f[3, 2] = m[1, 2] + m[2, 1]
    return f


@_called
def _top_eigenvector(a):
    """The unit eigenvector of the largest eigenvalue of the symmetric 4x4 ``a`` (overwritten):
    cyclic Jacobi rotations until the off-diagonal part is below rounding."""
    v = np.eye(4)
    for _ in range(32):
        off, scale = 0.0, 0.0
        for i in range(4):
            scale += a[i, i] * a[i, i]
            for j in range(i + 1, 4):
                off += a[i, j] * a[i, j]
        if off <= 1e-32 * (scale + 2 * off) or off == 0.0:
            break
        for i in range(3):
            for j in range(i + 1, 4):
                if a[i, j] == 0.0:
                    continue
                theta = (a[j, j] - a[i, i]) / (2.0 * a[i, j])
                t = 1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0))
                t = -t if theta < 0 else t
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                for k in range(4):  # columns i and j, then rows i and j, of a; v's columns
                    x, y = a[k, i], a[k, j]
                    a[k, i], a[k, j] = c * x - s * y, s * x + c * y
                for k in range(4):
                    x, y = a[i, k], a[j, k]
                    a[i, k], a[j, k] = c * x - s * y, s * x + c * y
                for k in range(4):
                    x, y = v[k, i], v[k, j]
                    v[k, i], v[k, j] = c * x - s * y, s * x + c * y
    best = 0
    for i in range(1, 4):
        best = i if a[i, i] > a[best, best] else best
    return v[:, best].copy()


@_called
def _quaternion(rot, q, row):
    """``q[row, 3:7]``: the unit quaternion of the rotation ``rot[:, :3]``, ``w >= 0``
    (:func:`torchik.geometry.rotations.rotmat_to_quat`, Shepperd's method, and
    :func:`~torchik.geometry.rotations.quat_canonical`)."""
    r = np.empty((3, 3))  # in float64
    for a in range(3):
        for b in range(3):
            r[a, b] = rot[a, b]
    m = _quaternion_form(r, 1.0)  # 4 u uᵀ
    best = 0
    for i in range(1, 4):
        best = i if m[i, i] > m[best, best] else best
    norm = 0.0
    for c in range(4):
        norm += m[best, c] * m[best, c]
    norm = math.sqrt(norm)
    key = 0.0
    for c in range(4):  # the first nonzero of w, x, y, z made positive
        key = m[best, c] if key == 0.0 else key
    sign = -1.0 if key < 0 else 1.0
    for c in range(4):
        q[row, 3 + c] = sign * m[best, c] / norm


@_inlined
def _loop(q, state, tree, target, limits, posture, base, w, reals, ints, restart, floating):
    """``n_iters`` iterations of every row of ``q``, in place (see
    :func:`torchik.kinematics.native.lm_loop`): rows one after another, a finished row stops.

    Args:
        q: ``(B, nq)``.
        state: ``(best_q, best_cost, iterations, finished, seed_cost, stall, age, stalled)``.
        tree: ``(parent, kind, source, multiplier, offset, c_joint, c_link, link_pos, chain,
            used, slot)`` of the links' needed joints
            (:func:`torchik.kinematics.native._tree_arrays`): ``used`` the Jacobian columns
            they move, ``slot`` each column's place among them (-1: none).
        target: ``(position (B, T, 3), rotmat (B, T, 3, 3), sizes (T,))``: ``sizes[t]`` 6 for
            a pose, 3 for a position (its ``rotmat`` never read).
        limits: ``(lower, upper, continuous, full_turn, box)``: ``lower`` and ``upper``
            ``(1, nq)`` shared by the rows or ``(B, nq)`` one box per row (``box`` true, see
            :meth:`torchik.ik.base.JointLimits.within`), the masks ``(nq,)``.
        posture: ``(rest (B, nq), columns (nv,) bool, gain, max_step)``: the columns stepped
            (the others zeroed) and the posture term (``gain`` 0: none, ``rest`` not read).
        base: ``(floating, moves, origin (3, 4))``: a floating base first in ``q`` (its 7
            coordinates, 6 twist columns; ``nv = nq - 1``; ``floating`` the kernel's own
            constant), whether it moves, and its joint's origin.
        w: ``(m,)`` square roots of the residual weights.
        reals: ``(damping, damping_floor, tol_position, tol_rotation, 1 - min_improvement)``.
        ints: ``(it, n_iters, max_iters, patience, attempt_iters, track, settle)``; with
            ``settle`` every row steps ``n_iters`` times whatever it converged, its last
            converged ``q`` kept in ``best_q`` (nothing else written).
        restart: ``(configs (R k P, nq), features (R k P, F) float32, aims (B, F) float32,
            slot (B,), attempt (B,), (k, P, R, group, chunk, early))``: with ``P > 0`` (and
            ``track``) a row that stalls starts again at once from its next seed of the pools
            (:func:`_reseed`; ``attempt`` counted, its stall counters cleared), instead of
            waiting, ``stalled``, for the caller's; ``P`` 0: never. With ``group > 1`` the
            rows are targets' ``group`` slots (``B`` a multiple): a target's slots step
            together in chunks of ``chunk`` iterations and, with ``early``, after a chunk in
            which one of them finished every one does (the early stop of
            :func:`torchik.ik.fixed.finish_groups`), so that a whole solve is one call.
    """
    best_q, best_cost, iterations, finished, seed_cost, stall, age, stalled = state
    mu, floor, tol_p, tol_r, keep = reals
    it0, n_iters, max_iters, patience, attempt_iters, track, settle = ints
    moves, origin = base[1], base[2]  # base[0]: floating, this kernel's own constant
    sizes = target[2]
    dof, n, m = q.shape[1], tree[0].shape[0], 0
    nv = dof - 1 if floating else dof
    for t in range(sizes.shape[0]):
        m += sizes[t]
    frames = np.empty((n + sizes.shape[0] + 1, 3, 4), q.dtype)  # joints, links, a base
    jac = np.empty((m, tree[9].shape[0]), q.dtype)  # the used columns only
    err, out = np.empty(m, q.dtype), np.empty(dof, q.dtype)
    work = (np.empty((m, m), q.dtype), np.empty(m, q.dtype), np.empty(m, q.dtype),
            np.empty(m, q.dtype), np.empty(nv, q.dtype))  # fmt: skip
    moving = (moves, origin, np.empty((3, 3), q.dtype), np.empty(nv, q.dtype))
    pool, unit = restart[5][1] if track else 0, max(restart[5][3], 1)
    chunk, early = restart[5][4] if unit > 1 else n_iters, restart[5][5] != 0
    scores, taken = np.empty(pool, np.float32), np.empty(pool, np.bool_)
    for first in range(0, q.shape[0], unit):  # a target's slots together where grouped
        e = 0
        while e < n_iters:
            steps = min(chunk, n_iters - e)
            hit = False
            for row in range(first, first + unit):
                done, i = finished[row] and not settle, 0
                while i < steps and not done:
                    cost = _iteration(q, row, out, frames, jac, err, work, tree, target, limits,
                                      posture, moving, w, mu, floor, floating)  # fmt: skip
                    conv = _converged(err, sizes, tol_p, tol_r)
                    if settle:  # every row steps on; its last converged iterate is kept
                        for c in range(dof):
                            best_q[row, c] = q[row, c] if conv else best_q[row, c]
                            q[row, c] = out[c]
                        i += 1
                        continue
                    _keep(q, row, out, best_q, best_cost, iterations, row, cost, conv,
                          it0 + e + i, max_iters)  # fmt: skip
                    if track:
                        counters = (seed_cost, stall, age, keep, patience, attempt_iters)
                        _count(q, row, cost, conv, counters, pool, restart, scores, taken,
                               (frames, tree, target, w, moving), floating)  # fmt: skip
                    done = conv
                    i += 1
                if settle:
                    continue
                finished[row] = done
                hit = hit or done
                if track:  # a finished row's cost no longer falls: its counters run on
                    stall[row] += steps - i
                    age[row] += steps - i
                    late = stall[row] >= patience or (0 < attempt_iters <= age[row])
                    stalled[row] = late and not done
            every = _early_stop(first, unit, early and hit, it0 + e + steps - 1, max_iters,
                                iterations, finished, stalled)  # fmt: skip
            e += steps
            if unit > 1 and every:
                break


@_inlined
def _count(q, row, cost, conv, counters, pool, restart, scores, taken, fit, floating):
    """After an iteration of ``q[row]``: its stall counters (``seed_cost``, ``stall``, ``age``
    of ``counters``, with the rule's ``keep``, ``patience`` and ``attempt_iters``) and, where
    it stalls and ``pool > 0``, its restart from the pools (:func:`_reseed`, with ``fit`` and
    ``floating``), counters cleared."""
    seed_cost, stall, age, keep, patience, attempt_iters = counters
    progress = cost < keep * seed_cost[row]
    seed_cost[row] = cost if progress else seed_cost[row]
    stall[row] = 0 if progress else stall[row] + 1
    age[row] += 1
    late = stall[row] >= patience or (0 < attempt_iters <= age[row])
    if late and not conv and pool > 0 and _reseed(q, row, restart, scores, taken, fit, floating):
        seed_cost[row], stall[row], age[row] = np.inf, 0, 0


@_inlined
def _early_stop(first, unit, hit, last, max_iters, iterations, finished, stalled):
    """After a chunk of a target's ``unit`` slots (rows ``first`` on) whose last evaluation is
    ``last``: with ``hit`` (grouped, early stop, and a slot finished) every slot finishes, its
    ``iterations`` ``last`` where unset and under ``max_iters`` (as
    :func:`torchik.ik.fixed.finish_groups`). Returns whether every slot has finished."""
    every = True
    for row in range(first, first + unit):
        if unit > 1 and hit:
            if iterations[row] == max_iters and last < max_iters:
                iterations[row] = last
            finished[row], stalled[row] = True, False
        every = every and finished[row]
    return every


@_inlined
def _keep(q, row, out, best_q, best_cost, iterations, k, cost, conv, it, max_iters):
    """After an iteration of ``q[row]`` (its cost, whether it converged, the evaluation
    ``it``): ``best_q[k]`` and ``best_cost[k]`` keep the best iterate (a converged one always),
    ``iterations[k]`` the evaluation it converged at (under ``max_iters``), and an unconverged
    row steps on to ``out``. What :func:`_loop` and :func:`_slots` do with every iteration."""
    if cost < best_cost[k] or conv:
        for c in range(q.shape[1]):
            best_q[k, c] = q[row, c]
        best_cost[k] = cost
    if conv and it < max_iters:
        iterations[k] = it
    if not conv:
        for c in range(q.shape[1]):
            q[row, c] = out[c]


BLOCK = 64
"""Rows walked at once by :func:`_walk_block`."""


@_inlined
def _walk_block(q, start, rows, frames, angles, cos, sin, tree):
    """:func:`_walk` of the rows ``start:start + rows`` (at most :data:`BLOCK`) at once, on a
    fixed base: ``frames (n + T, 3, 4, BLOCK)`` holds a row per lane. The same operations in
    the same order (the same values bit for bit), with the rows in the innermost loops, which
    the compiler vectorises: FK of a pool of configurations in half the time."""
    parent, kind, source, mult, offset, c_joint, c_link, link_pos = tree[:8]
    n = parent.shape[0]
    for i in range(n + link_pos.shape[0]):
        p, c = (parent[i], c_joint[i]) if i < n else (link_pos[i - n], c_link[i - n])
        for a in range(3):
            for col in range(4):
                if p < 0:
                    for r in range(rows):
                        frames[i, a, col, r] = c[a, col]
                    continue
                c0, c1, c2 = c[0, col], c[1, col], c[2, col]
                for r in range(rows):  # _place's sums, in its order
                    s = frames[p, a, 0, r] * c0 + frames[p, a, 1, r] * c1
                    s += frames[p, a, 2, r] * c2
                    frames[i, a, col, r] = s + frames[p, a, 3, r] if col == 3 else s
        if i >= n:
            continue
        for r in range(rows):
            angles[r] = mult[i] * q[start + r, source[i]] + offset[i]
        if kind[i] == 0:  # revolute about z: columns 0 and 1 turn
            for r in range(rows):
                cos[r], sin[r] = math.cos(angles[r]), math.sin(angles[r])
            for a in range(3):
                for r in range(rows):
                    f0, f1 = frames[i, a, 0, r], frames[i, a, 1, r]
                    frames[i, a, 0, r] = cos[r] * f0 + sin[r] * f1
                    frames[i, a, 1, r] = cos[r] * f1 - sin[r] * f0
        else:  # prismatic along z
            for a in range(3):
                for r in range(rows):
                    frames[i, a, 3, r] = frames[i, a, 3, r] + angles[r] * frames[i, a, 2, r]


@_inlined
def _block_scratch(tree, dtype):
    """``(frames, angles, cos, sin)`` for :func:`_walk_block`."""
    size = tree[0].shape[0] + tree[7].shape[0]
    frames = np.empty((size, 3, 4, BLOCK), dtype)
    return frames, np.empty(BLOCK, dtype), np.empty(BLOCK, dtype), np.empty(BLOCK, dtype)


@_kernel
def link_poses(q, out, tree):
    """``out[row, t] = T_root_link`` (``(B, T, 4, 4)``) of the links of ``tree`` (their needed
    joints' constants, :func:`torchik.kinematics.native._tree_arrays`), :data:`BLOCK` rows at
    a time."""
    n, links = tree[0].shape[0], tree[7].shape[0]
    frames, angles, cos, sin = _block_scratch(tree, q.dtype)
    for start in range(0, q.shape[0], BLOCK):
        rows = min(BLOCK, q.shape[0] - start)
        _walk_block(q, start, rows, frames, angles, cos, sin, tree)
        for r in range(rows):
            for t in range(links):
                for a in range(3):
                    for c in range(4):
                        out[start + r, t, a, c] = frames[n + t, a, c, r]
                    out[start + r, t, 3, a] = 0.0
                out[start + r, t, 3, 3] = 1.0


@_kernel
def link_jacobian(q, jac, pose, tree):
    """The geometric Jacobian ``jac[row] (6, D)`` of the one link of ``tree`` and its pose
    ``pose[row] (4, 4)``: :func:`_jacobian` of :func:`_walk`'s frames (the same sums in the
    same order), :data:`BLOCK` rows at a time (:func:`_walk_block`)."""
    kind, source, mult, chain = tree[1], tree[2], tree[3], tree[8]
    n, dof = kind.shape[0], jac.shape[2]
    frames, angles, cos, sin = _block_scratch(tree, q.dtype)
    block = np.empty((6, dof, BLOCK), q.dtype)
    for start in range(0, q.shape[0], BLOCK):
        rows = min(BLOCK, q.shape[0] - start)
        _walk_block(q, start, rows, frames, angles, cos, sin, tree)
        block[:] = 0.0
        for i in range(n):
            if not chain[0, i]:
                continue
            k, c = mult[i], source[i]
            for r in range(rows):
                ax, ay, az = frames[i, 0, 2, r], frames[i, 1, 2, r], frames[i, 2, 2, r]
                if kind[i] == 0:
                    dx = frames[n, 0, 3, r] - frames[i, 0, 3, r]
                    dy = frames[n, 1, 3, r] - frames[i, 1, 3, r]
                    dz = frames[n, 2, 3, r] - frames[i, 2, 3, r]
                    block[0, c, r] += k * (ay * dz - az * dy)
                    block[1, c, r] += k * (az * dx - ax * dz)
                    block[2, c, r] += k * (ax * dy - ay * dx)
                    block[3, c, r] += k * ax
                    block[4, c, r] += k * ay
                    block[5, c, r] += k * az
                else:
                    block[0, c, r] += k * ax
                    block[1, c, r] += k * ay
                    block[2, c, r] += k * az
        for r in range(rows):
            for a in range(6):
                for c in range(dof):
                    jac[start + r, a, c] = block[a, c, r]
            for a in range(3):
                for c in range(4):
                    pose[start + r, a, c] = frames[n, a, c, r]
                pose[start + r, 3, a] = 0.0
            pose[start + r, 3, 3] = 1.0


@_kernel
def pool_features(pool, tree, sizes, out):
    """The seeding features of every configuration of ``pool (M, D)``, float32 ``out (M,
    F)``: for each link ``t`` of ``tree`` in turn, its position ``p``, ``|p|²`` and (a pose,
    ``sizes[t]`` 6) its rotation flattened, as :func:`torchik.ik.seeding.link_features` forms
    them (in ``pool``'s dtype, then rounded to float32; the rotation weight goes on the
    targets' side)."""
    n = tree[0].shape[0]
    frames, angles, cos, sin = _block_scratch(tree, pool.dtype)
    for start in range(0, pool.shape[0], BLOCK):
        rows = min(BLOCK, pool.shape[0] - start)
        _walk_block(pool, start, rows, frames, angles, cos, sin, tree)
        for r in range(rows):
            row, f = start + r, 0
            for t in range(sizes.shape[0]):
                x, y, z = frames[n + t, 0, 3, r], frames[n + t, 1, 3, r], frames[n + t, 2, 3, r]
                out[row, f], out[row, f + 1] = np.float32(x), np.float32(y)
                out[row, f + 2], out[row, f + 3] = np.float32(z), np.float32(x * x + y * y + z * z)
                f += 4
                if sizes[t] == 6:
                    for a in range(3):
                        for b in range(3):
                            out[row, f + 3 * a + b] = np.float32(frames[n + t, a, b, r])
                    f += 9


@_kernel
def link_errors(q, tree, position, rotmat, posed, lower, upper, errors, within):
    """``errors[0, row, t]`` the position error and ``errors[1, row, t]`` the geodesic
    rotation error (``atan2(|vee(Rᵀ R_t)|, (tr - 1) / 2)``, 0 where ``posed[t]`` is false) of
    each link ``t`` of ``tree`` at ``q[row]`` against ``position (B, T, 3)`` and ``rotmat (B,
    T, 3, 3)``, and ``within[row]``: ``lower <= q[row] <= upper``; :data:`BLOCK` rows at a
    time (:func:`_walk_block`): whole-body IK's check by FK
    (:func:`torchik.ik.wholebody.evaluate_targets`), by :func:`_evaluate`'s formulas."""
    n = tree[0].shape[0]
    frames, angles, cos, sin = _block_scratch(tree, q.dtype)
    for start in range(0, q.shape[0], BLOCK):
        rows = min(BLOCK, q.shape[0] - start)
        _walk_block(q, start, rows, frames, angles, cos, sin, tree)
        for r in range(rows):
            row = start + r
            within[row] = _within(q, row, lower, upper)
            for t in range(posed.shape[0]):
                frame = frames[n + t, :, :, r]
                errors[0, row, t] = _distance(frame, position[row, t])
                errors[1, row, t] = _geodesic(frame, rotmat[row, t]) if posed[t] else 0.0


@_inlined
def _nearest_member(features, start, size, a):
    """The index in ``features[start:start + size]`` of the member whose dot product with the
    target's features ``a (F,)`` is least (the first of equals): its pose nearest the target
    (:func:`torchik.ik.seeding.nearest_in_pools`)."""
    best, best_d = 0, math.inf
    for m in range(size):
        d = 0.0
        for f in range(a.shape[0]):
            d += float(a[f]) * float(features[start + m, f])
        if d < best_d:
            best, best_d = m, d
    return best


@_inlined
def _evaluate(q, frames, tree, position, rotmat, sizes, bounds, tols, errors):
    """``errors[0:2]``: the position and geodesic rotation errors of the link at ``q[0]``
    (:func:`torchik.ik.rounds.evaluate`: ``atan2(|vee(Rᵀ R_t)|, (tr - 1) / 2)``; 0 for a
    position target); returns its success (both within ``tols`` and ``q`` within the joint
    limits ``bounds = (lower, upper, continuous, box)``). With a ``box``, continuous joints
    are first wrapped back into (-π, π], in ``q``
    (:meth:`torchik.ik.base.JointLimits.canonical`)."""
    parent, kind, source, mult, offset, c_joint, c_link, link_pos = tree[:8]
    lower, upper, cont, box = bounds
    n = parent.shape[0]
    if box:
        for c in range(q.shape[1]):
            q[0, c] = _wrap(q[0, c]) if cont[c] else q[0, c]
    _walk(q, 0, frames, parent, kind, source, mult, offset, c_joint, c_link, link_pos, 0)
    errors[0] = _distance(frames[n], position[0, 0])
    errors[1] = _geodesic(frames[n], rotmat[0, 0]) if sizes[0] == 6 else 0.0
    return errors[0] < tols[0] and errors[1] < tols[1] and _within(q, 0, lower, upper)


@_inlined
def _distance(frame, p):
    """``|x - p|``: the distance of ``frame``'s origin (its column 3) from ``p (3,)``."""
    dx, dy, dz = frame[0, 3] - p[0], frame[1, 3] - p[1], frame[2, 3] - p[2]
    return math.sqrt(dx * dx + dy * dy + dz * dz)


@_inlined
def _rel(r, t, i, j):
    """``(Rᵀ R_t)[i, j]`` of a frame's rotation ``r`` (its first three columns) and a target
    rotation ``t``, in their dtype."""
    return r[0, i] * t[0, j] + r[1, i] * t[1, j] + r[2, i] * t[2, j]


@_inlined
def _geodesic(r, t):
    """The angle ``atan2(|vee(Rᵀ R_t)|, (tr - 1) / 2)`` between a frame's rotation ``r`` (its
    first three columns) and ``t (3, 3)``: :func:`torchik.geometry.geodesic_distance`."""
    cos = 0.5 * ((_rel(r, t, 0, 0) + _rel(r, t, 1, 1) + _rel(r, t, 2, 2)) - 1.0)
    sx = 0.5 * (_rel(r, t, 2, 1) - _rel(r, t, 1, 2))
    sy = 0.5 * (_rel(r, t, 0, 2) - _rel(r, t, 2, 0))
    sz = 0.5 * (_rel(r, t, 1, 0) - _rel(r, t, 0, 1))
    return math.atan2(math.sqrt(sx * sx + sy * sy + sz * sz), cos)


@_inlined
def _within(q, row, lower, upper):
    """Whether ``lower <= q[row] <= upper``, every joint."""
    inside = True
    for c in range(q.shape[1]):
        inside = inside and lower[c] <= q[row, c] <= upper[c]
    return inside


@_kernel
def ik_round(pool, features, size, tree, target, limits, bounds, posture, w, reals, ints, tols,
             out):  # fmt: skip
    """A round of ``solve_ik`` for every target, target after target: each slot's seed (the
    member of its pool nearest the target, or its own row of ``pool``), the loop's ``n_iters``
    evaluations in chunks (:func:`_slots`), the evaluation and, with ``order``, the target's
    slots best first.

    Args:
        pool: ``(M, D)`` configurations: ``S`` pools of ``size`` (slot ``s`` takes from pool
            ``s``), or with ``size`` 0 one seed per row (``M = T * S``).
        features: ``(M, F)`` float32, :func:`pool_features` of ``pool`` (read with ``size``).
        size: configurations per pool, or 0.
        tree: the link's tree arrays (:func:`torchik.kinematics.native._tree_arrays`).
        target: ``(position (T, 1, 3), rotmat (T, 1, 3, 3) (zeros for positions), sizes
            (1,), a (T, F) float32)``: the targets and their seeding features.
        limits: ``(lower, upper, continuous (D,), full_turn (D,), box)``: ``lower`` and
            ``upper`` ``(1, D)``, or ``(T, D)`` a box per target
            (:meth:`torchik.ik.base.JointLimits.within`).
        bounds: ``(lower (D,), upper (D,), continuous (D,), box)``: the joint limits the
            evaluation checks (:func:`_evaluate`).
        posture: :func:`_loop`'s (every column stepped, no posture).
        w: ``(m,)`` square roots of the residual weights.
        reals: ``(damping, damping_floor, tol_position, tol_rotation)``.
        ints: ``(slots, n_iters, max_iters, order, chunk, early_stop)``.
        tols: ``(tol_position, tol_rotation, score's rotation scale)`` in ``pool``'s dtype.
        out: ``(q (T, S, D), success (T, S), position_error, rotation_error, iterations)``.
    """
    slots, dof, dtype = ints[0], pool.shape[1], pool.dtype
    sizes, a = target[2], target[3]
    q_out, success, pos_err, rot_err, iterations = out
    scratch = _row_scratch(tree[0].shape[0], sizes[0], dof, dtype, tree[9].shape[0])
    q, best, cost = (
        np.empty((slots, dof), dtype),
        np.empty((slots, dof), dtype),
        np.empty(slots, dtype),
    )
    its, flags = np.empty(slots, np.int64), np.empty((2, slots), np.bool_)  # converged, finished
    errs, score = np.empty((slots, 2), dtype), np.empty(slots, dtype)
    ranks, one = np.empty(slots, np.int64), np.empty((1, dof), dtype)
    cont, turn, box = limits[2], limits[3], limits[4]
    for t in range(target[0].shape[0]):
        aim = (target[0][t : t + 1], target[1][t : t + 1], sizes)
        b = t if box else 0  # the target's box, or the limits
        rows = (limits[0][b : b + 1], limits[1][b : b + 1], cont, turn, box)
        lower, upper = rows[0][0], rows[1][0]
        for s in range(slots):
            row = (
                s * size + _nearest_member(features, s * size, size, a[t])
                if size
                else t * slots + s
            )
            for c in range(dof):
                q[s, c] = _project(pool[row, c], lower[c], upper[c], cont[c], turn[c], box)
                best[s, c] = q[s, c]
        cost[:] = math.inf
        its[:] = ints[2]
        flags[:] = False
        _slots(q, best, cost, its, flags, one, scratch, tree, aim, rows, posture, w, reals, ints)
        for s in range(slots):
            one[0, :] = best[s]
            ok = _evaluate(one, scratch[0], tree, aim[0], aim[1], sizes, bounds, tols, errs[s])
            best[s, :] = one[0]  # continuous joints back in (-π, π] after a box
            flags[0, s], score[s] = ok, errs[s, 0] / tols[0] + errs[s, 1] / tols[2]
        _rank(ranks, flags[0], score, ints[3])
        for s in range(slots):
            r = ranks[s]
            success[t, s], pos_err[t, s], rot_err[t, s] = flags[0, r], errs[r, 0], errs[r, 1]
            iterations[t, s] = its[r]
            q_out[t, s, :] = best[r]


@_inlined
def _row_scratch(n, m, dof, dtype, used):
    """``(frames, jac, err, step, work, moving)``: one row's scratch for :func:`_iteration`."""
    work = (np.empty((m, m), dtype), np.empty(m, dtype), np.empty(m, dtype), np.empty(m, dtype),
            np.empty(dof, dtype))  # fmt: skip
    moving = (False, np.zeros((3, 4), dtype), np.empty((3, 3), dtype), np.empty(dof, dtype))
    frames, jac = np.empty((n + 2, 3, 4), dtype), np.empty((m, used), dtype)
    return frames, jac, np.empty(m, dtype), np.empty(dof, dtype), work, moving


@_inlined
def _slots(q, best, cost, its, flags, one, scratch, tree, aim, limits, posture, w, reals, ints):
    """One target's slots ``q (S, D)`` through ``n_iters`` evaluations, in chunks of ``chunk``
    as :func:`torchik.ik.fixed.run_fixed` runs them (no restart): a slot stops once it
    converged; with ``early_stop``, after a chunk in which some slot of the target converged,
    every slot stops, its ``iterations`` the chunk's last evaluation (where still unset and
    under ``max_iters``: :func:`torchik.ik.fixed.finish_groups`). ``best``, ``cost`` and
    ``its``: each slot's best ``q``, its cost and the evaluation it converged at."""
    frames, jac, err, step, work, moving = scratch
    mu, floor, tol_p, tol_r = reals
    slots, n_iters, max_iters, chunk, group = ints[0], ints[1], ints[2], ints[4], ints[5]
    done, finished = flags[0], flags[1]
    e = 0
    while e < n_iters:
        n = min(chunk, n_iters - e)
        for s in range(slots):
            if finished[s]:
                continue
            one[0, :] = q[s]
            i = 0
            while i < n and not done[s]:
                c = _iteration(one, 0, step, frames, jac, err, work, tree, aim, limits, posture,
                               moving, w, mu, floor, False)  # fmt: skip
                conv = _converged(err, aim[2], tol_p, tol_r)
                _keep(one, 0, step, best, cost, its, s, c, conv, e + i, max_iters)
                done[s] = conv
                i += 1
            finished[s] = done[s]
            q[s, :] = one[0]
        last, hit = e + n - 1, group and done.any()
        for s in range(slots):
            if hit and its[s] == max_iters and last < max_iters:
                its[s] = last
            finished[s] = finished[s] or hit
        e += n
        if finished.all():
            break


@_inlined
def _rank(ranks, ok, score, order):
    """``ranks``: the slots best first (successes, then by ``score``; equals keep their order,
    as :meth:`torchik.ik.result.IKResult.top`'s two stable sorts; NaN last), or as they are:
    a stable sort by score, then the successes taken first in that order (``O(K log K)``: a
    call may ask for thousands of slots)."""
    if not order:
        for s in range(ranks.shape[0]):
            ranks[s] = s
        return
    by_score, k = np.argsort(score, kind="mergesort"), 0
    for first in (True, False):
        for s in by_score:
            if ok[s] == first:
                ranks[k] = s
                k += 1

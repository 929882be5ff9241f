"""The batched IK loop shared by every solver; a solver only supplies its step.

A problem is a flat batch of ``N`` rows (targets x slots). Every iteration the solver's
:meth:`IKSolver.linearize` evaluates the pose residual at the active rows, rows within tolerance
are frozen ("sticky") and dropped from the active set (with ``early_stop``, every slot of their
target is), stalled rows are re-seeded, and :meth:`IKSolver.step` moves the rest, after which the
joints are projected back into their limits. The active set shrinks as rows converge, so late
iterations only pay for the rows that still need work.
"""

from __future__ import annotations

import math
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import ClassVar, overload

import torch
from torch import Tensor

from torchik.checks import check_bool, check_choice, check_float, check_int
from torchik.geometry.joints import circular_joints, project_to_limits, wrap_angle
from torchik.ik.fixed import Carry, run_fixed
from torchik.ik.seeding import Seeder
from torchik.robot.robot import Robot

__all__ = [
    "ITERATION_LIMIT",
    "IKProblem",
    "JointLimits",
    "LinkTarget",
    "IKSolver",
    "Linearization",
    "SolverSettings",
    "pose_residual",
]

State = dict[str, Tensor]


@dataclass(frozen=True)
class SolverSettings:
    """Settings every solver has; each solver's settings dataclass extends this one.

    Attributes:
        max_iters: iterations (residual evaluations) before giving up.
        rotation_weight: weight of the rotation residual (rad) against the position one (m) in
            the least-squares cost; a length scale of the robot.
        patience: iterations without a relative cost decrease of ``min_improvement`` after which
            a slot is re-seeded (only when the solver was given a way to draw new seeds).
        min_improvement: see ``patience``.
        attempt_iters: also re-seed a slot after this many iterations from its seed
            (``0``: never).
        early_stop: stop every slot of a target as soon as one of them succeeds (``False`` to
            collect several solutions per target).
        round_iters: with ``early_stop``, :func:`~torchik.ik.solve_ik` runs rounds of this many
            iterations; after each, targets without a success are retried with ``retry_seeds``
            fresh seeds each, random or the next given ones (``0``: one round of ``max_iters``).
        initial_seeds: with given seeds and ``early_stop``, the first round refines only this
            many slots of each target; later rounds take the next ``retry_seeds`` slots of the
            targets still unsolved (slots never run keep their seed). Without restarts, the
            round that takes the last given slots runs for the rest of ``max_iters``.
        retry_seeds: slots per target in the retry rounds.
        sync_every: the loop consults the host (drops finished rows, re-seeds stalled ones)
            every this many iterations; in between, finished rows are frozen by masks on the
            device (``0``: automatic, 1 on the CPU's host loop, :data:`CUDA_SYNC_EVERY` on the
            fixed loop: other devices, and the CPU's compiled loop).
        loop: ``"host"``: the loop above, whose active set shrinks as rows finish (the CPU's
            best with PyTorch operations); ``"fixed"``: every row steps every iteration,
            finished rows frozen by masks, the host read once per ``sync_every`` iterations,
            chunks captured in CUDA graphs on CUDA (:mod:`torchik.ik.fixed`); ``"auto"``:
            fixed off the CPU, and on the CPU where the solver compiles its chunks there
            (:meth:`IKSolver.compiled_loop`: Levenberg-Marquardt with Numba), host otherwise.
        capture: capture the fixed loop's chunks in CUDA graphs on CUDA (``False``: launch
            every operation, e.g. to measure what the graphs save).
        one_graph: on CUDA, a :func:`~torchik.ik.solve_ik` call runs as one program of fixed
            shapes, captured once per shape in one CUDA graph and replayed, with no host read
            (:mod:`torchik.ik.captured`): random seeds (seeding, every round, the retry slots,
            the evaluation), or given seeds without restarts (``refine_samples``, warm
            starts); ``False``: rounds with host checks between them. On an H200, 1 / 1 000
            Panda poses in 1.36 / 1.56 ms against 3.90 / 13.5 ms in rounds, all solved (the
            first call of a shape runs eagerly, the second captures). Whole-body IK's calls
            of random seeds too, where Triton's loop kernel steps them
            (:mod:`torchik.ik.wholebody.captured`). No effect on the CPU.
    """

    max_iters: int = 100
    rotation_weight: float = 1.0
    patience: int = 4
    min_improvement: float = 0.01
    attempt_iters: int = 0
    early_stop: bool = True
    round_iters: int = 0
    initial_seeds: int = 2
    retry_seeds: int = 8
    sync_every: int = 0
    loop: str = "auto"
    capture: bool = True
    one_graph: bool = True

    def __post_init__(self) -> None:
        """Each field checked by its own rule (a solver's settings check theirs after these);
        one line naming the field otherwise."""
        check_choice("loop", self.loop, LOOPS)
        for name in ("max_iters", "attempt_iters", "round_iters", "sync_every"):
            check_int(name, getattr(self, name), 0, ITERATION_LIMIT)
        for name in ("patience", "initial_seeds", "retry_seeds"):
            check_int(name, getattr(self, name), 1)
        for name in ("rotation_weight", "min_improvement"):
            check_float(name, getattr(self, name), 0.0)
        check_bool("early_stop", self.early_stop)
        check_bool("capture", self.capture)
        check_bool("one_graph", self.one_graph)


ITERATION_LIMIT = (1 << 31) - 1
"""The most iterations a solver setting counts (``max_iters`` and the like): far beyond any
solve's need, and within every counter's range (``2**63`` overflowed the fixed loop's 64-bit
counters, a traceback instead of the setting's one-line refusal)."""

CUDA_SYNC_EVERY = 11
"""Iterations between host checks of the IK loop on an accelerator (``sync_every=0``): a round
of ``round_iters=10`` iterations is 11 evaluations, so one chunk and one host read per round.
On an H200 with the fused LM loop, 100 000 Panda poses took 28.4 ms at 11 against 43.4 ms at 8
(``benchmarks/results/gpu_probe.md``, the fixed-loop settings)."""

LOOPS = ("auto", "host", "fixed")
"""The values of :attr:`SolverSettings.loop`."""


def pose_residual(pose: Tensor, target_position: Tensor, target_rotmat: Tensor | None):
    """Residual ``[p_target - p, log(R_target R^T)]`` (root frame) and its rotation angle.

    The same residual as :func:`torchik.geometry.pose_error`, in fewer operations:
    ``vee(R_t R^T) = sin(θ) u = ½ Σ_k r_k × t_k`` over the columns of ``R`` and ``R_t``, and
    ``cos θ = (tr(R_t R^T) - 1) / 2``; ``θ = atan2`` of the two is accurate at any angle. At
    ``θ = π`` exactly, the direction is undefined and the rotation residual is zero, which
    only matters for that one iteration.

    Args:
        pose: ``(B, 4, 4)`` current poses.
        target_position: ``(B, 3)``.
        target_rotmat: ``(B, 3, 3)``, or ``None`` for position-only residuals.

    Returns:
        ``(B, 6)`` (or ``(B, 3)``) residual and ``(B,)`` rotation angles (zeros if position-only).
    """
    pos = target_position - pose[:, :3, 3]
    if target_rotmat is None:
        return pos, pos.new_zeros(pos.shape[0])
    rot = pose[:, :3, :3]
    sin_axis = 0.5 * torch.linalg.cross(rot, target_rotmat, dim=-2).sum(dim=-1)
    cos = 0.5 * ((rot * target_rotmat).sum(dim=(-2, -1)) - 1.0)
    sin = sin_axis.norm(dim=-1)
    angle = torch.atan2(sin, cos)
    # angle / sin -> 1 at the identity; the floor only guards the exact zero (sin_axis = 0 there)
    scale = angle / sin.clamp_min(torch.finfo(sin.dtype).tiny)
    scale = torch.where(sin > 0, scale, 1.0)
    return torch.cat((pos, sin_axis * scale[:, None]), dim=-1), angle


_LIMITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""``JointLimits.of``'s cache: robot -> (the limit buffers' pointers, versions and devices, the
limits made from them). An in-place edit of a limit bumps its version; ``.to()`` moves it."""


@dataclass(frozen=True)
class JointLimits:
    """How joint values are kept within the limits, shared by every row or one box per row.

    Attributes:
        lower: ``(dof,)`` limits, or ``(N, dof)`` one box per row (see :meth:`within`);
            ``upper`` the same shape.
        continuous: ``(dof,)`` bool, continuous joints: wrapped to (-π, π].
        full_turn: ``(dof,)`` bool, limited revolute joints whose range spans a full turn
            (the UR5's ``[-π, π]``): wrapped into the range (``q`` and ``q ± 2π`` are the same
            pose), so a solver is never stuck on such a limit.
        clamped: ``(dof,)`` bool, the joints clamped into ``[lower, upper]``: the rest (with
            per-row boxes: every joint).
    """

    lower: Tensor
    upper: Tensor
    continuous: Tensor
    full_turn: Tensor
    clamped: Tensor

    @classmethod
    def of(cls, robot: Robot) -> JointLimits:
        """The robot's limits, made once per robot and state of its limit buffers (so that
        the masks :meth:`project` reads once from the device are read once per robot, not
        once per ``solve_ik`` round: each read stalls a GPU)."""
        buffers = (robot.lower, robot.upper, robot.continuous, robot.prismatic)
        stamp = tuple((b.data_ptr(), b._version, b.device) for b in buffers)
        known = _LIMITS.get(robot)
        if known is not None and known[0] == stamp:
            return known[1]
        revolute = ~robot.prismatic
        circular = circular_joints(robot.lower, robot.upper, robot.continuous, tol=1e-6)
        full = revolute & ~robot.continuous & circular
        made = cls(robot.lower, robot.upper, robot.continuous, full, ~(robot.continuous | full))
        _LIMITS[robot] = (stamp, made)
        return made

    @property
    def per_row(self) -> bool:
        """Whether every row has its own box."""
        return self.lower.dim() > 1

    def within(self, lower: Tensor, upper: Tensor) -> JointLimits:
        """Per-row limits: these limits intersected with the boxes ``[lower, upper] (N, dof)``.

        A continuous joint takes its box as given, anywhere on the real line (``q0 ± r`` with
        ``q0`` near π is fine); a box a full turn wide or wider leaves it free in (-π, π].
        :meth:`project` moves continuous and full-turn joints by whole turns to their value
        nearest the box centre and then clamps every joint into its box, so results may lie a
        turn away from (-π, π] (:meth:`canonical` wraps them back).

        Raises:
            ValueError: a box that is empty (after the intersection) or NaN.
        """
        lower, upper = torch.broadcast_tensors(lower.to(self.lower), upper.to(self.lower))
        free = self.continuous & (upper - lower >= 2 * math.pi)
        lo = torch.where(self.continuous, lower, torch.maximum(lower, self.lower))
        hi = torch.where(self.continuous, upper, torch.minimum(upper, self.upper))
        lo, hi = torch.where(free, -math.pi, lo), torch.where(free, math.pi, hi)
        if not bool(((lo <= hi) & torch.isfinite(lo) & torch.isfinite(hi)).all()):
            raise ValueError("empty or NaN joint box: lower > upper within the joint limits")
        clamped = torch.ones_like(self.clamped)
        return replace(self, lower=lo.contiguous(), upper=hi.contiguous(), clamped=clamped)

    def rows(self, index: Tensor) -> JointLimits:
        """The limits of the rows ``index`` (long); shared limits are returned as they are."""
        if not self.per_row:
            return self
        return replace(self, lower=self.lower[index], upper=self.upper[index])

    @cached_property
    def _masks(self) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        """The full-turn, continuous and periodic (either) masks, ``None`` where no joint is
        one: read once (a host sync), so that :meth:`project` never reads the device."""
        periodic = self.continuous | self.full_turn
        return tuple(
            m if bool(m.any()) else None for m in (self.full_turn, self.continuous, periodic)
        )  # type: ignore[return-value]

    @property
    def wrapped(self) -> tuple[Tensor | None, Tensor | None]:
        """``(continuous, full_turn)``, each ``None`` where no joint is one (read once, as
        :meth:`project` reads them): what Triton's kernels are given, so that a robot whose
        joints never wrap (the Panda, the G1) gets kernels with no wrapping in them."""
        full, continuous, _ = self._masks
        return continuous, full

    def project(self, q: Tensor) -> Tensor:
        """``q (N, dof)`` into the limits (:func:`torchik.geometry.joints.project_to_limits`:
        full-turn joints moved by whole turns, continuous ones wrapped to (-π, π])."""
        if self.per_row:
            return self._project_box(q)
        full, continuous, _ = self._masks
        return project_to_limits(q, self.lower, self.upper, full, continuous)

    def _project_box(self, q: Tensor) -> Tensor:
        periodic = self._masks[2]
        if periodic is not None:
            center = 0.5 * (self.lower + self.upper)
            q = torch.where(periodic, center + wrap_angle(q - center), q)
        return torch.clamp(q, self.lower, self.upper)

    def canonical(self, q: Tensor) -> Tensor:
        """``q (N, dof)`` from :meth:`project` with continuous joints back in (-π, π]."""
        if self.per_row and self._masks[1] is not None:
            return torch.where(self.continuous, wrap_angle(q), q)
        return q

    def sample(self, rows: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """``(n, dof)`` uniform random configurations within the boxes of ``rows (n,)`` long
        (or within the shared limits)."""
        index = rows if self.per_row else torch.zeros_like(rows)
        dof = self.lower.shape[-1]
        lower, upper = self.lower.view(-1, dof)[index], self.upper.view(-1, dof)[index]
        device = generator.device if generator is not None else lower.device
        u = torch.rand(lower.shape, generator=generator, dtype=lower.dtype, device=device)
        return lower + u.to(lower.device) * (upper - lower)


@dataclass(frozen=True)
class LinkTarget:
    """One link to place and its target in every row of a problem.

    Attributes:
        link: the link whose origin is placed.
        position: ``(N, 3)`` target positions.
        rotmat: ``(N, 3, 3)`` target rotations, or ``None`` to place the origin only.
        weight: weight ``>= 0`` of its residual in the cost (several links: whole-body IK).
    """

    link: str
    position: Tensor
    rotmat: Tensor | None = None
    weight: float = 1.0

    @property
    def size(self) -> int:
        """Rows of its residual: 3 for a position, 6 for a pose."""
        return 3 if self.rotmat is None else 6

    def rows(self, index: Tensor) -> LinkTarget:
        """The target of the rows ``index`` (long)."""
        rotmat = None if self.rotmat is None else self.rotmat[index]
        return replace(self, position=self.position[index], rotmat=rotmat)

    def residual(self, pose: Tensor) -> tuple[Tensor, Tensor]:
        """:func:`pose_residual` of the link's ``pose (N, 4, 4)`` against the target."""
        return pose_residual(pose, self.position, self.rotmat)

    def weights(self, rotation_weight: float) -> Tensor:
        """``(3,)`` or ``(6,)`` square roots of the residual weights: ``sqrt(weight)`` times 1
        for the position rows and ``rotation_weight`` for the rotation rows."""
        w = self.position.new_ones(3 if self.rotmat is None else 6)
        w[3:] = rotation_weight  # filled on the device: no tensor from host data (CUDA graphs)
        return w if self.weight == 1.0 else math.sqrt(self.weight) * w


@dataclass
class IKProblem:
    """The rows of a batched IK problem (targets repeated once per slot): the links to place,
    each with its target in every row.

    Attributes:
        robot: the robot.
        targets: the links and their targets (one for :func:`~torchik.ik.solve_ik`, several
            for :func:`~torchik.ik.wholebody.solve_wholebody`).
        group: ``(N,)`` long, the target each row belongs to (``early_stop`` groups).
        tol_position: success threshold on every link's position error (m).
        tol_rotation: success threshold on every pose target's rotation angle (rad).
        limits: how ``q`` is kept in the limits (default: :meth:`JointLimits.of` the robot;
            :meth:`JointLimits.within` for a box per row).
    """

    robot: Robot
    targets: tuple[LinkTarget, ...]
    group: Tensor
    tol_position: float
    tol_rotation: float
    limits: JointLimits = None  # type: ignore[assignment]
    _weights: dict[float, Tensor] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self):
        if not self.targets:
            raise ValueError("an IK problem needs at least one link target")
        if self.limits is None:
            self.limits = JointLimits.of(self.robot)

    @property
    def target(self) -> LinkTarget:
        """The target of a single-link problem."""
        if len(self.targets) != 1:
            raise ValueError(f"this problem places {len(self.targets)} links, not one")
        return self.targets[0]

    @property
    def position_only(self) -> bool:
        """Whether no target has a rotation."""
        return all(t.rotmat is None for t in self.targets)

    def __len__(self) -> int:
        return self.targets[0].position.shape[0]

    def rows(self, index: Tensor) -> IKProblem:
        """The sub-problem of the rows ``index`` (long)."""
        return replace(
            self,
            targets=tuple(t.rows(index) for t in self.targets),
            group=self.group[index],
            limits=self.limits.rows(index),
        )

    def weights(self, rotation_weight: float) -> Tensor:
        """``(m,)`` square roots of the residual weights, target after target (made once per
        problem: no tensor from host data inside the loop)."""
        if rotation_weight not in self._weights:
            parts = [t.weights(rotation_weight) for t in self.targets]
            self._weights[rotation_weight] = parts[0] if len(parts) == 1 else torch.cat(parts)
        return self._weights[rotation_weight]

    def project(self, q: Tensor) -> Tensor:
        """``q (N, dof)`` into the limits (see :class:`JointLimits`)."""
        return self.limits.project(q)

    def converged(self, lin: Linearization) -> Tensor:
        """``(B,)`` bool: every target within both tolerances (``lin.angle`` is ``(B, n)``)."""
        done, start = None, 0
        for i, t in enumerate(self.targets):
            ok = lin.error[:, start : start + 3].norm(dim=-1) < self.tol_position
            if t.rotmat is not None:
                ok = ok & (lin.angle[:, i] < self.tol_rotation)
            done = ok if done is None else done & ok
            start += t.size
        assert done is not None  # at least one target (__post_init__)
        return done


@dataclass
class Linearization:
    """What a step needs at the current rows.

    Attributes:
        error: ``(B, m)`` residual, unweighted: 6 rows per pose target, 3 per position target,
            target after target.
        angle: ``(B, n)`` rotation error (rad) of each of the ``n`` targets (0 for positions).
        cost: ``(B,)`` weighted squared norm of ``error``.
        jacobian: ``(B, m, dof)`` d(residual)/dq up to sign (the geometric Jacobian), or ``None``.
        gradient: ``(B, dof)`` gradient of ``cost / 2``, for solvers that use autograd.
    """

    error: Tensor
    angle: Tensor
    cost: Tensor
    jacobian: Tensor | None = None
    gradient: Tensor | None = None


def _stack(parts: list[Tensor], dim: int) -> Tensor:
    """``torch.cat`` of the targets' parts; one target's as it is (no copy: the hot path)."""
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=dim)


def _index_state(state: State, index: Tensor) -> State:
    return {k: v[index] for k, v in state.items()}


class IKSolver(ABC):
    """Base class: runs the batched loop; subclasses implement :meth:`step`.

    Subclasses set ``Settings`` to their settings dataclass (an extension of
    :class:`SolverSettings`) and may override :meth:`linearize` (default: geometric Jacobian
    and pose from :meth:`torchik.Robot.jacobian`) and :meth:`initial_state`.
    """

    Settings: ClassVar[type[SolverSettings]] = SolverSettings
    fixed_shape: ClassVar[bool] = True
    """Whether the solver can run the fixed-shape loop (:mod:`torchik.ik.fixed`)."""

    def __init__(self, settings: SolverSettings | None = None, **overrides):
        settings = settings if settings is not None else self.Settings()
        if not isinstance(settings, self.Settings):
            raise TypeError(f"{type(self).__name__} takes {self.Settings.__name__}")
        self.settings = replace(settings, **overrides) if overrides else settings

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.settings})"

    # ---------------------------------------------------------------- what subclasses supply
    def linearize(self, problem: IKProblem, q: Tensor) -> Linearization:
        """Residual, angle, cost and geometric Jacobian of the rows at ``q (B, dof)``, the
        targets' rows stacked."""
        errors, angles, jacobians = [], [], []
        for target in problem.targets:
            jac, pose = problem.robot.jacobian(q, target.link, return_pose=True)
            error, angle = target.residual(pose)
            errors.append(error)
            angles.append(angle)
            jacobians.append(jac if target.rotmat is not None else jac[:, :3])
        error, jac = _stack(errors, -1), _stack(jacobians, -2)
        w = problem.weights(self.settings.rotation_weight)
        cost = ((w * error) ** 2).sum(dim=-1)
        return Linearization(error, torch.stack(angles, dim=-1), cost, jacobian=jac)

    def initial_state(self, q: Tensor) -> State:
        """Per-row solver state for fresh seeds ``q (B, dof)`` (batch-first tensors)."""
        return {}

    def fused_iteration(self, problem: IKProblem, q: Tensor) -> tuple[Tensor, Linearization] | None:
        """The next ``q (B, dof)``, projected, and the :class:`Linearization` at ``q`` (its
        ``jacobian`` may be ``None``) in one kernel, for the fixed-shape loop; ``None`` (the
        default) where the solver has none: then :meth:`linearize` and :meth:`step`."""
        return None

    def kernel_switches(self, problem: IKProblem, q: Tensor) -> tuple:
        """What picks this solver's kernels for ``problem`` at ``q (B, dof)`` beyond its settings
        (module switches such as whole-body IK's ``FUSED_LOOP``): part of the key of a captured
        chunk, which replays the kernels it captured. None by default."""
        return ()

    def takes_groups(self, problem: IKProblem, q: Tensor) -> bool:
        """Whether :meth:`fused_loop` takes ``groups``: the early stop over each target's
        slots and the restarts in its kernel (see ``groups`` of
        :func:`torchik.kinematics.fused.lm_loop`). ``False`` by default."""
        return False

    def fused_loop(self, problem: IKProblem, c: Carry, n: int, max_iters: int, track: bool,
                   groups: dict[str, Tensor] | None = None) -> bool:  # fmt: skip
        """``n`` iterations of the fixed-shape loop on its carry ``c`` in one kernel, for
        :mod:`torchik.ik.fixed` (with ``groups`` where :meth:`takes_groups`, for
        :mod:`torchik.ik.captured`); ``False`` (the default: nothing done) where the solver
        has none: then ``n`` calls of :func:`torchik.ik.fixed.iterate`."""
        return False

    @abstractmethod
    def step(self, problem: IKProblem, q: Tensor, lin: Linearization, state: State) -> Tensor:
        """The next ``q (B, dof)`` from ``q`` (it is projected into the limits afterwards).

        May update ``state`` in place (assign new tensors to its keys).
        """

    # ---------------------------------------------------------------- the loop
    def solve(
        self,
        problem: IKProblem,
        q: Tensor,
        reseed: Seeder | None = None,
        max_iters: int | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Run the loop on every row.

        Args:
            problem: ``N`` rows.
            q: ``(N, dof)`` seeds.
            reseed: ``(rows (n,), attempt (n,)) -> (n, dof)`` fresh seeds for stalled rows
                (:data:`torchik.ik.seeding.Seeder`), or ``None`` for no restarts.
            max_iters: override ``settings.max_iters``.

        Returns:
            The best ``q (N, dof)`` met per row (the converged one for converged rows) and the
            ``(N,)`` iterations each row ran.
        """
        s = self.settings
        max_iters = s.max_iters if max_iters is None else check_int("max_iters", max_iters)
        sync_every = s.sync_every or (1 if q.device.type == "cpu" else CUDA_SYNC_EVERY)
        if self._fixed(q, problem):
            chunk = s.sync_every or CUDA_SYNC_EVERY
            return run_fixed(self, problem, q, reseed, max_iters, chunk)
        q = problem.project(q)
        best = _Best(q, max_iters)
        ids = torch.arange(len(problem), device=q.device)
        state = self.initial_state(q)
        zeros = torch.zeros_like(ids)
        track = {"seed_cost": best.cost.clone(), "stall": zeros, "age": zeros, "attempt": zeros}
        for it in range(max_iters + 1):
            lin = self.linearize(problem, q)
            done = problem.converged(lin)
            finished = best.update(ids, q, lin.cost, done, problem.group, s.early_stop)
            if it == max_iters:
                break
            best.record(ids, finished, it)
            host = it % sync_every == 0  # consult the host: drop finished rows, re-seed
            if host and bool(finished.any()):
                keep = torch.nonzero(~finished).flatten()
                if keep.numel() == 0:
                    break
                ids, q, problem = ids[keep], q[keep], problem.rows(keep)
                lin = Linearization(**{k: _maybe_index(v, keep) for k, v in vars(lin).items()})
                state, track = _index_state(state, keep), _index_state(track, keep)
                finished = finished[keep]
            stepped = problem.project(self.step(problem, q, lin, state))
            q = stepped if host else torch.where(finished[:, None], q, stepped)
            if reseed is not None:
                stalled = self._track_progress(lin.cost, track)
                if host:
                    q = self._restart_stalled(q, ids, stalled, state, track, reseed)
        return best.q, best.iterations

    @property
    def capturable(self) -> bool:
        """Whether chunks of the fixed-shape loop can be captured in a CUDA graph: a solver
        whose per-row state is a fixed set of tensors (see :mod:`torchik.ik.fixed`), and
        ``settings.capture``."""
        return self.fixed_shape and self.settings.capture

    def compiled_loop(self, problem: IKProblem, q: Tensor) -> bool:
        """Whether :meth:`fused_loop` runs this problem's chunks on the CPU as compiled code
        (then the fixed-shape loop is the CPU's too); ``False`` by default."""
        return False

    def compiled_round(self, robot: Robot, q: Tensor) -> bool:
        """Whether a round of random seeds on ``robot`` (rows like ``q``) runs as one
        compiled call on the CPU (:mod:`torchik.ik.compiled`); ``False`` by default."""
        return False

    def _fixed(self, q: Tensor, problem: IKProblem | None = None) -> bool:
        """Whether this solve takes the fixed-shape loop (see :attr:`SolverSettings.loop`):
        ``"auto"`` takes it off the CPU, and on the CPU where :meth:`compiled_loop` serves."""
        loop = self.settings.loop
        if loop == "auto":
            compiled = problem is not None and self.compiled_loop(problem, q)
            loop = "fixed" if q.device.type != "cpu" or compiled else "host"
        return loop == "fixed" and self.fixed_shape

    def _track_progress(self, cost: Tensor, track: State) -> Tensor:
        """Count the iterations without progress of each row (on the device); returns the
        ``(n,)`` rows that are stalled (no progress for ``patience`` iterations, or older than
        ``attempt_iters``)."""
        s = self.settings
        progress = cost < (1.0 - s.min_improvement) * track["seed_cost"]
        track["seed_cost"] = torch.where(progress, cost, track["seed_cost"])
        track["stall"] = torch.where(progress, 0, track["stall"] + 1)
        stalled = track["stall"] >= s.patience
        if s.attempt_iters:
            track["age"] = track["age"] + 1
            stalled = stalled | (track["age"] >= s.attempt_iters)
        return stalled

    def _restart_stalled(
        self, q: Tensor, ids: Tensor, stalled: Tensor, state: State, track: State, reseed: Callable
    ) -> Tensor:
        """Fresh seeds for the ``stalled`` rows (one host check); their counters start over."""
        if not bool(stalled.any()):
            return q
        q = q.clone()
        track["attempt"] = track["attempt"] + stalled.long()
        q[stalled] = reseed(ids[stalled], track["attempt"][stalled])
        track["seed_cost"] = torch.where(stalled, math.inf, track["seed_cost"])
        track["stall"] = torch.where(stalled, 0, track["stall"])
        track["age"] = torch.where(stalled, 0, track["age"])
        for key, value in self.initial_state(q).items():
            mask = stalled.view(-1, *([1] * (value.dim() - 1)))
            state[key] = torch.where(mask, value, state[key])
        return q


class _Best:
    """Per row of the full problem: the best ``q`` met, its cost, the iterations run, and
    which targets (groups) are finished."""

    def __init__(self, q: Tensor, max_iters: int):
        n_rows = q.shape[0]
        self.q, self.cost = q.clone(), q.new_full((n_rows,), math.inf)
        self.max_iters = max_iters
        self.iterations = torch.full((n_rows,), max_iters, dtype=torch.long, device=q.device)
        self.finished_groups = torch.zeros(n_rows, dtype=torch.bool, device=q.device)  # >= T

    def update(self, ids, q, cost, done, group, early_stop: bool) -> Tensor:
        """Record the active rows ``ids``; returns which of them are finished (converged, or
        with ``early_stop`` another slot of their target converged). Converged rows keep their
        converged ``q`` even if an earlier one had a lower weighted cost."""
        better = (cost < self.cost[ids]) | done
        self.q[ids] = torch.where(better[:, None], q, self.q[ids])
        self.cost[ids] = torch.where(better, cost, self.cost[ids])
        if not early_stop:
            return done
        hits = torch.zeros(self.finished_groups.shape, dtype=torch.long, device=done.device)
        hits.index_add_(0, group, done.long())  # no host sync (a boolean index would sync)
        self.finished_groups |= hits > 0
        return self.finished_groups[group]

    def record(self, ids: Tensor, finished: Tensor, it: int) -> None:
        """Note ``it`` as the iteration count of the rows that finished now (first time)."""
        first = finished & (self.iterations[ids] == self.max_iters)
        self.iterations[ids] = torch.where(first, it, self.iterations[ids])


@overload
def _maybe_index(value: Tensor, index: Tensor) -> Tensor: ...
@overload
def _maybe_index(value: None, index: Tensor) -> None: ...
def _maybe_index(value: Tensor | None, index: Tensor) -> Tensor | None:
    return None if value is None else value[index]

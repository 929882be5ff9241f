"""Levenberg-Marquardt with error-scaled (optionally also adaptive) damping: the default."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from torchik.checks import check_bool, check_float
from torchik.ik.base import IKProblem, IKSolver, Linearization, SolverSettings, State
from torchik.ik.fixed import Carry
from torchik.kinematics import fused, native

__all__ = ["LevenbergMarquardt", "LMSettings", "damped_step", "free_limit_columns"]


def damped_step(jacobian: Tensor, error: Tensor, damping: Tensor, weights: Tensor) -> Tensor:
    """``δ = (JᵀWJ + λI)⁻¹ JᵀW e`` for every row, through the ``m x m`` form.

    With ``Jw = W^½ J`` the push-through identity gives ``δ = Jwᵀ (Jw Jwᵀ + λI)⁻¹ W^½ e``: a
    6x6 (3x3 position-only) symmetric positive definite system per row instead of a ``dof``
    square one, solved by a batched Cholesky factorisation.

    Args:
        jacobian: ``(B, m, dof)``.
        error: ``(B, m)``.
        damping: ``(B,)`` λ > 0.
        weights: ``(m,)`` square roots of the residual weights.

    Returns:
        ``(B, dof)`` joint steps.
    """
    jw = jacobian * weights[:, None]
    a = jw @ jw.transpose(-1, -2)
    a.diagonal(dim1=-2, dim2=-1).add_(damping[:, None])
    y, _ = torch.linalg.solve_ex(a, error * weights)
    return (jw.transpose(-1, -2) @ y[..., None])[..., 0]


def free_limit_columns(
    problem: IKProblem,
    q: Tensor,
    jacobian: Tensor,
    error: Tensor,
    weights: Tensor,
    coordinates: Tensor | None = None,
) -> Tensor:
    """Zero the Jacobian columns of joints that sit on a limit and that the steepest descent
    direction ``JᵀW e`` pushes outwards (the active set of a projected Newton method).

    Without this, the step is computed as if those joints moved, the projection then undoes
    their part, and the rest of the step no longer fits: convergence slows or stalls.

    ``coordinates (nv,)`` long maps the Jacobian's columns to entries of ``q`` where they
    differ (a floating base, :func:`torchik.geometry.floating.velocity_coordinates`; ``-1``: a
    column without limits); ``None``: column ``i`` is ``q[..., i]``.
    """
    g = (jacobian.transpose(-1, -2) @ (error * weights * weights)[..., None])[..., 0]
    lim = problem.limits
    clamped, lower, upper = lim.clamped, lim.lower, lim.upper
    if coordinates is not None:
        index = coordinates.clamp_min(0)
        clamped = clamped[index] & (coordinates >= 0)
        q, lower, upper = q[:, index], lower[..., index], upper[..., index]
    blocked = clamped & (((q <= lower) & (g < 0)) | ((q >= upper) & (g > 0)))
    return jacobian * (~blocked)[:, None, :]


@dataclass(frozen=True)
class LMSettings(SolverSettings):
    """Levenberg-Marquardt settings.

    The damping of a row is ``λ = μ (cost + damping_floor)``: Sugihara's error-scaled damping
    (``cost`` the weighted squared residual, so steps are cautious far from the target and
    Gauss-Newton near it). With ``adaptive=True``, ``μ`` also adapts per row as in classic LM: a
    step that raises the cost is undone (the row returns to its last accepted point, whose
    residual and Jacobian are kept, so no extra kinematics) and ``μ`` is multiplied by
    ``increase``; an accepted one divides it by ``decrease``. On the bundled arms the plain
    error-scaled form converges as often and in fewer operations, hence the default.

    Attributes:
        damping: ``μ`` (initial ``μ`` when adaptive).
        damping_floor: keeps ``λ`` positive at the solution (m²).
        adaptive: adapt ``μ`` per row with rejected steps.
        increase: factor on ``μ`` after a rejected step.
        decrease: divisor of ``μ`` after an accepted step.
        mu_min: lower bound of ``μ``.
        mu_max: upper bound of ``μ``.
        fused_step: in the fixed-shape loop, each iteration (residual, step, projection) in
            one kernel, :func:`torchik.kinematics.fused.lm_step`, where it serves: FK on the
            fused kernels (:meth:`torchik.robot.Robot.takes_fused`), one link, a fixed base,
            limits shared by the rows, ``adaptive=False``; the usual operations elsewhere
            (the CPU). On by default: on an H200 it solved 1 / 1 000 / 100 000 Panda poses in
            3.8 / 17.4 / 42.2 ms against 4.4 / 21.6 / 85.9 ms for the captured usual iteration
            (``benchmarks/results/gpu_probe_ik.md``); equal to the usual iteration to rounding
            (tested in Triton's interpreter).
        fused_loop: in the fixed-shape loop, each chunk of ``sync_every`` iterations in one
            kernel, :func:`torchik.kinematics.fused.lm_loop` (where ``fused_step`` would
            serve): the rows' state stays in registers between iterations, and the early stop
            over a target's slots is applied at the end of the chunk (a slot whose sibling
            converged mid-chunk steps on to its end; with one slot per target the answers
            are the per-iteration loop's). On by default: on an H200, 1 / 1 000 / 10 000 /
            100 000 Panda poses in 3.0 / 12.1 / 19.8 / 48.4 ms against 5.4 / 13.6 / 22.7 /
            59.3 ms with ``fused_step`` alone (``benchmarks/results/gpu.md``). On the CPU the
            chunk is compiled by Numba (:func:`torchik.kinematics.native.lm_loop`, see
            :meth:`LevenbergMarquardt.compiled_loop`), and ``loop="auto"`` takes the fixed
            loop there for it.
        fused_restarts: in the one-graph program on CUDA (``one_graph``,
            :mod:`torchik.ik.captured`), the loop kernel also ends each target's slots once
            one converged and restarts the stalled rows between chunks (``groups`` of
            :func:`torchik.kinematics.fused.lm_loop`): one launch and one addition per chunk
            instead of about 27 small kernels, the same answers bit for bit (tested in
            Triton's interpreter). Off until a GPU has timed it.
    """

    max_iters: int = 60
    round_iters: int = 10
    rotation_weight: float = 0.3
    damping: float = 0.1
    damping_floor: float = 1e-6
    adaptive: bool = False
    increase: float = 4.0
    decrease: float = 2.0
    mu_min: float = 1e-3
    mu_max: float = 1e4
    fused_step: bool = True
    fused_loop: bool = True
    fused_restarts: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("damping", "damping_floor", "increase", "decrease", "mu_min", "mu_max"):
            check_float(name, getattr(self, name), 0.0)
        for name in ("adaptive", "fused_step", "fused_loop", "fused_restarts"):
            check_bool(name, getattr(self, name))


class LevenbergMarquardt(IKSolver):
    """Levenberg-Marquardt with error-scaled damping, batched over every row; joints on a limit
    that the descent direction pushes outwards are frozen for the step (see
    :func:`free_limit_columns`), and the result is clamped into the limits."""

    Settings = LMSettings
    settings: LMSettings

    @property
    def capturable(self) -> bool:
        """Not with ``adaptive``: its first step adds state (the last accepted ``q``)."""
        return self.settings.capture and not self.settings.adaptive

    def initial_state(self, q: Tensor) -> State:
        if not self.settings.adaptive:
            return {}
        return {
            "mu": q.new_full((q.shape[0],), self.settings.damping),
            "cost": q.new_full((q.shape[0],), torch.inf),
        }

    def step(self, problem: IKProblem, q: Tensor, lin: Linearization, state: State) -> Tensor:
        s = self.settings
        if s.adaptive:
            q, error, jac, cost, mu = self._accept_or_undo(q, lin, state)
        else:
            error, jac, cost, mu = lin.error, lin.jacobian, lin.cost, s.damping
        w = problem.weights(s.rotation_weight)
        jac = free_limit_columns(problem, q, jac, error, w)
        return q + damped_step(jac, error, mu * (cost + s.damping_floor), w)

    def _fused_serves(self, problem: IKProblem, q: Tensor) -> bool:
        """Whether the fused LM kernels can take this problem's iterations: one link, a fixed
        base on the fused FK kernels, limits shared by the rows, no adaptive damping."""
        if problem.limits.per_row:
            return False
        return self._kernels_take(problem) and problem.robot.takes_fused(q)

    def _loop_kernel_serves(self, problem: IKProblem, q: Tensor) -> bool:
        """Whether Triton's loop kernel (:func:`torchik.kinematics.fused.lm_loop`) takes this
        problem's chunks: where the fused step would (:meth:`_fused_serves`)."""
        return self._fused_serves(problem, q)

    def kernel_switches(self, problem: IKProblem, q: Tensor) -> tuple:
        """Whether the fused step and Triton's loop kernel serve (see
        :meth:`IKSolver.kernel_switches`)."""
        serves = self._fused_serves(problem, q), self._loop_kernel_serves(problem, q)
        return (*serves, self.takes_groups(problem, q))

    def _kernels_take(self, problem: IKProblem) -> bool:
        """One link on a fixed base, no adaptive damping, and this class's own step and
        linearization (a subclass that changes either, as whole-body IK's does with its posture
        step, keeps them: the kernels step plain LM): what both loop kernels (Triton's and the
        CPU's) take; the CPU's takes a box per row too."""
        return self._plain(problem.robot, len(problem.targets))

    def _plain(self, robot: Any, links: int) -> bool:
        """:meth:`_kernels_take` for ``links`` targets on ``robot``."""
        cls = type(self)
        if cls.step is not LevenbergMarquardt.step or cls.linearize is not IKSolver.linearize:
            return False
        return not (self.settings.adaptive or links != 1 or robot.floating_bases)

    def compiled_round(self, robot: Any, q: Tensor) -> bool:
        """Whether a round of random seeds runs as one compiled call on the CPU
        (:mod:`torchik.ik.compiled`): where the round's chunk would run compiled
        (:meth:`compiled_loop`: ``fused_loop`` on, the fixed loop, a backend other than
        ``"reference"``, one link on a fixed base, no adaptive damping, Numba installed)."""
        s = self.settings
        if not (s.loop != "host" and self.fixed_shape and self._plain(robot, 1)):
            return False
        return self._compiles(robot, q)

    def compiled_loop(self, problem: IKProblem, q: Tensor) -> bool:
        """Whether :meth:`fused_loop` runs this problem on the CPU, compiled by Numba
        (:func:`torchik.kinematics.native.lm_loop`): ``fused_loop`` on, a CPU tensor, the
        robot's :attr:`~torchik.robot.Robot.backend` not ``"reference"``, a problem the kernel
        takes (:meth:`_compiled_takes`: here one link on a fixed base, the joint limits or a
        box per target, no adaptive damping), fixed (not learnable) origins, Numba installed
        (:func:`~torchik.kinematics.native.runs_on`)."""
        return self._compiles(problem.robot, q) and self._compiled_takes(problem)

    def _compiles(self, robot: Any, q: Tensor) -> bool:
        """What both :meth:`compiled_loop` and :meth:`compiled_round` ask: ``fused_loop`` on,
        a backend other than ``"reference"``, and Numba's kernels running on ``q`` with the
        robot's tree (:func:`~torchik.kinematics.native.runs_on`)."""
        if not self.settings.fused_loop or robot.backend == "reference":
            return False
        return native.runs_on(q, robot.tree)

    def _compiled_takes(self, problem: IKProblem) -> bool:
        """Whether the CPU's kernel steps this solver's iteration on ``problem`` (see
        :meth:`compiled_loop`); a subclass whose step it also takes widens this and passes
        its step's arguments in :meth:`_compiled_extras`."""
        return self._kernels_take(problem)

    def _compiled_extras(self, problem: IKProblem) -> dict[str, Any]:
        """Keyword arguments of :func:`torchik.kinematics.native.lm_loop` beyond plain LM's
        (whole-body IK's held joints and posture); none here."""
        return {}

    def fused_iteration(self, problem: IKProblem, q: Tensor) -> tuple[Tensor, Linearization] | None:
        """The next ``q (B, dof)``, projected, and the residual and cost at ``q`` from one
        kernel (:func:`torchik.kinematics.fused.lm_step`), or ``None`` where it does not serve
        (see :class:`LMSettings` ``fused_step``): then :meth:`linearize` and :meth:`step`."""
        s, robot, limits = self.settings, problem.robot, problem.limits
        if not s.fused_step or not self._fused_serves(problem, q):
            return None
        target, w = problem.target, problem.weights(s.rotation_weight)
        error = q.new_empty(q.shape[0], w.shape[0])
        continuous, full_turn = limits.wrapped
        stepped = fused.lm_step(
            q, robot.tree, robot.link_index(target.link), target.position, target.rotmat, w,
            s.damping, limits.lower, limits.upper, damping_floor=s.damping_floor,
            continuous=continuous, full_turn=full_turn, residual=error,
        )  # fmt: skip
        angle = error[:, 3:].norm(dim=-1, keepdim=True)  # (B, 1): zeros for a position target
        return stepped, Linearization(error, angle, ((w * error) ** 2).sum(dim=-1))

    def takes_groups(self, problem: IKProblem, q: Tensor) -> bool:
        """``fused_restarts`` on, ``early_stop`` and Triton's loop kernel serving (see
        :meth:`IKSolver.takes_groups`)."""
        s = self.settings
        serves = s.fused_restarts and s.fused_loop and s.early_stop
        return serves and self._loop_kernel_serves(problem, q) and not self.initial_state(q)

    def fused_loop(self, problem: IKProblem, c: Carry, n: int, max_iters: int, track: bool,
                   groups: dict[str, Tensor] | None = None) -> bool:  # fmt: skip
        """``n`` iterations of the fixed-shape loop on the carry ``c`` in one kernel
        (:func:`torchik.kinematics.fused.lm_loop`; the early stop over each target's slots
        follows in :func:`torchik.ik.fixed.finish_groups`, or in the kernel with ``groups``);
        ``False`` (nothing done) where it does not serve (see :class:`LMSettings`
        ``fused_loop``)."""
        if groups is not None:
            if not self.takes_groups(problem, c.q):
                return False
            self._kernel_loop(fused, problem, c, n, max_iters, track, _aim(problem),
                              groups=groups)  # fmt: skip
        elif self.settings.fused_loop and self._loop_kernel_serves(problem, c.q):
            self._kernel_loop(fused, problem, c, n, max_iters, track, _aim(problem))
        elif self.compiled_loop(problem, c.q):
            self._compiled(problem, c, n, max_iters, track)
        else:
            return False
        return True

    def _compiled(self, problem: IKProblem, c: Carry, n: int, max_iters: int, track: bool,
                  **options: Any) -> None:  # fmt: skip
        """``n`` iterations of the CPU's compiled loop on ``c`` (every link of ``problem``, with
        :meth:`_compiled_extras` and ``options``)."""
        extra = {**self._compiled_extras(problem), **options}
        self._kernel_loop(native, problem, c, n, max_iters, track, _aim(problem), **extra)

    def _kernel_loop(self, kernels: Any, problem: IKProblem, c: Carry, n: int, max_iters: int,
                     track: bool, aim: tuple, **extra: Any) -> None:  # fmt: skip
        """``kernels.lm_loop`` (Triton's or the CPU's) on ``c`` for the targets ``aim``
        (``link, position, rotmat``: one link's, or sequences)."""
        s, limits = self.settings, problem.limits
        state = dict(best_q=c.best_q, best_cost=c.best_cost, iterations=c.iterations,
                     finished=c.finished, it=c.it)  # fmt: skip
        if track:
            state.update(seed_cost=c.seed_cost, stall=c.stall, age=c.age, stalled=c.stalled)
        continuous, full_turn = limits.wrapped  # None: no wrapping code in Triton's kernels
        kernels.lm_loop(
            c.q, problem.robot.tree, *aim, problem.weights(s.rotation_weight),
            s.damping, limits.lower, limits.upper, state, n_iters=n, max_iters=max_iters,
            tol_position=problem.tol_position, tol_rotation=problem.tol_rotation,
            damping_floor=s.damping_floor, continuous=continuous, full_turn=full_turn,
            patience=s.patience, min_improvement=s.min_improvement,
            attempt_iters=s.attempt_iters, **extra,
        )  # fmt: skip

    def _accept_or_undo(self, q: Tensor, lin: Linearization, state: State):
        s = self.settings
        accept = lin.cost <= state["cost"]
        error, jac, cost = lin.error, lin.jacobian, lin.cost
        assert jac is not None  # IKSolver.linearize sets it
        if "q" in state:
            q = torch.where(accept[:, None], q, state["q"])
            error = torch.where(accept[:, None], error, state["error"])
            jac = torch.where(accept[:, None, None], jac, state["jacobian"])
            cost = torch.where(accept, cost, state["cost"])
        mu = torch.where(accept, state["mu"] / s.decrease, state["mu"] * s.increase)
        mu = mu.clamp(s.mu_min, s.mu_max)
        state.update(q=q, error=error, jacobian=jac, cost=cost, mu=mu)
        return q, error, jac, cost, mu


def _aim(problem: IKProblem) -> tuple[tuple[int, ...], list[Tensor], list[Tensor | None]]:
    """The loop kernels' targets: every link's index, positions and rotations (or ``None``)."""
    targets, robot = problem.targets, problem.robot
    links = tuple(robot.link_index(t.link) for t in targets)
    return links, [t.position for t in targets], [t.rotmat for t in targets]

"""Levenberg-Marquardt with adaptive damping: the default solver."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from torchik.ik.base import IKProblem, IKSolver, Linearization, SolverSettings, State

__all__ = ["LevenbergMarquardt", "LMSettings", "damped_step"]


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
    chol, _ = torch.linalg.cholesky_ex(a)
    y = torch.cholesky_solve((error * weights)[..., None], chol)
    return (jw.transpose(-1, -2) @ y)[..., 0]


@dataclass(frozen=True)
class LMSettings(SolverSettings):
    """Levenberg-Marquardt settings.

    The damping of a row is ``λ = μ (cost + damping_floor)`` (Sugihara's error-scaled damping,
    ``cost`` the weighted squared residual) where ``μ`` adapts: a step that lowers the cost is
    accepted and divides ``μ`` by ``decrease``; one that raises it is undone (the row goes back
    to its last accepted point) and multiplies ``μ`` by ``increase``.

    Attributes:
        damping: initial ``μ``.
        damping_floor: keeps ``λ`` positive at the solution (m²).
        increase: factor on ``μ`` after a rejected step.
        decrease: divisor of ``μ`` after an accepted step.
        mu_min: lower bound of ``μ``.
        mu_max: upper bound of ``μ``.
    """

    max_iters: int = 60
    rotation_weight: float = 0.5
    damping: float = 1.0
    damping_floor: float = 1e-6
    increase: float = 4.0
    decrease: float = 2.0
    mu_min: float = 1e-3
    mu_max: float = 1e4
    limit_mode: str = "grad"


class LevenbergMarquardt(IKSolver):
    """Levenberg-Marquardt with error-scaled, adaptive damping, batched over every row.

    The state keeps each row's last accepted point (``q``, residual, Jacobian, cost), so an
    uphill step costs one evaluation and no extra kinematics.
    """

    Settings = LMSettings
    settings: LMSettings

    def initial_state(self, q: Tensor) -> State:
        return {
            "mu": q.new_full((q.shape[0],), self.settings.damping),
            "cost": q.new_full((q.shape[0],), torch.inf),
        }

    def step(self, problem: IKProblem, q: Tensor, lin: Linearization, state: State) -> Tensor:
        s = self.settings
        accept = lin.cost <= state["cost"]
        if "q" in state:
            q = torch.where(accept[:, None], q, state["q"])
            error = torch.where(accept[:, None], lin.error, state["error"])
            jac = torch.where(accept[:, None, None], lin.jacobian, state["jacobian"])
            cost = torch.where(accept, lin.cost, state["cost"])
        else:
            error, jac, cost = lin.error, lin.jacobian, lin.cost
        mu = torch.where(accept, state["mu"] / s.decrease, state["mu"] * s.increase)
        mu = mu.clamp(s.mu_min, s.mu_max)
        state.update(q=q, error=error, jacobian=jac, cost=cost, mu=mu)
        w = problem.weights(s.rotation_weight)
        lam = mu * (cost + s.damping_floor)
        if s.limit_mode == "grad":
            g = (jac.transpose(-1, -2) @ (error * w * w)[..., None])[..., 0]
            lo, up = problem.robot.lower, problem.robot.upper
            blocked = ((q <= lo) & (g < 0)) | ((q >= up) & (g > 0))
            jac = jac * (~blocked)[:, None, :]
        elif s.limit_mode == "step":
            d = damped_step(jac, error, lam, w)
            lo, up = problem.robot.lower, problem.robot.upper
            blocked = ((q <= lo) & (d < 0)) | ((q >= up) & (d > 0))
            jac = jac * (~blocked)[:, None, :]
        return q + damped_step(jac, error, lam, w)

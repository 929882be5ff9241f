"""Classic Jacobian baselines: damped least squares with fixed damping, Jacobian transpose."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from torchik.checks import check_float
from torchik.ik.base import IKProblem, IKSolver, Linearization, SolverSettings, State
from torchik.ik.lm import damped_step

__all__ = ["DampedLeastSquares", "DLSSettings", "JacobianTranspose", "JTSettings"]


def _limit_norm(step: Tensor, max_norm: float) -> Tensor:
    """Scale rows of ``step (B, dof)`` down to a norm of at most ``max_norm``."""
    norm = step.norm(dim=-1, keepdim=True)
    return step * (max_norm / norm.clamp_min(max_norm))


@dataclass(frozen=True)
class DLSSettings(SolverSettings):
    """Damped least squares settings.

    Attributes:
        damping: the fixed ``λ`` of ``δ = Jᵀ (J Jᵀ + λ² I)⁻¹ e`` (m).
        max_step: largest joint step norm per iteration (rad).
    """

    max_iters: int = 200
    rotation_weight: float = 0.5
    damping: float = 0.05
    max_step: float = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        check_float("damping", self.damping, 0.0)
        check_float("max_step", self.max_step, 0.0)


class DampedLeastSquares(IKSolver):
    """Damped least squares (Wampler; Nakamura & Hanafusa) with a fixed damping factor: the
    "DLS Jacobian" baseline of the Neural IK paper."""

    Settings = DLSSettings
    settings: DLSSettings

    def step(self, problem: IKProblem, q: Tensor, lin: Linearization, state: State) -> Tensor:
        s = self.settings
        damping = lin.cost.new_full(lin.cost.shape, s.damping**2)
        w = problem.weights(s.rotation_weight)
        assert lin.jacobian is not None  # IKSolver.linearize sets it
        return q + _limit_norm(damped_step(lin.jacobian, lin.error, damping, w), s.max_step)


@dataclass(frozen=True)
class JTSettings(SolverSettings):
    """Jacobian transpose settings.

    Attributes:
        max_step: largest joint step norm per iteration (rad).
    """

    max_iters: int = 500
    rotation_weight: float = 0.5
    patience: int = 30
    min_improvement: float = 1e-3
    max_step: float = 0.2

    def __post_init__(self) -> None:
        super().__post_init__()
        check_float("max_step", self.max_step, 0.0)


class JacobianTranspose(IKSolver):
    """``δ = α JᵀW e`` with the step length ``α = <e, JJᵀe> / |JJᵀe|²`` that is optimal for the
    linearised residual (Buss, 2004); weighted by the rotation weight."""

    Settings = JTSettings
    settings: JTSettings

    def step(self, problem: IKProblem, q: Tensor, lin: Linearization, state: State) -> Tensor:
        w = problem.weights(self.settings.rotation_weight)
        assert lin.jacobian is not None  # IKSolver.linearize sets it
        jw, ew = lin.jacobian * w[:, None], lin.error * w
        direction = (jw.transpose(-1, -2) @ ew[..., None])[..., 0]
        image = (jw @ direction[..., None])[..., 0]
        alpha = (ew * image).sum(-1) / (image * image).sum(-1).clamp_min(1e-30)
        return q + _limit_norm(alpha[:, None] * direction, self.settings.max_step)

"""Plain gradient descent on the pose error through autograd forward kinematics."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from torchik.checks import check_float
from torchik.ik.base import IKProblem, IKSolver, Linearization, SolverSettings, State

__all__ = ["GradientDescent", "GDSettings"]


@dataclass(frozen=True)
class GDSettings(SolverSettings):
    """Gradient descent settings.

    Attributes:
        learning_rate: step ``q <- q - lr * grad`` of the cost ``½ |W e|²``.
        max_step: largest joint step norm per iteration (rad).
    """

    max_iters: int = 1000
    rotation_weight: float = 0.5
    patience: int = 50
    min_improvement: float = 1e-3
    learning_rate: float = 1.0
    max_step: float = 0.2

    def __post_init__(self) -> None:
        super().__post_init__()
        check_float("learning_rate", self.learning_rate, 0.0)
        check_float("max_step", self.max_step, 0.0)


class GradientDescent(IKSolver):
    """Gradient descent with a fixed learning rate, the gradient from autograd through
    :meth:`torchik.Robot.forward_kinematics` (the differentiable-FK baseline of the Neural IK
    paper); no Jacobian is formed."""

    Settings = GDSettings
    settings: GDSettings

    @property
    def capturable(self) -> bool:
        """No: autograd inside a captured graph is not attempted (it runs eagerly)."""
        return False

    def linearize(self, problem: IKProblem, q: Tensor) -> Linearization:
        if torch.is_inference_mode_enabled():  # autograd's cryptic "does not require grad"
            raise RuntimeError(
                "method 'gd' differentiates through FK and cannot run inside "
                "torch.inference_mode(); call it outside (solve_ik already disables gradients "
                "elsewhere), or use another method"
            )
        with torch.enable_grad():
            q = q.detach().requires_grad_(True)
            fk = problem.robot.forward_kinematics
            parts = [t.residual(fk(q, t.link)) for t in problem.targets]
            error = torch.cat([e for e, _ in parts], dim=-1)
            angle = torch.stack([a for _, a in parts], dim=-1)
            cost = ((problem.weights(self.settings.rotation_weight) * error) ** 2).sum(dim=-1)
            (grad,) = torch.autograd.grad(0.5 * cost.sum(), q)
        grad = torch.where(torch.isfinite(grad), grad, 0.0)
        return Linearization(error.detach(), angle.detach(), cost.detach(), gradient=grad)

    def step(self, problem: IKProblem, q: Tensor, lin: Linearization, state: State) -> Tensor:
        s = self.settings
        assert lin.gradient is not None  # this solver's linearize sets it
        step = s.learning_rate * lin.gradient
        norm = step.norm(dim=-1, keepdim=True)
        return q - step * (s.max_step / norm.clamp_min(s.max_step))

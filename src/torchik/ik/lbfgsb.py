"""L-BFGS-B from SciPy on the pose error, one target row at a time (the IKPy-style baseline)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from torchik.ik.base import IKProblem, IKSolver, Linearization, SolverSettings, State

__all__ = ["LBFGSB", "LBFGSBSettings"]


def _scipy_minimize():
    try:
        from scipy.optimize import minimize
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the 'lbfgsb' IK method needs SciPy: pip install 'torchik[ik]' (or scipy)"
        ) from exc
    return minimize


@dataclass(frozen=True)
class LBFGSBSettings(SolverSettings):
    """L-BFGS-B settings. One iteration of the batched loop is one full SciPy run per active
    row, so ``max_iters`` counts runs (restarts from a random seed when ``patience = 1``).

    Attributes:
        scipy_max_iters: ``maxiter`` of each SciPy run.
        ftol: SciPy's relative cost tolerance.
        gtol: SciPy's projected-gradient tolerance.
    """

    max_iters: int = 4
    rotation_weight: float = 0.5
    patience: int = 1
    scipy_max_iters: int = 200
    ftol: float = 1e-14
    gtol: float = 1e-10


class LBFGSB(IKSolver):
    """SciPy's L-BFGS-B on ``|W e|²`` with the joint limits as box bounds, the cost and its
    gradient from autograd FK of one row; loops over rows in Python (a baseline, not fast)."""

    Settings = LBFGSBSettings
    settings: LBFGSBSettings

    def step(self, problem: IKProblem, q: Tensor, lin: Linearization, state: State) -> Tensor:
        minimize = _scipy_minimize()
        s = self.settings
        robot = problem.robot
        bounds = list(zip(robot.lower.tolist(), robot.upper.tolist(), strict=True))
        options = {"maxiter": s.scipy_max_iters, "ftol": s.ftol, "gtol": s.gtol}
        out = q.clone()
        for row in range(q.shape[0]):
            fun = _cost_function(problem.rows(torch.tensor([row])), s.rotation_weight)
            x0 = q[row].cpu().double().numpy()
            res = minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds, options=options)
            out[row] = torch.as_tensor(res.x, dtype=q.dtype, device=q.device)
        return out


def _cost_function(problem: IKProblem, rotation_weight: float):
    """``x (dof,) numpy -> (cost, gradient)`` for one row."""
    robot, w = problem.robot, problem.weights(rotation_weight)

    def fun(x):
        with torch.enable_grad():
            q = torch.as_tensor(x, dtype=robot.dtype, device=robot.device)[None].requires_grad_()
            error, _ = problem.residual(robot.forward_kinematics(q, problem.link))
            cost = ((w * error) ** 2).sum()
            (grad,) = torch.autograd.grad(cost, q)
        return cost.item(), grad[0].double().cpu().numpy()

    return fun

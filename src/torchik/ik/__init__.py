"""Numerical inverse kinematics: batched solvers sharing one loop, and ``solve_ik``.

Solvers (each implements only its step, see :class:`IKSolver`): :class:`LevenbergMarquardt`
(default), :class:`DampedLeastSquares`, :class:`JacobianTranspose`, :class:`GradientDescent`,
:class:`LBFGSB` (SciPy, optional extra ``ik``). :func:`refine_samples` polishes given
configurations (a learned model's samples) one for one, and :func:`collect_solutions` gathers
a number of solutions of one target from rounds of them. :func:`solve_wholebody` (what
``solve_ik`` does with a dict of targets) places several links at once.
"""

from torchik.ik.base import (
    IKProblem,
    IKSolver,
    JointLimits,
    Linearization,
    SolverSettings,
    pose_residual,
)
from torchik.ik.gradient import GDSettings, GradientDescent
from torchik.ik.jacobian import DampedLeastSquares, DLSSettings, JacobianTranspose, JTSettings
from torchik.ik.lbfgsb import LBFGSB, LBFGSBSettings
from torchik.ik.lm import LevenbergMarquardt, LMSettings
from torchik.ik.refine import collect_solutions, refine_samples
from torchik.ik.result import IKResult
from torchik.ik.solve import METHODS, default_link, solve_ik
from torchik.ik.wholebody.problem import WholeBodyProblem
from torchik.ik.wholebody.result import WholeBodyResult
from torchik.ik.wholebody.solve import solve_wholebody

__all__ = [
    "DLSSettings",
    "DampedLeastSquares",
    "GDSettings",
    "GradientDescent",
    "IKProblem",
    "IKResult",
    "IKSolver",
    "JTSettings",
    "JointLimits",
    "JacobianTranspose",
    "LBFGSB",
    "LBFGSBSettings",
    "LMSettings",
    "LevenbergMarquardt",
    "Linearization",
    "METHODS",
    "SolverSettings",
    "WholeBodyProblem",
    "WholeBodyResult",
    "default_link",
    "pose_residual",
    "collect_solutions",
    "refine_samples",
    "solve_ik",
    "solve_wholebody",
]

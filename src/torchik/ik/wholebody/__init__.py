"""Whole-body IK: several links placed at once, chosen joints, a posture in the null space, on a
fixed or floating base.
"""

from torchik.ik.wholebody.problem import (
    WholeBodyProblem,
)
from torchik.ik.wholebody.rest import (
    away_from_limits,
    seeds_near,
)
from torchik.ik.wholebody.result import (
    WholeBodyResult,
    evaluate_targets,
)
from torchik.ik.wholebody.seeds import (
    fit_base,
    wholebody_seeder,
)
from torchik.ik.wholebody.solve import (
    WholeBodyLM,
    solve_wholebody,
)

__all__ = [
    "away_from_limits",
    "evaluate_targets",
    "fit_base",
    "seeds_near",
    "solve_wholebody",
    "wholebody_seeder",
    "WholeBodyLM",
    "WholeBodyProblem",
    "WholeBodyResult",
]

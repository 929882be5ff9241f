"""Hyperparameter studies of learned IK models (Optuna; Ray Tune with ``backend="ray"``)."""

from torchik.tune.ray import (
    tune_ray,
)
from torchik.tune.results import (
    best_config,
    write_results,
)
from torchik.tune.space import (
    Choice,
    Float,
    Int,
    Param,
    default_space,
    parse_space,
    read_space,
)
from torchik.tune.study import (
    TuneConfig,
    TuneResult,
    open_study,
    tune,
)

__all__ = [
    "best_config",
    "Choice",
    "default_space",
    "Float",
    "Int",
    "open_study",
    "Param",
    "parse_space",
    "read_space",
    "tune",
    "tune_ray",
    "TuneConfig",
    "TuneResult",
    "write_results",
]

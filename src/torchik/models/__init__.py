"""Learned inverse kinematics: the common interface (:mod:`torchik.models.base`) and one module
per model family. Importing this package registers every family with :func:`register`."""

from torchik.models import mlp
from torchik.models.base import (
    FORMAT_VERSION,
    IKModel,
    ProblemSpec,
    clamp_to_limits,
    families,
    joint_difference,
    load,
    load_pretrained,
    register,
    squash_to_limits,
)
from torchik.models.mlp import MLP, MLPConfig

# TODO(issue 7): `from torchik.models import iknet` once src/torchik/models/iknet.py exists
# (the IKNet developer's file); it registers the "iknet" family on import.

__all__ = [
    "FORMAT_VERSION",
    "MLP",
    "IKModel",
    "MLPConfig",
    "ProblemSpec",
    "clamp_to_limits",
    "families",
    "joint_difference",
    "load",
    "load_pretrained",
    "mlp",
    "register",
    "squash_to_limits",
]

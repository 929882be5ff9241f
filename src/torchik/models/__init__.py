"""Learned inverse kinematics: the common interface (:mod:`torchik.models.base`) and one module
per model family. Importing this package registers every family with :func:`register`."""

from torchik.models import cvae as cvae
from torchik.models import flow as flow
from torchik.models import fm as fm
from torchik.models import iknet, mlp
from torchik.models import inn as inn
from torchik.models import mdn as mdn
from torchik.models import rnn as rnn
from torchik.models.base import (
    FORMAT_VERSION,
    PRETRAINED,
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
from torchik.models.iknet import IKNet, IKNetConfig
from torchik.models.mlp import MLP, MLPConfig

__all__ = [
    "FORMAT_VERSION",
    "MLP",
    "IKModel",
    "IKNet",
    "IKNetConfig",
    "MLPConfig",
    "PRETRAINED",
    "ProblemSpec",
    "clamp_to_limits",
    "families",
    "iknet",
    "joint_difference",
    "load",
    "load_pretrained",
    "mlp",
    "register",
    "squash_to_limits",
]

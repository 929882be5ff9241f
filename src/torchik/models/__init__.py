"""Learned inverse kinematics: the common interface (:class:`IKModel`), the registry of families,
checkpoints, one module per family and the pretrained models bundled with torchik.

Importing this package registers every family with :func:`register`.
"""

from torchik.models.base import IKModel, clamp_to_limits, squash_to_limits
from torchik.models.checkpoint import FORMAT_VERSION
from torchik.models.cvae import CVAE, CVAEConfig
from torchik.models.flow import Flow, FlowConfig
from torchik.models.fm import FEW_PASSES, FEW_PASSES_BF16, FlowMatching, FMConfig, FMSampler
from torchik.models.iknet import IKNet, IKNetConfig
from torchik.models.inn import INN, INNConfig
from torchik.models.mdn import MDN, MDNConfig
from torchik.models.mlp import MLP, MLPConfig
from torchik.models.pipeline import (
    ModelSolutions,
    check_model_fits,
    model_targets,
    solutions_with_model,
    solve_with_model,
)
from torchik.models.pretrained import PRETRAINED, load_pretrained
from torchik.models.registry import families, load, register
from torchik.models.rnn import RNN, RNNConfig

__all__ = [
    "CVAE",
    "CVAEConfig",
    "FEW_PASSES",
    "FEW_PASSES_BF16",
    "FMConfig",
    "FMSampler",
    "FORMAT_VERSION",
    "Flow",
    "FlowConfig",
    "FlowMatching",
    "IKModel",
    "IKNet",
    "IKNetConfig",
    "INN",
    "INNConfig",
    "MDN",
    "MDNConfig",
    "MLP",
    "MLPConfig",
    "ModelSolutions",
    "PRETRAINED",
    "RNN",
    "RNNConfig",
    "check_model_fits",
    "clamp_to_limits",
    "families",
    "load",
    "load_pretrained",
    "model_targets",
    "register",
    "solutions_with_model",
    "solve_with_model",
    "squash_to_limits",
]

"""The deterministic MLP baseline of the Neural IK paper: target -> one joint configuration."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from torchik.checks import MAX_LAYERS, MAX_WIDTH, check_choice, check_int
from torchik.learn.spec import ProblemSpec
from torchik.models.base import IKModel
from torchik.models.registry import register

__all__ = ["MLP", "MLPConfig"]

_ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU, "tanh": nn.Tanh}


@dataclass(frozen=True)
class MLPConfig:
    """Hyper-parameters of :class:`MLP`.

    Attributes:
        depth: number of hidden layers.
        width: units per hidden layer.
        activation: ``"relu"``, ``"gelu"``, ``"silu"`` or ``"tanh"``.
    """

    depth: int = 3
    width: int = 1024
    activation: str = "relu"

    def __post_init__(self) -> None:
        check_int("depth", self.depth, 1, MAX_LAYERS)
        check_int("width", self.width, 1, MAX_WIDTH)
        check_choice("activation", self.activation, _ACTIVATIONS)


@register
class MLP(IKModel):
    """A multilayer perceptron regressing joints from normalised targets.

    It is deterministic: :meth:`sample` returns the same prediction ``n`` times (clamped to the
    limits) and there is no ``log_prob``. The loss is the mean squared joint difference, wrapped
    for continuous joints, between the prediction and the training configuration.

    Example:
        >>> spec = ProblemSpec.from_robot(torchik.load_robot("panda"))
        >>> model = MLP(spec, MLPConfig(depth=2, width=64))
        >>> model.sample(torch.zeros(5, 3), n=4).shape
        torch.Size([5, 4, 7])
    """

    family = "mlp"
    Config = MLPConfig
    config: MLPConfig

    def __init__(self, spec: ProblemSpec, config: MLPConfig | None = None):
        super().__init__(spec, config)
        act, width = _ACTIVATIONS[self.config.activation], self.config.width
        layers: list[nn.Module] = []
        size = spec.target_dim
        for _ in range(self.config.depth):
            layers += [nn.Linear(size, width), act()]
            size = width
        layers.append(nn.Linear(size, spec.dof))
        self.net = nn.Sequential(*layers)

    @classmethod
    def tiny_config(cls) -> MLPConfig:
        return MLPConfig(depth=2, width=16)

    def predict(self, target: Tensor) -> Tensor:
        """The unclamped prediction ``(..., D)`` for ``target (..., T)``."""
        self._check_target(target)
        return self.denormalize_q(self.net(self.normalize_target(target)))

    def loss(self, q: Tensor, target: Tensor) -> Tensor:
        self._check(q, target)
        return self.joint_difference(self.predict(target), q).square().mean()

    def sample(self, target: Tensor, n: int, generator: torch.Generator | None = None) -> Tensor:
        self._check_target(target, n, generator)
        q = self.clamp_to_limits(self.predict(target))
        return q.unsqueeze(-2).expand(*q.shape[:-1], n, q.shape[-1]).clone()

"""An invertible neural network for inverse problems (Ardizzone et al., "Analyzing inverse
problems with invertible neural networks", ICLR 2019).

One invertible map ``f`` takes the joint features ``x`` (zero-padded to width ``N``) to
``[y, z, pad]``: ``y`` the normalised target, ``z`` a latent of size ``Z`` and zeros.
``N = max(F, T + Z)``. Sampling inverts ``[y, z ~ N(0, I), 0]``.

The map is a stack of GLOW-style affine coupling blocks, each preceded by a fixed random
permutation (a saved buffer): the input is split into halves ``u1, u2``;
``v2 = u2 * exp(s2(u1)) + t2(u1)``, then ``v1 = u1 * exp(s1(v2)) + t1(v2)``. Log-scales are
soft-clamped, ``s = c * 2 / pi * atan(s_raw / c)``, so that ``|s| < c`` and the inverse stays
well conditioned.

The loss (the paper's section 3.3) is a weighted sum of

* ``L_y``: squared error of the predicted target (supervised forward loss);
* ``L_z``: MMD between ``[y_pred, z]`` (gradient blocked through ``y_pred``) and
  ``[y, N(0, I)]``, which makes ``z`` independent of ``y`` and standard normal;
* ``L_pad``: squared padding outputs (they must be zero for the inverse to be valid);
* ``L_x`` (``backward_mmd``): MMD between the inverted ``[y, z ~ N(0, I), 0]`` and the
  training ``x`` (unsupervised backward loss), plus its padding's squares.

MMDs use inverse multiquadric kernels (:func:`torchik.learn.mmd`, widths ``MMD_WIDTHS``).
Joint features are ``(cos, sin)`` for circular joints (``cos_sin``), so no loss sees the seam at
``+-pi``.
The padded model has no tractable density: :meth:`IKModel.log_prob` is not implemented.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import torch
from torch import Tensor, nn

from torchik.checks import MAX_LAYERS, MAX_WIDTH, check_bool, check_choice, check_float, check_int
from torchik.learn.metrics import mmd
from torchik.learn.spec import ProblemSpec
from torchik.models.common import ACTIVATIONS, JointModel, mlp, repeat_targets
from torchik.models.registry import register

__all__ = ["INN", "INNConfig", "AffineCoupling"]

MMD_WIDTHS = (0.2, 0.5, 1.0, 2.0)
"""Kernel widths for unit-scale data (normalised joint features, a standard normal latent)."""


@dataclass(frozen=True)
class INNConfig:
    """Hyper-parameters of :class:`INN`.

    Attributes:
        latent: size ``Z`` of the latent ``z``.
        blocks: coupling blocks.
        width: hidden units of each coupling's sub-networks.
        depth: hidden layers of each sub-network.
        clamp: soft bound ``c`` of the log-scales.
        weight_y, weight_z, weight_x, weight_pad: loss weights.
        backward_mmd: include the unsupervised backward loss ``L_x``.
        y_noise: standard deviation of noise on ``y`` in the backward pass (normalised units).
        activation: ``"relu"``, ``"gelu"``, ``"silu"`` or ``"tanh"``.
        cos_sin: encode circular joints as ``(cos, sin)``.
    """

    latent: int = 4
    blocks: int = 6
    width: int = 128
    depth: int = 2
    clamp: float = 2.0
    weight_y: float = 1.0
    weight_z: float = 1.0
    weight_x: float = 1.0
    weight_pad: float = 1.0
    backward_mmd: bool = True
    y_noise: float = 0.0
    activation: str = "relu"
    cos_sin: bool = True

    def __post_init__(self) -> None:
        check_int("latent", self.latent, 1, MAX_WIDTH)
        check_int("width", self.width, 1, MAX_WIDTH)
        check_int("blocks", self.blocks, 1, MAX_LAYERS)
        check_int("depth", self.depth, 0, MAX_LAYERS)
        check_float("clamp", self.clamp, positive=True)
        for name in ("weight_y", "weight_z", "weight_x", "weight_pad", "y_noise"):
            check_float(name, getattr(self, name), 0.0)
        check_bool("backward_mmd", self.backward_mmd)
        check_choice("activation", self.activation, ACTIVATIONS)
        check_bool("cos_sin", self.cos_sin)


class AffineCoupling(nn.Module):
    """A GLOW-style affine coupling block of width ``N`` (both halves transformed).

    Args:
        size: ``N``.
        width, depth, activation: the sub-networks (see :func:`~torchik.models.common.mlp`).
        clamp: soft bound of the log-scales.
    """

    def __init__(self, size: int, width: int, depth: int, activation: str, clamp: float):
        super().__init__()
        if size < 2:
            raise ValueError(f"a coupling needs at least 2 dimensions, got {size}")
        self.split, self.clamp = size // 2, clamp
        rest = size - self.split
        self.net1 = mlp(rest, 2 * self.split, width, depth, activation)  # acts on u1
        self.net2 = mlp(self.split, 2 * rest, width, depth, activation)  # acts on u2

    def _scale_shift(self, net: nn.Module, u: Tensor) -> tuple[Tensor, Tensor]:
        raw, shift = net(u).chunk(2, dim=-1)
        # atan soft clamp: smooth, monotone, |s| < clamp so exp(+-s) stays bounded
        return self.clamp * (2.0 / math.pi) * torch.atan(raw / self.clamp), shift

    def forward(self, u: Tensor) -> Tensor:
        u1, u2 = u[..., : self.split], u[..., self.split :]
        s2, t2 = self._scale_shift(self.net2, u1)
        v2 = u2 * torch.exp(s2) + t2
        s1, t1 = self._scale_shift(self.net1, v2)
        return torch.cat((u1 * torch.exp(s1) + t1, v2), dim=-1)

    def inverse(self, v: Tensor) -> Tensor:
        v1, v2 = v[..., : self.split], v[..., self.split :]
        s1, t1 = self._scale_shift(self.net1, v2)
        u1 = (v1 - t1) * torch.exp(-s1)
        s2, t2 = self._scale_shift(self.net2, u1)
        return torch.cat((u1, (v2 - t2) * torch.exp(-s2)), dim=-1)


@register
class INN(JointModel):
    """Invertible network ``x <-> [y, z]`` trained with forward, latent and backward losses.

    Attributes:
        size: ``N``, the padded width.

    Example:
        >>> spec = ProblemSpec.from_robot(torchik.load_robot("panda"))
        >>> model = INN(spec, INNConfig(blocks=2, width=32))
        >>> model.sample(torch.zeros(5, 3), n=4).shape
        torch.Size([5, 4, 7])
    """

    family = "inn"
    Config = INNConfig
    config: INNConfig
    permutations: Tensor

    def __init__(self, spec: ProblemSpec, config: INNConfig | None = None):
        super().__init__(spec, config)
        cfg = self.config
        self.size = max(self.feature_dim, spec.target_dim + cfg.latent)
        args = (self.size, cfg.width, cfg.depth, cfg.activation, cfg.clamp)
        self.couplings = nn.ModuleList(AffineCoupling(*args) for _ in range(cfg.blocks))
        perms = [
            torch.randperm(self.size, generator=torch.Generator().manual_seed(i), device="cpu")
            for i in range(cfg.blocks)
        ]
        self.register_buffer("permutations", torch.stack(perms))

    @classmethod
    def tiny_config(cls) -> INNConfig:
        return INNConfig(latent=2, blocks=2, width=16, depth=1)

    # ------------------------------------------------------------ the map
    def forward(self, x: Tensor) -> Tensor:
        """``x (..., N)`` -> ``[y, z, pad] (..., N)``."""
        for perm, coupling in zip(self.permutations, self.couplings, strict=True):
            x = coupling(x[..., perm])
        return x

    def inverse(self, v: Tensor) -> Tensor:
        """``[y, z, pad] (..., N)`` -> ``x (..., N)``."""
        for perm, coupling in zip(
            reversed(self.permutations), reversed(self.couplings), strict=True
        ):
            v = cast(AffineCoupling, coupling).inverse(v)[..., torch.argsort(perm)]
        return v

    def _pad(self, x: Tensor) -> Tensor:
        return torch.cat((x, x.new_zeros(*x.shape[:-1], self.size - x.shape[-1])), dim=-1)

    def _generate(self, y: Tensor, z: Tensor) -> Tensor:
        """Joint features ``(..., F)`` and padding ``(..., N - F)`` of the inverted ``[y, z]``."""
        return self.inverse(self._pad(torch.cat((y, z), dim=-1)))

    # ------------------------------------------------------------ the interface
    def loss(self, q: Tensor, target: Tensor) -> Tensor:
        self._check(q, target)
        cfg, t = self.config, self.spec.target_dim
        x, y = self.joint_features(q), self.normalize_target(target)
        out = self(self._pad(x))
        y_pred, z_pred, pad = out[..., :t], out[..., t : t + cfg.latent], out[..., t + cfg.latent :]
        prior = torch.randn_like(z_pred)
        loss = cfg.weight_y * (y_pred - y).square().sum(-1).mean()
        loss = loss + cfg.weight_z * mmd(
            torch.cat((y_pred.detach(), z_pred), -1), torch.cat((y, prior), -1), MMD_WIDTHS
        )
        loss = loss + cfg.weight_pad * pad.square().sum(-1).mean()
        if cfg.backward_mmd:
            noisy = y + cfg.y_noise * torch.randn_like(y)
            generated = self._generate(noisy, torch.randn_like(z_pred))
            f = self.feature_dim
            loss = loss + cfg.weight_x * mmd(generated[..., :f], x, MMD_WIDTHS)
            loss = loss + cfg.weight_pad * generated[..., f:].square().sum(-1).mean()
        return loss

    def sample(self, target: Tensor, n: int, generator: torch.Generator | None = None) -> Tensor:
        self._check_target(target, n, generator)
        y = self.normalize_target(repeat_targets(target, n))
        shape = (*y.shape[:-1], self.config.latent)
        z = torch.randn(shape, generator=generator, dtype=y.dtype, device=y.device)
        features = self._generate(y, z)[..., : self.feature_dim]
        return self.project(self.from_features(features))

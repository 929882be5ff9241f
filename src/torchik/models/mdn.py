"""A mixture density network over the full joint vector (the Neural IK paper's "Multivariate
GMMs" baseline).

One MLP maps the normalised target to ``K`` components, each a mixing logit, a mean and a
lower-triangular Cholesky factor with a positive diagonal (softplus plus ``min_scale``) of a
``torch.distributions.MultivariateNormal`` over the joints divided by ``q_std``.

Design choices:

* **Circular joints** (continuous, or a full-turn range): a component's residual is the joint
  difference wrapped to ``(-pi, pi]`` (each component is evaluated at the image of ``q``
  nearest its mean), and its mean is a direction ``(cos, sin)`` read with ``atan2`` (with
  ``cos_sin``), so a mode can follow the target around the circle and straddle ``+-pi``.
  For limited joints the residual is the plain difference, and for a robot without circular
  joints :meth:`MDN.log_prob` is exactly the density of ``MixtureSameFamily`` of those
  normals. With circular joints it is the density of the draws before wrapping at the nearest
  image, which is the wrapped mixture's density up to the far images (negligible for scales
  well below ``pi``).
* The mixture lives on ``R^D``: its mass outside the limits is mapped onto them when sampling
  (limited joints clamped, circular ones wrapped into the range).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.distributions import MultivariateNormal

from torchik.checks import MAX_LAYERS, MAX_WIDTH, check_bool, check_choice, check_float, check_int
from torchik.learn.spec import ProblemSpec
from torchik.models.common import ACTIVATIONS, JointModel, mlp
from torchik.models.mixture import full_precision
from torchik.models.registry import register

__all__ = ["MDN", "MDNConfig"]


@dataclass(frozen=True)
class MDNConfig:
    """Hyper-parameters of :class:`MDN`.

    Attributes:
        components: mixture components ``K``.
        width: hidden units of the MLP.
        depth: hidden layers of the MLP.
        min_scale: floor of the Cholesky diagonal (normalised units): bounds the density.
        activation: ``"relu"``, ``"gelu"``, ``"silu"`` or ``"tanh"``.
        cos_sin: means of circular joints are directions ``(cos, sin)`` (read with ``atan2``).
    """

    components: int = 10
    width: int = 256
    depth: int = 3
    min_scale: float = 1e-3
    activation: str = "relu"
    cos_sin: bool = True

    def __post_init__(self) -> None:
        check_int("components", self.components, 1, MAX_WIDTH)
        check_int("width", self.width, 1, MAX_WIDTH)
        check_int("depth", self.depth, 0, MAX_LAYERS)
        check_float("min_scale", self.min_scale, positive=True)
        check_choice("activation", self.activation, ACTIVATIONS)
        check_bool("cos_sin", self.cos_sin)


@register
class MDN(JointModel):
    """Target ``(..., T)`` -> a ``K``-component full-covariance Gaussian mixture on joints.

    Example:
        >>> spec = ProblemSpec.from_robot(torchik.load_robot("panda"))
        >>> model = MDN(spec, MDNConfig(width=32, depth=2))
        >>> model.sample(torch.zeros(5, 3), n=4).shape
        torch.Size([5, 4, 7])
    """

    family = "mdn"
    Config = MDNConfig
    config: MDNConfig
    tril_rows: Tensor
    tril_cols: Tensor

    def __init__(self, spec: ProblemSpec, config: MDNConfig | None = None):
        super().__init__(spec, config)
        cfg, d = self.config, spec.dof
        rows, cols = torch.tril_indices(d, d, device="cpu")  # CPU even on meta (a count)
        self.register_buffer("tril_rows", rows, persistent=False)
        self.register_buffer("tril_cols", cols, persistent=False)
        self._per_component = 1 + self.feature_dim + len(rows)  # logit, mean, Cholesky
        size = cfg.components * self._per_component
        self.net = mlp(spec.target_dim, size, cfg.width, cfg.depth, cfg.activation)

    @classmethod
    def tiny_config(cls) -> MDNConfig:
        return MDNConfig(components=3, width=16, depth=1)

    def mixture(self, target: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Log mixing weights ``(..., K)``, means ``(..., K, D)`` in joint units and Cholesky
        factors ``(..., K, D, D)`` in normalised units, for ``target (..., T)``."""
        self._check_target(target)
        f, k = self.feature_dim, self.config.components
        (out,) = full_precision(self.net(self.normalize_target(target)))  # bf16 autocast
        out = out.unflatten(-1, (k, self._per_component))
        logits, mean, entries = out[..., 0], out[..., 1 : 1 + f], out[..., 1 + f :]
        diagonal = self.tril_rows == self.tril_cols
        # softplus keeps the diagonal positive; the floor bounds the density (and the loss)
        entries = torch.where(diagonal, F.softplus(entries) + self.config.min_scale, entries)
        d = self.spec.dof
        tril = entries.new_zeros(*entries.shape[:-1], d, d)
        tril[..., self.tril_rows, self.tril_cols] = entries
        return logits.log_softmax(-1), self.from_features(mean), tril

    def log_prob(self, q: Tensor, target: Tensor) -> Tensor:
        """Log density ``(...)`` of the (unprojected) mixture at ``q (..., D)``: exact for
        limited joints; circular joints use each component's nearest image (see the notes)."""
        self._check(q, target, finite=True)
        batch = torch.broadcast_shapes(q.shape[:-1], target.shape[:-1])
        if math.prod(batch) == 0:  # torch.distributions cannot validate an empty batch
            return q.new_zeros(batch)
        log_w, mean, tril = self.mixture(target)
        residual = self.wrapped_difference(q.unsqueeze(-2), mean) / self.q_std  # (..., K, D)
        # valid by construction (a positive diagonal, finite inputs checked above): torch's
        # validation would read three values back from the device at every training step
        components = MultivariateNormal(torch.zeros_like(mean), scale_tril=tril,
                                        validate_args=False)  # fmt: skip
        log_p = torch.logsumexp(log_w + components.log_prob(residual), dim=-1)
        return log_p - self.q_std.log().sum()

    def loss(self, q: Tensor, target: Tensor) -> Tensor:
        """Negative log-likelihood averaged over the batch."""
        return -self.log_prob(q, target).mean()

    def sample(self, target: Tensor, n: int, generator: torch.Generator | None = None) -> Tensor:
        self._check_target(target, n, generator)
        log_w, mean, tril = self.mixture(target)
        d = self.spec.dof
        probs = log_w.exp().reshape(-1, log_w.shape[-1])
        index = torch.multinomial(probs, n, True, generator=generator)
        index = index.reshape(*log_w.shape[:-1], n)  # (..., n)
        mean = _gather(mean, index)  # (..., n, D)
        tril = _gather(tril.flatten(-2), index).unflatten(-1, (d, d))
        eps = torch.randn(mean.shape, generator=generator, dtype=mean.dtype, device=mean.device)
        return self.project(mean + self.q_std * (tril @ eps.unsqueeze(-1)).squeeze(-1))


def _gather(x: Tensor, index: Tensor) -> Tensor:
    """Rows ``x[..., index, :]``: ``x (..., K, F)``, ``index (..., n)`` -> ``(..., n, F)``."""
    return x.gather(-2, index.unsqueeze(-1).expand(*index.shape, x.shape[-1]))

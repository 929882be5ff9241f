"""A conditional variational autoencoder (the planar-arm report's CVAE).

The encoder ``q(z | q, x)`` reads joint features and the normalised target ``x`` and returns a
diagonal Gaussian; the decoder ``p(q | z, x)`` maps a latent and the target to joint features;
the prior is ``N(0, I)`` or ``p(z | x)`` (``prior``). Sampling draws ``z`` from the prior,
decodes and projects the joints into their limits.

Design choices:

* **Wrap-around reconstruction loss** (the report's fix for the seam at ``+-pi``): the
  reconstruction error of a circular joint is its difference wrapped to ``(-pi, pi]``. Every
  joint's error is divided by its ``q_std`` so that joints of different ranges weigh alike.
* The decoder returns features: ``(cos, sin)`` for circular joints when ``cos_sin`` (the
  angle is their ``atan2``, so it can move around the circle without a jump), a normalised
  value otherwise.
* **The prior** is ``N(0, I)`` (the report's cVAE) or, with ``prior="conditional"``, a
  diagonal Gaussian ``p(z | x)`` from a third network that reads the target (Sohn et al.,
  2015). With the standard prior the encoder's ``q(z | q, x)`` must average to ``N(0, I)`` for
  every target, which a short training does not reach: samples drawn from ``N(0, I)`` then
  lean towards the training set's mean. A conditional prior only has to match, target by
  target, where the encoder puts its latents.
* ``loss = recon + beta * KL`` where ``recon`` is the sum of squared normalised errors. It is
  ``beta`` times the negative ELBO of a decoder whose density is Gaussian in the wrapped
  error with standard deviation ``sqrt(beta / 2) * q_std`` per joint, which is what
  :meth:`CVAE.log_prob` evaluates (a lower bound, ``log_prob_is_bound = True``; for circular
  joints the Gaussian in the wrapped error is the usual small-scale approximation of a wrapped
  normal).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from torchik.checks import MAX_LAYERS, MAX_WIDTH, check_bool, check_choice, check_float, check_int
from torchik.learn.spec import ProblemSpec
from torchik.models.common import ACTIVATIONS, JointModel, mlp, repeat_targets
from torchik.models.registry import register

__all__ = ["CVAE", "CVAEConfig"]

_LOG_2PI = math.log(2.0 * math.pi)
PRIORS = ("standard", "conditional")


def _gaussian(out: Tensor) -> tuple[Tensor, Tensor]:
    """Mean and log-variance ``(..., Z)`` of a network's output ``(..., 2 Z)``, the
    log-variance clamped so that its ``exp`` stays finite in float32."""
    mean, log_var = out.chunk(2, dim=-1)
    return mean, log_var.clamp(-12.0, 8.0)


@dataclass(frozen=True)
class CVAEConfig:
    """Hyper-parameters of :class:`CVAE`.

    Attributes:
        latent: size of ``z``.
        width: hidden units of the encoder and the decoder.
        depth: hidden layers of each.
        beta: weight of the KL term (see the module notes for the implied decoder scale).
        activation: ``"relu"``, ``"gelu"``, ``"silu"`` or ``"tanh"``.
        cos_sin: encode circular joints as ``(cos, sin)``.
        elbo_samples: latent draws of the Monte-Carlo ELBO in :meth:`CVAE.log_prob`.
        prior: ``"standard"`` (``N(0, I)``) or ``"conditional"`` (a network ``p(z | x)`` of
            ``width`` and ``depth``, see the module notes).
    """

    latent: int = 8
    width: int = 256
    depth: int = 3
    beta: float = 0.01
    activation: str = "relu"
    cos_sin: bool = True
    elbo_samples: int = 32
    prior: str = "standard"

    def __post_init__(self) -> None:
        for name in ("latent", "width", "elbo_samples"):
            check_int(name, getattr(self, name), 1, MAX_WIDTH)
        check_int("depth", self.depth, 0, MAX_LAYERS)
        check_float("beta", self.beta, positive=True)
        check_choice("activation", self.activation, ACTIVATIONS)
        check_bool("cos_sin", self.cos_sin)
        check_choice("prior", self.prior, PRIORS)


@register
class CVAE(JointModel):
    """Conditional VAE: ``q (..., D)``, target ``(..., T)``, latent ``(..., Z)``.

    Example:
        >>> spec = ProblemSpec.from_robot(torchik.load_robot("panda"))
        >>> model = CVAE(spec, CVAEConfig(width=32, depth=2))
        >>> model.sample(torch.zeros(5, 3), n=4).shape
        torch.Size([5, 4, 7])
    """

    family = "cvae"
    Config = CVAEConfig
    config: CVAEConfig
    log_prob_is_bound = True

    def __init__(self, spec: ProblemSpec, config: CVAEConfig | None = None):
        super().__init__(spec, config)
        cfg, t, f = self.config, spec.target_dim, self.feature_dim
        self.encoder = mlp(f + t, 2 * cfg.latent, cfg.width, cfg.depth, cfg.activation)
        self.decoder = mlp(cfg.latent + t, f, cfg.width, cfg.depth, cfg.activation)
        if cfg.prior == "conditional":
            self.prior_net = mlp(t, 2 * cfg.latent, cfg.width, cfg.depth, cfg.activation)

    @classmethod
    def tiny_config(cls) -> CVAEConfig:
        return CVAEConfig(latent=2, width=16, depth=1, elbo_samples=4)

    # ------------------------------------------------------------ pieces
    def encode(self, q: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
        """Mean and log-variance ``(..., Z)`` of ``q(z | q, target)``."""
        h = torch.cat((self.joint_features(q), self.normalize_target(target)), dim=-1)
        return _gaussian(self.encoder(h))

    def prior(self, target: Tensor) -> tuple[Tensor, Tensor]:
        """Mean and log-variance ``(..., Z)`` of the prior ``p(z | target)`` (zeros for the
        standard prior)."""
        if self.config.prior == "standard":
            zeros = target.new_zeros(*target.shape[:-1], self.config.latent)
            return zeros, zeros
        return _gaussian(self.prior_net(self.normalize_target(target)))

    def decode(self, z: Tensor, target: Tensor) -> Tensor:
        """Joints ``(..., D)`` (unprojected) decoded from ``z (..., Z)`` and ``target``."""
        h = torch.cat((z, self.normalize_target(target)), dim=-1)
        return self.from_features(self.decoder(h))

    def _terms(self, q: Tensor, target: Tensor, eps: Tensor) -> tuple[Tensor, Tensor]:
        """Reconstruction (sum of squared normalised errors) and KL, for noise ``eps``."""
        mean, log_var = self.encode(q, target)
        z = mean + torch.exp(0.5 * log_var) * eps
        error = self.wrapped_difference(self.decode(z, target), q) / self.q_std
        p_mean, p_log_var = self.prior(target)
        kl = 0.5 * (
            (mean - p_mean).square().mul(torch.exp(-p_log_var))
            + torch.exp(log_var - p_log_var)
            - 1.0
            + p_log_var
            - log_var
        ).sum(-1)
        return error.square().sum(-1), kl

    # ------------------------------------------------------------ the interface
    def loss(self, q: Tensor, target: Tensor) -> Tensor:
        """``mean(recon + beta * KL)`` with one reparametrised latent draw per row."""
        self._check(q, target)
        eps = torch.randn(*q.shape[:-1], self.config.latent, dtype=q.dtype, device=q.device)
        recon, kl = self._terms(q, target, eps)
        return (recon + self.config.beta * kl).mean()

    def log_prob(self, q: Tensor, target: Tensor, generator: torch.Generator | None = None):
        """A Monte-Carlo ELBO ``(...)`` of ``log p(q | target)`` (``elbo_samples`` draws).

        Without a ``generator`` the draws come from a fixed seed, so the value is a
        deterministic function of ``q`` and ``target``.
        """
        self._check(q, target, finite=True)
        shape = torch.broadcast_shapes(q.shape[:-1], target.shape[:-1])
        k, d = self.config.elbo_samples, self.spec.dof
        if generator is None:
            generator = torch.Generator(q.device).manual_seed(0)
        eps = torch.randn(*shape, k, self.config.latent, generator=generator, device=q.device)
        q = repeat_targets(q.expand(*shape, d), k)
        target = repeat_targets(target.expand(*shape, target.shape[-1]), k)
        recon, kl = self._terms(q, target, eps.to(q.dtype))
        # decoder: N(wrapped error; 0, var) with var = beta / 2 in normalised units
        var = self.config.beta / 2.0
        log_lik = -0.5 * (recon / var + d * (math.log(var) + _LOG_2PI))
        return (log_lik - kl).mean(-1) - self.q_std.log().sum()

    def sample(self, target: Tensor, n: int, generator: torch.Generator | None = None) -> Tensor:
        self._check_target(target, n, generator)
        target = repeat_targets(target, n)
        eps = torch.randn(
            *target.shape[:-1], self.config.latent, generator=generator, device=target.device
        ).to(target.dtype)
        mean, log_var = self.prior(target)
        return self.project(self.decode(mean + torch.exp(0.5 * log_var) * eps, target))

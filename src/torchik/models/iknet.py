"""IKNet, the model of "Neural Inverse Kinematics" (Bensadoun et al., ICML 2022).

A *hypernetwork* maps the target to the weights of one small *primary network* per joint.
Primary network ``j`` reads the joints before it and returns a one-dimensional Gaussian mixture
for joint ``j`` whose mixing weights go through :func:`~torchik.models.mixture.sparsemax`. The
joints are therefore an autoregressive chain: ``p(q | x) = prod_j p(q_j | q_<j, x)``.

Design choices (the paper leaves them open or the robots need them):

* **Generated weights** are one flat vector per target, cut into layers without copying. Each
  layer is a ``(fan_in + 1, fan_out)`` matrix whose last row is the bias, applied as
  ``(x @ W + b) / sqrt(fan_in + 1)`` with ``torch.baddbmm``: that fixed scale plays the role of
  a fan-in initialisation, so the heads can start as plain ``N(0, 1 / embedding)`` matrices on a
  layer-normalised embedding. ``n`` samples per target share their target's weights (batched
  matrix products over ``(targets, n, features)``), so sampling never copies weights. The
  likelihood (one sample per target: training) does not generate a layer with more rows than
  the embedding at all (:func:`_apply_factored`): the generated matrix is linear in the
  embedding, so the layer is one matrix product with the heads' own rows, shared by the batch.
* **Joint features** fed to later primary networks: ``(cos q, sin q)`` for circular joints (no
  seam at ``+-pi``) and ``q`` scaled to ``[-1, 1]`` for limited ones.
* **Limits and wrap-around** live in the mixture (see :mod:`torchik.models.mixture`): a
  wrapped normal per component for joints that turn fully (continuous, or ranges of a full turn
  such as UR5's ``[-pi, pi]``), a normal truncated to the limits otherwise. Means of limited
  joints are kept inside the limits by a sigmoid; scales lie between ``min_scale`` and the
  domain's maximum (:func:`~torchik.models.mixture.scale_range`). Samples are therefore always
  inside the limits and :meth:`IKNet.log_prob` is an exact, normalised density.
* **Means of circular joints** are directions ``(cos, sin)`` turned into angles by ``atan2``,
  so a mean can follow a target around the circle without a jump; on the 2-joint snake this
  halved the error after 1000 steps compared with an angle read off one output.
* At initialisation the component means of every joint are spread evenly over its range, and
  the mixing logits start small so that sparsemax begins with most components in its support
  (a component outside the support gets no gradient through its logit).
* **Normalisation**: none by default; :meth:`IKNetConfig.paper` keeps the paper's batch norm.
  Batch statistics of a 256-row batch jitter the generated weights of every target, and the
  NLL answers with broad components: after 3000 CPU steps (small preset) the mean distance of
  raw samples was 4.4 cm with batch norm and 2.4 cm without (layer norm: 2.4 cm) on the Digit
  arm, 7.1 against 6.2 cm on UR5 and the same 12.7 cm on Franka; on the 2-joint snake (K = 4,
  400 steps) 6-7 mm against 1-2.5 mm. With K = 2 on the snake, though, no or layer norm let
  both components of the first joint settle between the elbow-up and elbow-down solutions for
  three of three seeds (batch norm separated them); K = 4 separated them for every seed tried.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
from torch import Tensor, nn

from torchik.checks import MAX_LAYERS, MAX_WIDTH, check_choice, check_float, check_int
from torchik.learn.spec import ProblemSpec
from torchik.models.base import IKModel
from torchik.models.mixture import (
    JointDomain,
    mixture_log_prob,
    mixture_sample,
    mixture_sample_within,
    scale_range,
    sparsemax,
)
from torchik.models.registry import register

__all__ = ["IKNet", "IKNetConfig"]

_NORMS: dict[str, Callable[[int], nn.Module]] = {
    "batch": nn.BatchNorm1d,
    "layer": nn.LayerNorm,
    "none": lambda width: nn.Identity(),
}
_LOGIT_INIT_GAIN = 0.1  # small initial logits: sparsemax starts with most components in support


@dataclass(frozen=True)
class IKNetConfig:
    """Hyper-parameters of :class:`IKNet`. The defaults are the public code's sizes;
    :meth:`paper` gives the paper's, :meth:`small` a model that trains on a CPU in minutes.

    Attributes:
        hyper_width: units of each hidden layer of the hypernetwork.
        hyper_depth: hidden layers (linear, normalisation, ReLU) of the hypernetwork.
        embedding: size of the target embedding that the linear heads read.
        primary_width: hidden units of each primary network.
        primary_layers: linear layers of each primary network (>= 1).
        components: Gaussian components ``K`` per joint.
        min_scale: smallest component scale (radians or metres): keeps the NLL bounded.
        norm: hypernetwork normalisation: ``"none"`` (default), ``"batch"`` (the paper) or
            ``"layer"``.
        joint_features: what the primary networks read of a limited joint drawn before:
            ``"linear"`` (the paper: the angle scaled to [-1, 1]) or ``"trig"`` (that, its
            cosine and its sine: the kinematics is trigonometric in the angles; on the Franka
            after 6000 CPU steps 7.4 cm instead of 11.0). Circular joints are read as cosine
            and sine either way.
        target_noise: standard deviation of Gaussian noise added to each training target, in
            the target's own units (metres for positions), in training mode only: a
            regulariser for a fixed data set repeated many times (the model cannot learn one
            sharp density per training target). 0: off (the paper). On the Franka's 1 M
            protocol pairs, 40000 CPU steps at batch 1024: 2.68 cm with 5 mm, 2.73 cm without
            (the paper: 3.1): that set did not overfit, and the noise blurred the posterior.
    """

    hyper_width: int = 1024
    hyper_depth: int = 3
    embedding: int = 128
    primary_width: int = 256
    primary_layers: int = 2
    components: int = 50
    min_scale: float = 1e-4
    norm: str = "none"
    joint_features: str = "linear"
    target_noise: float = 0.0

    def __post_init__(self) -> None:
        for name in ("hyper_width", "embedding", "primary_width", "components"):
            check_int(name, getattr(self, name), 1, MAX_WIDTH)
        check_int("hyper_depth", self.hyper_depth, 0, MAX_LAYERS)
        check_int("primary_layers", self.primary_layers, 1, MAX_LAYERS)
        check_float("min_scale", self.min_scale, positive=True)
        check_choice("norm", self.norm, _NORMS)
        check_choice("joint_features", self.joint_features, ("linear", "trig"))
        check_float("target_noise", self.target_noise, 0.0)

    @classmethod
    def paper(cls, **overrides) -> IKNetConfig:
        """The paper's sizes (4 hypernetwork layers, 3-layer primary networks), batch norm."""
        return cls(**{"hyper_depth": 4, "primary_layers": 3, "norm": "batch", **overrides})

    @classmethod
    def small(cls, **overrides) -> IKNetConfig:
        """A model of about a million parameters that trains on a CPU in minutes."""
        sizes = {"hyper_width": 256, "hyper_depth": 2, "embedding": 32, "primary_width": 64}
        return cls(**{**sizes, "components": 10, **overrides})

    @classmethod
    def for_dof(cls, dof: int, **overrides) -> IKNetConfig:
        """A size for a robot of ``dof`` joints (``torchik train``'s default): :meth:`small`,
        with 4 components per joint up to 3 joints. A joint of such an arm has at most two
        branches (elbow up and down): K = 4 separated them for every seed tried on the 2-joint
        snake, and a step there costs a third to a fifth of K = 10's on a CPU."""
        return cls.small(**{"components": 4 if dof <= 3 else 10, **overrides})


@dataclass(frozen=True)
class _Layer:
    """Where one generated layer sits in a target's flat weight vector."""

    offset: int
    fan_in: int
    fan_out: int

    @property
    def size(self) -> int:
        return (self.fan_in + 1) * self.fan_out


def _layouts(fan_ins: list[int], width: int, layers: int, outs: list[int]) -> list[list[_Layer]]:
    """The generated layers of every joint's primary network, packed one after another."""
    offset, result = 0, []
    for fan_in, out in zip(fan_ins, outs, strict=True):
        sizes = [fan_in] + [width] * (layers - 1) + [out]
        joint = []
        for a, b in zip(sizes[:-1], sizes[1:], strict=True):
            joint.append(_Layer(offset, a, b))
            offset += joint[-1].size
        result.append(joint)
    return result


def _apply(x: Tensor, piece: Tensor, layer: _Layer) -> Tensor:
    """``x (B, n, fan_in)`` through each target's generated layer ``piece (B, layer.size)``:
    ``(B, n, fan_out)``."""
    w = piece.unflatten(1, (-1, layer.fan_out))
    scale = 1.0 / math.sqrt(layer.fan_in + 1)
    return torch.baddbmm(w[:, -1:], x, w[:, :-1], beta=scale, alpha=scale)


def _apply_factored(
    x: Tensor, embedding: Tensor, weight: Tensor, bias: Tensor, layer: _Layer
) -> Tensor:
    """:func:`_apply` of the layer that the heads' rows ``weight (size, E)`` and ``bias
    (size,)`` generate from ``embedding (B, E)``, without generating it: ``(B, n, fan_out)``.

    A generated matrix is linear in the embedding, ``W_b = sum_k e_bk H_k + C``, so
    ``[x, 1] W_b = sum_k e_bk ([x, 1] H_k) + [x, 1] C``: one matrix product shared by the whole
    batch (``[x, 1]`` times ``H`` laid out as ``(fan_in + 1, fan_out E)``, which the heads' rows
    already are), then each row's ``fan_out x E`` products summed against its embedding. The
    arithmetic is that of generating the layer, but the largest tensor is ``n fan_out E`` per
    target instead of ``(fan_in + 1) fan_out``, and the products are dense matrix products
    instead of one matrix-vector product per target: worth it for one sample per target
    (training, :meth:`IKNet.log_prob`) when ``E < fan_in + 1``.
    """
    b, n, e = x.shape[0], x.shape[1], embedding.shape[-1]
    ones = x.new_ones(b, n, 1)
    xa = torch.cat((x, ones), dim=-1)  # (B, n, fan_in + 1)
    z = xa @ weight.view(layer.fan_in + 1, layer.fan_out * e)  # (B, n, fan_out E)
    mixed = torch.bmm(z.view(b, n * layer.fan_out, e), embedding.unsqueeze(-1))
    out = torch.addmm(
        mixed.view(b * n, layer.fan_out), xa.view(b * n, -1), bias.view(-1, layer.fan_out)
    )
    return out.view(b, n, layer.fan_out) / math.sqrt(layer.fan_in + 1)


@register
class IKNet(IKModel):
    """The hypernetwork + sparse Gaussian-mixture model of the Neural IK paper.

    Training is teacher-forced: :meth:`loss` is the negative log-likelihood of the true joints,
    each primary network reading the *true* joints before its own. :meth:`sample` draws joint by
    joint, each conditioned on the ones already drawn.

    Attributes:
        domains: the :class:`~torchik.models.mixture.JointDomain` of every joint.
        generated_size: number of primary-network weights generated per target.

    Example:
        >>> spec = ProblemSpec.from_robot(torchik.load_robot("panda"))
        >>> model = IKNet(spec, IKNetConfig.small()).eval()
        >>> model.sample(torch.zeros(5, 3), n=4).shape
        torch.Size([5, 4, 7])
    """

    family = "iknet"
    Config = IKNetConfig
    config: IKNetConfig

    def __init__(self, spec: ProblemSpec, config: IKNetConfig | None = None):
        super().__init__(spec, config)
        cfg = self.config
        self.domains = tuple(
            JointDomain.from_limits(lo, hi, c)
            for lo, hi, c in zip(spec.lower, spec.upper, spec.continuous, strict=True)
        )
        limited = 3 if cfg.joint_features == "trig" else 1  # features of a limited joint
        widths = [2 if d.circular else limited for d in self.domains]
        self._feature_end = [sum(widths[:j]) for j in range(spec.dof)]
        # logits, scales and the means: two numbers (a direction) on a circle, else one
        outs = [(4 if d.circular else 3) * cfg.components for d in self.domains]
        self._layers = _layouts(self._feature_end, cfg.primary_width, cfg.primary_layers, outs)
        self.generated_size = self._layers[-1][-1].offset + self._layers[-1][-1].size
        self.hyper = self._hypernetwork(spec.target_dim)
        self.heads = nn.Linear(cfg.embedding, self.generated_size)
        self._init_heads()

    @classmethod
    def tiny_config(cls) -> IKNetConfig:
        return IKNetConfig(
            hyper_width=16, hyper_depth=1, embedding=8, primary_width=8, components=3
        )

    # ------------------------------------------------------------ construction
    def _hypernetwork(self, target_dim: int) -> nn.Sequential:
        cfg, norm = self.config, _NORMS[self.config.norm]
        layers: list[nn.Module] = []
        size = target_dim
        for _ in range(cfg.hyper_depth):
            layers += [nn.Linear(size, cfg.hyper_width), norm(cfg.hyper_width), nn.ReLU()]
            size = cfg.hyper_width
        # a unit-variance embedding lets the heads' initialisation fix the generated weights' scale
        embed = nn.LayerNorm(cfg.embedding, elementwise_affine=False)
        layers += [nn.Linear(size, cfg.embedding), embed]
        return nn.Sequential(*layers)

    @torch.no_grad()
    def _init_heads(self) -> None:
        if self.heads.weight.is_meta:  # built on the meta device to count parameters: no values
            return
        k = self.config.components
        nn.init.normal_(self.heads.weight, std=1.0 / math.sqrt(self.config.embedding))
        self.heads.bias.zero_()
        centers = (torch.arange(k, dtype=torch.float64) + 0.5) / k
        for domain, layers in zip(self.domains, self._layers, strict=True):
            out = layers[-1]
            rows = self.heads.weight[out.offset : out.offset + out.size]
            rows.view(out.fan_in + 1, out.fan_out, -1)[:, :k] *= _LOGIT_INIT_GAIN
            bias = self.heads.bias[out.offset : out.offset + out.size].view(out.fan_in + 1, -1)
            # the bias row is scaled by 1 / sqrt(fan_in + 1) when applied: undo that here
            gain = math.sqrt(out.fan_in + 1)
            lo, hi = scale_range(domain, self.config.min_scale)
            start = min(hi / 2, domain.span / k)
            bias[-1, k : 2 * k] = gain * math.log((start - lo) / (hi - start))
            if domain.circular:
                angle = 2 * math.pi * centers
                bias[-1, 2 * k :] = gain * torch.cat((torch.cos(angle), torch.sin(angle)))
            else:
                bias[-1, 2 * k :] = gain * torch.logit(centers)

    # ------------------------------------------------------------ pieces
    def embed(self, target: Tensor) -> Tensor:
        """The hypernetwork's embedding ``(..., embedding)`` of targets ``(..., T)``: the
        normalised target through the hypernetwork, the features the heads turn into weights."""
        self._check_target(target)
        flat = self.normalize_target(target).reshape(-1, target.shape[-1])  # BatchNorm1d: 2-D
        return self.hyper(flat).reshape(*target.shape[:-1], self.config.embedding)

    def generate(self, target: Tensor) -> Tensor:
        """The flat generated weights ``(B, generated_size)`` of targets ``(B, T)``."""
        return self.heads(self.embed(target))

    def _features(self, q: Tensor, j: int) -> Tensor:
        """Features ``(..., 1 or 2)`` of joint ``j``'s values ``q (...)``."""
        domain = self.domains[j]
        if domain.circular:
            return torch.stack((torch.cos(q), torch.sin(q)), dim=-1)
        linear = (2.0 * (q - domain.lower) / domain.span - 1.0).unsqueeze(-1)
        if self.config.joint_features == "trig":
            return torch.cat((linear, torch.cos(q)[..., None], torch.sin(q)[..., None]), dim=-1)
        return linear

    def _split(self, flat: Tensor) -> list[tuple[Tensor, ...]]:
        """The generated weights ``flat (B, generated_size)`` cut into one ``(B, size)`` view
        per layer, per joint.

        One ``split`` instead of a slice per layer: the backward of a slice writes a zero
        gradient as large as ``flat`` and adds into it, once per layer (most of a CPU step);
        the backward of ``split`` is one concatenation. The values are the same.
        """
        sizes = [layer.size for joint in self._layers for layer in joint]
        pieces = iter(flat.split(sizes, dim=1))
        return [tuple(next(pieces) for _ in joint) for joint in self._layers]

    def _maps(self, target: Tensor) -> list[tuple[Callable[[Tensor], Tensor], ...]]:
        """Per joint, its primary network's layers as maps of one feature row per target,
        ``(B, 1, fan_in) -> (B, 1, fan_out)``, for targets ``(B, T)``: a layer with more rows
        than the embedding (``fan_in + 1 > E``) applied without generating it
        (:func:`_apply_factored`), the others generated from their rows of the heads."""
        embedding, size = self.embed(target), self.config.embedding
        sizes = [layer.size for joint in self._layers for layer in joint]
        weights = iter(self.heads.weight.split(sizes))
        biases = iter(self.heads.bias.split(sizes))
        maps = []
        for joint in self._layers:
            row: list[Callable[[Tensor], Tensor]] = []
            for layer, weight, bias in zip(joint, weights, biases, strict=False):
                if layer.fan_in + 1 > size:
                    row.append(partial(_apply_factored, embedding=embedding, weight=weight,
                                       bias=bias, layer=layer))  # fmt: skip
                else:
                    piece = nn.functional.linear(embedding, weight, bias)
                    row.append(partial(_apply, piece=piece, layer=layer))
            maps.append(tuple(row))
        return maps

    def _mixture(
        self, x: Tensor, flat: Tensor | tuple[Callable[[Tensor], Tensor], ...], j: int
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Weights, means, scales ``(B, n, K)`` of joint ``j`` from features ``x (B, n, F_j)``
        and the generated weights (``flat`` whole) or joint ``j``'s layer maps (:meth:`_maps`)."""
        maps: tuple[Callable[[Tensor], Tensor], ...]
        if isinstance(flat, Tensor):
            pieces = zip(self._split(flat)[j], self._layers[j], strict=True)
            maps = tuple(partial(_apply, piece=p, layer=lay) for p, lay in pieces)
        else:
            maps = flat
        for layer in maps[:-1]:
            x = torch.relu(layer(x))
        k, domain = self.config.components, self.domains[j]
        out = maps[-1](x)
        logits, raw_scale, raw_mean = out[..., :k], out[..., k : 2 * k], out[..., 2 * k :]
        if domain.circular:  # a direction (cos, sin): no seam where the angle wraps
            means = domain.lower + math.pi + torch.atan2(raw_mean[..., k:], raw_mean[..., :k])
        else:
            means = domain.lower + domain.span * torch.sigmoid(raw_mean)
        lo, hi = scale_range(domain, self.config.min_scale)
        scales = lo + (hi - lo) * torch.sigmoid(raw_scale)
        return sparsemax(logits), means, scales

    # ------------------------------------------------------------ the interface
    def log_prob(self, q: Tensor, target: Tensor) -> Tensor:
        """Exact log density ``(...)`` of ``q (..., D)`` given ``target (..., T)`` (broadcast);
        ``-inf`` where a limited joint is outside its limits."""
        self._check(q, target, finite=True)
        if (empty := self._no_rows(q, target)) is not None:
            return empty
        shape = torch.broadcast_shapes(q.shape[:-1], target.shape[:-1])
        q = q.expand(*shape, q.shape[-1]).reshape(-1, q.shape[-1])
        maps = self._maps(target.expand(*shape, target.shape[-1]).reshape(-1, target.shape[-1]))
        features = torch.cat([self._features(q[:, j], j) for j in range(self.spec.dof)], dim=-1)
        total = q.new_zeros(q.shape[0])
        for j, end in enumerate(self._feature_end):
            weights, means, scales = self._mixture(features[:, None, :end], maps[j], j)
            total = total + mixture_log_prob(
                q[:, j], weights[:, 0], means[:, 0], scales[:, 0], self.domains[j]
            )
        return total.reshape(shape)

    def loss(self, q: Tensor, target: Tensor) -> Tensor:
        """Teacher-forced negative log-likelihood of the true joints, averaged over the batch
        (in training mode with ``target_noise``: of noisy targets)."""
        if self.training and self.config.target_noise > 0:
            target = target + self.config.target_noise * torch.randn_like(target)
        return -self.log_prob(self.clamp_to_limits(q), target).mean()

    def sample(
        self,
        target: Tensor,
        n: int,
        generator: torch.Generator | None = None,
        *,
        temperature: float = 1.0,
    ) -> Tensor:
        """``n`` solutions per target, drawn joint by joint: ``(..., T)`` -> ``(..., n, D)``.

        Args:
            target: ``(..., T)`` targets.
            n: samples per target.
            generator: random generator on the model's device.
            temperature: multiplies every component's scale. ``1`` draws from the model's
                density (what :meth:`log_prob` describes); below 1 concentrates each draw near
                its component's mean (more accurate, still one mode per component); ``0`` returns
                the means of the drawn components.
        """
        self._check_target(target, n, generator)
        check_float("temperature", temperature, 0.0)
        batch, t = target.shape[:-1], target.shape[-1]
        flat = self.generate(target.reshape(-1, t))
        features = flat.new_zeros(flat.shape[0], n, 0)
        joints = []
        for j in range(self.spec.dof):
            weights, means, scales = self._mixture(features, flat, j)
            if temperature != 1.0:  # a tiny positive scale keeps the truncation finite at 0
                scales = (scales * temperature).clamp_min(1e-30)
            joints.append(mixture_sample(weights, means, scales, self.domains[j], generator))
            features = torch.cat((features, self._features(joints[-1], j)), dim=-1)
        return torch.stack(joints, dim=-1).reshape(*batch, n, self.spec.dof)

    def sample_within(
        self,
        target: Tensor,
        n: int,
        center: Tensor,
        radius: float | Tensor,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """``n`` solutions per target with every joint within ``radius`` of ``center`` (of its
        projection onto the limits).

        Joint ``j`` is drawn from its mixture (given the joints already drawn) restricted to
        ``[center_j - radius_j, center_j + radius_j]`` and the limits, renormalised (see
        :func:`~torchik.models.mixture.mixture_sample_within`): the windowed sampling of the
        paper's path following (Eq. 15). Only continuous joints' windows wrap around; a
        revolute joint whose range is a full turn keeps its window inside the limits.

        Args:
            target: ``(..., T)`` targets.
            n: samples per target.
            center: ``(..., n, D)`` window centres (e.g. each path's previous configuration);
                a centre outside the limits is projected onto them first, and the window is
                around the projected centre.
            radius: window half-width ``> 0``: a number or ``(D,)`` per joint (rad or m).
            generator: random generator on the model's device.

        Returns:
            ``(..., n, D)``.
        """
        self._check_target(target, n, generator)
        batch, t, d = target.shape[:-1], target.shape[-1], self.spec.dof
        if not isinstance(center, Tensor) or center.shape != (*batch, n, d):
            got = tuple(center.shape) if isinstance(center, Tensor) else type(center).__name__
            raise ValueError(f"center must have shape {(*batch, n, d)}, got {got}")
        flat = self.generate(target.reshape(-1, t))
        center = center.reshape(flat.shape[0], n, d).to(flat)
        radius = torch.as_tensor(radius, dtype=flat.dtype, device=flat.device).expand(d)
        features, joints = flat.new_zeros(flat.shape[0], n, 0), []
        for j in range(d):
            weights, means, scales = self._mixture(features, flat, j)
            joints.append(
                mixture_sample_within(
                    weights,
                    means,
                    scales,
                    self.domains[j],
                    center[..., j],
                    radius[j],
                    generator,
                    wrap=self.spec.continuous[j],
                )  # fmt: skip
            )
            features = torch.cat((features, self._features(joints[-1], j)), dim=-1)
        return torch.stack(joints, dim=-1).reshape(*batch, n, d)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, generated_size={self.generated_size}"

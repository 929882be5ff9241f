"""Sequence-to-sequence IK: a small Transformer encoder from end-effector paths to joint paths.

Section 5.5 of the Neural IK paper (Bensadoun et al., ICML 2022) trains a Transformer encoder
that reads a sequence of end-effector positions of a UR5 (100 steps) and returns the joint
angles at every step, once on the raw positions and once on the IKNet hypernetwork's embedding
of each position; the embedding converges faster and to a lower test error. :class:`SequenceIK`
is that encoder, with an ``embed`` hook for the representation (for IKNet:
:class:`ModelEmbedding` around :meth:`torchik.models.IKNet.embed`);
:func:`~torchik.seq2seq.data.make_sequence_dataset` moves the arm along smooth joint paths
(:func:`torchik.learn.make_smooth_targets`) and
:func:`~torchik.seq2seq.training.train_sequence_model` trains and returns the test error after
every epoch.

Joint angles are predicted as one direction ``(cos, sin)`` per joint: no seam at ``+-pi``, and
the loss, the squared distance between the predicted and the true direction (``2 - 2 cos(error)``
for a unit prediction), does not care about wrap-around. A direction is read as the angle
``atan2(sin, cos) + 2 pi k`` inside the joint's limits, or the nearest limit
(:func:`direction_to_angle`): a Panda's joint 6 at 3.3 rad (limits ``[-0.0175, 3.7525]``) reads
3.3, not ``3.3 - 2 pi``. The model keeps
the limits as buffers; :func:`~torchik.seq2seq.training.train_sequence_model` sets them from the
robot. Only revolute joints are modelled (a prismatic joint is refused by
:func:`~torchik.seq2seq.data.revolute_limits`).

Example:
    >>> import torch, torchik
    >>> from torchik.seq2seq import make_sequence_dataset, revolute_limits
    >>> robot = torchik.load_robot("ur5", dtype=torch.float64)
    >>> data = make_sequence_dataset(robot, n_sequences=4, length=10)
    >>> model = SequenceIK(robot.dof, SequenceIKConfig(d_model=16, heads=2, layers=1),
    ...                    limits=revolute_limits(robot))
    >>> model(data.positions).shape
    torch.Size([4, 10, 6])
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import Tensor, nn

from torchik.checks import (
    MAX_LAYERS,
    MAX_WIDTH,
    check_choice,
    check_float,
    check_int,
    check_tensor,
)
from torchik.geometry.joints import angle_into_limits

__all__ = [
    "ModelEmbedding",
    "SequenceIK",
    "SequenceIKConfig",
    "angle_to_direction",
    "direction_to_angle",
    "sinusoidal_encoding",
]

_POSITIONAL = ("sinusoidal", "learned")

MAX_LENGTH = 1 << 16
"""The longest ``max_length`` a :class:`SequenceIKConfig` accepts (its positional encoding is a
``(max_length, d_model)`` table)."""


# ---------------------------------------------------------------------------- the model
@dataclass(frozen=True)
class SequenceIKConfig:
    """Sizes of :class:`SequenceIK`.

    Attributes:
        d_model: width of the tokens inside the encoder.
        heads: attention heads (must divide ``d_model``).
        layers: encoder layers.
        feedforward: hidden units of each layer's feed-forward block.
        dropout: dropout inside the encoder layers.
        max_length: longest sequence the positional encoding covers.
        positional: ``"sinusoidal"`` (fixed) or ``"learned"`` positional encoding.
    """

    d_model: int = 64
    heads: int = 4
    layers: int = 2
    feedforward: int = 128
    dropout: float = 0.0
    max_length: int = 512
    positional: str = "sinusoidal"

    def __post_init__(self) -> None:
        for name in ("d_model", "heads", "feedforward"):
            check_int(name, getattr(self, name), 1, MAX_WIDTH)
        check_int("layers", self.layers, 1, MAX_LAYERS)
        check_int("max_length", self.max_length, 1, MAX_LENGTH)
        if self.d_model % self.heads:
            raise ValueError(f"heads must divide d_model, got {self.heads} and {self.d_model}")
        check_float("dropout", self.dropout, 0.0, 1.0)
        if self.dropout == 1.0:
            raise ValueError("dropout must be in [0, 1), got 1.0")
        check_choice("positional", self.positional, _POSITIONAL)


def sinusoidal_encoding(length: int, width: int, dtype: torch.dtype | None = None) -> Tensor:
    """The fixed positional encoding of "Attention is all you need": ``(length, width)``.

    Column ``2i`` is ``sin(t / 10000^(2i / width))`` and column ``2i + 1`` its cosine.
    """
    t = torch.arange(length, dtype=torch.float64)[:, None]
    rate = torch.exp(-math.log(10000.0) * torch.arange(0, width, 2, dtype=torch.float64) / width)
    out = torch.zeros(length, width, dtype=torch.float64)
    out[:, 0::2] = torch.sin(t * rate)
    out[:, 1::2] = torch.cos(t * rate)[:, : width // 2]  # an odd width has one cosine fewer
    return out.to(dtype or torch.get_default_dtype())


class ModelEmbedding(nn.Module):
    """``model.embed`` as a module, so that the model moves, saves and trains with its user.

    Args:
        model: any module with ``embed(target (..., T)) -> (..., E)``, e.g. an
            :class:`~torchik.models.IKNet` (its hypernetwork embedding).
    """

    model: Any  # a module with embed()

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, positions: Tensor) -> Tensor:
        """``(..., T)`` -> ``(..., E)``."""
        return self.model.embed(positions)


class SequenceIK(nn.Module):
    """Transformer encoder: end-effector positions ``(B, S, 3)`` -> joint angles ``(B, S, D)``.

    Each position becomes a feature vector (the positions standardised with the training
    set's statistics, or ``embed(positions)``), a linear input projection makes it a token,
    a positional encoding is added, ``layers`` pre-norm encoder layers attend over the whole
    sequence (no mask: the path is known in advance) and a linear head gives a direction
    ``(cos, sin)`` per joint, read as the angle inside the joint's limits
    (:func:`direction_to_angle` with the buffers ``lower`` and ``upper``).

    The limits are persistent buffers. A state dict saved before the model had them (no
    ``lower`` and ``upper`` keys) still loads and keeps the limits the model was built with:
    its predictions differ from the old ones only where ``atan2``'s angle in ``[-pi, pi]``
    lies outside the limits: whole turns move it into them, or (in the gap of a range shorter
    than a turn) it becomes the nearest limit.

    Args:
        dof: joints ``D``.
        config: the sizes.
        embed: ``None`` (raw positions) or a callable ``(..., 3) -> (..., E)`` applied to the
            positions in metres; an ``nn.Module`` becomes a submodule (moved and saved with
            this one), so wrap a model's method in :class:`ModelEmbedding`.
        embed_dim: ``E``; required with ``embed``.
        train_embed: train the embedding with the encoder. ``False`` (the default) freezes
            it: it runs without gradients and stays in eval mode (batch-norm statistics too),
            and :meth:`trainable_parameters` leaves it out.
        input_dim: size of one position (3).
        limits: ``(lower (D,), upper (D,))``, the joints' limits (rad), e.g.
            :func:`~torchik.seq2seq.data.revolute_limits` of the robot; ``None``:
            ``[-pi, pi]`` for every joint until :meth:`set_limits` (which
            :func:`~torchik.seq2seq.training.train_sequence_model` calls).

    Example:
        >>> model = SequenceIK(6, SequenceIKConfig(d_model=16, heads=2, layers=1))
        >>> model(torch.zeros(2, 5, 3)).shape
        torch.Size([2, 5, 6])
    """

    position_mean: Tensor
    position_std: Tensor
    positional: Tensor
    lower: Tensor
    upper: Tensor

    def __init__(
        self,
        dof: int,
        config: SequenceIKConfig | None = None,
        embed: Callable[[Tensor], Tensor] | None = None,
        embed_dim: int | None = None,
        *,
        train_embed: bool = False,
        input_dim: int = 3,
        limits: tuple[Tensor, Tensor] | None = None,
    ):
        super().__init__()
        if embed is not None and embed_dim is None:
            raise ValueError("pass embed_dim, the size of what embed returns")
        self.dof, self.config = dof, config or SequenceIKConfig()
        self.embed, self.train_embed = embed, bool(train_embed and embed is not None)
        cfg = self.config
        self.register_buffer("position_mean", torch.zeros(input_dim))
        self.register_buffer("position_std", torch.ones(input_dim))
        self.register_buffer("lower", torch.full((dof,), -math.pi))
        self.register_buffer("upper", torch.full((dof,), math.pi))
        if limits is not None:
            self.set_limits(*limits)
        layer = nn.TransformerEncoderLayer(
            cfg.d_model, cfg.heads, cfg.feedforward, cfg.dropout, batch_first=True,
            norm_first=True,
        )  # fmt: skip
        self.encoder = nn.TransformerEncoder(
            layer, cfg.layers, norm=nn.LayerNorm(cfg.d_model), enable_nested_tensor=False
        )
        self.head = nn.Linear(cfg.d_model, 2 * dof)
        self._init_positional(cfg)
        # created last: with one seed, raw and embedded variants share every other initial weight
        self.input = nn.Linear(input_dim if embed is None else cast(int, embed_dim), cfg.d_model)

    def _init_positional(self, cfg: SequenceIKConfig) -> None:
        table = sinusoidal_encoding(cfg.max_length, cfg.d_model)
        if cfg.positional == "learned":  # starts from the sinusoid, then trains
            self.positional = nn.Parameter(table)
        else:
            self.register_buffer("positional", table, persistent=False)

    @torch.no_grad()
    def set_normalization(self, positions: Tensor) -> None:
        """Standardise raw inputs with the mean and std of ``positions (..., 3)`` (training set)."""
        flat = positions.reshape(-1, positions.shape[-1]).to(self.position_mean)
        self.position_mean.copy_(flat.mean(dim=0))
        self.position_std.copy_(flat.std(dim=0).clamp_min(1e-6))

    @torch.no_grad()
    def set_limits(self, lower: Tensor, upper: Tensor) -> None:
        """Decode within the joint limits ``lower (D,)`` and ``upper (D,)`` (rad)."""
        for name, value in (("lower", lower), ("upper", upper)):
            check_tensor(name, value, shape=(self.dof,), batch=False)
            if not bool(torch.isfinite(value).all()):
                raise ValueError(f"{name} must be finite, got {value.tolist()}")
        if bool((lower > upper).any()):
            raise ValueError(f"lower {lower.tolist()} exceeds upper {upper.tolist()}")
        self.lower.copy_(lower)
        self.upper.copy_(upper)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        # a state dict saved before the limits were buffers has none: keep the model's own
        for name in ("lower", "upper"):
            state_dict.setdefault(prefix + name, getattr(self, name))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def features(self, positions: Tensor) -> Tensor:
        """Per-step input features ``(..., S, F)`` of positions ``(..., S, 3)`` (metres)."""
        if self.embed is None:
            return (positions - self.position_mean) / self.position_std
        if self.train_embed:
            return self.embed(positions)
        with torch.no_grad():  # frozen: no graph through the embedding
            return self.embed(positions)

    def directions(self, features: Tensor) -> Tensor:
        """Unnormalised joint directions ``(..., S, D, 2)`` (cos, sin) from ``(..., S, F)``."""
        batch, (steps, width) = features.shape[:-2], features.shape[-2:]
        if steps > self.config.max_length:
            raise ValueError(f"sequences of {steps} steps exceed max_length")
        tokens = self.input(features.reshape(-1, steps, width)) + self.positional[:steps]
        out = self.head(self.encoder(tokens))
        return out.reshape(*batch, steps, self.dof, 2)

    def forward(self, positions: Tensor) -> Tensor:
        """Joint angles ``(..., S, D)`` within the model's limits for positions ``(..., S, 3)``
        (:func:`direction_to_angle`)."""
        return self.angles(self.directions(self.features(positions)))

    def angles(self, directions: Tensor) -> Tensor:
        """``(..., D, 2)`` directions -> ``(..., D)`` angles within the model's limits."""
        return direction_to_angle(directions, self.lower, self.upper)

    def loss_from_features(self, features: Tensor, q: Tensor) -> Tensor:
        """Mean squared distance between predicted and true directions ``(cos q, sin q)``."""
        return (self.directions(features) - angle_to_direction(q)).square().sum(-1).mean()

    def loss(self, positions: Tensor, q: Tensor) -> Tensor:
        """Training loss of positions ``(B, S, 3)`` and their true joints ``q (B, S, D)``."""
        return self.loss_from_features(self.features(positions), q)

    def trainable_parameters(self) -> list[nn.Parameter]:
        """Every parameter except a frozen embedding's."""
        frozen = set()
        if isinstance(self.embed, nn.Module) and not self.train_embed:
            frozen = {id(p) for p in self.embed.parameters()}
        return [p for p in self.parameters() if id(p) not in frozen]

    def train(self, mode: bool = True) -> SequenceIK:
        super().train(mode)
        if isinstance(self.embed, nn.Module) and not self.train_embed:
            self.embed.eval()  # frozen means frozen batch-norm statistics too
        return self


def angle_to_direction(q: Tensor) -> Tensor:
    """``(..., D)`` angles -> ``(..., D, 2)`` unit directions ``(cos, sin)``."""
    return torch.stack((torch.cos(q), torch.sin(q)), dim=-1)


def direction_to_angle(
    direction: Tensor, lower: Tensor | None = None, upper: Tensor | None = None
) -> Tensor:
    """``(..., D, 2)`` directions (any length) -> ``(..., D)`` angles, within the limits if
    given.

    A direction stands for every angle ``a + 2 pi k``, ``a = atan2(sin, cos)``. Without limits
    the angle is ``a``, in ``[-pi, pi]``. With limits it is

    - ``a`` where ``a`` is inside them (a continuous joint, whose limits are ``(-pi, pi]``,
      reads as before, and so does a range of more than a turn that holds ``a``);
    - else the ``a + 2 pi k`` inside them (Panda's joint 6, ``[-0.0175, 3.7525]``: the
      direction of 3.3 reads 3.3, where ``atan2`` gives ``3.3 - 2 pi``);
    - else (a direction in the gap of a range shorter than a turn) the ``a + 2 pi k``
      nearest to the range, clamped: the limit nearest to the direction around the circle.
      Every angle returned is a joint value of the robot, as the other models of torchik
      return (:func:`torchik.geometry.project_to_limits`).

    Args:
        direction: ``(..., D, 2)`` ``(cos, sin)`` up to a positive factor.
        lower, upper: ``(D,)`` joint limits (rad), broadcast against ``(..., D)``; both or
            neither.

    Returns:
        ``(..., D)`` angles; the gradient is ``atan2``'s (the turns added carry none), zero
        where a direction in a gap is clamped.

    Example:
        >>> q = torch.tensor([3.3, 1.0])  # joint 6 of a Panda, and its joint 4 in its gap
        >>> lower, upper = torch.tensor([-0.0175, -3.0718]), torch.tensor([3.7525, -0.0698])
        >>> direction_to_angle(angle_to_direction(q), lower, upper)
        tensor([ 3.3000, -0.0698])
    """
    angle = torch.atan2(direction[..., 1], direction[..., 0])
    if lower is None and upper is None:
        return angle
    if lower is None or upper is None:
        raise ValueError("pass both lower and upper, or neither")
    return angle_into_limits(angle, lower.to(angle), upper.to(angle))

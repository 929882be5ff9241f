"""The common interface of learned IK models, their registry and their checkpoints.

Every model family subclasses :class:`IKModel`, declares ``family`` and a frozen ``Config``
dataclass, and implements :meth:`IKModel.loss` and :meth:`IKModel.sample` (and
:meth:`IKModel.log_prob` where it has a density). Decorate the class with :func:`register` so
that :func:`load` can rebuild it from a checkpoint and the contract tests cover it.

A checkpoint is a ``torch.save`` of plain types and tensors only::

    {"format_version": 2, "family": "mlp", "config": {...}, "spec": {...}, "state_dict": {...},
     "sha256": "..."}

and :func:`load` reads it with ``weights_only=True``: a checkpoint never executes code. Loading
checks everything before it allocates: the layout, the content hash of format 2 files
(:func:`~torchik.checkpoint.content_hash`), that every weight is finite, the config and
spec (each field in range) and the parameter count (at most :data:`MAX_PARAMETERS`, counted
before the model is built). Every refusal is a :class:`ValueError` naming the file.

:class:`ProblemSpec`, :data:`TARGET_DIMS` and :data:`MAX_DOF` live in :mod:`torchik.spec`,
the checkpoint files' :mod:`torchik.checkpoint` (:func:`atomic_save` and the checks); both are
re-exported here.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, ClassVar, TypeVar

import torch
from torch import Tensor, nn

from torchik.checkpoint import (
    FORMAT_VERSION,
    _torch_load,
    atomic_save,
    check_checkpoint,
    content_hash,
    read_checkpoint,
)
from torchik.checks import check_int
from torchik.rotations import wrap_angle
from torchik.spec import MAX_DOF, TARGET_DIMS, ProblemSpec

__all__ = [
    "FORMAT_VERSION",
    "MAX_DOF",
    "MAX_PARAMETERS",
    "MAX_SAMPLES",
    "TARGET_DIMS",
    "PRETRAINED",
    "IKModel",
    "ProblemSpec",
    "atomic_save",
    "check_checkpoint",
    "clamp_to_limits",
    "families",
    "from_checkpoint",
    "joint_difference",
    "load",
    "load_pretrained",
    "read_checkpoint",
    "register",
    "squash_to_limits",
    "content_hash",
]

MAX_SAMPLES = 1 << 20
"""The most samples per target :meth:`IKModel.sample` draws."""

MAX_PARAMETERS = 200_000_000
"""The most parameters a checkpoint's model may have (800 MB of float32): :func:`load` counts
them before building the model and refuses larger ones."""


# ---------------------------------------------------------------------------- limit helpers
def _limits(spec: ProblemSpec, like: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    lower = torch.tensor(spec.lower, dtype=like.dtype, device=like.device)
    upper = torch.tensor(spec.upper, dtype=like.dtype, device=like.device)
    return lower, upper, torch.tensor(spec.continuous, device=like.device)


def _clamp(q: Tensor, lower: Tensor, upper: Tensor, continuous: Tensor) -> Tensor:
    # continuous joints have limits (-pi, pi]: wrapping keeps their value, clamping would not
    return torch.where(continuous, wrap_angle(q), torch.clamp(q, lower, upper))


def _squash(raw: Tensor, lower: Tensor, upper: Tensor, kind: str) -> Tensor:
    if kind == "sigmoid":
        unit = torch.sigmoid(raw)
    elif kind == "tanh":
        unit = 0.5 * (torch.tanh(raw) + 1.0)
    else:
        raise ValueError(f"squash must be 'sigmoid' or 'tanh', got {kind!r}")
    # float rounding of lower + span * 1 can land one ulp past upper: clamp the result
    return torch.clamp(lower + (upper - lower) * unit, lower, upper)


def clamp_to_limits(q: Tensor, spec: ProblemSpec) -> Tensor:
    """Joints ``q (..., D)`` clamped to ``[lower, upper]``; continuous joints wrapped instead.

    The gradient is zero where a joint is clamped (use :func:`squash_to_limits` to keep one).
    """
    return _clamp(q, *_limits(spec, q))


def squash_to_limits(raw: Tensor, spec: ProblemSpec, kind: str = "sigmoid") -> Tensor:
    """Unbounded ``raw (..., D)`` mapped smoothly into ``[lower, upper]``.

    Args:
        raw: network outputs ``(..., D)``.
        spec: the problem (its limits).
        kind: ``"sigmoid"`` (``lower + span * sigmoid(raw)``) or ``"tanh"``
            (``lower + span * (tanh(raw) + 1) / 2``, the same map with ``raw`` scaled by 2).

    Returns:
        ``(..., D)`` within the limits.
    """
    lower, upper, _ = _limits(spec, raw)
    return _squash(raw, lower, upper, kind)


def joint_difference(q1: Tensor, q2: Tensor, continuous: Tensor) -> Tensor:
    """``q1 - q2`` with continuous joints' differences wrapped to ``(-pi, pi]``.

    Args:
        q1, q2: ``(..., D)`` joint values (broadcast).
        continuous: ``(D,)`` bool mask.

    Returns:
        ``(..., D)``.
    """
    diff = q1 - q2
    return torch.where(continuous, wrap_angle(diff), diff)


# ---------------------------------------------------------------------------- the model
class IKModel(nn.Module):
    """Base class of learned inverse kinematics: targets ``(..., T)`` -> joints ``(..., D)``.

    Subclasses set ``family`` and ``Config`` and implement :meth:`loss` and :meth:`sample`
    (and :meth:`log_prob` if they have a density). Register them with :func:`register`.

    Buffers: ``target_mean``/``target_std`` ``(T,)`` and ``q_mean``/``q_std`` ``(D,)``, set from
    training data by :meth:`set_normalization` and saved in the ``state_dict``; ``lower``,
    ``upper`` ``(D,)`` and ``continuous`` ``(D,)`` (bool) from the spec, on the model's
    device and dtype.

    Attributes:
        spec: the :class:`ProblemSpec`.
        config: an instance of ``Config``.
    """

    family: ClassVar[str] = ""
    Config: ClassVar[type] = type(None)
    log_prob_is_bound: ClassVar[bool] = False
    """True where :meth:`log_prob` is a lower bound (an ELBO), not the exact log density."""

    config: Any
    target_mean: Tensor
    target_std: Tensor
    q_mean: Tensor
    q_std: Tensor
    lower: Tensor
    upper: Tensor
    continuous: Tensor

    def __init__(self, spec: ProblemSpec, config: Any = None):
        super().__init__()
        if not isinstance(spec, ProblemSpec):
            raise TypeError(f"spec must be a ProblemSpec, got {type(spec).__name__}")
        config = self.Config() if config is None else config
        if not isinstance(config, self.Config):
            raise TypeError(
                f"config of a {self.family!r} model must be {self.Config.__name__}, "
                f"got {type(config).__name__}"
            )
        self.spec, self.config = spec, config
        f = torch.get_default_dtype()
        t, d = spec.target_dim, spec.dof
        self.register_buffer("target_mean", torch.zeros(t, dtype=f))
        self.register_buffer("target_std", torch.ones(t, dtype=f))
        self.register_buffer("q_mean", torch.zeros(d, dtype=f))
        self.register_buffer("q_std", torch.ones(d, dtype=f))
        self.register_buffer("lower", torch.tensor(spec.lower, dtype=f))
        self.register_buffer("upper", torch.tensor(spec.upper, dtype=f))
        self.register_buffer("continuous", torch.tensor(spec.continuous, dtype=torch.bool))

    @classmethod
    def tiny_config(cls) -> Any:
        """A small configuration for quick tests (default: ``Config()``)."""
        return cls.Config()

    @classmethod
    def parameter_count(cls, spec: ProblemSpec, config: Any) -> int:
        """The number of parameters of ``cls(spec, config)``, without allocating them.

        The default builds the model on the ``meta`` device (shapes only, no memory); a family
        whose construction cannot run there overrides this with its formula.
        """
        with torch.device("meta"):
            model = cls(spec, config)
        return sum(p.numel() for p in model.parameters())

    # ------------------------------------------------------------ normalisation
    @torch.no_grad()
    def set_normalization(self, q: Tensor, target: Tensor) -> None:
        """Set the normalisation buffers from training data ``q (N, D)``, ``target (N, T)``.

        Standard deviations are floored at 1e-6 so constant columns (e.g. a planar arm's z)
        normalise to 0 instead of dividing by zero.
        """
        self._check(q, target)
        for name, x in (("q", q), ("target", target)):
            x = x.to(self.target_mean)
            std = x.std(dim=0) if x.shape[0] > 1 else torch.ones_like(x[0])
            getattr(self, f"{name}_mean").copy_(x.mean(dim=0))
            getattr(self, f"{name}_std").copy_(std.clamp_min(1e-6))

    def normalize_target(self, target: Tensor) -> Tensor:
        """``(target - target_mean) / target_std``, shape ``(..., T)``."""
        return (target - self.target_mean) / self.target_std

    def normalize_q(self, q: Tensor) -> Tensor:
        """``(q - q_mean) / q_std``, shape ``(..., D)``."""
        return (q - self.q_mean) / self.q_std

    def denormalize_q(self, z: Tensor) -> Tensor:
        """Inverse of :meth:`normalize_q`."""
        return z * self.q_std + self.q_mean

    # ------------------------------------------------------------ limits
    def clamp_to_limits(self, q: Tensor) -> Tensor:
        """``q (..., D)`` clamped to the limits, continuous joints wrapped."""
        return _clamp(q, self.lower, self.upper, self.continuous)

    def squash_to_limits(self, raw: Tensor, kind: str = "sigmoid") -> Tensor:
        """``raw (..., D)`` mapped smoothly into the limits (see :func:`squash_to_limits`)."""
        return _squash(raw, self.lower, self.upper, kind)

    def joint_difference(self, q1: Tensor, q2: Tensor) -> Tensor:
        """``q1 - q2`` ``(..., D)`` with continuous joints wrapped."""
        return joint_difference(q1, q2, self.continuous)

    # ------------------------------------------------------------ the interface
    def loss(self, q: Tensor, target: Tensor) -> Tensor:
        """The scalar training loss of a batch ``q (B, D)``, ``target (B, T)``."""
        raise NotImplementedError(f"the {self.family!r} model does not implement loss")

    def sample(self, target: Tensor, n: int, generator: torch.Generator | None = None) -> Tensor:
        """``n`` solutions per target: ``target (..., T)`` -> ``(..., n, D)``, within limits."""
        raise NotImplementedError(f"the {self.family!r} model does not implement sample")

    def log_prob(self, q: Tensor, target: Tensor) -> Tensor:
        """Log density of ``q (..., D)`` given ``target (..., T)``: ``(...)``."""
        raise NotImplementedError(f"the {self.family!r} model has no log_prob")

    def _check(self, q: Tensor | None, target: Tensor | None, n: int | None = None) -> None:
        """Shape checks with clear messages, for subclasses to call (``n``: samples per target,
        ``1 <= n <= MAX_SAMPLES``)."""
        if n is not None:
            check_int("n", n, 1, MAX_SAMPLES)
        if q is not None and (q.dim() == 0 or q.shape[-1] != self.spec.dof):
            raise ValueError(f"q must have shape (..., {self.spec.dof}), got {tuple(q.shape)}")
        t = self.spec.target_dim
        if target is not None and (target.dim() == 0 or target.shape[-1] != t):
            raise ValueError(
                f"{self.spec.targets!r} targets must have shape (..., {t}), "
                f"got {tuple(target.shape)}"
            )

    # ------------------------------------------------------------ checkpoints
    def checkpoint(self, half: bool = False) -> dict[str, Any]:
        """The checkpoint dict (plain types and tensors) that :meth:`save` writes; ``half``
        as for :meth:`save`."""
        params = {name for name, _ in self.named_parameters()} if half else set()
        state = {
            k: v.detach().cpu().half() if k in params and v.dtype == torch.float32 else
            v.detach().cpu()
            for k, v in self.state_dict().items()
        }  # fmt: skip
        ckpt = {
            "format_version": FORMAT_VERSION,
            "family": self.family,
            "config": dataclasses.asdict(self.config),
            "spec": dataclasses.asdict(self.spec),
            "state_dict": state,
        }
        return {**ckpt, "sha256": content_hash(ckpt)}

    def save(self, path: str | os.PathLike, half: bool = False) -> None:
        """Write the checkpoint atomically (a temporary file renamed over ``path``).

        Args:
            path: the file.
            half: store the parameters in float16 (half the size; buffers such as the
                normalisation statistics stay as they are): the bundled models are stored so.
                :func:`load` brings them back in float32.
        """
        atomic_save(self.checkpoint(half), path)

    def extra_repr(self) -> str:
        return f"family={self.family!r}, robot={self.spec.robot!r}, targets={self.spec.targets!r}"


# ---------------------------------------------------------------------------- registry
_REGISTRY: dict[str, type[IKModel]] = {}

M = TypeVar("M", bound=type[IKModel])


def register(cls: M) -> M:
    """Class decorator: add an :class:`IKModel` subclass to the registry under ``cls.family``."""
    if not (isinstance(cls, type) and issubclass(cls, IKModel)):
        raise TypeError(f"register expects an IKModel subclass, got {cls!r}")
    if not cls.family:
        raise ValueError(f"{cls.__name__} must set the class attribute 'family'")
    # every dataclass has __dataclass_params__; typeshed's DataclassInstance does not declare it
    if not (dataclasses.is_dataclass(cls.Config) and cls.Config.__dataclass_params__.frozen):  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__}.Config must be a frozen dataclass")
    known = _REGISTRY.get(cls.family)
    if known is not None and known.__qualname__ != cls.__qualname__:
        raise ValueError(f"family {cls.family!r} is already registered by {known.__name__}")
    _REGISTRY[cls.family] = cls
    return cls


def families() -> dict[str, type[IKModel]]:
    """A copy of the registry: family name -> model class."""
    return dict(_REGISTRY)


def from_checkpoint(ckpt: dict[str, Any]) -> IKModel:
    """Rebuild a model from a checkpoint dict (see :meth:`IKModel.checkpoint`).

    Everything is checked before the model is allocated (:func:`check_checkpoint`, the config
    and spec, at most :data:`MAX_PARAMETERS` parameters).

    Raises:
        ValueError: the checkpoint is damaged, of an unknown family, too large, or does not
            match its model class.
    """
    check_checkpoint(ckpt)
    ckpt = _upcast_half(ckpt)
    cls, spec, config = _parse(ckpt)
    count = cls.parameter_count(spec, config)
    if count > MAX_PARAMETERS:
        raise ValueError(
            f"the {cls.family!r} checkpoint's config {dataclasses.asdict(config)} makes "
            f"{count:,} parameters; at most {MAX_PARAMETERS:,} are loaded"
        )
    model = cls(spec, config)
    state = ckpt["state_dict"]
    floats = [v for v in state.values() if v.is_floating_point()]
    if floats:  # keep the saved dtype and the device map_location chose
        model.to(device=floats[0].device, dtype=floats[0].dtype)
    own = model.state_dict()
    for name, value in state.items():  # load_state_dict would cast silently
        if name in own and value.dtype != own[name].dtype:
            raise ValueError(f"the weight {name!r} is {value.dtype}, the model's {own[name].dtype}")
    try:
        model.load_state_dict(state)
    except (RuntimeError, TypeError, KeyError) as err:
        reason = str(err).replace("\n", " ")
        raise ValueError(
            f"the {cls.family!r} checkpoint does not match its model: {reason}"
        ) from err
    return model


def _upcast_half(ckpt: dict[str, Any]) -> dict[str, Any]:
    """A checked checkpoint whose parameters were stored in float16 beside float32 buffers
    (``save(half=True)``), with those parameters back in float32."""
    state = ckpt["state_dict"]
    dtypes = {v.dtype for v in state.values() if v.is_floating_point()}
    if dtypes != {torch.float16, torch.float32}:
        return ckpt
    up = {k: v.float() if v.dtype == torch.float16 else v for k, v in state.items()}
    return {**ckpt, "state_dict": up}


def _parse(ckpt: dict[str, Any]) -> tuple[type[IKModel], ProblemSpec, Any]:
    """The class, spec and config of a checked checkpoint."""
    family = ckpt["family"]
    if family not in _REGISTRY:
        raise ValueError(f"unknown model family {family!r}; registered: {sorted(_REGISTRY)}")
    cls = _REGISTRY[family]
    try:
        return cls, ProblemSpec(**ckpt["spec"]), cls.Config(**ckpt["config"])
    except (TypeError, ValueError) as err:
        raise ValueError(f"invalid spec or config in a {family!r} checkpoint: {err}") from err


def load(path: str | os.PathLike, map_location: Any = None) -> IKModel:
    """Load a model saved by :meth:`IKModel.save`, in eval mode.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is corrupt, not a torchik checkpoint, damaged (content hash,
            NaN/inf weights), of a newer format, of an unknown family, too large, or
            inconsistent with its model class; the message names the file.
    """
    ckpt = _torch_load(path, map_location)
    try:
        return from_checkpoint(ckpt).eval()
    except ValueError as err:
        raise ValueError(f"{os.fspath(path)!r}: {err}") from err


PRETRAINED: dict[str, str] = {
    "panda": "Franka Panda: full pose (position and orientation) of panda_hand",
    "ur5": "UR5 (the Neural IK paper's limits): position of ee_link",
    "digit_arm": "Digit arm: position of its end link",
    "snake2": "2-joint snake: position of its end",
    "snake4": "4-joint snake: position of its end",
    "panda_position": "Franka Panda: position of panda_hand",
    "digit_arm_iknet": "Digit arm: position of its end link, an IKNet (samples joint by joint: "
    "path following with sample_within)",
}
"""Name -> description of the models bundled with torchik (see :func:`load_pretrained`);
their measured accuracy is in ``torchik/pretrained/accuracy.json`` and the README."""


def load_pretrained(name: str, map_location: Any = None) -> IKModel:
    """A pretrained model bundled with torchik (no download), in eval mode, float32.

    The name is the robot's (:data:`PRETRAINED`); the checkpoints are package data written by
    ``scripts/train_pretrained.py``.

    Raises:
        ValueError: no model of that name is bundled (the message lists the names).

    Example:
        >>> model = load_pretrained("snake2")
        >>> model.sample(torch.tensor([[0.1, 0.05, 0.0]]), n=4).shape
        torch.Size([1, 4, 2])
    """
    from importlib import resources

    if name not in PRETRAINED:
        raise ValueError(
            f"no pretrained model named {name!r} is bundled; available: {', '.join(PRETRAINED)}"
        )
    resource = resources.files("torchik").joinpath("pretrained").joinpath(f"{name}.pt")
    with resources.as_file(resource) as path:
        if not path.is_file():
            raise ValueError(f"the pretrained model {name!r} is missing from this installation")
        return load(path, map_location)

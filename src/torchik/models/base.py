"""The common interface of learned IK models.

Every model family subclasses :class:`IKModel`, declares ``family`` and a frozen ``Config``
dataclass, and implements :meth:`IKModel.loss` and :meth:`IKModel.sample` (and
:meth:`IKModel.log_prob` where it has a density). Decorate the class with
:func:`torchik.models.registry.register` so that :func:`torchik.models.registry.load` can
rebuild it from a checkpoint and the contract tests cover it.

A checkpoint is a ``torch.save`` of plain types and tensors only::

    {"format_version": 2, "family": "mlp", "config": {...}, "spec": {...}, "state_dict": {...},
     "sha256": "..."}

and :func:`torchik.models.registry.load` reads it with ``weights_only=True``: a checkpoint
never executes code. Loading checks everything before it allocates: the layout, the content
hash of format 2 files (:func:`~torchik.models.checkpoint.content_hash`), that every weight is
finite, the config and spec (each field in range) and the parameter count (at most
:data:`~torchik.models.registry.MAX_PARAMETERS`, counted before the model is built). Every
refusal is a :class:`ValueError` naming the file.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import os
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from torchik.checks import check_generator, check_int, check_tensor
from torchik.geometry.joints import joint_difference, project_to_limits
from torchik.learn.data import as_target
from torchik.learn.spec import ProblemSpec
from torchik.models.checkpoint import FORMAT_VERSION, content_hash, save_checkpoint

__all__ = [
    "MAX_SAMPLES",
    "IKModel",
    "clamp_to_limits",
    "squash_to_limits",
]

MAX_SAMPLES = 1 << 20
"""The most samples per target :meth:`IKModel.sample` draws."""


# ---------------------------------------------------------------------------- limit helpers
def _limits(spec: ProblemSpec, like: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    lower = torch.tensor(spec.lower, dtype=like.dtype, device=like.device)
    upper = torch.tensor(spec.upper, dtype=like.dtype, device=like.device)
    return lower, upper, torch.tensor(spec.continuous, device=like.device)


def _clamp(q: Tensor, lower: Tensor, upper: Tensor, continuous: Tensor) -> Tensor:
    # continuous joints have limits (-pi, pi]: wrapping keeps their value, clamping would not
    return project_to_limits(q, lower, upper, canonical=continuous)


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


# ---------------------------------------------------------------------------- the model
def _as_model_data(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` with its tensor arguments (targets and configurations: data) moved to the
    model's dtype and device, that of its ``target_mean`` buffer. The policy: data given to a
    model is converted to the model's dtype and device; configurations given to FK must match
    the robot's dtype (:func:`torchik.robot.configuration.check_q` says how)."""
    if getattr(method, "_takes_any_dtype", False):
        return method

    signature = inspect.signature(method)

    @functools.wraps(method)
    def converted(self: IKModel, *args: Any, **kwargs: Any) -> Any:
        like = self.target_mean

        def to_model(x: Any) -> Any:
            if not isinstance(x, Tensor) or x.device.type == "meta":  # the checks refuse it
                return x
            if x.dtype != torch.bool and x.dtype != like.dtype:
                return x.to(like)
            return x.to(like.device)

        bound = signature.bind(self, *args, **kwargs)
        target = bound.arguments.get("target")
        if isinstance(target, Tensor):  # poses and positions become the model's targets
            bound.arguments["target"] = as_target(target, self.spec.targets)
        args = tuple(to_model(x) for x in bound.args[1:])
        return method(self, *args, **{k: to_model(v) for k, v in bound.kwargs.items()})

    converted._takes_any_dtype = True  # type: ignore[attr-defined]
    return converted


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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every family's :meth:`sample`, :meth:`log_prob` and :meth:`loss` take their data
        (targets, and the configurations scored or learned from) in any dtype and on any
        device: :func:`_as_model_data` converts them to the model's, as ``nn.Linear`` cannot."""
        super().__init_subclass__(**kwargs)
        for name in ("sample", "log_prob", "loss"):
            if name in cls.__dict__:
                setattr(cls, name, _as_model_data(cls.__dict__[name]))

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

        Raises:
            ValueError: shapes other than these, or no row (the means would be NaN).
            TypeError: not floating-point tensors.
        """
        check_tensor("q", q, (self.spec.dof,))
        check_tensor("target", target, (self.spec.target_dim,))
        self._check_shapes(q, target)
        if q.dim() != 2 or target.dim() != 2 or not len(q) or len(q) != len(target):
            raise ValueError(f"q and target must be (N, D) and (N, T) with N >= 1, got "
                             f"{tuple(q.shape)} and {tuple(target.shape)}")  # fmt: skip
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

    def _check(
        self,
        q: Tensor,
        target: Tensor,
        n: int | None = None,
        generator: Any = None,
        finite: bool = False,
    ) -> None:
        """Checks of ``q (..., D)`` and ``target (..., T)`` with clear messages, for subclasses
        to call: tensors of the model's dtype and device (torch said "mat1 and mat2 must have
        the same dtype"), shapes whose batch dims broadcast; ``n``: samples,
        ``1 <= n <= MAX_SAMPLES``; ``generator``: ``None`` or a ``torch.Generator``. In eval
        mode, values are checked to be finite with ``finite`` or ``n`` (a host read, which a
        training step never makes)."""
        self._check_inputs((("q", q), ("target", target)), n, generator, finite)

    @staticmethod
    def _no_rows(q: Tensor, target: Tensor) -> Tensor | None:
        """The ``(...)`` log densities of an empty broadcast batch (zeros of no element), which
        a subclass's ``log_prob`` returns as they are (its reshapes of no rows fail); ``None``
        where there are rows."""
        shape = torch.broadcast_shapes(q.shape[:-1], target.shape[:-1])
        return q.new_zeros(shape) if math.prod(shape) == 0 else None

    def _check_target(self, target: Tensor, n: int | None = None, generator: Any = None) -> None:
        """:meth:`_check` of a ``target (..., T)`` alone (``sample``: ``n`` given)."""
        self._check_inputs((("target", target),), n, generator, False)

    def _check_inputs(self, named: tuple, n: int | None, generator: Any, finite: bool) -> None:
        if n is not None:
            check_int("n", n, 1, MAX_SAMPLES)
        check_generator("generator", generator)
        own = self.target_mean
        for name, x in named:
            if not isinstance(x, Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        values = dict(named)
        self._check_shapes(values.get("q"), values["target"])
        for name, x in named:
            if x.dtype != own.dtype:
                raise TypeError(
                    f"{name} is {x.dtype} but the model is {own.dtype}: convert one of them"
                )
            if x.device != own.device:
                raise ValueError(f"{name} is on {x.device} but the model is on {own.device}")
        checked = (finite or n is not None) and not self.training  # a training step never waits
        for name, x in named if checked else ():
            if not bool(torch.isfinite(x).all()):
                raise ValueError(f"{name} contains NaN or infinite values")

    def _check_shapes(self, q: Tensor | None, target: Tensor | None) -> None:
        """``q (..., D)`` and ``target (..., T)`` (either may be ``None``), of any dtype and
        device, whose batch dims broadcast."""
        for name, x in (("q", q), ("target", target)):
            if x is not None and not isinstance(x, Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if q is not None and (q.dim() == 0 or q.shape[-1] != self.spec.dof):
            raise ValueError(f"q must have shape (..., {self.spec.dof}), got {tuple(q.shape)}")
        t = self.spec.target_dim
        if target is not None and (target.dim() == 0 or target.shape[-1] != t):
            raise ValueError(
                f"{self.spec.targets!r} targets must have shape (..., {t}), "
                f"got {tuple(target.shape)}"
            )
        if q is not None and target is not None:
            try:
                torch.broadcast_shapes(q.shape[:-1], target.shape[:-1])
            except RuntimeError:
                raise ValueError(
                    f"q {tuple(q.shape)} and target {tuple(target.shape)}: their batch shapes "
                    "do not broadcast"
                ) from None

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
        save_checkpoint(self.checkpoint(half), path)

    def extra_repr(self) -> str:
        return f"family={self.family!r}, robot={self.spec.robot!r}, targets={self.spec.targets!r}"

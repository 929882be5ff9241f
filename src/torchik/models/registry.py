"""The registry of learned IK model families, and loading a model from its checkpoint.

Every family's class is decorated with :func:`register` (importing :mod:`torchik.models` imports
them all); :func:`load` reads a checkpoint file and rebuilds the model of its family, after
checking everything (:func:`torchik.models.checkpoint.check_checkpoint`, the config and spec,
the parameter count) before it allocates.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, TypeVar

import torch

from torchik.checks import check_map_location
from torchik.files import load_tensors
from torchik.learn.spec import ProblemSpec
from torchik.models.base import IKModel
from torchik.models.checkpoint import check_checkpoint

__all__ = ["MAX_PARAMETERS", "families", "from_checkpoint", "load", "register"]

MAX_PARAMETERS = 200_000_000
"""The most parameters a checkpoint's model may have (800 MB of float32): :func:`load` counts
them before building the model and refuses larger ones."""


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
            inconsistent with its model class; the message names the file. A
            ``map_location`` device torchik cannot run on (``meta``, a GPU this machine lacks).
        TypeError: a ``map_location`` of another kind than ``torch.load`` takes.
    """
    check_map_location("map_location", map_location)
    ckpt = load_tensors(path, map_location)
    try:
        return from_checkpoint(ckpt).eval()
    except ValueError as err:
        raise ValueError(f"{os.fspath(path)!r}: {err}") from err

"""Model checkpoint files: the format, the content hash, and the checks run before loading.

A model checkpoint is a dict of plain types and tensors (see :meth:`IKModel.checkpoint
<torchik.models.base.IKModel.checkpoint>`), written by :func:`save_checkpoint` (with its
content hash, through :func:`torchik.files.atomic_save`) and read with ``weights_only=True``
(:func:`torchik.files.load_tensors`: a checkpoint never executes code). :func:`check_checkpoint`
checks its layout, format version, content hash and weights before anything is built from it;
building and the checks of the config and spec are
:func:`torchik.models.registry.from_checkpoint`'s.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from typing import Any

import torch
from torch import Tensor

from torchik.checks import short_repr
from torchik.files import atomic_save, load_tensors

__all__ = [
    "FORMAT_VERSION",
    "MIN_STD",
    "check_checkpoint",
    "content_hash",
    "read_checkpoint",
    "save_checkpoint",
]

FORMAT_VERSION = 2
"""Version of the checkpoint layout written by :meth:`IKModel.save`: 2 adds the ``"sha256"``
content hash (required from 2 on; format 1 files load without one)."""


def content_hash(ckpt: dict[str, Any]) -> str:
    """SHA-256 (hex) of a checkpoint's content: every entry but ``"sha256"`` itself.

    Dicts are hashed by sorted key, lists and tuples in order, tensors by dtype, shape and
    bytes (of a CPU copy), every other value by its type and ``repr``: the config and spec
    are covered as well as the weights, so a flipped byte anywhere is caught.

    Args:
        ckpt: a checkpoint dict (plain types and tensors).

    Raises:
        ValueError: a tensor claims more elements than its storage holds (an expanded view:
            hashing it would allocate its full size).

    Example:
        >>> content_hash({"w": torch.zeros(2)}) == content_hash({"w": torch.zeros(2)})
        True
        >>> content_hash({"w": torch.zeros(2)}) == content_hash({"w": torch.ones(2)})
        False
    """
    digest = hashlib.sha256()
    _feed(digest, {k: v for k, v in ckpt.items() if k != "sha256"})
    return digest.hexdigest()


def _feed(digest: Any, obj: Any) -> None:
    if isinstance(obj, Tensor):
        if obj.numel() * obj.element_size() > obj.untyped_storage().nbytes():
            raise ValueError(f"a tensor of shape {tuple(obj.shape)} is larger than its storage")
        data = obj.detach().cpu().contiguous().reshape(-1)
        digest.update(f"T{data.dtype}{tuple(obj.shape)}:".encode())
        digest.update(data.view(torch.uint8).numpy())  # the buffer itself, no copy
    elif isinstance(obj, dict):
        digest.update(f"D{len(obj)}:".encode())
        for key in sorted(obj, key=repr):
            _feed(digest, key)
            _feed(digest, obj[key])
    elif isinstance(obj, (list, tuple)):
        digest.update(f"{type(obj).__name__}{len(obj)}:".encode())
        for item in obj:
            _feed(digest, item)
    else:
        digest.update(f"{type(obj).__name__}:{obj!r};".encode())


_LAYOUT = {"format_version": int, "family": str, "config": dict, "spec": dict, "state_dict": dict}


def check_checkpoint(ckpt: Any, require: dict[str, tuple[str, ...]] | None = None) -> None:
    """Check a checkpoint dict before anything is built from it.

    Checks the layout (keys and their types; every weight a tensor no larger than its
    storage), the format version, the :func:`content_hash` (required from format 2 on; a
    format 1 file without one loads with a warning that it cannot be verified), that every
    floating weight is finite, that the weights are float32 or float64 (float16 parameters
    beside float32 buffers: ``save(half=True)``) and that the normalisation's standard
    deviations are positive. The config and spec are the model class's to check (see
    :func:`torchik.models.registry.from_checkpoint`).

    Args:
        ckpt: what ``torch.load`` returned.
        require: more keys the checkpoint must have, each a dict holding the listed keys (e.g.
            ``{"training": ("optimizer", "step")}`` for a resumable training checkpoint).

    Raises:
        ValueError: the first problem found, in one line.
    """
    if not isinstance(ckpt, dict):
        raise ValueError(f"not a torchik model checkpoint (a {type(ckpt).__name__})")
    for key, kind in _LAYOUT.items():
        if not isinstance(ckpt.get(key), kind) or isinstance(ckpt.get(key), bool):
            got = "missing" if key not in ckpt else type(ckpt[key]).__name__
            raise ValueError(f"not a torchik model checkpoint: {key!r} is {got}")
    version = ckpt["format_version"]
    if not 1 <= version <= FORMAT_VERSION:
        raise ValueError(
            f"checkpoint format {version}; this torchik reads 1 to {FORMAT_VERSION}: upgrade it"
        )
    for key, inner in (require or {}).items():
        value = ckpt.get(key)
        missing = [k for k in inner if k not in value] if isinstance(value, dict) else [key]
        if missing:
            raise ValueError(f"damaged checkpoint: {key!r} lacks {missing}")
    _check_weights(ckpt["state_dict"])
    _check_hash(ckpt, version)
    for name, value in ckpt["state_dict"].items():
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise ValueError(f"the weight {name!r} holds NaN or infinite values")
    _check_dtypes(ckpt["state_dict"])
    _check_normalization(ckpt["state_dict"])


_DTYPES: tuple[set[torch.dtype], ...] = (
    {torch.float32},
    {torch.float64},
    {torch.float16, torch.float32},
    set(),
)
"""The floating dtypes a model's weights may have together (the last but one: ``half=True``)."""

MIN_STD = 5e-7
"""The smallest normalisation standard deviation a checkpoint may hold: ``set_normalization``
floors them at 1e-6 (float32 rounds that down a little); 0 would make every sample NaN."""


def _check_dtypes(state: dict[str, Tensor]) -> None:
    dtypes = {v.dtype for v in state.values() if v.is_floating_point()}
    if dtypes not in _DTYPES:
        names = ", ".join(sorted(str(d).removeprefix("torch.") for d in dtypes))
        raise ValueError(
            f"the weights are {names}: a torchik model holds float32 or float64 weights "
            "(float16 parameters beside float32 buffers where saved with half=True)"
        )


def _check_normalization(state: dict[str, Tensor]) -> None:
    for name in ("target_std", "q_std"):
        std = state.get(name)
        if std is not None and std.numel() and float(std.min()) < MIN_STD:
            raise ValueError(
                f"the normalisation {name!r} holds {float(std.min()):g}, below {MIN_STD:g}: "
                "a standard deviation of 0 makes every sample NaN"
            )


def _check_weights(state: dict) -> None:
    for name, value in state.items():
        if not (isinstance(name, str) and isinstance(value, Tensor)):
            raise ValueError(f"damaged weights: {short_repr(name)} is a {type(value).__name__}")
        if value.numel() * value.element_size() > value.untyped_storage().nbytes():
            raise ValueError(f"damaged weights: {name!r} is larger than its storage")


def _check_hash(ckpt: dict[str, Any], version: int) -> None:
    sha256 = ckpt.get("sha256")
    if sha256 is None and version >= 2:
        raise ValueError("the checkpoint has no content hash ('sha256'): it is damaged")
    if sha256 is None:
        warnings.warn(
            "a format 1 checkpoint has no content hash: damage to it cannot be detected; "
            "re-save it with torchik.models.load(path).save(path) to add one",
            stacklevel=4,
        )
    try:
        matches = sha256 is None or sha256 == content_hash(ckpt)
    except RecursionError as err:  # absurdly nested lists
        raise ValueError("the checkpoint is nested too deeply to be a torchik checkpoint") from err
    if not matches:
        raise ValueError("the content does not match the checkpoint's hash: it is damaged")


def read_checkpoint(
    path: str | os.PathLike,
    map_location: Any = None,
    require: dict[str, tuple[str, ...]] | None = None,
) -> dict[str, Any]:
    """Read and check a checkpoint file (see :func:`check_checkpoint`) without building it.

    Args:
        path: the file.
        map_location: as for ``torch.load``.
        require: more keys the checkpoint must have, see :func:`check_checkpoint`.

    Returns:
        The checkpoint dict.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a corrupt, foreign, damaged or newer file; the message names it.
    """
    ckpt = load_tensors(path, map_location)
    try:
        check_checkpoint(ckpt, require)
    except ValueError as err:
        raise ValueError(f"{os.fspath(path)!r}: {err}") from err
    return ckpt


def save_checkpoint(ckpt: dict[str, Any], path: str | os.PathLike) -> None:
    """Write a checkpoint dict atomically (:func:`torchik.files.atomic_save`) with its
    :func:`content_hash` as ``"sha256"`` (replacing any hash it had).

    Args:
        ckpt: the checkpoint (see :meth:`IKModel.checkpoint
            <torchik.models.base.IKModel.checkpoint>`), possibly with more entries such as a
            training state.
        path: the file.
    """
    ckpt = {k: v for k, v in ckpt.items() if k != "sha256"}
    atomic_save({**ckpt, "sha256": content_hash(ckpt)}, path)

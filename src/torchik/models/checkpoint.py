"""Checkpoint files: atomic writing, the content hash, and the checks run before loading.

A model checkpoint is a dict of plain types and tensors (see :meth:`IKModel.checkpoint
<torchik.models.base.IKModel.checkpoint>`), written by :func:`atomic_save` and read with
``weights_only=True`` (a checkpoint never executes code). :func:`check_checkpoint` checks its
layout, format version, content hash and weights before anything is built from it; building
and the checks of the config and spec are :func:`torchik.models.base.from_checkpoint`'s.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "FORMAT_VERSION",
    "atomic_save",
    "check_checkpoint",
    "read_checkpoint",
    "state_hash",
]

FORMAT_VERSION = 2
"""Version of the checkpoint layout written by :meth:`IKModel.save`: 2 adds the ``"sha256"``
content hash (required from 2 on; format 1 files load without one)."""


def state_hash(state: dict[str, Tensor]) -> str:
    """SHA-256 (hex) of a state dict: every tensor's name, dtype, shape and bytes, by name.

    Args:
        state: name -> tensor (any device; hashed as its contiguous CPU bytes).

    Example:
        >>> state_hash({"w": torch.zeros(2)}) == state_hash({"w": torch.zeros(2)})
        True
        >>> state_hash({"w": torch.zeros(2)}) == state_hash({"w": torch.ones(2)})
        False
    """
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(
            tensor.view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        )
    return digest.hexdigest()


def atomic_save(obj: Any, path: str | os.PathLike) -> None:
    """``torch.save(obj, path)`` via a temporary file and ``os.replace``: a killed writer never
    leaves a half-written ``path``.

    A model checkpoint (a dict with ``"family"`` and ``"state_dict"``) gets the
    :func:`state_hash` of the weights it holds as ``"sha256"``. Temporary files of ``path``
    left by writers that were killed (their process is gone) are removed first.
    """
    path = os.fspath(path)
    _remove_orphans(path)
    if isinstance(obj, dict) and {"family", "state_dict"} <= set(obj):
        obj = {**obj, "sha256": state_hash(obj["state_dict"])}
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _remove_orphans(path: str) -> None:
    """Remove ``path.tmp<PID>`` files whose process no longer runs (a writer killed mid-save)."""
    folder, base = os.path.split(path)
    pattern = re.compile(re.escape(base) + r"\.tmp(\d+)")
    for name in os.listdir(folder or "."):
        match = pattern.fullmatch(name)
        if match and not _alive(int(match.group(1))):
            try:
                os.remove(os.path.join(folder, name))
            except OSError:  # another writer removed it first
                pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # another user's process
        return True
    return True


_LAYOUT = {"format_version": int, "family": str, "config": dict, "spec": dict, "state_dict": dict}


def _torch_load(path: str | os.PathLike, map_location: Any) -> Any:
    """``torch.load(path, weights_only=True)``; a corrupt or foreign file -> ValueError."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise
    except pickle.UnpicklingError as err:  # not torch's advice to retry with weights_only=False
        lines = [x for x in str(err).splitlines() if x.strip() and "weights_only" not in x]
        reason = lines[0] if lines else type(err).__name__
        raise ValueError(
            f"{os.fspath(path)!r} is refused: it holds pickled objects other than tensors and "
            f"plain types, which torchik never loads ({reason})"
        ) from err
    except Exception as err:  # torch raises many types for corrupt or foreign files
        name = os.fspath(path)
        raise ValueError(f"{name!r} is not a readable torchik checkpoint: {err}") from err


def check_checkpoint(ckpt: Any, require: dict[str, tuple[str, ...]] | None = None) -> None:
    """Check a checkpoint dict before anything is built from it.

    Checks the layout (keys and their types; every weight a tensor), the format version, the
    content hash (required from format 2 on) and that every floating weight is finite. It does
    not check the config and spec (the model class does, see :func:`from_checkpoint`).

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
    _check_weights(ckpt["state_dict"], ckpt.get("sha256"), version)


def _check_weights(state: dict, sha256: Any, version: int) -> None:
    for name, value in state.items():
        if not (isinstance(name, str) and isinstance(value, Tensor)):
            raise ValueError(f"damaged weights: {name!r} is a {type(value).__name__}")
    if sha256 is None and version >= 2:
        raise ValueError("the checkpoint has no content hash ('sha256'): it is damaged")
    if sha256 is not None and sha256 != state_hash(state):
        raise ValueError("the weights do not match the checkpoint's content hash: it is damaged")
    for name, value in state.items():
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise ValueError(f"the weight {name!r} holds NaN or infinite values")


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
    ckpt = _torch_load(path, map_location)
    try:
        check_checkpoint(ckpt, require)
    except ValueError as err:
        raise ValueError(f"{os.fspath(path)!r}: {err}") from err
    return ckpt

"""Files torchik writes and reads: atomic saving, ``torch.load`` that never runs code, and
reading only regular files of bounded size.

Every file torchik saves with ``torch.save`` (data sets, model and training checkpoints) goes
through :func:`atomic_save`; every such file it reads through :func:`load_tensors`; text
inputs (robot descriptions) through :func:`read_regular_file`.
"""

from __future__ import annotations

import math
import os
import pickle
import re
import stat
from pathlib import Path
from typing import Any

import torch

__all__ = ["FileRefused", "atomic_save", "load_tensors", "read_regular_file"]


class FileRefused(ValueError):
    """A path torchik will not read: not a regular file, or larger than the limit."""


def atomic_save(obj: Any, path: str | os.PathLike) -> None:
    """``torch.save(obj, path)`` via a temporary file and ``os.replace``: a killed writer never
    leaves a half-written ``path``.

    Temporary files of ``path`` left by writers that were killed (their process is gone) are
    removed first. Model checkpoints go through
    :func:`torchik.models.checkpoint.save_checkpoint`, which adds their content hash.
    """
    path = os.fspath(path)
    _remove_orphans(path)
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
    if not os.path.isdir(folder or "."):  # torch.save says so
        return
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


def load_tensors(path: str | os.PathLike, map_location: Any) -> Any:
    """``torch.load(path, weights_only=True)``; a corrupt or foreign file -> ValueError."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise
    except pickle.UnpicklingError as err:  # not torch's advice to retry with weights_only=False
        found = re.search(r"GLOBAL ([\w.]+)", str(err))
        what = f"it would import {found.group(1)}" if found else "it holds objects"
        raise ValueError(
            f"{os.fspath(path)!r} is refused: {what}; a torchik checkpoint holds tensors and "
            "plain types only, and pickled code is never run"
        ) from err
    except Exception as err:  # torch raises many types for corrupt or foreign files
        name, reason = os.fspath(path), (str(err).splitlines() or [type(err).__name__])[0]
        raise ValueError(f"{name!r} is not a readable torchik checkpoint: {reason}") from err


def read_regular_file(path: Path, max_bytes: int | None) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``, checked before reading.

    Opened non-blocking, so that a FIFO is refused instead of waiting for a writer forever.

    Raises:
        FileRefused: not a regular file (a FIFO, a device, a directory), or too large.
        OSError: the file cannot be opened (``FileNotFoundError`` among others).
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused("not a regular file (a FIFO or a device is never read)")
        if max_bytes is not None and info.st_size > max_bytes:
            raise FileRefused(f"{info.st_size} bytes, over the limit of {max_bytes} (max_bytes=)")
        # In chunks, not read(max_bytes + 1): that would allocate the whole limit up front.
        chunks, size, limit = [], 0, math.inf if max_bytes is None else max_bytes
        while chunk := file.read(2**20):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # the file grew while we read it
                raise FileRefused(f"over the limit of {max_bytes} bytes (max_bytes=)")
    return b"".join(chunks)

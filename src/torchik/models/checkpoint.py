"""Moved to :mod:`torchik.checkpoint` (below both :mod:`torchik.data` and :mod:`torchik.models`);
this module re-exports it so that ``from torchik.models.checkpoint import ...`` keeps working."""

from torchik.checkpoint import (
    FORMAT_VERSION,
    _torch_load,
    atomic_save,
    check_checkpoint,
    content_hash,
    read_checkpoint,
)

__all__ = [
    "FORMAT_VERSION",
    "_torch_load",
    "atomic_save",
    "check_checkpoint",
    "content_hash",
    "read_checkpoint",
]

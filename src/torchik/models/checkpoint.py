"""Moved to :mod:`torchik.checkpoint` (below both :mod:`torchik.data` and :mod:`torchik.models`);
this module re-exports it so that ``from torchik.models.checkpoint import ...`` keeps working.

The names come with ``*`` and the new module's own ``__all__``, so the two cannot drift apart.
"""

from torchik.checkpoint import *  # noqa: F403
from torchik.checkpoint import __all__, _torch_load  # noqa: F401

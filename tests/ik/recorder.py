"""The ATen operations a piece of code dispatches, for tests that a loop reads nothing back
from the device (``local_scalar_dense``, ``nonzero`` and the like would stall a GPU, and a
CUDA graph cannot hold them)."""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode

READS = ("local_scalar", "is_nonzero", "nonzero", "masked_select")
"""Names of the operations that read a value back to the host."""


class Recorder(TorchDispatchMode):
    """``with Recorder() as seen: ...`` records every operation's name in ``seen.ops``."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))

    def reads(self) -> list[str]:
        """The recorded operations that read the device."""
        return [op for op in self.ops if any(name in op for name in READS)]

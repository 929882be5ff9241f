"""The ATen operations a piece of code dispatches, for tests that a loop reads nothing back
from the device (``local_scalar_dense``, ``nonzero`` and the like would stall a GPU, and a
CUDA graph cannot hold them)."""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode

READS = ("local_scalar", "is_nonzero", "nonzero", "masked_select")
"""Names of the operations that read a value back to the host."""

NO_KERNEL = ("aten.empty", "aten.new_empty", "aten.set_", "aten.lift_fresh", "aten.detach",
             "aten.alias", "aten.t.", "aten.unbind", "aten._unsafe_view")  # fmt: skip
"""Prefixes of the names of operations that launch no kernel on a GPU (allocations and views
that ``is_view`` does not mark)."""


class Recorder(TorchDispatchMode):
    """``with Recorder() as seen: ...`` records every operation's name in ``seen.ops``."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []
        self.views: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        if func.is_view:
            self.views.add(str(func))
        return func(*args, **(kwargs or {}))

    def kernels(self) -> list[str]:
        """The recorded operations that launch a kernel on a GPU: not views, allocations or
        other metadata (an upper bound: a copy to the same dtype, say, may launch none)."""
        return [op for op in self.ops if op not in self.views and not op.startswith(NO_KERNEL)]

    def reads(self) -> list[str]:
        """The recorded operations that read the device."""
        return [op for op in self.ops if any(name in op for name in READS)]

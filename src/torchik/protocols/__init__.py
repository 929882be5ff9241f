"""The papers' evaluation tables as library functions: two lines on any robot and model.

Each table of ``benchmarks/results/`` is one function here, built on :mod:`torchik.evaluate`
(the metrics) and :mod:`torchik.ik` (the solvers); ``benchmarks/`` only parses arguments, adds the
papers' anchors and writes the files.

- :func:`iknet_table` (:mod:`torchik.protocols.iknet`): the IKNet paper's table.
- :func:`posterior_table` (:mod:`torchik.protocols.posterior`): the cVAE-vs-INN report's table.
- :func:`numerical_ik_table` (:mod:`torchik.protocols.numerical`): numerical IK solvers.
- :func:`pose_table` (:mod:`torchik.protocols.pose`): full-pose learned IK (IKFlow's protocol).
- :func:`time_call` (:mod:`torchik.protocols.timing`): every runtime in the tables, through
  :mod:`torch.utils.benchmark`.
- :class:`Report` and :func:`machine_stamp` (:mod:`torchik.protocols.report`): tables written as
  markdown and JSON under the machine, load and versions they came from.
- :func:`first_call_seconds` and :func:`crafted_urdf` (:mod:`torchik.protocols.urdf_load`): the
  cost of loading large URDFs.

The submodules are imported on first use of a name (PEP 562): ``import torchik.protocols`` is
cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "iknet_table": "iknet",
    "posterior_table": "posterior",
    "numerical_ik_table": "numerical",
    "pose_table": "pose",
    "Timing": "timing",
    "time_call": "timing",
    "Report": "report",
    "machine_stamp": "report",
    "crafted_urdf": "urdf_load",
    "first_call_seconds": "urdf_load",
}
"""Public name -> the submodule of this package that defines it."""

_SUBMODULES = ("iknet", "numerical", "pose", "posterior", "report", "timing", "urdf_load")
"""The submodules (the values of ``_EXPORTS``)."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """A table function (or a submodule), imported on first use."""
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})

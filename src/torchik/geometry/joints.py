"""Joint-space helpers: angles wrapped to ``(-pi, pi]``, with any leading batch dims.

Continuous joints (and the angle of any revolute joint) live on a circle: differences and
projections of such coordinates wrap, those of others do not.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["wrap_angle"]


def wrap_angle(angle: Tensor) -> Tensor:
    """Wraps angles to ``(-pi, pi]``; ``-pi`` maps to ``pi``. The gradient is 1 (the shift is a
    piecewise-constant multiple of ``2 pi``, so it carries no gradient).

    Args:
        angle: Angles ``(...)`` in radians.

    Returns:
        Angles ``(...)`` in ``(-pi, pi]``.
    """
    # k = ceil((x - pi) / 2pi) is the number of turns that puts x in (-pi, pi]; x = -pi gives
    # (-2pi) / 2pi = -1 exactly in floating point, so -pi -> pi exactly. The two where's repair
    # rounding for large |x| where x - 2pi k can land a hair outside the interval.
    turns = torch.ceil((angle - math.pi) / (2.0 * math.pi)).detach()
    out = angle - (2.0 * math.pi) * turns
    out = torch.where(out <= -math.pi, out + 2.0 * math.pi, out)
    return torch.where(out > math.pi, out - 2.0 * math.pi, out)

"""Warnings that a test's random generator is drawn to make, filtered where the generator makes
them (never globally: the same warning from any other test still shows, and fails a test that
asks for none)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from torchik.description import URDFWarning

# the message when its first note (so every note: the lenient-limit notes come first) is a mimic
# joint's own limits that its driver's range leaves, from a URDF or an MJCF (MJCFWarning)
MIMIC_LIMITS = r"[^;]*?: joint '[^']*' mimics '[^']*': its own limits"


@contextmanager
def mimic_limits_allowed() -> Iterator[None]:
    """Ignore the note on a random mimic joint's own limits (drawn independently of its
    driver's, so often left by the driver's range) inside the ``with`` block only."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", MIMIC_LIMITS, URDFWarning)
        yield

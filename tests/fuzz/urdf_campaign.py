"""A long URDF fuzzing run that counts outcomes instead of stopping at the first failure.

``benchmarks/fuzz_urdf.py`` (``make fuzz``) calls :func:`fuzz` and writes its tallies; the CI
sample (``tests/test_fuzz_urdf.py``) asserts on the same strategies and :func:`check_source`.
"""

from __future__ import annotations

import re
import signal
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed

from tests.fuzz.urdf_strategies import HANG_S, check_source, mutated_urdfs


@dataclass
class Tally:
    """Outcomes of a run: counts, the kinds of URDFError message, one detail per outcome."""

    counts: Counter = field(default_factory=Counter)
    kinds: Counter = field(default_factory=Counter)
    details: dict[str, str] = field(default_factory=dict)
    slowest: float = 0.0  # seconds of the slowest single case


def fuzz(examples: int, seed: int) -> Tally:
    """Check ``examples`` mutated URDFs drawn with hypothesis seed ``seed`` (reproducible)."""
    tally, folder = Tally(), tempfile.mkdtemp()

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @hypothesis_seed(seed)
    @given(mutated_urdfs())
    def one(source: str | bytes) -> None:
        signal.setitimer(signal.ITIMER_REAL, 2 * HANG_S)  # a real hang would never return
        try:
            outcome, detail, seconds = check_source(source, Path(folder))
        except _Hang:
            outcome, detail, seconds = "hang", repr(source)[:200], 2 * HANG_S
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        tally.counts[outcome] += 1
        if outcome == "URDFError":  # tally the kinds of message, names and numbers left out
            tally.kinds[_kind(detail)] += 1
        tally.details.setdefault(outcome, detail)
        tally.slowest = max(tally.slowest, seconds)

    signal.signal(signal.SIGALRM, _raise_hang)
    one()
    return tally


class _Hang(BaseException):
    """Raised by the alarm in a case that runs too long (a BaseException: never caught as a
    crash)."""


def _raise_hang(*_: object) -> None:
    raise _Hang


def _kind(message: str) -> str:
    message = re.sub(r"^\S*fuzz\.urdf: ", "", message)
    message = re.sub(r"'[^']*'|\"[^\"]*\"|\d+(\.\d+)?(e[+-]?\d+)?", "…", message)
    return message[:70]

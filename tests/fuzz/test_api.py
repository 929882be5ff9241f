"""A bounded sample of out-of-range public API values (see api.py; ``make fuzz`` runs the long
version)."""

from __future__ import annotations

import random

from tests.fuzz.api import _calls, finding, run_one


def test_out_of_range_api_values_are_refused_in_one_line_or_return():
    calls = 20 * len(_calls(random.Random(0)))  # 20 calls of each function
    rows = [(seed, *run_one(seed)) for seed in range(calls)]
    bad = [row for row in rows if finding(row[2], row[3])]
    assert not bad, "\n".join(map(str, bad))
    assert {row[2] for row in rows} == {"returned", "refused"}  # the sample reaches both
    for name in {row[1] for row in rows}:  # and so does every function's (FK's never returned:
        # its valid call passed ``links=``, which it refuses, so every call tested that alone)
        assert {row[2] for row in rows if row[1] == name} == {"returned", "refused"}, name

"""A bounded sample of nonsense ``solve_wholebody`` calls (see ``tests/fuzz/wholebody.py``;
``make fuzz`` runs the long version)."""

from __future__ import annotations

from tests.fuzz.solve_ik import finding
from tests.fuzz.wholebody import run_one


def test_nonsense_solve_wholebody_calls_are_refused_in_one_line_or_solved():
    rows = [(seed, *run_one(seed)) for seed in range(200)]
    bad = [row for row in rows if finding(row[1], row[2])]
    assert not bad, "\n".join(map(str, bad))
    assert {row[1] for row in rows} == {"solved", "refused"}  # the sample reaches both

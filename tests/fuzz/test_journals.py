"""A bounded sample of damaged tune journals and of concurrent writers on a full disk (see
journals.py; ``make fuzz`` runs the long version)."""

from __future__ import annotations

import pytest

pytest.importorskip("optuna", reason="the 'tune' extra (optuna) is not installed")

from tests.fuzz.journals import MUTATIONS, crafted, finding, run  # noqa: E402


def test_the_sample_covers_every_mutation_kind():
    assert {crafted(seed)[0] for seed in range(20)} == set(MUTATIONS)


@pytest.mark.parametrize("entry,n", [("open_journal", 20), ("cli tune --resume", 10)])
def test_damaged_journals_open_recover_or_are_refused_naming_the_file(entry, n):
    rows = run(range(n), [entry])
    bad = [r for r in rows if finding(r[3], r[4])]
    assert not bad, "\n".join(map(str, bad))


def test_concurrent_writers_on_a_full_disk_leave_every_record_once_and_none_torn():
    rows = run(range(5), ["concurrent"])
    assert [r[3] for r in rows] == ["whole"] * 5, rows

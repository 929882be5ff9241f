"""Special files for every path argument, three kinds per entry point (see paths.py; ``make
fuzz`` runs every pair). The issue's cases are among them: ``dataset --out`` a device (it
became a regular file), ``train --config`` and ``tune --space`` ``/dev/zero`` (read until
memory ran out), ``models.load``, ``solve --model``, ``eval --model``/``--data`` a FIFO
(blocked forever)."""

from __future__ import annotations

from tests.fuzz.paths import ENTRIES, SPECIAL, finding, run, sample

ISSUE = [
    ("cli dataset --out", "device"),
    ("cli train --config", "dev-zero"),
    ("cli tune --space", "dev-zero"),
    ("models.load", "fifo"),
    ("cli solve --model", "fifo"),
    ("cli eval --model", "fifo"),
    ("cli eval --data", "fifo"),
]


def test_the_sample_covers_every_entry_point_and_every_special_file():
    pairs = sample(3)
    assert {e for e, _ in pairs} == set(ENTRIES) and {k for _, k in pairs} == set(SPECIAL)


def test_special_files_are_refused_in_one_line_and_never_replaced():
    rows = run(sample(3) + ISSUE)
    bad = [row for row in rows if finding(row[2])]
    assert not bad, "\n".join(map(str, bad))
    issue = {(e, k): result for e, k, result, *_ in rows if (e, k) in ISSUE}
    assert set(issue.values()) <= {"refused", "skipped (needs root)"}, issue

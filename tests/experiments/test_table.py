"""experiments.table: the tables of the results files (markdown, JSON, speed ratios)."""

import pytest

from experiments.table import Column, Table, Tables, fmt_pct, fmt_ratio, fmt_sci, fmt_time


def test_formats():
    assert [fmt_time(x) for x in (1.52, 0.0124, 3.1e-6, 4.12e-7)] == [
        "1.52 s", "12.4 ms", "3.1 µs", "412 ns",
    ]  # fmt: skip
    assert (fmt_pct(0.987), fmt_sci(1.23e-7), fmt_ratio(3.456)) == ("98.7 %", "1.2e-07", "3.46×")


def test_ratios_are_taken_within_the_same_case():
    t = Table("t", [Column("n", "n"), Column("s", "time", fmt_time)], case_keys=("n",),
              time_key="s", references=("ref",))  # fmt: skip
    t.add("ref", n=1, s=2.0)
    t.add("ref", n=2, s=8.0)
    t.add("mine", n=1, s=1.0)
    t.add("mine", n=2, s=1.0)
    t.add("mine", n=3, s=1.0)  # no reference row for this case
    t.add("gone", "missing: not installed", n=1)
    ratios = [row.get("speedup_vs_ref") for row in t.rows]
    t.fill_ratios()
    assert [row["speedup_vs_ref"] for row in t.rows] == [1.0, 1.0, 2.0, 8.0, None, None]
    assert ratios == [None] * 6  # nothing is computed before asked
    lines = t.markdown().splitlines()
    assert lines[2] == "| method | n | time | × faster than ref | status |"
    assert (
        "| mine | 3 | 1 s | — | ok |" in lines
        and "| gone | 1 | — | — | missing: not installed |" in lines
    )


def test_row_notes_json_and_several_tables():
    t = Table("first", [Column("x", "x")], notes=["a note"])
    t.add("m", x=1)
    assert t.row("m")["x"] == 1
    with pytest.raises(KeyError):
        t.row("other")
    assert t.as_json() == {"title": "first", "notes": ["a note"],
                           "rows": [{"method": "m", "status": "ok", "x": 1}]}  # fmt: skip
    assert t.markdown().endswith("| m | 1 | ok |\n\n- a note\n")
    both = Tables([t, Table("second", [])])
    assert both.markdown().count("## ") == 2 and both.markdown().startswith("## first")

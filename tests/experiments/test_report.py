"""experiments.report: the machine stamp and a Report's markdown and JSON files."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from experiments.report import (
    GIT_COMMIT_ENV,
    PARENT_ENV,
    Report,
    command_line,
    cpu_busy_fraction,
    cpu_model,
    dist_version,
    git_commit,
    gpu_name,
    jsonable,
    kept_reading,
    load_average,
    load_warning,
    machine_stamp,
    wait_for_quiet,
)
from experiments.table import Column, Table, fmt_time

STAMP_KEYS = [
    "date", "command", "launched_by", "cpu", "cores", "torch_threads", "load_average_at_start",
    "gpu", "python", "torch", "numpy", "numba", "torchik", "anchors",
]  # fmt: skip


def test_machine_stamp_has_every_key_in_order(monkeypatch, tmp_path):
    monkeypatch.setenv(PARENT_ENV, "benchmarks/run.py fk")
    stamp = machine_stamp(["torch", "no-such-distribution"], root=tmp_path)
    assert list(stamp) == STAMP_KEYS
    assert stamp["launched_by"] == "benchmarks/run.py fk"
    expected = {"torch": dist_version("torch"), "no-such-distribution": "not installed"}
    assert stamp["anchors"] == expected
    assert stamp["torchik"].endswith("(git unknown)")  # tmp_path is no checkout
    assert len(stamp["load_average_at_start"]) == 3
    json.dumps(stamp)  # plain values


def test_stamp_parts():
    assert cpu_model() and gpu_name()
    assert dist_version("no-such-distribution") == "not installed"
    assert dist_version("numpy") == np.__version__
    assert command_line().split()[0]  # the interpreter
    assert git_commit("/") == "unknown"
    assert all(isinstance(x, float) for x in load_average())
    busy = cpu_busy_fraction(0.01)
    assert math.isnan(busy) or 0.0 <= busy <= 1.0
    assert wait_for_quiet(0) == 0.0


def test_a_given_commit_names_the_stamp(monkeypatch):
    """A copy of the tree on another machine carries another commit's git data: the commit
    given by the caller wins, marked as given."""
    monkeypatch.setenv(GIT_COMMIT_ENV, "abc1234")
    assert git_commit("/") == "abc1234 (given)"
    assert "git abc1234 (given)" in machine_stamp()["torchik"]
    monkeypatch.setenv(GIT_COMMIT_ENV, " ")
    assert git_commit("/") == "unknown"


def test_jsonable_cleans_values():
    value = {1: (np.float32(0.5), float("nan"), [np.int64(3), math.inf])}
    assert jsonable(value) == {"1": [0.5, None, [3, None]]}


def _report() -> Report:
    table = Table("speed", [Column("seconds", "time", fmt_time)], time_key="seconds",
                  references=("slow",), notes=["a note"])  # fmt: skip
    table.add("slow", seconds=2.0)
    table.add("fast", seconds=0.5, extra=np.float64(np.nan))
    stamp = machine_stamp(["numpy"])
    return Report("mine", "My benchmark", intro=["Some words."], tables=[table], stamp=stamp)


def test_report_writes_markdown_and_json(tmp_path):
    md, js = _report().write(tmp_path / "new")
    assert (md, js) == (tmp_path / "new" / "mine.md", tmp_path / "new" / "mine.json")
    text = md.read_text()
    assert text.startswith("# My benchmark\n\n| machine | |\n|---|---|\n| date | ")
    assert "| command | `" in text and "| anchors | numpy " in text and "| duration_s | " in text
    assert "\nSome words.\n\n## speed\n\n| method | time | × faster than slow | status |" in text
    assert "| fast | 500 ms | 4.00× | ok |" in text and text.endswith("- a note\n")
    payload = json.loads(js.read_text())
    assert list(payload) == ["stamp", "intro", "tables"]
    assert list(payload["stamp"]) == [*STAMP_KEYS, "load_average_at_end", "duration_s"]
    assert payload["intro"] == ["Some words."]
    (table,) = payload["tables"]
    assert table["title"] == "speed" and table["notes"] == ["a note"]
    assert table["rows"][1] == {"method": "fast", "status": "ok", "seconds": 0.5,
                                "extra": None, "speedup_vs_slow": 4.0}  # fmt: skip


def test_report_without_intro_or_tables(tmp_path):
    md, js = Report("empty", "Nothing").write(tmp_path)
    assert md.read_text().startswith("# Nothing\n\n| machine | |")
    assert json.loads(js.read_text())["tables"] == []


@pytest.mark.parametrize("key", ["load_average_at_end", "duration_s"])
def test_write_adds_the_end_of_the_run(tmp_path, key):
    report = _report()
    assert key not in report.stamp
    report.write(tmp_path)
    assert key in report.stamp


def test_a_loaded_machine_is_flagged_under_the_stamp(tmp_path):
    quiet = {"cores": 2, "load_average_at_start": [0.4, 1.0, 1.0], "load_average_at_end": [1.9]}
    assert load_warning(quiet) is None and load_warning({}) is None
    busy = {**quiet, "load_average_at_end": [7.12, 4.98, 3.1]}
    assert "reached 7.1 on 2 cores" in load_warning(busy)
    md, _ = Report("busy", "Busy", stamp=dict(busy), measured_here=False).write(tmp_path)
    text = md.read_text()
    assert text.index("| load_average_at_end |") < text.index("> **Loaded machine**")
    md, _ = Report("quiet", "Quiet", stamp=dict(quiet), measured_here=False).write(tmp_path)
    assert "Loaded machine" not in md.read_text()


def test_results_measured_elsewhere_keep_their_stamp(tmp_path):
    stamp = {"date": "then", "gpu": "elsewhere"}
    md, js = Report("far", "Far", stamp=dict(stamp), measured_here=False).write(tmp_path)
    assert json.loads(js.read_text())["stamp"] == stamp  # no load or duration of this machine
    assert "load_average" not in md.read_text()


def test_a_reading_written_by_hand_survives_a_rerun_flagged_with_its_run(tmp_path):
    def write(date: str) -> str:
        return Report("r", "R", stamp={"date": date}, measured_here=False).write(tmp_path)[0]

    md = write("first")
    md.write_text(md.read_text() + "\n## Reading (by hand)\n\n- it is faster\n")
    text = write("second").read_text()
    assert text.startswith("# R\n") and "| date | second |" in text
    assert text.endswith(
        "## Reading (by hand)\n\n> Kept from an earlier run of this report (first): written "
        "for its numbers, check it against the tables above.\n\n- it is faster\n"
    )
    assert write("third").read_text().endswith(text[text.index("## Reading") :])  # still "first"
    assert kept_reading("# no reading\n| date | x |\n") is None

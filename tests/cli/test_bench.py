"""``torchik bench``: benchmarks/run.py's arguments are checked before any script starts."""

from __future__ import annotations

import importlib.util

import pytest

from tests.cli.test_cli import assert_one_line_error, run
from tests.paths import REPO

RUN_PY = REPO / "benchmarks" / "run.py"
pytestmark = pytest.mark.skipif(not RUN_PY.is_file(), reason="needs a source checkout")


def _run_py():
    spec = importlib.util.spec_from_file_location("bench_run", RUN_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--bogus"], "unrecognized arguments: --bogus (a script's own options go after --)"),
        (["fk", "--bogus", "1"], "unrecognized arguments: --bogus 1"),
        (["nosuch"], "unknown benchmark(s): nosuch; choose from fk, ik"),
        (["fk", "--wait-idle", "-1"], "argument --wait-idle: must be a finite number >= 0"),
    ],
)
def test_bad_arguments_are_one_line_before_any_script_runs(capfd, argv, says):
    """``torchik bench --bogus`` ran every script in turn, each failing with its usage (some
    30 s, exit 1); ``torchik bench nosuch`` printed the usage and the error."""
    code, out, err = run(capfd, "bench", *argv)
    assert_one_line_error(code, err)
    assert code == 2 and says in err and "==" not in out


def test_the_common_options_and_those_after_a_double_dash_are_forwarded(monkeypatch, tmp_path):
    module = _run_py()
    commands = []
    monkeypatch.setattr(module.subprocess, "call", lambda command, **_: commands.append(command))
    argv = ["fk", "ik", "--wait-idle", "5", "--out", str(tmp_path), "--", "--batches", "1"]
    assert module.main(argv) == 0
    tail = ["--wait-idle", "5.0", "--out", str(tmp_path), "--batches", "1"]
    assert [c[1:] for c in commands] == [["benchmarks/fk.py", *tail], ["benchmarks/ik.py", *tail]]


def test_a_relative_out_is_a_folder_of_the_current_one(monkeypatch, tmp_path):
    """``torchik bench fk --out res`` wrote the checkout's res/: run.py ran in the checkout."""
    import contextlib
    import os

    from torchik.cli import bench, main

    module, forwarded = _run_py(), []

    def call(command, cwd=None, **_):  # run.py's parsing, where bench starts it
        with contextlib.chdir(cwd or os.getcwd()):
            forwarded.append(module._parse(command[2:], {"fk": RUN_PY})[1])
        return 0

    monkeypatch.setattr(bench.subprocess, "call", call)
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "fk", "--out", "res"]) == 0
    assert forwarded == [["--out", str(tmp_path / "res")]]

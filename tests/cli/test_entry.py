"""The console script: Ctrl-C while torch imports, and the command line's own errors."""

from __future__ import annotations

import builtins
import signal
import subprocess
import sys
import time

import pytest

from tests.cli.test_cli import assert_one_line_error, run
from tests.paths import REPO

_INTERRUPTED_EARLY = """import sys
from _torchik_cli import main
sys.argv = ["torchik", "info", "panda", "--samples", "100000000"]
print("ready", file=sys.stderr, flush=True)
sys.exit(main())
"""


def test_the_console_script_is_the_launcher_and_it_imports_no_torch():
    assert 'torchik = "_torchik_cli:main"' in (REPO / "pyproject.toml").read_text()
    code = "import sys, _torchik_cli; print('torch' in sys.modules, 'torchik' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def test_ctrl_c_while_torch_imports_is_one_line_and_130():
    """Ctrl-C in a command's first seconds printed a long traceback ending in
    KeyboardInterrupt (``from torchik.cli import main`` imports torch: some 3 s). The signal is
    sent 0.1 s after the child says it calls the launcher, in the import; were the import over
    by then, the command (minutes of samples) gives the same line."""
    with subprocess.Popen([sys.executable, "-c", _INTERRUPTED_EARLY], stderr=subprocess.PIPE,
                          text=True) as child:  # fmt: skip
        assert child.stderr.readline() == "ready\n"
        time.sleep(0.1)
        child.send_signal(signal.SIGINT)
        err = child.stderr.read()
        child.wait(timeout=120)
    assert child.returncode == 130 and err == "torchik: interrupted\n", err


def test_the_launcher_turns_an_interrupted_import_into_130(monkeypatch, capsys):
    from _torchik_cli import main

    real = builtins.__import__

    def interrupted(name, *args, **kwargs):
        if name == "torchik.cli":
            raise KeyboardInterrupt
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", interrupted)
    assert main() == 130
    assert capsys.readouterr().err == "torchik: interrupted\n"


def test_python_m_torchik_goes_through_the_launcher(monkeypatch, capsys):
    """``python -m torchik`` imported torchik.cli itself: Ctrl-C in that import was a
    traceback (in torchik's own ``__init__``, before any of its lines run, it still is)."""
    import runpy

    real = builtins.__import__

    def interrupted(name, *args, **kwargs):
        if name == "torchik.cli":
            raise KeyboardInterrupt
        return real(name, *args, **kwargs)

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(builtins, "__import__", interrupted)
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module("torchik", run_name="__main__")
    assert exit_.value.code == 130
    assert capsys.readouterr().err == "torchik: interrupted\n"


@pytest.mark.parametrize(
    ("robot", "says"),
    [
        ("planar:-1,1", "'planar:-1,1': link length 1 of 2 must be positive and finite, got -1"),
        ("planar:1,nan", "link length 2 of 2 must be positive and finite, got nan"),
        ("planar:1,x", "planar arm lengths must be numbers, got 'planar:1,x'"),
    ],
)
def test_a_bad_planar_arm_counts_its_lengths_from_one(capsys, robot, says):
    """``planar:-1,1`` said ``link length 0 must be positive`` (the library's index)."""
    code, _, err = run(capsys, "info", robot)
    assert_one_line_error(code, err)
    assert code == 1 and says in err

"""``torchik tune``: settings that fail every trial refused up front, trials that fail or are
interrupted without Optuna's tracebacks, the line that continues an interrupted study."""

from __future__ import annotations

import io
import json
import logging
import shlex
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error, run

SMALL = ["--model", "mdn", "--preset", "tiny", "--trials", "2", "--steps", "4", "--val-every",
         "2", "--train-size", "64", "--val-size", "16", "--batch-size", "16", "--quiet",
         "--no-baseline"]  # fmt: skip


@pytest.fixture
def optuna_records():
    """What Optuna logs (its library logger does not propagate to pytest's)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    logger = logging.getLogger("optuna")
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


def test_a_batch_larger_than_the_training_set_is_refused_before_a_study(tmp_path, capsys):
    """In the flags' names: it said "raise train_size or lower batch_size"."""
    out = tmp_path / "study"
    argv = [*SMALL, "--train-size", "8", "--out", str(out)]
    code, _, err = run(capsys, "tune", *argv)
    assert_one_line_error(code, err)
    assert "--batch-size 16 is more than the --train-size 8 training pairs" in err
    assert "raise --train-size or lower --batch-size" in err and "_size" not in err
    assert not out.exists()


def test_fixed_settings_every_trial_refuses_are_refused_before_a_study(tmp_path, capsys):
    space = tmp_path / "space.json"
    space.write_text(json.dumps({"width": 0}))
    out = tmp_path / "study"
    code, _, err = run(capsys, "tune", *SMALL, "--space", str(space), "--out", str(out))
    assert_one_line_error(code, err)
    assert "width" in err and not out.exists()


def test_an_unknown_robot_is_named_in_the_command_lines_spelling(capsys, tmp_path):
    code, _, err = run(capsys, "tune", *SMALL, "--robot", "nosuch", "--out", str(tmp_path / "s"))
    assert_one_line_error(code, err)
    assert "'planar:L1,L2,...'" in err and "link_lengths" not in err


def test_a_drawn_batch_larger_than_the_training_set_fails_its_trial_alone(
    tmp_path, capsys, optuna_records
):
    space = tmp_path / "space.json"
    space.write_text(json.dumps({"batch_size": [16, 128], "lr": 1e-3, "weight_decay": 1e-6}))
    out = tmp_path / "study"
    code, text, err = run(capsys, "tune", *SMALL, "--trials", "4", "--space", str(space),
                          "--out", str(out), "--sampler", "random")  # fmt: skip
    assert code == 0, err
    assert "Traceback" not in err and not any("failed" in r.getMessage() for r in optuna_records)
    failures = [line for line in err.splitlines() if "failed:" in line]
    assert all("fewer than batch_size=128" in line for line in failures), err


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_a_trial_stopped_by_ctrl_c_or_an_error_is_not_logged_by_optuna(
    tmp_path, capsys, monkeypatch, optuna_records, error
):
    import torchik.tune.study

    def make_objective(*args):
        def objective(trial):
            raise error("stopped in the trial")

        return objective

    monkeypatch.setattr(torchik.tune.study, "make_objective", make_objective)
    out = tmp_path / "study"
    code, _, err = run(capsys, "tune", *SMALL, "--out", str(out))
    assert "Traceback" not in err and not any("failed" in r.getMessage() for r in optuna_records)
    if error is RuntimeError:
        assert_one_line_error(code, err)
        return
    assert code == 130
    line = err.strip().splitlines()[-1]
    assert line.startswith("interrupted; continue the study with: torchik tune "), err
    argv = shlex.split(line.split("with: torchik ")[1])
    assert argv == ["tune", *SMALL, "--out", str(out), "--resume"]


def test_the_continue_line_adds_out_and_resume_once(tmp_path):
    from torchik.cli.tune import _interrupted

    line = _interrupted(Path("runs/t t"), ["tune", "--model", "mdn", "--resume"])
    assert line.endswith("torchik tune --model mdn --out 'runs/t t' --resume")
    line = _interrupted(Path("x"), ["tune", "--model", "mdn", "--out=x"])
    assert line.endswith("torchik tune --model mdn --out=x --resume")


def test_the_progress_of_a_study_counts_trials():
    from torchik.tune.progress import TrialProgress

    stream = io.StringIO()
    bar = TrialProgress(5, 1, title="tuning", stream=stream, bar=False)
    bar.advance(1)
    bar.advance(3)
    bar.close()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "tuning" and lines[1].startswith("trial 3/5  ") and len(lines) == 2
    assert "s/trial" in lines[1] and "samples/s" not in lines[1]

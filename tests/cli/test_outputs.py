"""The files the commands write: a bad output path is refused in one line before the work, an
existing file is never replaced by accident, and no message names a temporary file."""

from __future__ import annotations

import pytest

from tests.cli.test_cli import assert_one_line_error, run


def _no_work(monkeypatch) -> None:
    """Make the work of dataset, fit-sampler, plot and view fail loudly if it starts."""
    from torchik.cli import dataset, fit, plot
    from torchik.viewer import app

    def work(*args, **kwargs):
        raise AssertionError("the work started")

    for module, name in ((dataset, "_robot"), (fit, "_load_model"), (plot, "_robot"),
                         (app, "open_robot")):  # fmt: skip
        monkeypatch.setattr(module, name, work)


OUT_COMMANDS = {
    "dataset": ["dataset", "snake2", "-n", "10", "--out"],
    "fit-sampler": "fit-sampler --model pretrained --robot ur5 --iters 3 --steps 2 --out".split(),
    "plot": ["plot", "arm", "snake2", "--position", "0.1", "0.1", "--out"],
    "view": ["view", "snake2", "--screenshot"],
}


@pytest.mark.parametrize("command", OUT_COMMANDS)
def test_an_output_in_a_missing_folder_is_refused_before_the_work(capsys, monkeypatch, command):
    """It was refused after the work, as ``file not found: nodir/s.json.tmp8202``."""
    _no_work(monkeypatch)
    code, _, err = run(capsys, *OUT_COMMANDS[command], "nodir/out.x")
    assert_one_line_error(code, err)
    assert code == 1 and "the folder 'nodir' does not exist: 'nodir/out.x' was not written" in err


@pytest.mark.parametrize("command", OUT_COMMANDS)
def test_an_empty_output_path_is_named_so(capsys, monkeypatch, command):
    """``--out ''`` said "'' is a directory"."""
    _no_work(monkeypatch)
    code, _, err = run(capsys, *OUT_COMMANDS[command], "")
    assert_one_line_error(code, err)
    assert "the output path is empty" in err


def test_the_message_names_the_file_not_its_temporary():
    from torchik.cli.common import _message

    assert _message(FileNotFoundError(2, "No such file", "a/s.json.tmp8202")) == (
        "file not found: a/s.json"
    )
    assert _message(PermissionError(13, "Permission denied", "x.pt.tmp9")) == (
        "Permission denied: x.pt"
    )


@pytest.mark.parametrize("command", ["dataset", "fit-sampler"])
def test_an_existing_file_is_replaced_only_with_overwrite(capsys, monkeypatch, tmp_path, command):
    """``torchik dataset snake2 -n 100 --out snake2.pt`` silently replaced a larger data set
    that a run's provenance names."""
    out = tmp_path / "earlier"
    out.write_text("kept")
    _no_work(monkeypatch)
    code, _, err = run(capsys, *OUT_COMMANDS[command], str(out))
    assert_one_line_error(code, err)
    assert code == 1 and f"'{out}' exists: pass --overwrite to replace it" in err
    assert out.read_text() == "kept"
    monkeypatch.undo()
    if command == "dataset":
        code, _, err = run(capsys, *OUT_COMMANDS[command], str(out), "--overwrite")
        assert code == 0 and out.stat().st_size > 4, err


def test_fit_sampler_overwrites_when_asked(capsys, tmp_path):
    import torch

    from torchik import load_robot
    from torchik.learn import ProblemSpec
    from torchik.models import FlowMatching, FMConfig
    from torchik.models.fm_fit import load_sampler

    torch.manual_seed(0)
    spec = ProblemSpec.from_robot(load_robot("snake2"))
    FlowMatching(spec, FMConfig(width=8, blocks=1, steps=2)).save(tmp_path / "fm.pt")
    out = tmp_path / "sampler.json"
    out.write_text("{}")
    argv = ["fit-sampler", "--model", str(tmp_path / "fm.pt"), "--out", str(out), "--steps",
            "2", "--iters", "2", "--no-progress"]  # fmt: skip
    code, _, err = run(capsys, *argv, "--overwrite")
    assert code == 0 and load_sampler(out).steps == 2, err


def test_plot_help_says_an_existing_image_is_replaced(capsys):
    code, out, _ = run(capsys, "plot", "arm", "--help")
    assert code == 0 and "an existing one is replaced" in " ".join(out.split())


# ------------------------------------------------------------------------ files given as inputs
def test_a_text_or_image_file_given_to_view_play_is_named_so(capsys, tmp_path):
    """It said "is refused: it holds objects; ... pickled code is never run"."""
    pytest.importorskip("viser")
    (tmp_path / "q.csv").write_text("a,b\n1,2\n")
    (tmp_path / "q.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(32))
    for name, kind in (("q.csv", "text"), ("q.png", "a PNG image")):
        code, _, err = run(capsys, "view", "panda", "--play", str(tmp_path / name))
        assert_one_line_error(code, err)
        assert f"it is {kind}, not a file of torch.save" in err and "pickled" not in err


def test_a_truncated_model_file_is_named_so(capsys, tmp_path):
    from torchik.models import load_pretrained

    load_pretrained("snake2").save(tmp_path / "m.pt")
    (tmp_path / "cut.pt").write_bytes((tmp_path / "m.pt").read_bytes()[:3000])
    code, _, err = run(capsys, "solve", "snake2", "--position", "0.1", "0.1", "--model",
                       str(tmp_path / "cut.pt"))  # fmt: skip
    assert_one_line_error(code, err)
    assert "it is truncated or damaged (not a complete file" in err and "miniz" not in err


def test_plot_training_of_a_file_that_is_no_log_says_what_it_takes(capsys, tmp_path):
    """A run's JSON file said "has no rows yet: the run stopped before its first log row"."""
    (tmp_path / "train_data.json").write_text('{"rows": 10}\n')
    code, _, err = run(capsys, "plot", "training", str(tmp_path / "train_data.json"),
                       "--out", str(tmp_path / "a.png"))  # fmt: skip
    assert_one_line_error(code, err)
    assert "is not a training log" in err and "a run folder of torchik train or its log.csv" in err


def test_a_file_where_a_folder_is_made_is_named_so(tmp_path):
    """``torchik train ... --out img.png`` (a file) said ``File exists: img.png``."""
    from torchik.cli.common import _message

    (tmp_path / "img.png").write_bytes(b"x")
    err = FileExistsError(17, "File exists", str(tmp_path / "img.png"))
    assert _message(err) == f"'{tmp_path / 'img.png'}' is a file, not a folder"

"""``torchik train``: a refused run changes nothing, resuming checks its data, the resume line."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchik.cli import main

RUN = ("checkpoint.pt", "best.pt", "model.pt", "log.csv", "train_data.json")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str) -> None:
    assert code == 1
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("torchik: error: ")


def _train(capsys, data: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    return run(capsys, "train", "--data", str(data), "--model", "mdn", "--preset", "tiny",
               "--steps", "4", "--out", str(out), "--config", "batch_size=8", "log_every=1",
               *extra)  # fmt: skip


@pytest.fixture(scope="module")
def snake_data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "s2.pt"
    assert main(["dataset", "snake2", "-n", "64", "--out", str(path), "--seed", "3"]) == 0
    return path


@pytest.fixture(scope="module")
def other_data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "other.pt"
    assert main(["dataset", "snake2", "-n", "64", "--out", str(path), "--seed", "4"]) == 0
    return path


@pytest.mark.parametrize(
    "bad",
    [
        ["--preset", "paper"],  # mdn has only tiny
        ["--config", "width=0"],
        ["--config", "batch_size=1000"],  # more than the 58 training rows
        ["--config", "no_such_key=1"],
        ["--val-fraction", "1"],
    ],
)
def test_a_refused_overwrite_leaves_the_earlier_run_intact(tmp_path, capsys, snake_data, bad):
    out = tmp_path / "run"
    assert _train(capsys, snake_data, out)[0] == 0
    before = {name: (out / name).read_bytes() for name in RUN}
    code, _, err = _train(capsys, snake_data, out, "--overwrite", *bad)
    assert_one_line_error(code, err)
    assert {name: (out / name).read_bytes() for name in RUN} == before


@pytest.mark.parametrize("second_ctrl_c", [False, True])
def test_a_resumed_run_interrupted_before_its_first_step_is_at_its_checkpoint(
    tmp_path, capsys, snake_data, monkeypatch, second_ctrl_c
):
    import torchik.train.loop
    from torchik.train.loop import TrainingInterrupted

    out = tmp_path / "run"
    assert _train(capsys, snake_data, out)[0] == 0

    def stopped_at_once(*args, **kwargs):  # Ctrl-C while the checkpoint is read
        if second_ctrl_c:
            raise KeyboardInterrupt
        raise TrainingInterrupted(4, out / "checkpoint.pt")

    monkeypatch.setattr(torchik.train.loop, "train", stopped_at_once)
    code, _, err = _train(capsys, snake_data, out, "--steps", "8", "--resume")
    assert code == 130, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("interrupted at step 4; resume with: torchik train "), line


def test_resuming_on_other_data_is_refused_and_the_same_rows_moved_are_taken(
    tmp_path, capsys, snake_data, other_data
):
    import json
    import shutil

    out = tmp_path / "run"
    assert _train(capsys, snake_data, out)[0] == 0
    before = {name: (out / name).read_bytes() for name in RUN}
    code, _, err = _train(capsys, other_data, out, "--steps", "6", "--resume")
    assert_one_line_error(code, err)
    assert str(snake_data) in err and str(other_data) in err and "--overwrite" in err
    assert {name: (out / name).read_bytes() for name in RUN} == before
    moved = tmp_path / "moved.pt"
    shutil.copy(snake_data, moved)
    code, _, err = _train(capsys, moved, out, "--steps", "6", "--resume")
    assert code == 0, err
    assert json.loads((out / "train_data.json").read_text())["path"] == str(moved.resolve())


def test_an_interrupted_run_records_its_data_for_the_resume(
    tmp_path, capsys, snake_data, other_data, monkeypatch
):
    import torchik.train.loop

    real = torchik.train.loop.train

    def interrupted(*args, callback=None, **kwargs):
        def stop_at_3(step, metrics):
            callback(step, metrics)
            if step == 3:
                raise KeyboardInterrupt

        return real(*args, callback=stop_at_3, **kwargs)

    monkeypatch.setattr(torchik.train.loop, "train", interrupted)
    out = tmp_path / "run"
    code, _, err = _train(capsys, snake_data, out, "--config", "batch_size=8", "checkpoint_every=2")
    assert code == 130 and (out / "train_data.json").is_file(), err
    monkeypatch.setattr(torchik.train.loop, "train", real)
    code, _, err = _train(capsys, other_data, out, "--resume")
    assert_one_line_error(code, err)
    assert "--resume: the run in" in err

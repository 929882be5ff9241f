"""``torchik train``: a refused run changes nothing, resuming checks its data, the resume line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_cli import URDF, assert_one_line_error, interrupt_training, run
from torchik.cli import main

RUN = ("checkpoint.pt", "best.pt", "model.pt", "log.csv", "train_data.json")


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
    if "batch_size=1000" in bad:  # says how, in the command's terms
        assert "fewer than batch_size=1000: set another with --config batch_size=N" in err


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

    real = interrupt_training(monkeypatch)
    out = tmp_path / "run"
    code, _, err = _train(capsys, snake_data, out, "--config", "batch_size=8", "checkpoint_every=2")
    assert code == 130 and (out / "train_data.json").is_file(), err
    monkeypatch.setattr(torchik.train.loop, "train", real)
    code, _, err = _train(capsys, other_data, out, "--resume")
    assert_one_line_error(code, err)
    assert "--resume: the run in" in err


def test_the_workers_of_nproc_run_the_command_as_given_so_its_resume_line_keeps_nproc(tmp_path):
    from torchik.cli.entry import build_parser
    from torchik.cli.train import _interrupted, _workers_command

    argv = ["train", "--stream", "snake2", "--model", "mdn", "--nproc", "2", "--out", "r"]
    args = build_parser().parse_args(argv)
    args.argv = argv
    command = _workers_command(args)
    assert command[-len(argv) :] == argv and command[-len(argv) - 1] == "2"
    (tmp_path / "checkpoint.pt").write_bytes(b"")  # unreadable: the line says so
    assert "cannot be read" in _interrupted(tmp_path, 3, command[-len(argv) :])


@pytest.mark.parametrize(
    "bad",
    [
        ["--data", "nothere.pt"],
        ["--data", "{data}", "--preset", "paper"],
        ["--data", "{data}", "--config", "batch_size=7"],  # not a multiple of 2 processes
        ["--stream", "nosuch"],
    ],
)
def test_nproc_checks_the_settings_before_starting_processes(capsys, monkeypatch, snake_data, bad):
    import subprocess

    def no_processes(*args, **kwargs):
        raise AssertionError("a process was started")

    monkeypatch.setattr(subprocess, "Popen", no_processes)
    bad = [a.replace("{data}", str(snake_data)) for a in bad]
    code, _, err = run(capsys, "train", "--model", "mdn", "--preset", "tiny", "--steps", "4",
                       "--nproc", "2", *bad)  # fmt: skip
    assert_one_line_error(code, err)


@pytest.mark.parametrize("out", ["run.png", "run.png/sub"])
def test_an_out_where_a_file_stands_is_refused_before_the_data_is_read(
    tmp_path, capsys, monkeypatch, out
):
    """``--out run.png`` (an image there) was refused once the model was built, seconds in."""
    import torchik.cli.train

    def work(*args, **kwargs):
        raise AssertionError("the work started")

    monkeypatch.setattr(torchik.cli.train, "_training_data", work)
    (tmp_path / "run.png").write_bytes(b"\x89PNG")
    for nproc in ("1", "2"):
        code, _, err = run(capsys, "train", "--stream", "snake2", "--model", "mdn", "--out",
                           str(tmp_path / out), "--nproc", nproc)  # fmt: skip
        assert_one_line_error(code, err)
        assert f"'{tmp_path / 'run.png'}' is a file, not a folder" in err


def test_the_end_link_of_a_file_robot_is_named_once_under_nproc(capsys, monkeypatch, tmp_path):
    """The launching process and each of the ``--nproc 2`` workers named it: three lines."""
    import subprocess

    import torchik.cli.train
    from torchik.train import distributed

    class Workers:  # what Popen starts: done at once
        def wait(self) -> int:
            return 0

    monkeypatch.setattr(subprocess, "Popen", lambda *args, **kwargs: Workers())
    argv = ["train", "--stream", str(URDF / "two_branches.urdf"), "--model", "mdn", "--preset",
            "tiny", "--nproc", "2", "--out", str(tmp_path / "r")]  # fmt: skip
    code, _, err = run(capsys, *argv)
    assert code == 0 and "end link" not in err, err  # the launcher leaves it to rank 0
    args = torchik.cli.build_parser().parse_args(argv)
    monkeypatch.setenv("WORLD_SIZE", "2")  # a worker of torchrun
    for rank, says in ((0, True), (1, False)):
        monkeypatch.setattr(distributed, "world", lambda rank=rank: (rank, 2))
        torchik.cli.train._training_data(args, torchik.cli.train._settings(args)[2])
        assert ("torchik: end link" in capsys.readouterr().err) == says


def test_the_errors_of_the_workers_are_printed_once_each_in_their_order(tmp_path, monkeypatch):
    from torchik.cli.train import _launcher_errors, _report_to_launcher

    monkeypatch.setenv("RANK", "1")
    assert _report_to_launcher(str(tmp_path), RuntimeError("peer closed"))
    monkeypatch.setenv("RANK", "0")
    assert _report_to_launcher(str(tmp_path), FileNotFoundError(2, "No such file", "d.pt"))
    assert _report_to_launcher(str(tmp_path), RuntimeError("peer   closed"))
    assert not _report_to_launcher(str(tmp_path), KeyError("a bug: its traceback shows"))
    assert _launcher_errors(str(tmp_path)) == ["peer closed", "file not found: d.pt"]


def _nproc_command(data: Path, out: Path, *extra: str) -> list[str]:
    import sys

    return [sys.executable, "-m", "torchik", "train", "--data", str(data), "--model", "mdn",
            "--preset", "tiny", "--out", str(out), "--config", "batch_size=8",
            "checkpoint_every=20", "log_every=100000", *extra]  # fmt: skip


@pytest.mark.slow
def test_an_error_in_the_workers_of_nproc_is_one_line(tmp_path, snake_data):
    import os
    import subprocess

    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    assert subprocess.run(_nproc_command(snake_data, out, "--steps", "4"), env=env).returncode == 0
    command = _nproc_command(snake_data, out, "--steps", "8", "--nproc", "2", "--resume")
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("torchik: error")]
    assert errors == [errors[0]] and "resume with --nproc 1" in errors[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_ctrl_c_under_nproc_prints_a_resume_line_with_nproc_and_no_traceback(tmp_path, snake_data):
    import os
    import shlex
    import signal
    import subprocess
    import time

    out = tmp_path / "run"
    command = _nproc_command(snake_data, out, "--steps", "1000000", "--nproc", "2")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def ctrl_c_back() -> None:  # a runner in the background has SIGINT ignored
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=ctrl_c_back)  # fmt: skip
    deadline = time.monotonic() + 120
    while not (out / "checkpoint.pt").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "SignalException" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("interrupted at step"), err
    argv = shlex.split(line.split("resume with: torchik ")[1])
    assert argv[argv.index("--nproc") + 1] == "2" and argv[-1] == "--resume"


@pytest.mark.parametrize(
    "extra",
    [["--sampler", "normal"], ["--std", "0.1"], ["--targets", "pose"], ["--link", "link_1"]],
)
def test_streams_options_with_data_are_refused_not_ignored(tmp_path, capsys, snake_data, extra):
    """--data's file fixes its targets, joints and end link: --targets, --sampler, --std and
    --link were ignored without a word."""
    code, _, err = _train(capsys, snake_data, tmp_path / "run", *extra)
    assert_one_line_error(code, err)
    assert f"{extra[0]}: --stream's options; --data's file fixes" in err
    assert not (tmp_path / "run").exists()


def test_std_without_the_normal_sampler_is_refused_by_train_and_dataset(tmp_path, capsys):
    """The uniform sampler has no std: --std alone was ignored."""
    code, _, err = run(capsys, "train", "--stream", "snake2", "--model", "mdn", "--preset", "tiny",
                       "--steps", "2", "--out", str(tmp_path / "run"), "--std", "0.5")  # fmt: skip
    assert_one_line_error(code, err)
    assert "--std is the normal sampler's spread: add --sampler normal" in err
    code, _, err = run(capsys, "dataset", "snake2", "-n", "8", "--out", str(tmp_path / "d.pt"),
                       "--std", "0.5")  # fmt: skip
    assert_one_line_error(code, err)
    assert "add --sampler normal" in err and not (tmp_path / "d.pt").exists()
    code, out, _ = run(capsys, "dataset", "snake2", "-n", "8", "--out", str(tmp_path / "d.pt"),
                       "--sampler", "normal", "--std", "0.5", "0.1")  # fmt: skip
    assert code == 0 and "normal joints" in out

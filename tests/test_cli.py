"""The command line: in-process ``main([...])`` and a few real ``python -m torchik.cli`` runs."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchik.cli import main

URDF = Path(__file__).resolve().parent / "data" / "urdf"
TINY_IKNET = ["hyper_width=8", "hyper_depth=1", "embedding=4", "primary_width=4", "components=2"]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str) -> None:
    assert code != 0
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def test_info_panda(capsys):
    code, out, _ = run(capsys, "info", "panda", "--samples", "500")
    assert code == 0
    assert "7 dof" in out and "end link panda_hand" in out
    assert "panda_joint4" in out and "-3.0718" in out and "fixed" in out
    assert "reach" in out


def test_info_urdf_file(capsys):
    code, out, _ = run(capsys, "info", str(URDF / "mimic.urdf"), "--samples", "200")
    assert code == 0
    assert "mimics finger_a" in out


def test_solve_position_json(capsys):
    code, out, _ = run(capsys, "solve", "panda", "--position", "0.4", "0.1", "0.5", "-n", "4",
                       "--format", "json")  # fmt: skip
    assert code == 0
    rows = json.loads(out)
    assert len(rows) == 4
    assert all(r["success"] and r["position_error"] < 1e-3 for r in rows)
    assert rows[0]["rotation_error"] is None and len(rows[0]) == 7 + 3


def test_solve_pose_csv(capsys):
    code, out, _ = run(capsys, "solve", "ur5", "--pose", "0.4", "0.1", "0.3", "0", "1", "0", "0",
                       "-n", "3", "--format", "csv")  # fmt: skip
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 3
    best = rows[0]
    assert float(best["position_error"]) < 1e-3 and float(best["rotation_error"]) < 0.02
    assert best["success"] == "True"


def test_solve_table_planar(capsys):
    code, out, _ = run(capsys, "solve", "snake2", "--position", "0.1", "0.1", "-n", "2")
    assert code == 0
    assert "2 within tolerance" in out and "pos err (mm)" in out


def test_dataset_train_eval_round_trip(tmp_path, capsys):
    data, run_dir = tmp_path / "s2.pt", tmp_path / "run"
    code, out, _ = run(capsys, "dataset", "snake2", "-n", "80", "--targets", "planar",
                       "--out", str(data), "--seed", "1")  # fmt: skip
    assert code == 0 and data.exists() and "80 samples" in out
    code, out, err = run(capsys, "train", "--data", str(data), "--model", "iknet", "--steps", "2",
                         "--out", str(run_dir), "--config", *TINY_IKNET, "batch_size=16",
                         "log_every=1")  # fmt: skip
    assert code == 0, err
    assert (run_dir / "model.pt").exists() and (run_dir / "log.csv").exists()
    assert "step       2/2" in err  # progress lines from train.py
    code, out, err = run(capsys, "eval", "--model", str(run_dir / "model.pt"),
                         "--data", str(data), "-n", "3", "--format", "json")  # fmt: skip
    assert code == 0, err
    metrics = {r["metric"]: r["value"] for r in json.loads(out)}
    assert metrics["targets"] == 80 and metrics["samples outside limits"] == 0
    assert 0 < metrics["position error mean (mm)"] < 1000
    code, out, _ = run(
        capsys,
        "solve",
        "snake2",
        "--position",
        "0.1",
        "0.1",
        "--model",
        str(run_dir / "model.pt"),
        "-n",
        "3",
        "--refine",
        "--format",
        "json",
    )
    assert code == 0 and len(json.loads(out)) == 3


@pytest.mark.parametrize(
    "argv",
    [
        ["info", "no_such_robot"],
        ["info", "missing.urdf"],
        ["info", str(URDF.parent / "bad_urdf" / "cycle.urdf")],
        ["solve", "panda", "--position", "1", "2"],
        ["solve", "panda", "--pose", "1", "2", "3"],
        ["solve", "panda", "--position", "0.4", "0", "0.5", "--link", "nope"],
        ["solve", "panda", "--position", "0.4", "0", "0.5", "--model", "pretrained"],
        ["solve", "panda", "--position", "0.4", "0", "0.5", "--model", "missing.pt"],
        ["eval", "--model", "missing.pt", "--data", "missing.pt"],
        ["train", "--data", "missing.pt", "--model", "iknet"],
        ["dataset", "panda", "-n", "-3", "--out", "x.pt"],
        ["frobnicate"],
        [],
    ],
)
def test_bad_input_gives_one_line_error(capsys, argv):
    code, _, err = run(capsys, *argv)
    assert_one_line_error(code, err)


def test_bad_files_and_config(tmp_path, capsys):
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    code, _, err = run(capsys, "eval", "--model", str(junk), "--data", str(junk))
    assert_one_line_error(code, err)
    data = tmp_path / "d.pt"
    assert main(["dataset", "snake2", "-n", "20", "--out", str(data)]) == 0
    for config in (["nope=1"], ["width"], ["width=abc"]):
        code, _, err = run(capsys, "train", "--data", str(data), "--model", "mlp",
                           "--out", str(tmp_path / "r"), "--config", *config)  # fmt: skip
        assert_one_line_error(code, err)


def test_help_on_every_command(capsys):
    for command in ("info", "dataset", "train", "eval", "solve", "plot"):
        code, out, _ = run(capsys, command, "--help")
        assert code == 0 and "usage: torchik" in out


def test_bench_help(capfd):  # benchmarks/run.py (a checkout) or our note: both print usage
    code, out, _ = run(capfd, "bench", "--help")
    assert code == 0 and "usage" in out


def test_subprocess_module_runs():
    args = [sys.executable, "-m", "torchik.cli", "solve", "snake2", "--position", "0.1", "0.1",
            "-n", "2", "--format", "json"]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert all(r["success"] for r in json.loads(done.stdout))


def test_subprocess_error_has_no_traceback():
    args = [sys.executable, "-m", "torchik", "info", "no_such_robot"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith("torchik: error: unknown robot")
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1

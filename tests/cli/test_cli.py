"""The command line: in-process ``main([...])`` and a few real ``python -m torchik.cli`` runs."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import DATA, REPO
from torchik.cli import main

URDF = DATA / "urdf"
TINY_IKNET = ["hyper_width=8", "hyper_depth=1", "embedding=4", "primary_width=4", "components=2"]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str) -> None:
    assert code != 0
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def interrupt_training(monkeypatch, at: int = 3):
    """Make ``torchik.train.loop.train`` raise KeyboardInterrupt after step ``at`` (as Ctrl-C
    would); returns the real one, to put back."""
    import torchik.train.loop

    real = torchik.train.loop.train

    def interrupted(*args, callback=None, **kwargs):
        def stop(step, metrics):
            callback(step, metrics)
            if step == at:
                raise KeyboardInterrupt

        return real(*args, callback=stop, **kwargs)

    monkeypatch.setattr(torchik.train.loop, "train", interrupted)
    return real


def test_each_command_is_a_module_with_add_parser_and_run():
    import importlib

    from torchik.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    commands = "info dataset train eval fit-sampler solve plot bench tune view".split()
    assert list(sub.choices) == commands
    for name, parser in sub.choices.items():
        module = importlib.import_module(f"torchik.cli.{name.split('-')[0]}")  # fit-sampler: fit
        assert callable(module.add_parser)
        assert parser.get_default("func") is module.run


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


def test_info_computes_the_reach_in_chunks(capsys, monkeypatch, tmp_path):
    """10 000 reach samples of a 5 000-link chain were one batch: 6.1 GB and 188 s."""
    from torchik.cli import info
    from torchik.robot.robot import Robot

    joints = [
        f'<joint name="j{i}" type="revolute"><parent link="l{i}"/><child link="l{i + 1}"/>'
        f'<origin xyz="0 0 0.01"/><axis xyz="0 1 0"/><limit lower="-1" upper="1"/></joint>'
        for i in range(200)
    ]
    links = [f'<link name="l{i}"/>' for i in range(201)]
    (tmp_path / "chain.urdf").write_text(f'<robot name="c">{"".join(links + joints)}</robot>')
    code, whole, _ = run(capsys, "info", str(tmp_path / "chain.urdf"), "--samples", "1000")
    real, batches = Robot.link_positions, []

    def counted(self, q, link):
        batches.append(q.shape[0] * len(self.link_names))
        return real(self, q, link)

    monkeypatch.setattr(Robot, "link_positions", counted)
    monkeypatch.setattr(info, "_REACH_POSES", 201 * 64)
    code, chunked, _ = run(capsys, "info", str(tmp_path / "chain.urdf"), "--samples", "1000")
    assert code == 0 and chunked == whole  # the same samples, in 16 chunks
    assert len(batches) == 16 and max(batches) <= 201 * 64


def test_solve_position_json(capsys):
    code, out, _ = run(capsys, "solve", "panda", "--position", "0.4", "0.1", "0.5", "-n", "4",
                       "--format", "json")  # fmt: skip
    assert code == 0
    rows = json.loads(out)
    assert len(rows) == 4
    assert all(r["success"] and r["position_error"] < 1e-3 for r in rows)
    assert rows[0]["rotation_error"] is None and len(rows[0]) == 7 + 3


def test_solve_takes_the_host_loop_in_its_one_shot_process():
    """``torchik solve`` solves one target and exits: on the CPU, LM runs on its host loop
    (the compiled loop's first load, about 2 s, would cost more than it saves); Numba is
    never imported."""
    import torch

    from torchik import load_robot
    from torchik.cli.solve import _one_shot

    robot = load_robot("panda", dtype=torch.float64)
    assert _one_shot("lm", robot).settings.loop == "host" and _one_shot("dls", robot) == "dls"
    code = ("import sys\nfrom torchik.cli import main\n"
            "main(['solve', 'panda', '--position', '0.4', '0.1', '0.5', '--format', 'json'])\n"
            "assert 'numba' not in sys.modules\n")  # fmt: skip
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120)


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
    code, _, err = run(capsys, "solve", "snake2", "--position", "0.1", "0.1", "--model",
                       str(run_dir / "model.pt"), "--sampler", "few")  # fmt: skip
    assert code == 1 and "--sampler is for flow-matching models; this model is 'iknet'" in err


def test_a_fitted_sampler_is_only_for_a_bundled_model_that_has_one(monkeypatch):
    from torchik.cli.solve import _sample_options
    from torchik.models import FEW_PASSES, load_pretrained
    from torchik.models.pretrained import catalog, fitted_sampler

    real = catalog.fitted_samplers

    panda = load_pretrained("panda")
    assert _sample_options(panda, None, "panda") == {}  # its defaults, bfloat16 where fast
    own = load_pretrained("panda", sampler="own")  # as a model file: no default sampler
    assert _sample_options(own, None, None) == {"sampler": FEW_PASSES}
    assert _sample_options(panda, "model", "panda") == {"sampler": panda.config.sampler}
    with pytest.raises(ValueError, match="no sampler is fitted to this model"):
        _sample_options(panda, "fitted", None)
    low = fitted_sampler("panda", bf16=True)
    assert _sample_options(panda, "fitted-bf16", "panda") == {"sampler": low}
    reads = []
    monkeypatch.setattr(catalog, "fitted_samplers", lambda: reads.append(1) or real())
    _sample_options(panda, "fitted-bf16", "panda")
    assert len(reads) == 1  # samplers.json read once a solve


@pytest.mark.parametrize("sampler", ["model", "few", "few-bf16", "fitted", "fitted-bf16"])
def test_solve_with_the_bundled_model_and_each_sampler(sampler, capsys):
    code, out, err = run(capsys, "solve", "panda", "--pose", "0.4", "0.1", "0.5", "0", "1", "0",
                         "0", "--model", "pretrained", "--refine", "-n", "20", "--sampler",
                         sampler, "--format", "json")  # fmt: skip
    assert code == 0, err
    rows = json.loads(out)
    assert len(rows) == 20 and sum(r["success"] for r in rows) >= 18


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


# ------------------------------------------------------------------------ a new user's first hour
UR10 = str(URDF / "ur10_robot.urdf")  # ur_description's layout: the last link is `base`


def test_a_urdf_file_gets_its_flange_as_end_link_everywhere(tmp_path, capsys):
    code, out, err = run(capsys, "info", UR10, "--samples", "300")
    assert code == 0, err
    assert "end link ee_link" in out and "end link ee_link" in err  # chosen, and said so
    reach = float(out.split("reach     ~")[1].split()[0])
    assert 1.0 < reach < 1.6  # the UR10 reaches 1.3 m; `base` reached 0.000
    code, out, err = run(capsys, "solve", UR10, "--position", "0.5", "0.2", "0.4", "-n", "3")
    assert code == 0, err
    assert "ur10 ee_link: 3 solutions" in out and "3 within tolerance" in out
    code, out, err = run(capsys, "dataset", UR10, "-n", "10", "--out", str(tmp_path / "d.pt"))
    assert code == 0 and "link ee_link" in out, err


TWO_FINGERS = """<robot name="gripper"><link name="palm"/><link name="left"/><link name="right"/>
<joint name="l" type="prismatic"><parent link="palm"/><child link="left"/><axis xyz="0 1 0"/>
<limit lower="0" upper="0.04"/></joint>
<joint name="r" type="prismatic"><parent link="palm"/><child link="right"/><axis xyz="0 -1 0"/>
<limit lower="0" upper="0.04"/></joint></robot>"""


def test_a_tree_without_a_single_end_link_asks_for_link(tmp_path, capsys):
    code, out, err = run(capsys, "info", str(URDF / "two_branches.urdf"), "--samples", "50")
    assert code == 0 and "end link right_tip" in out, err  # the longer branch
    path = tmp_path / "gripper.urdf"
    path.write_text(TWO_FINGERS)
    code, out, err = run(capsys, "info", str(path), "--samples", "50")
    assert code == 0 and "end link ?" in out and "['left', 'right']" in out, err
    code, _, err = run(capsys, "solve", str(path), "--position", "0", "0.01", "0")
    assert_one_line_error(code, err)
    assert "['left', 'right']" in err and "--link" in err
    code, out, err = run(capsys, "solve", str(path), "--position", "0", "0.01", "0", "--link",
                         "left", "-n", "2")  # fmt: skip
    assert code == 0 and "2 within tolerance" in out, err


@pytest.mark.parametrize("device", ["banana", "meta", "cuda:99", "cuda"])
def test_solve_refuses_devices_it_cannot_use(capsys, device):
    import torch

    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code, _, err = run(capsys, "solve", "snake2", "--position", "0.1", "0.1", "--device", device)
    assert_one_line_error(code, err)
    assert code == 2 and "--device" in err


@pytest.mark.parametrize("flag", ["--tol-position", "--tol-rotation"])
@pytest.mark.parametrize("value", ["-1", "nan", "inf", "abc"])
def test_solve_refuses_nonsense_tolerances(capsys, flag, value):
    code, _, err = run(capsys, "solve", "snake2", "--position", "0.1", "0.1", f"{flag}={value}")
    assert_one_line_error(code, err)
    assert code == 2 and flag in err


def test_solve_out_of_reach_exits_3(capsys):
    code, out, err = run(capsys, "solve", "snake2", "--position", "5", "5", "-n", "2",
                         "--format", "json")  # fmt: skip
    assert code == 3
    assert not any(r["success"] for r in json.loads(out))
    assert "no solution within tolerance" in err and "exit status 3" in err


def _train(capsys, data: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    return run(capsys, "train", "--data", str(data), "--model", "iknet", "--steps", "4",
               "--out", str(out), "--config", *TINY_IKNET, "batch_size=8", "log_every=1",
               "val_every=0", *extra)  # fmt: skip


@pytest.fixture
def snake_data(tmp_path) -> Path:
    path = tmp_path / "s2.pt"
    assert main(["dataset", "snake2", "-n", "64", "--out", str(path), "--seed", "3"]) == 0
    return path


def test_train_refuses_to_overwrite_a_run(tmp_path, capsys, snake_data):
    out = tmp_path / "run"
    code, _, err = run(capsys, "train", "--data", str(snake_data), "--model", "iknet", "--out",
                       str(out), "--resume", "--steps", "2")  # fmt: skip
    assert_one_line_error(code, err)
    assert "no" in err and "checkpoint.pt" in err
    assert _train(capsys, snake_data, out)[0] == 0
    before = (out / "checkpoint.pt").read_bytes()
    code, _, err = _train(capsys, snake_data, out)
    assert_one_line_error(code, err)
    assert "--resume" in err and "--overwrite" in err
    assert (out / "checkpoint.pt").read_bytes() == before
    code, _, err = _train(capsys, snake_data, out, "--resume", "--overwrite")
    assert_one_line_error(code, err)
    assert _train(capsys, snake_data, out, "--overwrite")[0] == 0


def test_train_is_reproducible_with_a_seed(tmp_path, capsys, snake_data):
    import torch

    states = []
    for name in ("a", "b"):
        assert _train(capsys, snake_data, tmp_path / name, "--seed", "7")[0] == 0
        states.append(torch.load(tmp_path / name / "model.pt", weights_only=True)["state_dict"])
    assert states[0].keys() == states[1].keys()
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


def test_train_interrupted_says_how_to_resume(tmp_path, capsys, snake_data, monkeypatch):
    import shlex

    import torchik.train.loop

    real = interrupt_training(monkeypatch)
    out = tmp_path / "run"
    code, _, err = _train(capsys, snake_data, out, "checkpoint_every=2")
    assert code == 130 and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("interrupted at step 3") and "resume with: torchik train " in line
    argv = shlex.split(line.split("resume with: torchik ")[1])
    assert argv[-1] == "--resume" and str(out) in argv
    monkeypatch.setattr(torchik.train.loop, "train", real)
    code, out_text, err = run(capsys, *argv)
    assert code == 0 and "for 4 steps" in out_text, err


def test_train_presets_and_the_default_size(tmp_path, capsys, snake_data):
    from torchik.cli.train import _model_config
    from torchik.models import IKNet, IKNetConfig

    assert _model_config(IKNet, None, {}, 2)[1] == IKNetConfig.small(components=4)
    assert _model_config(IKNet, None, {}, 7)[1] == IKNetConfig.small()
    assert _model_config(IKNet, "paper", {"components": 3}, 2)[1] == IKNetConfig.paper(components=3)
    assert _model_config(IKNet, "tiny", {}, 2)[1] == IKNet.tiny_config()
    code, _, err = run(capsys, "train", "--data", str(snake_data), "--model", "mlp",
                       "--preset", "paper", "--out", str(tmp_path / "m"))  # fmt: skip
    assert_one_line_error(code, err)
    assert "tiny" in err
    code, _, err = run(capsys, "train", "--data", str(snake_data), "--model", "iknet",
                       "--preset", "tiny", "--steps", "1", "--out", str(tmp_path / "t"),
                       "--config", "batch_size=8")  # fmt: skip
    assert code == 0 and err.startswith("training iknet (tiny preset, "), err


def test_eval_warns_on_the_training_data(tmp_path, capsys, snake_data):
    out = tmp_path / "run"
    assert _train(capsys, snake_data, out)[0] == 0
    model = str(out / "model.pt")
    code, _, err = run(capsys, "eval", "--model", model, "--data", str(snake_data), "-n", "2")
    assert code == 0 and "warning" in err and "trained on" in err
    other = tmp_path / "other.pt"
    assert main(["dataset", "snake2", "-n", "64", "--out", str(other), "--seed", "4"]) == 0
    code, _, err = run(capsys, "eval", "--model", model, "--data", str(other), "-n", "2")
    assert code == 0 and "warning" not in err


@pytest.mark.parametrize("path", ["bad_urdf/not_xml.urdf", "urdf/mimic.urdf"])
def test_a_urdf_given_as_data_or_model_is_named(capsys, snake_data, path):
    path = str(URDF.parent / path)
    for argv, hint in (
        (["train", "--data", path, "--model", "iknet"], "torchik dataset"),
        (["eval", "--data", path, "--model", str(snake_data)], "torchik dataset"),
        (["eval", "--data", str(snake_data), "--model", path], "torchik train"),
    ):
        code, _, err = run(capsys, *argv)
        assert_one_line_error(code, err)
        assert "pop from empty list" not in err and "Weights only" not in err
        assert hint in err


def test_plot_without_matplotlib_says_how_to_install(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    code, _, err = run(capsys, "plot", "arm", "snake2", "--position", "0.1", "0.1")
    assert_one_line_error(code, err)
    assert "pip install 'torchik[plot]'" in err


RESULTS = sorted((REPO / "benchmarks" / "results").glob("*.json"))


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.stem)
def test_plot_benchmark_draws_every_results_file(tmp_path, capsys, path):
    pytest.importorskip("matplotlib")
    code, _, err = run(capsys, "plot", "benchmark", str(path), "--out", str(tmp_path / "b.png"))
    assert code == 0, err
    assert (tmp_path / "b.png").stat().st_size > 1000


def test_help_texts_read_as_plain_text(capfd):
    code, out, _ = run(capfd, "--help")
    assert code == 0 and "``" not in out and "rail_arm" in out
    if (REPO / "benchmarks" / "run.py").is_file():
        code, out, _ = run(capfd, "bench", "--help")
        assert code == 0 and out.startswith("usage: torchik bench")
    code, out, _ = run(capfd, "solve", "--help")
    assert "Exit status: 0 with a solution within tolerance, 3 without one" in " ".join(out.split())


def test_demo_docstring_states_its_time():
    import torchik.demo

    assert "minute" not in torchik.demo.__doc__.splitlines()[0]


def test_ctrl_c_in_a_real_process_prints_the_resume_command(tmp_path, snake_data):
    import signal
    import time

    out = tmp_path / "run"
    args = [sys.executable, "-m", "torchik", "train", "--data", str(snake_data), "--model", "mlp",
            "--preset", "tiny", "--steps", "1000000", "--out", str(out), "--config",
            "batch_size=8", "checkpoint_every=50", "log_every=100000"]  # fmt: skip

    # a runner that starts tests in the background has SIGINT ignored: give the child Ctrl-C back
    def ctrl_c_back() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_back)
    assert proc.stderr is not None and proc.stderr.readline().startswith("training mlp")
    deadline = time.monotonic() + 60
    while not (out / "checkpoint.pt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 130, err
    assert "Traceback" not in err
    assert "interrupted at step" in err and f"--out {out} " in err
    assert err.strip().endswith("log_every=100000 --resume")


def test_train_uses_the_threads_asked_for_and_restores_the_count(tmp_path, capsys, snake_data,
                                                                 monkeypatch):  # fmt: skip
    import torch

    import torchik.train.loop

    real, seen = torchik.train.loop.train, []

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(torchik.train.loop, "train", spy)
    before = torch.get_num_threads()
    assert _train(capsys, snake_data, tmp_path / "a")[0] == 0  # default: one thread
    assert _train(capsys, snake_data, tmp_path / "b", "--threads", "2")[0] == 0
    assert seen == [1, 2] and torch.get_num_threads() == before
    code, _, err = _train(capsys, snake_data, tmp_path / "c", "--threads", "100000")
    assert code == 1 and "--threads must be at most" in err and err.count("\n") == 1
    assert not (tmp_path / "c").exists() and torch.get_num_threads() == before


def test_eval_of_a_pretrained_model_on_a_fresh_data_set(capsys, snake_data):
    # the bundled model's spec holds float32-rounded limits, the new data float64 ones
    capsys.readouterr()  # what making the data set printed
    code, out, err = run(capsys, "eval", "--model", "pretrained", "--data", str(snake_data),
                         "-n", "2", "--format", "json")  # fmt: skip
    assert code == 0, err
    metrics = {r["metric"]: r["value"] for r in json.loads(out)}
    assert metrics["targets"] == 64 and metrics["position error mean (mm)"] < 50


def test_more_inputs_that_give_one_line(tmp_path, capsys, snake_data):
    listing = tmp_path / "list.json"
    listing.write_text("[1, 2]")
    code, _, err = run(capsys, "plot", "benchmark", str(listing))
    assert_one_line_error(code, err)
    code, _, err = run(capsys, "info", str(URDF / "two_branches.urdf"), "--link", "nope")
    assert_one_line_error(code, err)
    code, _, err = run(capsys, "eval", "--model", "pretrained", "--data", str(snake_data),
                       "--robot", "snake4")  # fmt: skip
    assert_one_line_error(code, err)
    code, _, err = run(capsys, "plot", "densities", "--model", "pretrained", "--position", "0.1",
                       "0.1")  # fmt: skip
    assert_one_line_error(code, err)
    assert "--robot" in err


def test_plot_densities_of_a_pretrained_model(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = str(tmp_path / "d.png")
    code, _, err = run(capsys, "plot", "densities", "--model", "pretrained", "--robot", "snake2",
                       "--position", "0.1", "0.1", "-n", "50", "--out", out)  # fmt: skip
    assert code == 0 and (tmp_path / "d.png").exists(), err


def test_train_on_a_stream_and_resume(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--stream", "snake2", "--model", "mlp", "--preset", "tiny", "--out",
            str(out), "--config", "batch_size=32", "log_every=5", "val_every=10",
            "val_targets=50", "stats_rows=500", "ema_decay=0.9"]  # fmt: skip
    code, text, err = run(capsys, *argv, "--steps", "10")
    assert code == 0, err
    assert "fresh position pairs of snake2" in err and "for 10 steps" in text
    assert "stream" in (out / "train_data.json").read_text()
    code, text, err = run(capsys, *argv, "--steps", "20", "--resume")
    assert code == 0 and "for 20 steps" in text, err
    code, _, err = run(capsys, "train", "--stream", "snake2", "--data", "x.pt", "--model", "mlp")
    assert code == 2 and "not allowed with" in err
    code, _, err = run(capsys, "train", "--stream", "snake2", "--model", "mlp", "--out",
                       str(tmp_path / "r2"), "--targets", "pose", "--link", "nope")  # fmt: skip
    assert_one_line_error(code, err)


def test_train_for_minutes(tmp_path, capsys):
    from torchik.cli.train import _replace_option

    out = tmp_path / "run"
    argv = ["train", "--stream", "snake2", "--model", "mlp", "--preset", "tiny", "--out",
            str(out), "--config", "batch_size=32", "val_targets=20", "stats_rows=200"]  # fmt: skip
    code, text, err = run(capsys, *argv, "--minutes", "0.02")
    assert code == 0, err
    assert "measuring the training speed" in err and "trained mlp for" in text
    steps = int(text.split("trained mlp for ")[1].split()[0])
    assert steps >= 50 and f"for {steps} steps" in err
    code, _, err = run(capsys, *argv, "--minutes", "0.02", "--resume")
    assert_one_line_error(code, err)
    assert "resume with --steps N" in err
    code, _, err = run(capsys, *argv, "--minutes", "0.02", "--steps", "3")
    assert code == 2 and "not allowed with" in err
    code, _, err = run(capsys, *argv, "--minutes", "0.02", "--nproc", "2", "--overwrite")
    assert_one_line_error(code, err)
    seven = ["--steps", "7"]
    assert _replace_option(["a", "--minutes", "2", "b", "--minutes=3"], "--minutes", seven) == [
        "a", "--steps", "7", "b", "--steps", "7"
    ]  # fmt: skip
    assert _replace_option(["x", "--nproc", "2", "--nproc=3", "y"], "--nproc", []) == ["x", "y"]


def test_plot_refuses_a_huge_dpi_in_one_line(capsys, tmp_path):
    code, _, err = run(capsys, "plot", "arm", "snake2", "--position", "0.1", "0.1", "0",
                       "--dpi", "100000", "--out", str(tmp_path / "a.png"))  # fmt: skip
    assert code == 2 and "at most 1200" in err
    assert_one_line_error(code, err)


def test_a_model_for_another_robot_says_what_differs(capsys, snake_data, tmp_path):
    """It said "for robot 'snake2', link 'ee'; not for 'snake2', link 'ee'"."""
    from torchik.description.bundled import bundled_urdf

    assert _train(capsys, snake_data, tmp_path / "run")[0] == 0
    moved = bundled_urdf("snake2").replace('<origin xyz="0.1 0 0"', '<origin xyz="0.2 0 0"', 1)
    (tmp_path / "snake2.urdf").write_text(moved)
    model = str(tmp_path / "run" / "model.pt")
    code, _, err = run(capsys, "solve", str(tmp_path / "snake2.urdf"), "--position", "0.1",
                       "0.1", "--link", "ee", "--model", model)  # fmt: skip
    assert_one_line_error(code, err)
    assert err.strip().endswith(
        "the model is for robot 'snake2', link 'ee', not for this one: the geometry (joint "
        "origins, axes or links; the robot hash)"
    )


def test_a_full_disk_while_training_says_so_in_one_line(capsys, snake_data, tmp_path, monkeypatch):
    """It said "[enforce fail at inline_container.cc:672] unexpected pos"."""
    import errno

    import torchik.files

    def full(obj, file):
        file.write(b"PK")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torchik.files.torch, "save", full)
    out = tmp_path / "run"
    code, _, err = _train(capsys, snake_data, out, "checkpoint_every=2")
    assert code == 1 and "Traceback" not in err and "enforce fail" not in err
    last = err.strip().splitlines()[-1]  # after the progress lines
    assert last.startswith(f"torchik: error: no space left on {out / 'checkpoint.pt'}: it was")
    assert sorted(p.name for p in out.iterdir()) == ["log.csv"]  # no half-written file


@pytest.mark.parametrize("kind", ["fifo", "device", "directory", "link"])
def test_dataset_out_never_replaces_what_is_there(capsys, tmp_path, kind):
    """``torchik dataset panda -n 10 --out /dev/full`` (as root) turned the device into a
    regular file, exit 0; a FIFO was replaced, a symbolic link replaced (its target unwritten)."""
    import os
    import stat

    out = tmp_path / "out.pt"
    if kind == "fifo":
        os.mkfifo(out)
    elif kind == "device":
        try:
            os.mknod(out, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # /dev/full's numbers
        except PermissionError:
            pytest.skip("mknod needs root")
    elif kind == "directory":
        out.mkdir()
    else:
        out.symlink_to("target.pt")
    mode = os.lstat(out).st_mode
    code, _, err = run(capsys, "dataset", "snake2", "-n", "10", "--out", str(out))
    assert os.lstat(out).st_mode == mode  # the same kind of file, untouched
    if kind == "link":
        assert code == 0 and (tmp_path / "target.pt").stat().st_size > 0  # written through
        return
    assert_one_line_error(code, err)
    assert "not a regular file: nothing was written" in err


def test_fit_sampler_writes_json_that_solve_samples_with(capsys, tmp_path):
    import torch

    from torchik import load_robot
    from torchik.learn import ProblemSpec
    from torchik.models import FlowMatching, FMConfig
    from torchik.models.fm_fit import load_sampler

    torch.manual_seed(0)
    spec = ProblemSpec.from_robot(load_robot("panda"), targets="pose")
    FlowMatching(spec, FMConfig(width=8, blocks=1, steps=2)).save(tmp_path / "fm.pt")
    out = tmp_path / "sampler.json"
    code, _, err = run(capsys, "fit-sampler", "--model", str(tmp_path / "fm.pt"), "--out",
                       str(out), "--steps", "3", "--iters", "2", "--no-progress")  # fmt: skip
    assert code == 0, err
    assert "3 passes" in err and load_sampler(out).steps == 3
    code, stdout, err = run(capsys, "solve", "panda", "--pose", "0.4", "0.1", "0.5", "0", "1",
                            "0", "0", "--model", str(tmp_path / "fm.pt"), "-n", "4",
                            "--sampler", str(out), "--format", "json")  # fmt: skip
    assert code in (0, 3) and len(json.loads(stdout)) == 4, (
        err
    )  # 3: raw samples of an untrained model
    code, _, err = run(capsys, "fit-sampler", "--model", "pretrained", "--robot", "snake2",
                       "--out", str(tmp_path / "x.json"))  # fmt: skip
    assert_one_line_error(code, err)
    assert "for flow-matching models; this model is 'mdn'" in err
    (tmp_path / "bad.json").write_text("{}")
    bad = str(tmp_path / "bad.json")
    code, _, err = run(capsys, "solve", "panda", "--pose", "0.4", "0.1", "0.5", "0", "1", "0",
                       "0", "--model", str(tmp_path / "fm.pt"), "--sampler", bad)  # fmt: skip
    assert_one_line_error(code, err)
    assert "not a sampler written by fit_sampler" in err

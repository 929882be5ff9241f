"""torchik.tune, torchik.tune.space, torchik.tune.results and ``torchik tune``: spaces and their
files, a study in one process and in two worker processes on the embedded journal, a study
killed and resumed, the result files (``best.json`` read back by ``torchik train --config``),
and one clear error line for each bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna", reason="the 'tune' extra (optuna) is not installed")

from tests.paths import REPO  # noqa: E402
from torchik.cli import main  # noqa: E402
from torchik.models import families  # noqa: E402
from torchik.tune import (  # noqa: E402
    Choice,
    Float,
    Int,
    TuneConfig,
    best_config,
    default_space,
    open_study,
    parse_space,
    read_space,
    tune,
    write_results,
)
from torchik.tune.objective import (  # noqa: E402
    baseline_params,
    build_trial,
    make_objective,
    make_problem,
    posterior_metrics,
    problem_robot,
    trial_configs,
)
from torchik.tune.results import search_curve, trial_budget, write_trials_csv  # noqa: E402
from torchik.tune.space import read_mapping, space_to_json, split_params, suggest  # noqa: E402
from torchik.tune.study import JOURNAL, counted_trials  # noqa: E402

SMALL = dict(  # a trial of ~0.1 s
    family="cvae", robot="planar:1,1,1", trials=4, steps=30, val_every=10, batch_size=64,
    train_size=300, val_size=50, preset="tiny",
)  # fmt: skip
SPACE = {"width": [8, 16], "depth": None, "latent": None, "beta": None, "prior": None}
CLI = ["tune", "--model", "cvae", "--robot", "planar:1,1,1", "--preset", "tiny", "--steps", "30",
       "--val-every", "10", "--batch-size", "64", "--train-size", "300", "--val-size", "50",
       "--quiet"]  # fmt: skip


def _finished_trials(out: Path, name: str) -> int:
    """Trials counted so far; 0 while the journal holds no study yet (it is created first)."""
    if not (out / JOURNAL).exists():
        return 0
    try:
        return counted_trials(_study(out, name))
    except KeyError:  # optuna: "Record does not exist." until the study is written
        return 0


def _study(out: Path, name: str):
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    storage = JournalStorage(JournalFileBackend(str(out / JOURNAL)))
    return optuna.load_study(study_name=name, storage=storage)


# ---------------------------------------------------------------------------- spaces
@pytest.mark.parametrize("family", sorted(families()))
def test_default_space_fits_every_family(family):
    space = default_space(family)
    assert {"lr", "weight_decay"} <= set(space)
    trial = optuna.trial.FixedTrial(
        {k: (p.choices[0] if isinstance(p, Choice) else p.low) for k, p in space.items()}
    )
    model_kw, train_kw = split_params(family, suggest(trial, space))
    assert set(train_kw) == {"lr", "weight_decay"}
    families()[family].Config(**model_kw)  # the settings are the family's fields


def test_parse_space_overrides_fixes_and_drops():
    space = parse_space(
        {"lr": {"low": 1e-3, "high": 1e-2, "log": True}, "depth": {"low": 1, "high": 3},
         "width": [32, 64], "beta": 0.5, "latent": None, "batch_size": {"choices": [64, 128]}},
        "cvae",
    )  # fmt: skip
    assert space["lr"] == Float(1e-3, 1e-2, True)
    assert space["depth"] == Int(1, 3)
    assert space["width"] == Choice((32, 64)) and space["batch_size"] == Choice((64, 128))
    assert space["beta"] == 0.5 and "latent" not in space
    assert parse_space(space_to_json(space), "cvae", base={}) == space
    fixed = {
        "lr": 2e-3,
        "depth": 2,
        "width": 32,
        "batch_size": 64,
        "weight_decay": 1e-5,
        "prior": "conditional",
    }
    params = suggest(optuna.trial.FixedTrial(fixed), space)
    assert params["beta"] == 0.5 and split_params("cvae", params)[1]["batch_size"] == 64


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"widht": [8]}, "unknown setting 'widht'"),
        ({"lr": {"low": 1e-2, "high": 1e-3}}, "empty range"),
        ({"depth": {"low": 3, "high": 3}}, "empty range"),
        ({"lr": {"low": 0.0, "high": 1.0, "log": True}}, "low must be > 0"),
        ({"width": []}, "non-empty list"),
        ({"lr": {"low": 1e-3}}, "must be"),
        # values the configs refuse, up front (a trial found them out when it built its config)
        ({"width": -5}, "a fixed value is refused: width must be >= 1, got -5"),
        ({"lr": [0.1, -1.0]}, "a choice of 'lr' is refused: lr must be > 0, got -1.0"),
        ({"latent": [4, 0]}, "a choice of 'latent' is refused"),
        ({"batch_size": 2.5}, "a fixed value is refused: batch_size must be an int"),
    ],
)
def test_parse_space_refuses(entry, message):
    with pytest.raises(ValueError, match=message):
        parse_space(entry, "cvae")


def test_read_space_json_and_yaml(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps({"width": [8, 16]}))
    (tmp_path / "s.yaml").write_text("width: [8, 16]\nlr: {low: 0.001, high: 0.01, log: true}\n")
    assert read_space(tmp_path / "s.json", "cvae")["width"] == Choice((8, 16))
    pytest.importorskip("yaml")
    assert read_space(tmp_path / "s.yaml", "cvae")["lr"] == Float(1e-3, 1e-2, True)
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="expected a mapping"):
        read_mapping(tmp_path / "list.json")


# ---------------------------------------------------------------------------- studies
def test_tune_in_process_writes_results_that_train_reads(tmp_path, capsys):
    config = TuneConfig(**SMALL, pruner="hyperband")
    result = tune(config, tmp_path, parse_space(SPACE, "cvae"), progress=False)
    assert result.trials == 4 and set(result.best_config) == {"width", "lr", "weight_decay"}
    assert {"trials", "best", "history", "importances"} <= set(result.files)
    best = json.loads((tmp_path / "best.json").read_text())
    assert best["model"] == "cvae" and best["preset"] == "tiny"
    assert best.items() >= trial_budget(config).items()
    study = _study(tmp_path, config.study_name)
    assert study.user_attrs["tune_config"]["seed"] == 0
    assert all(t.user_attrs["seed"] == 0 for t in study.trials)
    curve = search_curve(study)
    assert [b for *_, b in curve] == sorted((b for *_, b in curve), reverse=True)
    assert curve[-1][2] == pytest.approx(result.best_value) == min(v for _, v, _ in curve)
    assert curve[-1][0] == 3 and result.curve == [b for *_, b in curve]
    rows = (tmp_path / "trials.csv").read_text().splitlines()
    assert len(rows) == 5 and rows[0].startswith("number,state,value,seconds,seed")
    argv = ["train", "--config", str(tmp_path / "best.json"), "--stream", "planar:1,1,1",
            "--targets", "planar", "--out", str(tmp_path / "run")]  # fmt: skip
    assert main(argv) == 0
    assert "cvae (tiny preset" in capsys.readouterr().err


@pytest.mark.parametrize("sampler", ["gp", "random"])
def test_other_samplers(tmp_path, sampler):
    config = TuneConfig(**{**SMALL, "trials": 3, "sampler": sampler, "pruner": "none"})
    result = tune(config, tmp_path, parse_space(SPACE, "cvae"), progress=False)
    assert result.states == {"COMPLETE": 3} and len(result.curve) == 3
    again = tune(config, tmp_path, parse_space(SPACE, "cvae"), resume=True, progress=False)
    assert again.trials == 3 and again.trial_seconds == pytest.approx(result.trial_seconds)
    assert result.trial_seconds > 0
    seeds = {t.user_attrs["sampler_seed"] for t in _study(tmp_path, config.study_name).trials}
    assert seeds == {0}


def test_build_trial_and_best_config(tmp_path):
    config = TuneConfig(**SMALL)
    from torchik.learn import make_dataset
    from torchik.robot import load_robot

    spec = make_dataset(load_robot("planar", link_lengths=[1, 1, 1]), 8).spec
    model, train_config = build_trial(config, {"width": 8, "lr": 3e-3}, spec)
    assert model.config.width == 8 and train_config.lr == 3e-3 and train_config.steps == 30
    with pytest.raises(ValueError):
        build_trial(config, {"width": 0}, spec)
    study = optuna.create_study()
    assert best_config(study, config) is None and search_curve(study) == []
    study.add_trial(optuna.trial.create_trial(params={"lr": 1e-3}, value=0.5,
        distributions={"lr": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)},
        user_attrs={"config": {"lr": 1e-3, "width": 8}}))  # fmt: skip
    assert best_config(study, config)["width"] == 8
    assert write_trials_csv(study, tmp_path / "t.csv").read_text().count("\n") == 2
    assert "best" in write_results(study, tmp_path / "r", config)
    assert counted_trials(study) == 1


def test_two_worker_processes_share_one_study(tmp_path):
    config = TuneConfig(**{**SMALL, "trials": 6})
    result = tune(config, tmp_path, parse_space(SPACE, "cvae"), jobs=2, progress=False)
    study = _study(tmp_path, config.study_name)
    numbers = [t.number for t in study.trials]
    assert result.trials == 6 and sorted(numbers) == list(range(len(numbers)))
    assert len(numbers) == 6  # neither lost nor duplicated: each worker ran its share
    states = {t.state for t in study.trials}
    assert states <= {optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED}


def test_killed_study_resumes(tmp_path):
    """SIGKILL the whole ``torchik tune --jobs 2`` (workers too) once a trial has finished;
    ``--resume`` keeps every finished trial and runs the interrupted ones again."""
    out = tmp_path / "run"
    argv = [*CLI, "--steps", "400", "--trials", "8", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "torchik", *argv, "--jobs", "2"],
                            start_new_session=True, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    name = "cvae_planar1-1-1_position_error"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            if _finished_trials(out, name) >= 2:
                break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = {t.number: t.value for t in _study(out, name).trials if t.value is not None}
    assert before, "no trial finished before the kill"
    assert main([*argv, "--resume"]) == 0
    study = _study(out, name)
    after = {t.number: t for t in study.trials}
    assert all(after[n].value == v for n, v in before.items())  # nothing finished was lost
    assert counted_trials(study) == 8
    interrupted = [t for t in study.trials if t.user_attrs.get("interrupted")]
    retried = sorted(t.user_attrs["retry_of"] for t in study.trials if "retry_of" in t.user_attrs)
    assert retried == sorted(t.number for t in interrupted)
    assert all(t.state == optuna.trial.TrialState.FAIL for t in interrupted)


def test_ctrl_c_trial_runs_again_on_resume(tmp_path, monkeypatch):
    import torchik.train.loop

    real, calls = torchik.train.loop.train, []

    def interrupted_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    config, space = TuneConfig(**SMALL), parse_space(SPACE, "cvae")
    monkeypatch.setattr(torchik.train.loop, "train", interrupted_second)
    with pytest.raises(KeyboardInterrupt):
        tune(config, tmp_path, space, progress=False)
    monkeypatch.setattr(torchik.train.loop, "train", real)
    assert tune(config, tmp_path, space, resume=True, progress=False).trials == 4
    study = _study(tmp_path, config.study_name)
    (stopped,) = [t for t in study.trials if t.user_attrs.get("interrupted")]
    (retry,) = [t for t in study.trials if t.user_attrs.get("retry_of") == stopped.number]
    assert retry.params == stopped.params and retry.value is not None


def test_posterior_objective(tmp_path):
    """The posterior protocol's metrics as the objective, on a 2-joint arm."""
    posterior = {"objective": "posterior_mismatch", "posterior_targets": 4, "posterior_samples": 50}
    config = TuneConfig(**{**SMALL, "robot": "planar:1,1", "trials": 2, **posterior})
    problem = make_problem(config)
    assert problem.reference.shape == (4, 50, 2) and problem.targets.shape == (4, 2)
    model, _ = build_trial(config, {}, problem.train_set.spec)
    metrics = posterior_metrics(model, problem, config)
    assert metrics["posterior_mismatch"] > 0 and metrics["resimulation"] > 0
    study = optuna.create_study()
    study.optimize(make_objective(config, parse_space(SPACE, "cvae"), problem), n_trials=1)
    trial = study.trials[0]
    assert trial.value == trial.user_attrs["posterior_mismatch"] > 0
    with pytest.raises(ValueError, match="needs a planar arm"):
        TuneConfig(**{**SMALL, "robot": "snake2", "objective": "resimulation"})
    assert problem_robot("snake2")[1:] == (None, None)
    with pytest.raises(ValueError, match="unknown robot|snake9"):
        tune(TuneConfig(**{**SMALL, "robot": "snake9"}), tmp_path / "x", progress=False)
    assert not (tmp_path / "x").exists()  # refused before a study was made


# ---------------------------------------------------------------------------- bad input
def _error(capsys, argv) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    return err


def test_bad_input_one_line_each_and_nothing_lost(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*CLI, "--trials", "2", "--out", str(out)]) == 0
    journal = (out / JOURNAL).read_bytes()
    capsys.readouterr()
    (tmp_path / "bad.json").write_text(json.dumps({"widht": [8]}))
    bad = [*CLI, "--space", str(tmp_path / "bad.json")]
    assert "unknown setting 'widht'" in _error(capsys, bad)
    (tmp_path / "empty.json").write_text(json.dumps({"lr": {"low": 0.1, "high": 0.01}}))
    assert "empty range" in _error(capsys, [*CLI, "--space", str(tmp_path / "empty.json")])
    bad_url = "sqlite:///" + str(tmp_path / "no" / "such" / "dir" / "x.db")
    assert "cannot reach the storage" in _error(capsys, [*CLI, "--storage", bad_url])
    assert "--resume" in _error(capsys, [*CLI, "--trials", "3", "--out", str(out)])
    name = "cvae_planar1-1-1_position_error"
    other = [*CLI, "--out", str(out), "--resume", "--objective", "resimulation", "--study", name]
    assert "already exists with objective" in _error(capsys, other)
    assert (out / JOURNAL).read_bytes() == journal  # the existing study is untouched
    assert counted_trials(_study(out, name)) == 2


def test_train_config_file_errors(tmp_path, capsys):
    stream = ["--stream", "planar:1,1,1", "--targets", "planar", "--out", str(tmp_path / "r")]
    (tmp_path / "c.json").write_text(json.dumps({"model": "cvae", "widht": 8}))
    assert "unknown --config key 'widht'" in _error(
        capsys, ["train", "--config", str(tmp_path / "c.json"), *stream]
    )
    (tmp_path / "c.json").write_text(json.dumps({"model": "cvae", "width": 8}))
    wrong = ["train", "--model", "mdn", "--config", str(tmp_path / "c.json"), *stream]
    assert "differs from the --config file's model" in _error(capsys, wrong)
    (tmp_path / "n.json").write_text(json.dumps({"width": 8}))
    assert "--model is required" in _error(
        capsys, ["train", "--config", str(tmp_path / "n.json"), *stream]
    )


def test_shared_storage_refuses_other_objective(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    config = TuneConfig(**{**SMALL, "trials": 1})
    tune(config, tmp_path / "a", parse_space(SPACE, "cvae"), url, "s", progress=False)
    storage = optuna.storages.RDBStorage(url)
    other = TuneConfig(**{**SMALL, "objective": "resimulation"})
    with pytest.raises(ValueError, match="already exists with objective"):
        open_study(other, storage, "s", True)
    assert main([*CLI, "--storage", url, "--study", "s", "--trials", "2", "--out",
                 str(tmp_path / "b")]) == 0  # fmt: skip
    assert counted_trials(optuna.load_study(study_name="s", storage=url)) == 2  # joined
    (tmp_path / "other.json").write_text(json.dumps({"width": [4, 8]}))
    capsys.readouterr()
    joined = [*CLI, "--storage", url, "--study", "s", "--out", str(tmp_path / "b")]
    assert "searches another space" in _error(
        capsys, [*joined, "--space", str(tmp_path / "other.json")]
    )


# ---------------------------------------------------------------------------- the baseline trial
def test_baseline_params_moves_the_defaults_into_the_space():
    config = TuneConfig(**{**SMALL, "preset": None, "family": "iknet"})
    model_config, train_config = trial_configs(config, {}, 7)
    assert model_config.primary_width == 64 and train_config.weight_decay == 0.0
    params = baseline_params(config, default_space("iknet"), 7)
    # 64 is not a choice: the closest (128); weight decay 0 clamped to the range's low end
    assert params == {"primary_width": 128, "components": 10, "lr": 1e-3, "weight_decay": 1e-6}
    space = {"width": Int(300, 400), "activation": Choice(("silu", "tanh")), "depth": 3,
             "latent": Choice((2, 4, 8)), "beta": Float(0.5, 1.0)}  # fmt: skip
    params = baseline_params(TuneConfig(**SMALL), space, 3)  # the tiny cvae: width 16
    assert params == {"width": 300, "latent": trial_configs(TuneConfig(**SMALL), {}, 3)[0].latent,
                      "beta": 0.5}  # fmt: skip
    assert "activation" not in params and "depth" not in params  # no such choice; fixed


def test_first_trial_is_the_starting_config(tmp_path, capsys):
    config = TuneConfig(**{**SMALL, "trials": 2})
    space = parse_space(SPACE, "cvae")
    result = tune(config, tmp_path / "a", space, progress=False)
    first = min(_study(tmp_path / "a", config.study_name).trials, key=lambda t: t.number)
    assert first.user_attrs["baseline"] and first.params == baseline_params(config, space, 3)
    assert result.baseline_value == first.value
    assert "baseline" in (tmp_path / "a" / "trials.csv").read_text().splitlines()[1]
    off = tune(TuneConfig(**{**SMALL, "trials": 1, "baseline": False}), tmp_path / "b", space,
               progress=False)  # fmt: skip
    assert off.baseline_value != off.baseline_value  # nan: no baseline trial
    assert main([*CLI, "--trials", "1", "--out", str(tmp_path / "c")]) == 0
    assert "the starting config (the baseline trial) gave" in capsys.readouterr().out
    assert main([*CLI, "--trials", "1", "--no-baseline", "--out", str(tmp_path / "d")]) == 0
    assert "starting config" not in capsys.readouterr().out


def test_a_diverging_trial_fails_in_one_line_and_the_study_goes_on(
    tmp_path, capsys, caplog, monkeypatch
):
    import torchik.train.loop as loop

    real, calls = loop.train, []

    def train(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # the second trial diverges
            raise FloatingPointError("the loss became nan between steps 1 and 10: lower lr")
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "train", train)
    config = TuneConfig(**{**SMALL, "trials": 3, "pruner": "none"})
    result = tune(config, tmp_path, parse_space(SPACE, "cvae"), progress=False)
    err = capsys.readouterr().err
    assert "torchik: tune: trial 1 failed: the loss became nan between steps 1 and 10" in err
    optuna_lines = [r.getMessage() for r in caplog.records if r.name.startswith("optuna")]
    assert not [line for line in optuna_lines if line.startswith("Trial 1 failed")], optuna_lines
    assert result.states == {"COMPLETE": 2, "FAIL": 1}
    trials = _study(tmp_path, config.study_name).trials
    assert all(t.user_attrs["beat"] > 0 for t in trials)  # each recorded its worker alive
    trial = trials[1]
    assert trial.state.name == "FAIL" and trial.user_attrs["error"].startswith("the loss became")


def test_a_running_trial_of_another_machine_is_abandoned_only_once_its_beat_is_stale():
    import socket
    from types import SimpleNamespace

    from torchik.tune.study import STALE_S, _abandoned

    def trial(**attrs):
        return SimpleNamespace(user_attrs=attrs)

    now, here = 1e9, socket.gethostname()
    elsewhere = "another-machine-" + here + ":4242"
    assert not _abandoned(trial(worker=elsewhere, beat=now - 5.0), now)  # alive there
    assert _abandoned(trial(worker=elsewhere, beat=now - STALE_S - 1.0), now)
    assert _abandoned(trial(worker=elsewhere), now)  # an older torchik's: no beat
    assert _abandoned(trial(), now)  # no worker at all
    assert _abandoned(trial(worker=f"{here}:{os.getpid()}", beat=now), now)  # this process
    assert not _abandoned(trial(worker=f"{here}:{os.getppid()}", beat=0.0), now)  # alive here


def test_a_trial_beats_while_it_runs_and_stops_after():
    import threading

    from torchik.tune.study import _beating

    beats: list[float] = []

    class Trial:
        def set_user_attr(self, key, value):
            assert key == "beat"
            beats.append(value)

    with _beating(Trial(), interval=0.01):
        time.sleep(0.1)
    count = len(beats)
    time.sleep(0.05)
    assert count >= 3 and len(beats) == count and beats == sorted(beats)
    assert not [t for t in threading.enumerate() if t.name == "torchik-tune-beat"]

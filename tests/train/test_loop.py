"""The training loop: learning, determinism, logs, checkpoints, early stopping, kill/resume."""

from __future__ import annotations

import csv
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import torchik.train.loop as train_module
from tests.paths import REPO
from torchik import load_robot, models
from torchik.learn import make_dataset
from torchik.models import MLP, MLPConfig
from torchik.train import TrainConfig, finetune, lr_factor, train

QUIET = {"progress": False, "batch_size": 64, "seed": 3}


def _problem(n: int = 1200):
    """A tiny, fully seeded problem: snake2 positions, an MLP of width 32."""
    robot = load_robot("snake2", dtype=torch.float64)
    train_set, val_set, _ = make_dataset(robot, n, seed=0).split((0.8, 0.1, 0.1))
    torch.manual_seed(0)
    return robot, MLP(train_set.spec, MLPConfig(depth=2, width=32)), train_set, val_set


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_lr_schedule():
    config = TrainConfig(steps=110, warmup_steps=10, min_lr_ratio=0.1)
    assert lr_factor(0, config) == pytest.approx(0.1)
    assert lr_factor(9, config) == pytest.approx(1.0)
    assert lr_factor(60, config) == pytest.approx(0.55)
    assert lr_factor(110, config) == pytest.approx(0.1)


def test_training_learns_and_is_deterministic():
    config = TrainConfig(steps=150, lr=3e-3, log_every=50, val_every=75, **QUIET)
    robot, model, train_set, val_set = _problem()
    before = train_module.validate(model, val_set, robot)["val_position_error"]
    first = train(model, train_set, val_set, config, robot=robot)
    # snake2 positions have two solutions (elbow up/down): a regressor only halves the error
    assert first.best_val < 0.75 * before and first.steps == 150 and not first.stopped_early
    again = train(_problem()[1], train_set, val_set, config, robot=robot)
    assert [r["loss"] for r in first.history] == [r["loss"] for r in again.history]
    assert first.best_val == again.best_val


def test_out_dir_log_and_checkpoints(tmp_path):
    robot, model, train_set, val_set = _problem()
    config = TrainConfig(steps=40, log_every=10, val_every=20, checkpoint_every=20, **QUIET)
    result = train(model, train_set, val_set, config, out_dir=tmp_path, robot=robot)
    rows = _read(tmp_path / "log.csv")
    assert [int(r["step"]) for r in rows] == [10, 20, 30, 40]
    assert rows[0]["val_position_error"] == "nan" and float(rows[1]["val_position_error"]) > 0
    for name in ("checkpoint.pt", "best.pt"):
        loaded = models.load(tmp_path / name)  # training checkpoints load as models too
        assert isinstance(loaded, MLP) and not loaded.training
    target = val_set.target[:5]
    best = models.load(tmp_path / "best.pt")
    assert torch.equal(best.sample(target, 2), result.model.sample(target, 2))  # restore_best


def test_early_stopping(monkeypatch):
    values = iter([0.5, 0.4, 0.45, 0.41, 0.42, 0.3])

    def fake_validate(*args, **kwargs):
        return {"val_loss": next(values)}

    monkeypatch.setattr(train_module, "validate", fake_validate)
    _, model, train_set, val_set = _problem()
    config = TrainConfig(steps=100, val_every=5, patience=3, **QUIET)
    result = train(model, train_set, val_set, config)
    assert result.stopped_early and result.steps == 25
    assert result.best_val == 0.4 and result.best_step == 10


def test_refuses_mismatches(tmp_path):
    robot, model, train_set, _ = _problem()
    train(model, train_set, config=TrainConfig(steps=2, **QUIET), out_dir=tmp_path)
    other = MLP(train_set.spec, MLPConfig(depth=1, width=8))
    with pytest.raises(ValueError, match="config"):
        train(other, train_set, config=TrainConfig(steps=4, **QUIET), out_dir=tmp_path, resume=True)
    with pytest.raises(ValueError, match=r"^the model's spec differs from the data's: robot "
                                         r"'snake4' vs 'snake2'; .*dof 4 vs 2"):  # fmt: skip
        train(MLP(make_dataset(load_robot("snake4"), 100).spec), train_set)
    with pytest.raises(ValueError, match="the model is for robot 'snake2', link .*: name"):
        train(model, train_set, robot=load_robot("snake4"))
    # two robots of one name: the message says what differs (it said 'not the robot')
    arm = load_robot("planar", link_lengths=[0.5, 0.3])
    arm_model = MLP(make_dataset(arm, 100).spec, MLPConfig(depth=1, width=8))
    with pytest.raises(ValueError, match=r"not for this one: the geometry"):
        train(arm_model, make_dataset(arm, 100), robot=load_robot("planar", link_lengths=[1, 1]))
    with pytest.raises(ValueError, match="batch_size"):
        train(model, train_set.subset(slice(0, 10)), config=TrainConfig(**QUIET))
    # arguments of the wrong kind, one line each (None for the model: AttributeError before)
    kinds = [
        ({"model": None}, "model must be an IKModel, got NoneType"),
        ({"config": {"steps": 2}}, "config must be a TrainConfig, got dict"),
        ({"val_set": {"steps": 2}}, "val_set must be an IKDataset or None"),
        ({"robot": "panda"}, "robot must be a Robot or None, got str"),
    ]
    for kwargs, match in kinds:
        with pytest.raises(TypeError, match=match):
            train(**{"model": model, "train_set": train_set, **kwargs})
    with pytest.raises(TypeError, match="model must be an IKModel, got NoneType"):
        finetune(None, train_set)
    with pytest.raises(TypeError, match="q must be a torch.Tensor, got NoneType"):
        model.set_normalization(None, train_set.target)
    with pytest.raises(ValueError, match="N >= 1"):  # the means of no row would be NaN
        model.set_normalization(train_set.q[:0], train_set.target[:0])


# ---------------------------------------------------------------------------- kill and resume
RESUME = TrainConfig(
    steps=30, log_every=1, val_every=5, checkpoint_every=10, warmup_steps=5, **QUIET
)
HANG_AT = 14  # the child stops here, four steps after its checkpoint at step 10


def _run(out_dir: Path, resume: bool = False, callback=None):
    robot, model, train_set, val_set = _problem()
    return train(model, train_set, val_set, RESUME, out_dir, resume, robot, callback)


def child(out_dir: str) -> None:
    """Run in a subprocess: train, and hang after step HANG_AT until the parent kills it."""
    torch.set_num_threads(1)

    def hang(step, row):
        if step == HANG_AT:
            (Path(out_dir) / "hanging").write_text(str(os.getpid()))
            time.sleep(300)

    _run(Path(out_dir), callback=hang)


def test_resume_after_sigkill_continues_exactly(tmp_path):
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    code = f"import sys; sys.path.insert(0, {str(REPO)!r}); "
    code += f"from tests.train import test_loop; test_loop.child({str(killed)!r})"
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 120
        while not (killed / "hanging").exists():
            assert proc.poll() is None, "the training subprocess died before hanging"
            assert time.monotonic() < deadline, "the training subprocess never got to its step"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert len(_read(killed / "log.csv")) == HANG_AT  # rows past the checkpoint exist
    resumed = _run(killed, resume=True)  # one thread, as in the child: bitwise-equal sums
    uninterrupted = _run(clean)
    rows, expected = _read(killed / "log.csv"), _read(clean / "log.csv")
    assert [r["step"] for r in rows] == [str(s) for s in range(1, 31)]
    for key in ("loss", "lr", "val_loss", "val_position_error"):
        assert [r[key] for r in rows] == [r[key] for r in expected], key
    assert resumed.best_val == uninterrupted.best_val and resumed.steps == 30
    assert not math.isnan(float(rows[-1]["val_position_error"]))
    state, ref = resumed.model.state_dict(), uninterrupted.model.state_dict()
    assert all(torch.equal(state[k], ref[k]) for k in ref)


def test_a_run_says_its_first_step_and_that_it_resumed_and_leaves_no_empty_log(tmp_path, capsys):
    from torchik.train import TrainingInterrupted

    data = make_dataset(load_robot("snake2"), 400, seed=0)
    config = TrainConfig(steps=20, log_every=100, checkpoint_every=2, warmup_steps=2,
                         batch_size=64, seed=3)  # fmt: skip

    def interrupt(step, metrics):
        if step == 3:  # Ctrl-C before the first log row
            os.kill(os.getpid(), signal.SIGINT)

    def model():
        torch.manual_seed(0)
        return MLP(data.spec, MLPConfig(depth=1, width=8))

    with pytest.raises(TrainingInterrupted):
        train(model(), data, config=config, out_dir=tmp_path, callback=interrupt)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("training mlp") and lines[1].startswith("step       1/20")
    assert not (tmp_path / "log.csv").exists()  # was a header and no row: plot failed on it
    train(model(), data, config=config, out_dir=tmp_path, resume=True)
    err = capsys.readouterr().err
    assert err.startswith(f"resumed at step 3 of 20 from {tmp_path / 'checkpoint.pt'}\n")
    assert [row["step"] for row in _read(tmp_path / "log.csv")] == ["20"]


# ---------------------------------------------------------------------------- resumed settings
def _rates_used(monkeypatch) -> list[tuple[float, float]]:
    """Record ``(lr, weight_decay)`` of the optimizer as each step runs."""
    from torchik.train.engine import Stepper

    used, step = [], Stepper.eager_step

    def recording(self, q, target):
        group = self.optimizer.param_groups[0]
        used.append((float(group["lr"]), group["weight_decay"]))
        return step(self, q, target)

    monkeypatch.setattr(Stepper, "eager_step", recording)
    return used


def test_a_resumed_run_takes_the_new_lr_and_weight_decay(tmp_path, monkeypatch):
    _, model, train_set, _ = _problem()
    first = TrainConfig(steps=4, lr=1e-3, warmup_steps=2, min_lr_ratio=0.1, **QUIET)
    train(model, train_set, config=first, out_dir=tmp_path)
    used = _rates_used(monkeypatch)
    new = TrainConfig(steps=8, lr=5e-2, weight_decay=0.1, warmup_steps=2, min_lr_ratio=0.1,
                      **QUIET)  # fmt: skip
    train(_problem()[1], train_set, config=new, out_dir=tmp_path, resume=True)
    expected = [(5e-2 * lr_factor(step, new), 0.1) for step in range(4, 8)]
    assert used == expected  # the schedule of the new lr from the step reached
    ckpt = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    group = ckpt["training"]["optimizer"]["param_groups"][0]
    assert group["initial_lr"] == 5e-2 and group["weight_decay"] == 0.1
    assert group["lr"] == pytest.approx(5e-2 * lr_factor(8, new))


def test_a_run_resumed_with_another_batch_size_seed_or_rows_is_refused_in_one_line(tmp_path):
    """They passed silently: the resumed run drew other batches, or batches of other rows (a
    data set of the same shape, or the same rows in another order: another split)."""
    _, model, train_set, _ = _problem()
    train(model, train_set, config=TrainConfig(steps=2, **QUIET), out_dir=tmp_path)
    order = torch.randperm(len(train_set), generator=torch.Generator().manual_seed(0))
    other = make_dataset(load_robot("snake2", dtype=torch.float64), len(train_set), seed=9)
    rows = r"on other rows \(SHA-256 [0-9a-f]{12}\), this data set's are [0-9a-f]{12}"
    cases = [
        (train_set, {"batch_size": 32}, "with batch_size 64, this run has 32"),
        (train_set, {"seed": 4}, "with seed 3, this run has 4"),
        (other, {}, rows),
        (train_set.subset(order), {}, rows),
    ]
    for data, change, why in cases:
        config = TrainConfig(**{**QUIET, "steps": 4, **change})
        with pytest.raises(ValueError, match=f"^cannot resume from .*: it was trained {why}$"):
            train(_problem()[1], data, config=config, out_dir=tmp_path, resume=True)
    same = train_set.subset(slice(None))  # the same rows in other tensors
    config = TrainConfig(steps=4, **QUIET)
    assert train(_problem()[1], same, config=config, out_dir=tmp_path, resume=True).steps == 4


def test_a_checkpoint_without_the_hash_of_its_rows_resumes_unchecked(tmp_path):
    """Checkpoints of format 4 had no hash of the rows (and a state may lack its config):
    they resume as they did, those checks skipped."""
    from torchik.models.checkpoint import save_checkpoint

    _, model, train_set, _ = _problem()
    train(model, train_set, config=TrainConfig(steps=2, **QUIET), out_dir=tmp_path)
    ckpt = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert ckpt["training"]["format_version"] == 5
    del ckpt["training"]["batches"]["sha256"], ckpt["training"]["config"]
    ckpt["training"]["format_version"] = 4
    save_checkpoint(ckpt, tmp_path / "checkpoint.pt")
    other = make_dataset(load_robot("snake2", dtype=torch.float64), len(train_set), seed=9)
    config = TrainConfig(steps=4, **{**QUIET, "seed": 4})
    assert train(_problem()[1], other, config=config, out_dir=tmp_path, resume=True).steps == 4


def test_a_run_that_stopped_early_stays_stopped_on_resume(tmp_path, monkeypatch):
    values = iter([0.5, 0.4, 0.45, 0.41, 0.42, 0.3, 0.2])
    monkeypatch.setattr(train_module, "validate", lambda *a, **k: {"val_loss": next(values)})
    _, model, train_set, val_set = _problem()
    config = TrainConfig(steps=100, val_every=5, patience=3, **QUIET)
    first = train(model, train_set, val_set, config, out_dir=tmp_path)
    assert first.stopped_early and first.steps == 25
    saved = (tmp_path / "checkpoint.pt").read_bytes()
    for _ in range(2):  # trained one more step on every resume
        again = train(_problem()[1], train_set, val_set, config, out_dir=tmp_path, resume=True)
        assert again.stopped_early and again.steps == 25 and again.best_step == first.best_step
        state, ref = again.model.state_dict(), first.model.state_dict()
        assert all(torch.equal(state[k], ref[k]) for k in ref)
        assert (tmp_path / "checkpoint.pt").read_bytes() == saved
    assert [r["step"] for r in again.history] == [r["step"] for r in first.history]


def test_a_checkpoint_without_the_early_stop_resumes(tmp_path):
    """Checkpoints of format 3 had no ``stopped_early``: they resume as they did."""
    from torchik.models.checkpoint import save_checkpoint

    _, model, train_set, _ = _problem()
    train(model, train_set, config=TrainConfig(steps=2, **QUIET), out_dir=tmp_path)
    ckpt = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    del ckpt["training"]["stopped_early"]
    ckpt["training"]["format_version"] = 3
    save_checkpoint(ckpt, tmp_path / "checkpoint.pt")
    config = TrainConfig(steps=4, **QUIET)
    result = train(_problem()[1], train_set, config=config, out_dir=tmp_path, resume=True)
    assert result.steps == 4 and not result.stopped_early


def test_each_log_row_has_the_lr_its_step_ran_at(tmp_path, monkeypatch):
    """Rows had the next step's rate: 8.5e-4 for step 1 at 1e-3, 0.0 for the last."""
    used = _rates_used(monkeypatch)
    _, model, train_set, _ = _problem()
    config = TrainConfig(steps=4, lr=1e-3, warmup_steps=0, log_every=1, **QUIET)
    result = train(model, train_set, config=config, out_dir=tmp_path)
    rates = [lr for lr, _ in used]
    assert rates[0] == 1e-3 and rates[-1] > 0
    assert [row["lr"] for row in result.history] == rates
    assert [float(row["lr"]) for row in _read(tmp_path / "log.csv")] == rates

"""The training engine: streams, exact resume mid-stream, bf16, EMA, compilation, micro-batches,
Ctrl-C, non-finite losses, settings and progress."""

from __future__ import annotations

import copy
import csv
import io
import math
import os
import signal
from pathlib import Path

import pytest
import torch

from torchik import load_robot
from torchik.learn import FKStream, make_dataset
from torchik.models import MLP, MLPConfig, families
from torchik.train import (
    EMA,
    Progress,
    TrainConfig,
    TrainingInterrupted,
    read_log,
    train,
    write_log,
)
from torchik.train.engine import Rows, Stepper, resolve_precision
from torchik.train.progress import LOG_COLUMNS

QUIET = {"progress": False, "batch_size": 64, "seed": 3, "stats_rows": 2000}


def _stream(seed: int = 0) -> FKStream:
    return FKStream(load_robot("snake2", dtype=torch.float64), seed=seed)


def _mlp(spec) -> MLP:
    torch.manual_seed(0)
    return MLP(spec, MLPConfig(depth=2, width=32))


def _log(path: Path) -> list[dict[str, str]]:
    with (path / "log.csv").open(newline="") as f:
        return list(csv.DictReader(f))


# ---------------------------------------------------------------------------- the stream
def test_stream_is_deterministic_resumable_and_exact():
    a, b = _stream(5), _stream(5)
    assert all(torch.equal(x, y) for x, y in zip(a.next(100), b.next(100), strict=True))
    state = a.state_dict()
    first = a.next(50)
    a.load_state_dict(state)
    assert torch.equal(a.next(50)[0], first[0]) and a.drawn == 150
    assert not torch.equal(_stream(6).next(100)[0], b.next(100)[0])  # seeds differ
    # on the CPU the stream's first batch is make_dataset's data set of the same seed
    robot = load_robot("panda", dtype=torch.float64)
    q, target = FKStream(robot, seed=2).next(300)
    data = make_dataset(robot, 300, seed=2)
    assert torch.equal(q, data.q) and torch.equal(target, data.target)
    fk = robot.link_positions(q.double(), "panda_hand")
    assert torch.allclose(target.double(), fk, atol=1e-6)


def test_stream_draw_leaves_the_stream_and_checks_arguments():
    stream = _stream(1)
    held_out = stream.draw(500, seed=9)
    assert len(held_out) == 500 and stream.drawn == 0
    assert torch.equal(held_out.q, stream.draw(500, seed=9).q)
    normal = FKStream(load_robot("snake2"), sampler="normal", std=0.1, seed=0)
    assert normal.next(1000)[0].std() < 0.15
    with pytest.raises(ValueError, match="sampler"):
        FKStream(load_robot("snake2"), sampler="banana")
    with pytest.raises(ValueError, match="std"):
        FKStream(load_robot("snake2"), sampler="normal", std=float("nan"))
    with pytest.raises(ValueError, match="batch_size"):
        stream.next(0)
    with pytest.raises(ValueError, match="seed"):
        stream.load_state_dict(_stream(2).state_dict())
    assert "snake2" in repr(stream)


def test_training_on_a_stream_learns_and_resumes_exactly(tmp_path):
    config = TrainConfig(steps=24, log_every=2, checkpoint_every=8, warmup_steps=4, **QUIET)
    val = _stream().draw(200, seed=123)

    def stop_at_13(step, metrics):
        if step == 13:
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        train(_mlp(val.spec), _stream(), val, config, tmp_path / "a", callback=stop_at_13)
    resumed = train(_mlp(val.spec), _stream(), val, config, tmp_path / "a", resume=True)
    clean = train(_mlp(val.spec), _stream(), val, config, tmp_path / "b")
    assert [r["loss"] for r in _log(tmp_path / "a")] == [r["loss"] for r in _log(tmp_path / "b")]
    state, ref = resumed.model.state_dict(), clean.model.state_dict()
    assert all(torch.equal(state[k], ref[k]) for k in ref)
    assert clean.history[-1]["loss"] < clean.history[0]["loss"]


def test_training_on_a_stream_leaves_the_callers_stream_where_it_was():
    """On the CPU train drew from the caller's stream (elsewhere from a copy restarted at its
    seed): the same call twice trained two models, and the stream moved."""
    stream, config = _stream(4), TrainConfig(steps=3, **QUIET)
    stream.next(10)  # as on another device, the training starts at the stream's seed
    first, second, fresh = (train(_mlp(stream.spec), s, config=config).model.state_dict()
                            for s in (stream, stream, _stream(4)))  # fmt: skip
    assert stream.drawn == 10
    assert all(torch.equal(first[k], second[k]) and torch.equal(first[k], fresh[k]) for k in first)


def test_resuming_on_the_other_kind_of_training_data_is_refused_in_one_line(tmp_path):
    """A stream's checkpoint resumed on a data set said 'damaged training state'."""
    data = make_dataset(load_robot("snake2", dtype=torch.float64), 500, seed=0)
    stream, fixed = r"a stream \(FKStream\)", r"a fixed data set \(IKDataset\)"
    cases = [(data, _stream(), fixed, stream), (_stream(), data, stream, fixed)]
    for saved, passed, trained, other in cases:
        out = tmp_path / type(saved).__name__
        train(_mlp(data.spec), saved, config=TrainConfig(steps=2, **QUIET), out_dir=out)
        message = f"^cannot resume from .*: it was trained on {trained}, and this call passes "
        with pytest.raises(ValueError, match=f"{message}{other}$"):
            train(_mlp(data.spec), passed, config=TrainConfig(steps=4, **QUIET), out_dir=out,
                  resume=True)  # fmt: skip


def test_resuming_with_a_stream_of_another_seed_or_processes_is_not_called_damage(tmp_path):
    """Another run's settings, not a damaged file: the message says which."""
    from torchik.train import distributed

    data = make_dataset(load_robot("snake2", dtype=torch.float64), 500, seed=0)
    train(_mlp(data.spec), _stream(), config=TrainConfig(steps=2, **QUIET), out_dir=tmp_path)
    other = _stream(seed=5)
    with pytest.raises(ValueError, match=r"^cannot resume from .*: it was trained on a stream "
                                         r"of seed 0, this one has 5$"):  # fmt: skip
        train(_mlp(data.spec), other, config=TrainConfig(steps=4, **QUIET), out_dir=tmp_path,
              resume=True)  # fmt: skip
    two = {"ranks": [{"stream": {}}, {"stream": {}}]}
    assert distributed.other_world(two) == (
        "the checkpoint was written by 2 process(es), this run has 1: resume with --nproc 2"
    )
    assert distributed.other_world({"stream": {}}) is None
    assert distributed.first_rank(two) == {"stream": {}} and distributed.first_rank(5) == 5


def test_resuming_on_a_stream_of_another_sampler_std_or_fk_dtype_is_refused_in_one_line(
    tmp_path,
):
    """Only the seed was compared: a run resumed with another std or sampler trained on other
    pairs, silently. A checkpoint of format 4 (the seed alone) resumes unchecked."""
    from torchik.models.checkpoint import save_checkpoint

    snake = load_robot("snake2", dtype=torch.float64)
    normal = FKStream(snake, sampler="normal", std=0.2)
    train(_mlp(normal.spec), normal, config=TrainConfig(steps=2, **QUIET), out_dir=tmp_path)
    cases = [
        (FKStream(snake, sampler="normal", std=0.5), "std 0.2, this one has 0.5"),
        (FKStream(snake, sampler="normal", std=[0.2, 0.3]), r"std 0.2, this one has \[0.2, 0.3\]"),
        (FKStream(snake), "sampler 'normal', this one has 'uniform'"),
        (FKStream(snake, sampler="normal", fk_dtype=torch.float32),
         "fk_dtype 'torch.float64', this one has 'torch.float32'"),
    ]  # fmt: skip
    config = TrainConfig(steps=4, **QUIET)
    for stream, why in cases:
        with pytest.raises(ValueError, match=f"^cannot resume from .*: it was trained on a "
                                             f"stream of {why}$"):  # fmt: skip
            train(_mlp(normal.spec), stream, config=config, out_dir=tmp_path, resume=True)
    same = FKStream(snake, sampler="normal", std=[0.2, 0.2])  # the same std, given per joint
    assert train(_mlp(normal.spec), same, config=config, out_dir=tmp_path, resume=True).steps == 4
    ckpt = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    for key in ("sampler", "std", "fk_dtype"):
        del ckpt["training"]["batches"]["stream"][key]
    ckpt["training"]["format_version"] = 4
    save_checkpoint(ckpt, tmp_path / "checkpoint.pt")
    config = TrainConfig(steps=6, **QUIET)
    assert train(_mlp(normal.spec), cases[0][0], config=config, out_dir=tmp_path,
                 resume=True).steps == 6  # fmt: skip


# ---------------------------------------------------------------------------- the step
def _batch():
    data = make_dataset(load_robot("snake2", dtype=torch.float64), 256, seed=0)
    return data, data.q, data.target


@pytest.mark.parametrize("family", ["mlp", "iknet", "mdn", "rnn", "cvae", "inn", "flow"])
def test_bf16_autocast_runs_on_the_cpu_and_matches_fp32_loosely(family):
    family = families()[family]  # panda: limited joints, whose densities need float32
    data = make_dataset(load_robot("panda", dtype=torch.float64), 256, seed=0)
    q, target = data.q, data.target
    losses = {}
    for precision in ("fp32", "bf16"):
        torch.manual_seed(0)
        model = family(data.spec, family.tiny_config())
        model.set_normalization(q, target)
        stepper = Stepper(model, TrainConfig(precision=precision), torch.device("cpu"))
        assert stepper.precision == precision
        losses[precision] = [float(stepper.step(q, target)) for _ in range(5)]
    assert all(math.isfinite(v) for v in losses["bf16"])
    for a, b in zip(losses["fp32"], losses["bf16"], strict=True):
        assert abs(a - b) <= 0.05 * abs(a) + 0.05


def test_auto_precision_is_fp32_off_cuda():
    model = MLP(_batch()[0].spec)
    assert resolve_precision("auto", torch.device("cpu"), model) == "fp32"
    assert resolve_precision("bf16", torch.device("cpu"), model) == "bf16"
    with pytest.raises(ValueError, match="precision"):
        resolve_precision("fp8", torch.device("cpu"), model)


def test_ema_equals_a_direct_computation():
    data, q, target = _batch()
    model = _mlp(data.spec)
    ema = EMA(model, decay=0.9)
    expected = {k: v.clone() for k, v in model.state_dict().items() if v.is_floating_point()}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(1, 6):
        optimizer.zero_grad()
        model.loss(q, target).backward()
        optimizer.step()
        ema.update(model, step)
        d = min(0.9, (1 + step) / (10 + step))
        for k in expected:
            expected[k] = d * expected[k] + (1 - d) * model.state_dict()[k]
    averaged = ema.averaged_state(model)
    assert all(torch.allclose(averaged[k], expected[k], atol=1e-12) for k in expected)
    live = copy.deepcopy(model.state_dict())
    with ema.applied(model):
        assert torch.equal(model.state_dict()["net.0.weight"], averaged["net.0.weight"])
    assert all(torch.equal(model.state_dict()[k], live[k]) for k in live)
    with pytest.raises(ValueError, match="ema_decay"):
        EMA(model, 1.0)


def test_training_with_ema_returns_and_saves_the_average(tmp_path):
    data = make_dataset(load_robot("snake2"), 600, seed=0)
    config = TrainConfig(steps=20, ema_decay=0.95, val_every=0, restore_best=False, **QUIET)
    result = train(_mlp(data.spec), data, config=config, out_dir=tmp_path)
    from torchik.models import load

    saved = load(tmp_path / "checkpoint.pt").state_dict()
    assert all(torch.equal(saved[k], v) for k, v in result.model.state_dict().items())
    raw = torch.load(tmp_path / "checkpoint.pt", weights_only=True)["training"]["model_state"]
    assert not torch.equal(raw["net.0.weight"], saved["net.0.weight"])  # raw weights differ


def test_compiled_step_gives_the_eager_loss():
    data, q, target = _batch()
    losses = {}
    for compiled in (False, True):
        model = _mlp(data.spec)
        model.set_normalization(q, target)
        stepper = Stepper(model, TrainConfig(compile=compiled), torch.device("cpu"))
        losses[compiled] = [float(stepper.step(q, target)) for _ in range(3)]
    assert losses[True] == pytest.approx(losses[False], rel=1e-4)


def test_micro_batches_accumulate_the_full_batch_gradient():
    data, q, target = _batch()
    models = {}
    for k in (1, 4):
        model = _mlp(data.spec)
        model.set_normalization(q, target)
        stepper = Stepper(model, TrainConfig(micro_batches=k, grad_clip=None), torch.device("cpu"))
        models[k] = (float(stepper.step(q, target)), model)
    assert models[4][0] == pytest.approx(models[1][0], rel=1e-6)
    one, four = models[1][1].state_dict(), models[4][1].state_dict()
    assert all(torch.allclose(one[k], four[k], atol=1e-6) for k in one)


# ---------------------------------------------------------------------------- the loop
@pytest.mark.parametrize(("sig", "at"), [(signal.SIGINT, 7), (signal.SIGTERM, 4)])
def test_ctrl_c_or_sigterm_saves_a_checkpoint_and_the_run_resumes_exactly(tmp_path, sig, at):
    data = make_dataset(load_robot("snake2"), 800, seed=0)
    config = TrainConfig(steps=20, log_every=1, checkpoint_every=100, warmup_steps=2, **QUIET)

    def interrupt(step, metrics):
        if step == at:
            os.kill(os.getpid(), sig)

    before = signal.getsignal(sig)  # SIG_IGN where the runner ignores Ctrl-C
    with pytest.raises(TrainingInterrupted) as info:
        train(_mlp(data.spec), data, config=config, out_dir=tmp_path / "a", callback=interrupt)
    assert info.value.step == at and info.value.checkpoint == tmp_path / "a" / "checkpoint.pt"
    assert isinstance(info.value, KeyboardInterrupt)
    assert signal.getsignal(sig) is before  # train put the caller's handler back
    train(_mlp(data.spec), data, config=config, out_dir=tmp_path / "a", resume=True)
    train(_mlp(data.spec), data, config=config, out_dir=tmp_path / "b")
    assert [r["loss"] for r in _log(tmp_path / "a")] == [r["loss"] for r in _log(tmp_path / "b")]


class _Exploding(MLP):
    family = "mlp"

    def loss(self, q, target):
        return super().loss(q, target) * float("nan")


def test_a_non_finite_loss_is_caught_at_the_next_log_step():
    data = make_dataset(load_robot("snake2"), 500, seed=0)
    torch.manual_seed(0)
    model = _Exploding(data.spec, MLPConfig(depth=1, width=8))
    with pytest.raises(FloatingPointError, match="between steps 1 and 5"):
        train(model, data, config=TrainConfig(steps=20, log_every=5, **QUIET))


@pytest.mark.parametrize(
    ("field", "value"),
    [("grad_clip", -1.0), ("grad_clip", math.nan), ("lr", math.inf), ("steps", 0),
     ("steps", 2.5), ("ema_decay", 1.0), ("precision", "fp16"), ("micro_batches", 0),
     ("weight_decay", -1e-3), ("patience", 0), ("seed", -1), ("compile", "yes")],
)  # fmt: skip
def test_settings_are_validated(field, value):
    with pytest.raises((ValueError, TypeError), match=field):
        TrainConfig(**{field: value})


def test_progress_lines_show_samples_per_second_and_a_title():
    out = io.StringIO()
    progress = Progress(100, start=0, rows_per_step=512, title="training x", stream=out)
    progress.advance(10)
    progress.report({"loss": "1.5"})
    progress.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "training x"
    assert lines[1].startswith("step      10/100")  # the first steps done: a line at once
    assert "samples/s" in lines[2] and "loss 1.5" in lines[2] and "ETA" in lines[2]
    quiet = io.StringIO()
    progress = Progress(100, rows_per_step=8, stream=quiet, heartbeat=0.0)
    progress.advance(1)  # no report asked for: the heartbeat prints one anyway
    assert quiet.getvalue().startswith("step       1/100") and "samples/s" in quiet.getvalue()
    bar = io.StringIO()
    progress = Progress(100, rows_per_step=512, title="t", stream=bar, bar=True)
    progress.advance(50)
    progress.report({"loss": "2"})
    progress.close()
    assert "50/100" in bar.getvalue()


def test_log_round_trips_exactly_and_cuts_at_a_step(tmp_path):
    path = tmp_path / "log.csv"
    assert read_log(path) == []  # no file yet: no rows
    empty = dict.fromkeys(LOG_COLUMNS, math.nan)
    rows = [empty | {"step": s, "loss": 1 / 3 / s} for s in (1, 2, 3)]
    write_log(path, rows[:2])
    write_log(path, rows[2:], append=True)
    back = read_log(path)
    assert [r["step"] for r in back] == [1, 2, 3] and back[2]["loss"] == rows[2]["loss"]
    assert math.isnan(back[0]["val_loss"])  # an empty cell reads as NaN
    assert [r["step"] for r in read_log(path, upto=2)] == [1, 2]


def test_rows_checkpoint_the_epoch_order_in_a_few_bytes_and_resume_it_exactly():
    data = make_dataset(load_robot("snake2", dtype=torch.float64), 1000, seed=0)
    like = torch.zeros((), dtype=torch.float64)
    rows = Rows(data, 64, seed=1, like=like)
    for _ in range(20):  # into the second epoch (15 batches each)
        rows.next()
    state = rows.state_dict()
    assert "order" not in state
    assert sum(v.numel() * v.element_size() for v in state.values() if torch.is_tensor(v)) < 10_000
    old = {"generator": rows.generator.get_state(), "order": rows.order.clone(),
           "cursor": rows.cursor}  # the format of checkpoints before 2026-11-26  # fmt: skip
    resumed, from_old = Rows(data, 64, seed=7, like=like), Rows(data, 64, seed=8, like=like)
    resumed.load_state_dict(copy.deepcopy(state))
    from_old.load_state_dict(old)
    assert "order" in from_old.state_dict()  # saved as it came until its next epoch
    for _ in range(20):  # to the third epoch
        q, target = rows.next()
        for other in (resumed, from_old):
            torch.testing.assert_close(other.next(), (q, target), rtol=0, atol=0)
    assert "order" not in from_old.state_dict()


def _mutated(training: dict, where: str, value) -> dict:
    state = copy.deepcopy(training)
    if where.startswith("lr"):
        state["optimizer"]["param_groups"][0]["lr"] = value
    elif where == "beta":
        state["optimizer"]["param_groups"][0]["betas"] = (0.9, value)
    elif where == "base_lrs":
        state["scheduler"]["base_lrs"] = [value]
    else:
        state[where] = value
    return state


@pytest.mark.parametrize(
    "where,value,message",
    [
        ("step", -5, "step must be >= 0, got -5"),
        ("step", 2.5, "step must be an int"),
        ("lr", -1e-3, r"the optimizer's lr must be in \[0.0, inf\], got -0.001"),
        ("lr_nan", math.nan, "the optimizer's lr must be finite, got nan"),
        ("beta", 1.0, "the optimizer's betas must be < 1"),
        ("base_lrs", -1.0, "the scheduler's base_lrs must be in"),
        ("best_val", math.nan, "best_val must be finite, got nan"),
        ("best_step", 99, "best_step must be <= 2, got 99"),
        ("elapsed", -1.0, r"elapsed must be in \[0.0, inf\]"),
        ("window", [1.0], "window must be \\[loss sum, steps\\]"),
    ],
)
def test_a_mutated_training_state_is_refused_on_resume(tmp_path, where, value, message):
    """Such files resumed silently (issue 36): they are checked as new settings are."""
    from torchik.models.checkpoint import save_checkpoint
    from torchik.train.engine import check_training_state
    from torchik.train.loop import CHECKPOINT

    data = make_dataset(load_robot("snake2"), 64, seed=0)
    config = TrainConfig(steps=2, batch_size=16, progress=False, val_every=0, checkpoint_every=1)
    train(MLP(data.spec, MLPConfig(width=8, depth=1)), data, config=config, out_dir=tmp_path)
    ckpt = torch.load(tmp_path / CHECKPOINT, weights_only=True)
    check_training_state(ckpt["training"])  # the file as written passes
    bad = {**ckpt, "training": _mutated(ckpt["training"], where, value)}
    save_checkpoint(bad, tmp_path / CHECKPOINT)  # correctly hashed
    with pytest.raises(ValueError, match=f"cannot resume from .*damaged training state: {message}"):
        model = MLP(data.spec, MLPConfig(width=8, depth=1))
        train(model, data, config=config, out_dir=tmp_path, resume=True)


def test_check_batch_size_is_what_training_refuses():
    from torchik.train.engine import check_batch_size

    check_batch_size(16, 16, 2)
    check_batch_size(1 << 20)  # a stream fills any batch
    with pytest.raises(ValueError, match="^the training set has 8 rows, fewer than batch_size=16$"):
        check_batch_size(16, 8)
    with pytest.raises(ValueError, match="^batch_size=15 must be a multiple of the 2 processes$"):
        check_batch_size(15, None, 2)

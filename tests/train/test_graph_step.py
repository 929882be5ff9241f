"""The training step captured whole in one CUDA graph (``TrainConfig.cuda_graph``): on the CPU
with a stand-in graph that calls the step again on replay (the buffers, the warm-up, the
learning rate as a tensor, checkpoints, the fallback), on a GPU with real graphs."""

from __future__ import annotations

import warnings

import pytest
import torch

from tests.train.test_engine import QUIET, _log, _mlp
from torchik import load_robot
from torchik.learn import make_dataset
from torchik.models import families
from torchik.train import TrainConfig, engine, train
from torchik.train.engine import GRAPH_WARMUP, GraphStep, Stepper


class _Rerun:
    """A stand-in for :class:`~torchik.train.engine.CUDAGraphOf`: capturing records the step
    without running it (as a capture does), a replay runs it again on the same buffers."""

    captured = 0

    def __init__(self) -> None:
        self.fn, self.out = None, None

    def capture(self, fn) -> None:
        type(self).captured += 1
        self.fn = fn

    def replay(self) -> None:
        assert self.fn is not None
        self.out = self.fn()


class _Refused(_Rerun):
    def capture(self, fn) -> None:
        raise RuntimeError("operation not permitted when stream is capturing")


@pytest.fixture
def stand_in(monkeypatch):
    """``cuda_graph`` captures on the CPU too, in :class:`_Rerun` graphs."""
    monkeypatch.setattr(engine, "_captures", lambda device: True)
    monkeypatch.setattr(GraphStep, "graph_type", _Rerun)
    _Rerun.captured = 0
    return monkeypatch


def _data():
    return make_dataset(load_robot("snake2", dtype=torch.float64), 600, seed=0)


def test_captured_steps_equal_eager_ones_and_follow_the_schedule(stand_in):
    data = _data()
    config = TrainConfig(steps=12, log_every=1, warmup_steps=5, **QUIET)
    runs = {}
    for graph in (False, True):
        cfg = TrainConfig(**{**vars(config), "cuda_graph": graph})
        runs[graph] = train(_mlp(data.spec), data, config=cfg)
    eager, captured = runs[False], runs[True]
    # the same steps, but for the rate's rounding: a float32 tensor once captured
    loss = [[r["loss"] for r in run.history] for run in (eager, captured)]
    assert loss[1] == pytest.approx(loss[0], rel=1e-6)
    lr = [[r["lr"] for r in run.history] for run in (eager, captured)]
    assert lr[1][:GRAPH_WARMUP] == lr[0][:GRAPH_WARMUP]  # floats until the capture
    assert lr[1] == pytest.approx(lr[0], rel=1e-7)
    assert len(set(lr[0])) > 6  # warm-up and cosine: the rate moves
    a, b = captured.model.state_dict(), eager.model.state_dict()
    assert all(torch.allclose(a[k], b[k], rtol=1e-6, atol=1e-9) for k in b)
    assert _Rerun.captured == 1


def test_the_graph_reads_its_buffers_and_a_tensor_learning_rate(stand_in):
    data = _data()
    model = _mlp(data.spec)
    model.set_normalization(data.q, data.target)
    stepper = Stepper(model, TrainConfig(cuda_graph=True), torch.device("cpu"))
    assert isinstance(stepper.graph, GraphStep)
    batches = [(data.q[i : i + 64], data.target[i : i + 64]) for i in range(0, 384, 64)]
    for i, (q, target) in enumerate(batches):
        stepper.step(q, target)
        assert (stepper.graph.graph is not None) == (i >= GRAPH_WARMUP)
    group = stepper.optimizer.param_groups[0]
    assert isinstance(group["lr"], torch.Tensor) and group["lr"].dim() == 0
    inputs = stepper.graph.inputs
    assert torch.equal(inputs[0], batches[-1][0]) and inputs[0] is not batches[-1][0]
    # a batch of another shape steps eagerly, leaving the buffers alone
    stepper.step(data.q[:32], data.target[:32])
    assert inputs[0].shape[0] == 64 and torch.equal(inputs[0], batches[-1][0])
    rate = group["lr"]
    group["lr"] = 0.25  # a schedule that assigns a float: copied into the graph's tensor
    stepper.step(*batches[0])
    assert group["lr"] is rate and float(rate) == 0.25


def test_a_checkpoint_of_a_captured_run_holds_floats_and_resumes_exactly(stand_in, tmp_path):
    data = _data()
    config = TrainConfig(steps=16, log_every=2, checkpoint_every=6, warmup_steps=4,
                         cuda_graph=True, **QUIET)  # fmt: skip

    def stop_at_9(step, metrics):
        if step == 9:
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        train(_mlp(data.spec), data, config=config, out_dir=tmp_path / "a", callback=stop_at_9)
    state = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=False)["training"]
    assert all(type(g["lr"]) is float for g in state["optimizer"]["param_groups"])
    assert all(type(lr) is float for lr in state["scheduler"]["_last_lr"])
    train(_mlp(data.spec), data, config=config, out_dir=tmp_path / "a", resume=True)
    eager = TrainConfig(**{**vars(config), "cuda_graph": False})
    train(_mlp(data.spec), data, config=eager, out_dir=tmp_path / "b")
    assert [r["loss"] for r in _log(tmp_path / "a")] == [r["loss"] for r in _log(tmp_path / "b")]


def test_a_refused_capture_warns_once_and_the_steps_stay_eager(stand_in):
    stand_in.setattr(GraphStep, "graph_type", _Refused)
    data = _data()
    config = TrainConfig(steps=8, log_every=1, **QUIET)
    graph = TrainConfig(**{**vars(config), "cuda_graph": True})
    with pytest.warns(RuntimeWarning, match="stay eager: CUDA graph capture failed") as caught:
        captured = train(_mlp(data.spec), data, config=graph)
    assert len([w for w in caught if w.category is RuntimeWarning]) == 1
    eager = train(_mlp(data.spec), data, config=config)
    assert [r["loss"] for r in captured.history] == [r["loss"] for r in eager.history]


def test_cuda_graph_is_the_eager_step_off_cuda_and_refuses_reduce_overhead():
    stepper = Stepper(_mlp(_data().spec), TrainConfig(cuda_graph=True), torch.device("cpu"))
    assert stepper.graph is None
    with pytest.raises(ValueError, match="cuda_graph captures the whole step"):
        TrainConfig(cuda_graph=True, compile=True, compile_mode="reduce-overhead")
    with pytest.raises(TypeError, match="cuda_graph"):
        TrainConfig(cuda_graph="yes")


# ---------------------------------------------------------------------------- on a GPU
@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="captures a CUDA graph: needs CUDA")
@pytest.mark.parametrize(
    ("family", "rel"), [("mlp", 1e-4), ("mdn", 1e-4), ("iknet", 1e-4), ("fm", 0.2)]
)
def test_a_captured_step_on_cuda_trains_as_the_eager_one(family, rel):
    """Every family named here captures (no warning) and its losses follow the eager run's:
    the same kernels, the schedule applied. fm draws noise in its loss, which a graph may draw
    otherwise than the eager steps: its losses only come close; the others' weights too."""
    robot = load_robot("panda")
    data = make_dataset(robot, 4096, targets="pose" if family == "fm" else "position", seed=0)
    cls = families()[family]
    config = TrainConfig(steps=12, log_every=1, warmup_steps=4, device="cuda", precision="fp32",
                         val_every=0, checkpoint_every=0, batch_size=256,
                         progress=False)  # fmt: skip
    runs = {}
    for graph in (False, True):
        torch.manual_seed(0)
        model = cls(data.spec)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cfg = TrainConfig(**{**vars(config), "cuda_graph": graph})
            runs[graph] = train(model, data, config=cfg)
        failed = [str(w.message) for w in caught if "capture failed" in str(w.message)]
        assert not failed, failed
    losses = [[r["loss"] for r in runs[g].history] for g in (False, True)]
    assert losses[1] == pytest.approx(losses[0], rel=rel, abs=1e-6)
    if rel < 1e-3:
        a, b = runs[True].model.state_dict(), runs[False].model.state_dict()
        assert all(torch.allclose(a[k], b[k], rtol=1e-3, atol=1e-5) for k in b)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="captures a CUDA graph: needs CUDA")
def test_a_replayed_step_does_not_wait_for_the_device():
    data = make_dataset(load_robot("panda"), 2048, targets="position", seed=0)
    model = _mlp(data.spec).cuda()
    model.set_normalization(data.q.cuda(), data.target.cuda())
    stepper = Stepper(model, TrainConfig(cuda_graph=True), torch.device("cuda"))
    q, target = data.q[:256].cuda(), data.target[:256].cuda()
    for _ in range(GRAPH_WARMUP + 1):
        stepper.step(q, target)
    assert stepper.graph is not None and stepper.graph.graph is not None
    torch.cuda.set_sync_debug_mode("error")
    try:
        loss = stepper.step(q, target)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(loss)


@pytest.mark.parametrize("family", ["mlp", "mdn", "rnn", "cvae", "inn", "flow", "fm", "iknet"])
def test_no_familys_loss_and_backward_reads_the_device(family):
    """What a CUDA graph cannot hold: a value read back to the host. No family's training
    loss or its backward reads one (on the CPU the only read of a step is the CPU AdamW's
    step counter, which fused CUDA AdamW keeps on the device)."""
    from tests.ik.recorder import Recorder

    robot = load_robot("panda")
    data = make_dataset(robot, 256, targets="pose" if family in ("fm", "flow") else "position",
                        seed=0)  # fmt: skip
    cls = families()[family]
    torch.manual_seed(0)
    model = cls(data.spec, cls.tiny_config())
    model.set_normalization(data.q, data.target)
    model.loss(data.q[:32], data.target[:32]).backward()  # lazy set-up done
    with Recorder() as seen:
        model.loss(data.q[:32], data.target[:32]).backward()
    assert seen.ops and seen.reads() == []

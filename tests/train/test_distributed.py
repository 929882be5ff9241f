"""Training on two processes (torch.distributed, gloo on the CPU) gives the one-process run.

With a fixed data set, the two ranks take the odd and even rows of each global batch and DDP
averages their gradients: the global batch, the loss and the weights are those of one process up
to the order of float additions. A run stopped and resumed on two processes continues exactly.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from torchik import load_robot
from torchik.learn import FKStream, make_dataset
from torchik.models import MLP, MLPConfig
from torchik.train import TrainConfig, distributed, train

CONFIG = {"lr": 3e-3, "log_every": 5, "val_every": 10, "progress": False, "batch_size": 64}


def _problem():
    robot = load_robot("snake2", dtype=torch.float64)
    train_set, val_set = make_dataset(robot, 640, seed=0).split((0.9, 0.1))
    torch.manual_seed(0)
    return robot, MLP(train_set.spec, MLPConfig(depth=2, width=32)), train_set, val_set


def _run(out: str | None, steps: int, resume: bool = False, stream: bool = False):
    robot, model, train_set, val_set = _problem()
    source = FKStream(robot, seed=0) if stream else train_set
    config = TrainConfig(steps=steps, **CONFIG)
    return train(model, source, val_set, config, out, resume=resume, robot=robot)


def _worker(rank: int, rendezvous: str, jobs: list, results: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=2)
    try:
        for i, (out, steps, resume, stream) in enumerate(jobs):
            result = _run(out, steps, resume, stream)
            state = {k: v.clone() for k, v in result.model.state_dict().items()}
            torch.save({"history": result.history, "state": state}, f"{results}.{i}.{rank}")
        dist.barrier()  # both ranks done before either leaves
    finally:
        dist.destroy_process_group()


def _curve(history: list[dict]) -> list[tuple[float, str]]:
    return [(row["loss"], repr(row["val_position_error"])) for row in history]


def _two_processes(tmp_path: Path, jobs: list) -> list[list[dict]]:
    results = str(tmp_path / "result")
    mp.spawn(_worker, args=(str(tmp_path / "rendezvous"), jobs, results), nprocs=2, join=True)
    return [[torch.load(f"{results}.{i}.{r}") for r in (0, 1)] for i in range(len(jobs))]


def test_two_processes_equal_one_and_resume_exactly(tmp_path):
    torch.set_num_threads(1)
    one = _run(None, 20)
    jobs = [
        (None, 20, False, False),  # the one-process run, on two
        (str(tmp_path / "run"), 10, False, False),  # stopped at step 10 ...
        (str(tmp_path / "run"), 20, True, False),  # ... and resumed to 20
        (None, 8, False, True),  # a stream: each rank its own shard
    ]
    two, first_half, resumed, stream = _two_processes(tmp_path, jobs)
    for rank in (0, 1):  # the ranks agree with each other, bit for bit
        for key, value in two[0]["state"].items():
            assert torch.equal(value, two[rank]["state"][key]), key
    losses = [row["loss"] for row in two[0]["history"]]
    assert losses == pytest.approx([row["loss"] for row in one.history], rel=1e-5)
    for key, value in one.model.state_dict().items():
        torch.testing.assert_close(two[0]["state"][key], value, atol=1e-5, rtol=1e-4)
    assert _curve(resumed[0]["history"]) == _curve(two[0]["history"])  # continued exactly
    for key, value in two[0]["state"].items():
        assert torch.equal(resumed[0]["state"][key], value), key
    ckpt = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)
    assert len(ckpt["training"]["batches"]["ranks"]) == 2
    assert stream[0]["history"][-1]["loss"] == stream[1]["history"][-1]["loss"]  # mean of both


def test_one_process_cannot_resume_a_two_process_checkpoint():
    saved = {"ranks": [{"a": 1}, {"a": 2}]}
    with pytest.raises(ValueError, match="resume with --nproc 2"):
        distributed.pick(saved)


def test_cli_nproc_two(tmp_path):
    data = tmp_path / "data.pt"
    make_dataset(load_robot("snake2"), 400, seed=0).save(data)
    out = tmp_path / "run"
    command = [sys.executable, "-m", "torchik", "train", "--data", str(data), "--model", "mlp",
               "--preset", "tiny", "--steps", "6", "--config", "batch_size=32", "log_every=3",
               "--out", str(out), "--nproc", "2"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (out / "model.pt").is_file() and (out / "checkpoint.pt").is_file()
    assert "2 processes" in done.stderr
    bad = subprocess.run(command[:-2] + ["--nproc", "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr

"""torchik.tune.ray: the same objective under Ray Tune (Optuna search, ASHA) on a local Ray
with 2 CPUs. Runs where the ``ray`` extra is installed (``pip install torchik[ray]``)."""

from __future__ import annotations

import csv
import json

import pytest

pytest.importorskip("optuna", reason="the 'tune' extra (optuna) is not installed")
ray = pytest.importorskip("ray.tune", reason="the 'ray' extra (ray[tune]) is not installed")

from torchik.cli import main  # noqa: E402
from torchik.tune import (  # noqa: E402
    TuneConfig,
    parse_space,
    tune_ray,
)
from torchik.tune.objective import baseline_params  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    import ray as ray_core

    ray_core.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray_core.shutdown()


def test_tune_ray_local(tmp_path, local_ray):
    config = TuneConfig(
        "cvae", "planar:1,1,1", trials=3, steps=30, val_every=10, batch_size=64,
        train_size=300, val_size=50, preset="tiny",
    )  # fmt: skip
    space = parse_space({"width": [8, 16], "depth": None, "latent": None, "beta": 0.02}, "cvae")
    result = tune_ray(config, tmp_path, space, progress=False)
    assert result.trials == 3 and result.states.get("COMPLETE", 0) >= 1
    best = json.loads((tmp_path / "best.json").read_text())
    assert best["model"] == "cvae" and best["beta"] == 0.02 and best["width"] in (8, 16)
    assert result.best_value == min(result.curve)
    # one trial is the starting config (the tiny cvae, moved into the space)
    first = baseline_params(config, space, 3)
    with (tmp_path / "trials.csv").open() as f:
        configs = [json.loads(row["config"]) for row in csv.DictReader(f)]
    assert any(c.items() >= first.items() for c in configs)
    argv = ["train", "--config", str(tmp_path / "best.json"), "--stream", "planar:1,1,1",
            "--targets", "planar", "--out", str(tmp_path / "run")]  # fmt: skip
    assert main(argv) == 0


def test_cli_ray_refuses_optuna_options(tmp_path, capsys):
    argv = ["tune", "--model", "cvae", "--backend", "ray", "--jobs", "2", "--out", str(tmp_path)]
    assert main(argv) == 1
    assert "--jobs" in capsys.readouterr().err

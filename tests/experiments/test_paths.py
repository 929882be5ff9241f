"""The path-following protocol (experiments.paths) at toy size on the two-joint snake."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import torchik
from experiments.paths import PathsSettings, paths_table
from experiments.small_iknet import train_small_iknet

SETTINGS = PathsSettings(sequences=2, paths=3, length=4, candidates=2, timed_sequences=0)


@pytest.fixture(scope="module")
def setup():
    robot = torchik.load_robot("snake2", dtype=torch.float64)
    data = torchik.make_dataset(torchik.load_robot("snake2"), 300, seed=0)
    return robot, train_small_iknet(data, steps=5).model.float().eval()


@pytest.fixture(scope="module")
def table(setup):
    threads = torch.get_num_threads()  # module fixtures run before conftest's one_thread
    torch.set_num_threads(1)  # and the timed table is compared number for number with this one
    yield paths_table(*setup, SETTINGS)
    torch.set_num_threads(threads)


def test_rows_and_bounds(table):
    assert len(table.rows) == 8 and table.title.startswith("snake2, 2 smooth sequences")
    r = SETTINGS.radius
    for row in table.rows:
        assert row["seconds"] is None  # nothing timed
        assert 0 <= row["best_error"] <= row["mean_error"] <= row["worst_error"]
        assert 0 <= row["under_5mm"] <= 1 and 0 <= row["within_r"] <= 1
    for method in ("IKNet windowed", "IKNet windowed + r-constrained LM refinement"):
        assert table.row(method)["max_jump"] <= r + 1e-6
        assert table.row(method)["within_r"] == 1 and table.row(method)["paths"] == 3
    assert table.row("sequential LM (from the true start)")["mean_error"] < 1e-4


def test_timing_replays_the_generators(setup, table):
    timed = paths_table(*setup, dataclasses.replace(SETTINGS, timed_sequences=1,
                                                    min_run_time=0.01))  # fmt: skip
    for a, b in zip(table.rows, timed.rows, strict=True):
        assert b["seconds"] > 0
        assert {k: v for k, v in a.items() if k != "seconds"} == {
            k: v for k, v in b.items() if k != "seconds"
        }

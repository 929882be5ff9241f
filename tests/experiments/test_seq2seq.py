"""The seq2seq representation protocol (experiments.seq2seq) at toy size."""

from __future__ import annotations

import pytest
import torch

import torchik
from experiments.seq2seq import (
    VARIANTS,
    Seq2SeqSettings,
    seq2seq_figure,
    seq2seq_notes,
    seq2seq_runs,
    seq2seq_tables,
    untrained_like,
)
from experiments.small_iknet import train_small_iknet

SETTINGS = Seq2SeqSettings(train_sequences=8, test_sequences=4, length=5, epochs=2, warmup=1,
                           d_model=8, heads=2, layers=1, feedforward=8, seeds=(0, 1))  # fmt: skip


@pytest.fixture(scope="module")
def setup():
    robot = torchik.load_robot("snake2", dtype=torch.float64)
    data = torchik.make_dataset(torchik.load_robot("snake2"), 300, seed=0)
    return robot, train_small_iknet(data, steps=3).model


@pytest.fixture(scope="module")
def runs(setup):
    return seq2seq_runs(*setup, SETTINGS)


def test_runs_per_variant_and_seed(runs):
    assert list(runs) == list(VARIANTS.values())
    for run in runs.values():
        assert len(run.histories) == 2 and len(run.seconds) == 2
        assert [row["epoch"] for row in run.histories[0]] == [0, 1, 2]
    raw, frozen, tuned = (runs[VARIANTS[k]] for k in ("raw", "frozen", "tuned"))
    assert raw.histories[0] != raw.histories[1]  # the seeds differ
    assert tuned.parameters > frozen.parameters > 0


def test_tables(runs):
    summary, position, joint = seq2seq_tables(runs, SETTINGS.epochs)
    assert [r["method"] for r in summary.rows] == list(runs)
    raw = summary.row(VARIANTS["raw"])
    assert raw["reach"] is not None and raw["reach"] <= 2 and raw["best"] <= raw["final"]
    assert [r["method"] for r in position.rows] == ["epoch 0", "epoch 1", "epoch 2"]
    mean, std = runs[VARIANTS["raw"]].curve("test_joint_error")
    assert joint.rows[-1]["v0"] == (mean[-1], std[-1])


def test_untrained_control_keeps_the_scaling(setup):
    iknet = setup[1]
    control = untrained_like(iknet)
    assert torch.equal(control.target_mean, iknet.target_mean)
    assert not torch.equal(next(control.parameters()), next(iknet.parameters()))


def test_notes_and_figure(setup, runs):
    notes = seq2seq_notes(setup[0], SETTINGS, "an IKNet")
    assert "an IKNet" in notes[0] and "0, 1" in notes[3]  # the embedding and the seeds
    assert len(seq2seq_figure(runs).axes) == 2


def test_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="unknown variants"):
        Seq2SeqSettings(variants=("raw", "embedding"))

"""The fine-tuning protocols (experiments.finetune) at toy size on the two-joint snake."""

from __future__ import annotations

import pytest
import torch

import torchik
from experiments.finetune import (
    SCALE,
    FinetuneSettings,
    family_table,
    finetune_table,
    largest_change,
    percentile,
)
from torchik.train import perturbed_robot

SETTINGS = FinetuneSettings(n_a=300, n_few=100, test=20, steps=3, finetune_steps=2,
                            family_arms=2, family_chunk=100)  # fmt: skip


@pytest.fixture(scope="module")
def snake():
    return torchik.load_robot("snake2", dtype=torch.float64)


def test_percentile_counts_larger_errors_and_half_the_ties():
    assert percentile(1.0, [2.0, 3.0]) == 100.0
    assert percentile(1.0, [0.5, 1.0, 2.0, 3.0]) == pytest.approx(62.5)
    assert percentile(5.0, [1.0]) == 0.0


def test_largest_change_is_within_the_scale(snake):
    arm = perturbed_robot(snake, SCALE, torch.Generator().manual_seed(0))
    assert 0 < largest_change(arm, snake) <= SCALE + 1e-12
    assert largest_change(snake, snake) == 0


def test_finetune_table_rows(snake):
    table = finetune_table(snake, SETTINGS, name="snake")
    assert table.title.startswith("(b) Few-shot fine-tuning: snake B")
    assert [r["data"] for r in table.rows] == ["300 of A", "+ 100 of B", "100 of B", "100 of B",
                                               "300 of B"]  # fmt: skip
    assert [r["steps"] for r in table.rows] == [3, 2, 2, 3, 3]
    for row in table.rows:
        assert 0 < row["median"] and 0 < row["mean"] < 2 and row["seconds"] > 0
    # the fine-tuned copy starts from A's weights: it differs from A's row
    assert table.rows[1]["mean"] != table.rows[0]["mean"]


def test_family_table_ranks_the_family_model(snake):
    table = family_table(snake, SETTINGS)
    arms, mean = table.rows[:-1], table.rows[-1]
    assert len(arms) == 2 and mean["method"] == "mean over arms"
    for row in arms:
        assert 1 <= row["rank"] <= row["of"] == 3 and len(row["errors"]) == 2
        assert row["percentile"] == percentile(row["family"], row["errors"])
    assert mean["family"] == pytest.approx(sum(r["family"] for r in arms) / 2)
    assert "mean percentile" in table.notes[0]

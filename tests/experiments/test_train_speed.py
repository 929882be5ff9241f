"""experiments.train_speed: the training-throughput table, its intro and speed key."""

from __future__ import annotations

from experiments.train_speed import FAMILIES, speed_intro, speed_key, speed_table


def test_speed_key_intro_and_table():
    assert speed_key("cpu", 1) == "samples_per_cpu_s"  # one CPU thread: CPU seconds
    assert speed_key("cpu", 2) == speed_key("cuda", 1) == "samples_per_s"
    intro = speed_intro(repeats=3, steps=30, warmup=5, baseline="abc")
    assert "3" in intro[0] and "`abc`" in intro[1]  # the repeats and the baseline revision
    table = speed_table("cuda", 1, 4096)
    table.add("before", family=FAMILIES[0], samples_per_s=2.0)
    table.add("eager", family=FAMILIES[0], samples_per_s=5.0, speedup=2.5)
    assert "batch 4096" in table.title and "| 2.50 |" in table.markdown()

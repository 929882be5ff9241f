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


def test_matmul_flops_count_a_steps_products_per_sample_and_clear_the_gradients():
    """A linear model of 3 -> 2: forward 2*3*2 per row, its backward twice that (the input's and
    the weight's gradients); the same per sample whatever the batch."""
    import torch

    from experiments.train_speed import matmul_flops

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(3, 2, dtype=torch.float64)

        def loss(self, q, target):
            return (self.layer(target) - q).square().mean()

    model = Model()
    for rows in (1, 8):
        q, target = (
            torch.zeros(rows, 2, dtype=torch.float64),
            torch.ones(rows, 3, dtype=torch.float64),
        )
        target.requires_grad_(True)  # so the input's gradient is formed as well
        assert matmul_flops(model, q, target) == 36.0
        assert all(p.grad is None for p in model.parameters())

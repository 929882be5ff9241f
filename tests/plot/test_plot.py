"""Every plot function returns a Figure with the expected axes and saves to PNG."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
import torch

import torchik
from tests.paths import REPO
from torchik import plot
from torchik.learn import ProblemSpec
from torchik.models import MLP, IKNet

pytest.importorskip("matplotlib")

RESULTS = REPO / "benchmarks" / "results"


def save(fig, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    fig.savefig(path, dpi=40)
    assert path.stat().st_size > 1000


def test_arm_samples_planar_and_spatial(tmp_path):
    g = torch.Generator().manual_seed(0)
    arm = torchik.PlanarArm(3, [0.5, 0.5, 1.0])
    q = torch.randn(10, 3, generator=g)
    fig = plot.plot_arm_samples(arm, q, arm(q[0]), probs=torch.rand(10, generator=g),
                                start=torch.zeros(3))  # fmt: skip
    assert len(fig.axes) == 1
    save(fig, tmp_path, "planar")
    robot = torchik.load_robot("panda")
    q = robot.random_configuration(5, g)
    fig = plot.plot_arm_samples(robot, q, torch.tensor([0.4, 0.0, 0.5]), start=robot.neutral())
    assert len(fig.axes) == 3
    save(fig, tmp_path, "panda")
    snake = torchik.load_robot("snake2")  # a Robot whose chain stays in z = 0: one view
    assert len(plot.plot_arm_samples(snake, snake.random_configuration(4, g), [0.1, 0.1]).axes) == 1


@pytest.mark.parametrize("family, robot, targets, axes", [
    (IKNet, "snake2", "planar", 2),  # exact marginals from log_prob
    (IKNet, "panda", "position", 7),  # histograms
    (MLP, "snake2", "planar", 2),  # no log_prob: histograms
])  # fmt: skip
def test_joint_densities(tmp_path, family, robot, targets, axes):
    torch.manual_seed(0)
    spec = ProblemSpec.from_robot(torchik.load_robot(robot), targets=targets)
    model = family(spec, family.tiny_config()).eval()
    target = torch.zeros(spec.target_dim)
    fig = plot.plot_joint_densities(model, target, grid=50, n=200)
    assert len(fig.axes) == axes
    save(fig, tmp_path, f"{family.family}_{robot}")


def test_joint_density_curves_integrate_to_one_in_bounded_memory():
    """A peaked density's trapezoid missed the mass (0.72 at grid 400 on snake2) and log_prob
    ran on the whole mesh at once (4.9 GB at grid 1500)."""
    import numpy as np

    from torchik.plot import arms

    spec = ProblemSpec.from_robot(torchik.load_robot("snake2"), targets="planar")
    model = IKNet(spec, IKNet.tiny_config()).eval()
    centre, std, calls = torch.tensor([0.1234, -0.5678]), 0.003, []

    def peaked(q, target):  # a normalised Gaussian narrower than the grid's spacing
        calls.append(len(q))
        z = (q - centre.to(q)) / std
        return -0.5 * z.square().sum(-1) - 2 * math.log(std * math.sqrt(2 * math.pi))

    model.log_prob = peaked
    fig = plot.plot_joint_densities(model, torch.zeros(spec.target_dim), n=10)
    assert max(calls) <= arms._GRID_CHUNK and sum(calls) == 400**2
    for ax in fig.axes:
        x, y = ax.lines[0].get_data()
        assert np.trapezoid(y, x) == pytest.approx(1.0, abs=1e-9)


def test_resimulation_and_posterior(tmp_path):
    g = torch.Generator().manual_seed(0)
    points = torch.randn(300, 2, generator=g) * 0.1
    fig = plot.plot_resimulation(points, [0.0, 0.0], ground_truth=[0.01, 0.02])
    assert len(fig.axes) == 1 and "no hull" not in fig.axes[0].get_title()
    save(fig, tmp_path, "resim")
    samples, truth = torch.randn(200, 3, generator=g), torch.randn(300, 3, generator=g)
    fig = plot.plot_posterior(samples, truth, labels=["h", "a", "b"])
    assert len(fig.axes) == 6  # lower triangle with the diagonal of a 3 x 3 grid
    save(fig, tmp_path, "posterior")
    assert len(plot.plot_posterior(torch.randn(50, 6), torch.randn(50, 6)).axes) == 6


def test_resimulation_draws_the_measured_hull_and_skips_nan_rows():
    pytest.importorskip("scipy")
    from torchik.learn import convex_hull_area

    points = torch.randn(200, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    points[7] = torch.nan  # an incomplete rejection sample
    fig = plot.plot_resimulation(points, [2.0, 0.0])  # a target off the cloud's centre
    assert "no hull" not in fig.axes[0].get_title()
    loop = fig.axes[0].patches[0].get_xy()
    x, y = loop[:, 0], loop[:, 1]
    drawn = 0.5 * abs((x[:-1] * y[1:] - x[1:] * y[:-1]).sum())  # shoelace
    assert drawn == pytest.approx(convex_hull_area(points).item(), rel=1e-9)


@pytest.mark.filterwarnings("error")  # min(x, nan) warned and dropped the truth's range
def test_posterior_leaves_nan_rows_out():
    g = torch.Generator().manual_seed(2)
    samples, truth = torch.randn(100, 2, generator=g), 3 + torch.randn(80, 2, generator=g)
    samples[5], truth[-20:] = torch.nan, torch.nan  # rejection_sample fills with NaN rows
    fig = plot.plot_posterior(samples, truth)  # numpy said 'range of [nan, nan] is not finite'
    lo, hi = fig.axes[0].patches[0].get_path().get_extents().intervalx
    finite = torch.cat([samples[:5], samples[6:], truth[:-20]])[:, 0]
    assert (lo, hi) == pytest.approx((finite.min().item(), finite.max().item()))
    assert len(plot.plot_posterior(torch.randn(20, 5), torch.full((20, 5), torch.nan)).axes) == 5


def test_training_curves_from_csv_and_dict(tmp_path):
    rows = [{"step": s, "loss": 1.0 / s, "lr": 1e-3, "val_loss": "",
             "val_position_error": 0.1 / s if s % 2 == 0 else "", "seconds": 0.5 * s}
            for s in range(1, 11)]  # fmt: skip
    path = tmp_path / "log.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    fig = plot.plot_training_curves(path)
    assert len(fig.axes) == 3
    save(fig, tmp_path, "training")
    log = {"step": [1, 2, 3], "loss": [3, 2, 1], "seconds": [1, 2, 3], "val_loss": [3, 2, 1]}
    assert len(plot.plot_training_curves(log).axes) == 3
    with pytest.raises(FileNotFoundError, match="no training log"):
        plot.plot_training_curves(tmp_path / "missing.csv")
    (tmp_path / "empty.csv").write_text("step,loss,seconds\n")
    with pytest.raises(ValueError, match="has no rows"):
        plot.plot_training_curves(tmp_path / "empty.csv")
    (tmp_path / "nostep.csv").write_text("loss,seconds\n1,2\n")
    with pytest.raises(ValueError, match="no 'step' column"):
        plot.plot_training_curves(tmp_path / "nostep.csv")


@pytest.mark.parametrize("name, tables", [("fk", 1), ("ik", 3)])  # ik: Panda, UR5, batch sizes
def test_benchmark(tmp_path, name, tables):
    path = RESULTS / f"{name}.json"
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    fig = plot.plot_benchmark(path)
    assert len(fig.axes) == tables
    save(fig, tmp_path, name)


def test_plots_refuse_bad_inputs_in_one_line():
    """What matplotlib or NumPy would meet (a meta tensor, a list of configurations, points
    of three coordinates, labels too few) is refused first, naming the argument."""
    arm, g = torchik.PlanarArm(2, [0.5, 0.5]), torch.Generator().manual_seed(0)
    q = torch.randn(6, 2, generator=g)
    points, target = torch.rand(20, 2, generator=g), [0.5, 0.5]
    spec = ProblemSpec.from_robot(torchik.load_robot("snake2"))
    model, size = MLP(spec, MLP.tiny_config()), spec.target_dim
    cases = [
        (lambda: plot.plot_arm_samples(arm, q.tolist(), target), TypeError, "q_samples must be"),
        (lambda: plot.plot_arm_samples(arm, q[:0], target), ValueError, "a configuration at"),
        (lambda: plot.plot_arm_samples(arm, q, [1.0]), ValueError, r"target must be \(2,\)"),
        (
            lambda: plot.plot_arm_samples(arm, q, target, probs=torch.rand(3)),
            ValueError,
            "probs must be 6 weights",
        ),
        (lambda: plot.plot_arm_samples(arm, q, target, start=q), ValueError, r"start must be"),
        (lambda: plot.plot_resimulation(points.to("meta"), target), ValueError, "points is on"),
        (
            lambda: plot.plot_resimulation(torch.rand(5, 3), target),
            ValueError,
            r"points must be \(n, 2\)",
        ),
        (lambda: plot.plot_resimulation(points, target, 0.0), ValueError, "hull_percentile"),
        (
            lambda: plot.plot_resimulation(points, target, ground_truth=[1, 2, 3]),
            ValueError,
            "ground_truth",
        ),
        (lambda: plot.plot_resimulation(points, "x"), TypeError, "target must be numbers"),
        (lambda: plot.plot_posterior(points, points, ["a"]), ValueError, "labels must be 2"),
        (
            lambda: plot.plot_posterior(points, torch.rand(4, 3)),
            ValueError,
            r"ground_truth_samples must be \(n, 2\)",
        ),
        (lambda: plot.plot_joint_densities(model, None), TypeError, "target must be a"),
        (lambda: plot.plot_joint_densities(model, torch.zeros(2, size)), ValueError, "one"),
        (
            lambda: plot.plot_joint_densities(model, torch.zeros(size), grid=10**9),
            ValueError,
            "grid",
        ),
        (
            lambda: plot.plot_joint_densities(model, torch.zeros(size), generator=3),
            TypeError,
            "generator",
        ),
    ]
    for call, error, match in cases:
        with pytest.raises(error, match=match) as caught:
            call()
        assert "\n" not in str(caught.value)

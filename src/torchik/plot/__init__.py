"""Plots (matplotlib, imported when a function is called): arms and their samples, densities,
posteriors, training curves, benchmark results.
"""

from torchik.plot.arms import (
    plot_arm_samples,
    plot_joint_densities,
    plot_posterior,
    plot_resimulation,
)
from torchik.plot.results import (
    plot_benchmark,
    plot_training_curves,
)

__all__ = [
    "plot_arm_samples",
    "plot_benchmark",
    "plot_joint_densities",
    "plot_posterior",
    "plot_resimulation",
    "plot_training_curves",
]

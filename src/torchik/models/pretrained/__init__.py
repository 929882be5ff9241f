"""Pretrained models bundled with torchik and the evaluation that measured them.

The checkpoints (``<name>.pt``) and their measured accuracy (``accuracy.json``) are written by
``scripts/train_pretrained.py``; load a model with :func:`load_pretrained`. A flow-matching
model's few-pass sampler fitted to it (``samplers.json``, ``scripts/fit_sampler.py``) comes
with :func:`fitted_sampler`.
The accuracy is that of *raw* samples (no refinement) on held-out targets: the targets of
joint configurations drawn uniformly within the limits with the seed :data:`TEST_SEED`, which
no training set uses.
"""

from torchik.models.pretrained.catalog import (
    PRETRAINED,
    TEST_SEED,
    evaluate,
    few_pass_samplers,
    fitted_sampler,
    fitted_samplers,
    held_out_targets,
    load_pretrained,
    measured_accuracy,
    trained_on,
    training_chunks,
    training_text,
)

__all__ = [
    "PRETRAINED",
    "TEST_SEED",
    "evaluate",
    "few_pass_samplers",
    "fitted_sampler",
    "fitted_samplers",
    "held_out_targets",
    "load_pretrained",
    "measured_accuracy",
    "trained_on",
    "training_chunks",
    "training_text",
]

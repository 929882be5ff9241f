"""The papers' evaluation tables as library functions: two lines on any robot and model.

Each table of ``benchmarks/results/`` is one function here, built on :mod:`torchik.learn.evaluate`
(the metrics) and :mod:`torchik.ik` (the solvers); ``benchmarks/`` only parses arguments, adds the
papers' anchors and writes the files.

- :func:`iknet_table` (:mod:`experiments.iknet`): the IKNet paper's table.
- :func:`posterior_table` (:mod:`experiments.posterior`): the cVAE-vs-INN report's table;
  the experiment around it (arms, training, tables) in :mod:`experiments.posterior_run`.
- :func:`numerical_ik_table` (:mod:`experiments.numerical`): numerical IK solvers.
- :func:`pose_table` (:mod:`experiments.pose`): full-pose learned IK (IKFlow's protocol);
  its goals and published figures in :mod:`experiments.pose_notes`.
- :func:`sampler_table` (:mod:`experiments.fm_samplers`): a flow-matching model's samplers
  with fewer passes against its own, on the held-out targets.
- :func:`paths_table` (:mod:`experiments.paths`): path following by windowed sampling,
  refinement and sequential IK (the Neural IK paper's Eq. 15).
- :func:`finetune_table` and :func:`family_table` (:mod:`experiments.finetune`): few-shot
  fine-tuning to a perturbed robot, one model for a family of robots (its Section 5.4).
- :func:`seq2seq_runs` and :func:`seq2seq_tables` (:mod:`experiments.seq2seq`): raw
  positions vs an IKNet embedding as a Transformer's input (its Section 5.5).
- :func:`train_small_iknet` and :func:`load_or_train_iknet`
  (:mod:`experiments.small_iknet`): the small IKNet those three run on, and its recipe.
- :func:`~experiments.recipes.run_recipes` (:mod:`experiments.recipes`): learned-IK
  recipes (the NSF flow, flow matching) trained and measured alike on Panda positions.
- :func:`~experiments.tune_run.run_arm` (:mod:`experiments.tune_run`): the report's
  hyperparameter search reproduced, defaults against the tuned best.
- :mod:`experiments.wholebody`: whole-body IK on the G1 (both hands; feet and hands on
  a floating base), torchik's rows and a driver for other libraries' solvers.
- :mod:`experiments.fk_speed`: FK, FK + backward and Jacobian timings and agreement of
  any FK implementations.
- :mod:`experiments.gpu`: the GPU runbook's FK paths and IK host-check rows.
- :mod:`experiments.train_speed`: the training-throughput table and its intro.
- :func:`time_call` (:mod:`experiments.timing`): every runtime in the tables, through
  :mod:`torch.utils.benchmark`.
- :class:`Report` and :func:`machine_stamp` (:mod:`experiments.report`): tables written as
  markdown and JSON under the machine, load and versions they came from.
- :func:`first_call_seconds` and :func:`crafted_urdf` (:mod:`experiments.urdf_load`): the
  cost of loading large URDFs.

The submodules are imported on first use of a name (PEP 562): ``import experiments`` is
cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "iknet_table": "iknet",
    "posterior_table": "posterior",
    "numerical_ik_table": "numerical",
    "pose_table": "pose",
    "sampler_table": "fm_samplers",
    "PathsSettings": "paths",
    "paths_table": "paths",
    "FinetuneSettings": "finetune",
    "family_table": "finetune",
    "finetune_table": "finetune",
    "Seq2SeqSettings": "seq2seq",
    "seq2seq_runs": "seq2seq",
    "seq2seq_tables": "seq2seq",
    "load_or_train_iknet": "small_iknet",
    "train_small_iknet": "small_iknet",
    "Timing": "timing",
    "time_call": "timing",
    "Report": "report",
    "machine_stamp": "report",
    "crafted_urdf": "urdf_load",
    "first_call_seconds": "urdf_load",
}
"""Public name -> the submodule of this package that defines it."""

_SUBMODULES = (
    "finetune",
    "fk_speed",
    "fm_samplers",
    "gpu",
    "iknet",
    "numerical",
    "paths",
    "pose",
    "pose_notes",
    "posterior",
    "posterior_run",
    "recipes",
    "report",
    "seq2seq",
    "small_iknet",
    "timing",
    "train_speed",
    "tune_run",
    "urdf_load",
    "wholebody",
)
"""The submodules (the values of ``_EXPORTS``)."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """A table function (or a submodule), imported on first use."""
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})

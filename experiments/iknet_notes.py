"""The tables (columns and notes) of :mod:`experiments.iknet_run`'s experiment."""

from __future__ import annotations

import json
import math
from typing import Any

from experiments.table import Column, Table, fmt_time

IKNetRun = Any
"""The settings of :class:`experiments.iknet_run.IKNetRun` (which imports this module: typed
by name here so that the two do not import each other)."""

__all__ = ["iknet_tables", "size_table", "variants_tables"]


def _cm(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:.2f}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def iknet_tables(
    rows: list[dict[str, Any]],
    curve: list[dict[str, Any]],
    sizes: list[dict[str, Any]],
    args: IKNetRun,
) -> list[Table]:
    """The experiment's tables: rows, validation curve, and (if ``sizes``) the size table.

    Args:
        rows: :func:`experiments.iknet_run.run_robot`'s rows (several robots).
        curve: its curve points.
        sizes: :func:`experiments.iknet.iknet_sizes` rows with a ``preset`` key.
        args: the experiment's settings (their values are written into the notes).

    Returns:
        The :class:`~experiments.table.Table` list.
    """
    tables = [_main_table(rows, args), _curve_table(curve, args.preset)]
    if sizes:
        tables.append(size_table(sizes, args.batch))
    return tables


def _main_table(rows: list[dict[str, Any]], args: IKNetRun) -> Table:
    title = f"IKNet ({args.preset} preset)" if "iknet" in args.families else "Baselines"
    main = Table(
        f"{title}, position targets, 1000 test targets x {args.samples}",
        [
            Column("robot", "robot"),
            Column("parameters", "parameters", lambda x: f"{x / 1e6:.2f} M"),
            Column("train_size", "train pairs"),
            Column("steps", "steps"),
            Column("train_s", "train time", fmt_time),
            Column("mean_cm", "mean (cm)", _cm),
            Column("std_cm", "std (cm)", _cm),
            Column("median_cm", "median (cm)", _cm),
            Column("paper_cm", "paper mean (cm)", _cm),
            Column("acc_10cm", "< 10 cm", _pct),
            Column("acc_2cm", "< 2 cm", _pct),
            Column("acc_1cm", "< 1 cm", _pct),
            Column("best10_cm", "best of 10 (cm)", _cm),
            Column("best100_cm", "best of 100 (cm)", _cm),
            Column("runtime_1_s", "time/target, 1 sample", fmt_time),
            Column("runtime_100_s", "time/target, 100 samples", fmt_time),
            Column("diversity", "diversity (rad)", lambda x: "—" if math.isnan(x) else f"{x:.3f}"),
        ],
        references=(),
    )
    for row in rows:
        temperature = row.get("temperature", 1.0)
        label = "" if temperature == 1.0 else f", temperature {temperature:g}"
        method = row["method"]
        if row.get("family") == "iknet":
            method = f"IKNet ({args.preset}{label})"
        main.add(method, **{k: v for k, v in row.items() if k != "method"})
    main.notes += _notes(rows, args)
    return main


def _notes(rows: list[dict[str, Any]], args: IKNetRun) -> list[str]:
    notes = [
        "Distances are over every sample (1000 targets x samples); accuracy = fraction of samples "
        "within the threshold; best of N = mean over targets of the smallest of the first N.",
        "Runtime: sampling for a batch of 1000 targets divided by 1000 (CPU, all cores); "
        "train time: wall time of the training loop including its periodic validation "
        "(500 targets, 1 sample each).",
        "Diversity: mean pairwise joint-space distance between samples of one target (rad), "
        "differences wrapped on full-turn joints.",
        f"Training: AdamW lr {args.lr}, batch {args.batch}, grad-norm clip {args.grad_clip}, "
        f"warm-up then cosine decay, {args.train_threads or 'all'} torch thread(s) while "
        "training; steps as listed (a fixed number, so that load from other jobs on the shared "
        "machine changes the time, not the model); weights of the best validation error kept.",
        "Rows without a temperature are raw samples of the model's density (the protocol). "
        "'temperature t' rows draw the same components with every scale multiplied by t "
        "(sample(..., temperature=t)): not the learned density, shown to separate the error of "
        "the component means from the spread of the components.",
    ]
    if any(r.get("family", "iknet") != "iknet" for r in rows):
        notes.append(
            "Other learned models: the family's default configuration (torchik.models), the "
            "same data, optimiser, schedule and validation as IKNet, trained for the same "
            f"wall-time budget ({args.family_minutes} min on {args.train_threads or 'all'} "
            "thread(s); steps as listed). The MLP is deterministic: its 100 samples are one "
            "prediction, so best-of-N equals the mean and its diversity is 0."
        )
    if args.solvers:
        notes.append(
            "Numerical rows: torchik.solve_ik(position_only=True), float64, success at 1 mm, "
            "on the same 1000 test targets; 'lm, 1 start' / 'dls, 1 start' start each target from "
            "one uniform random configuration without restarts (as the paper ran IKPy), "
            "'lm, default seeding' is what a user gets by default (2 slots, nearest-of-256 seeds, "
            "restarts); one solution per target, so best-of-N and diversity are empty. Runtime: "
            "the whole batch (median of 3) divided by 1000. IKPy: chain.inverse_kinematics from "
            "one uniform random start, position only, first 200 targets, Python loop."
        )
    return notes


def _curve_table(curve: list[dict[str, Any]], preset: str) -> Table:
    learning = Table(
        "Validation mean distance against training time",
        [
            Column("robot", "robot"),
            Column("step", "step"),
            Column("seconds", "seconds", lambda x: f"{x:.0f}"),
            Column("val_mean_cm", "val mean (cm), 1 sample", _cm),
            Column("loss", "train loss", lambda x: f"{x:.3f}"),
        ],
        references=(),
    )
    for row in curve:
        method = row.get("method", "IKNet")
        method = f"IKNet ({preset})" if method == "IKNet" else method
        learning.add(method, **{k: v for k, v in row.items() if k != "method"})
    return learning


def size_table(sizes: list[dict[str, Any]], batch: int) -> Table:
    """The Franka table of parameters, generated weights, memory and speed per preset."""
    table = Table(
        f"Franka (panda_hand): sizes, memory and speed per preset (training batch {batch})",
        [
            Column("parameters", "parameters", lambda x: f"{x / 1e6:.2f} M"),
            Column("head_parameters", "of which heads", lambda x: f"{x / 1e6:.2f} M"),
            Column("generated_per_target", "generated weights / target", lambda x: f"{x:,}"),
            Column("generated_mib_per_1000", "MiB / 1000 targets", lambda x: f"{x:.0f}"),
            Column("saved_mib", "saved for backward (MiB)", lambda x: f"{x:.0f}"),
            Column("state_mib", "weights+grads+AdamW (MiB)", lambda x: f"{x:.0f}"),
            Column("step_s", "train step", fmt_time),
            Column("sample_per_target_s", "sample / target (1000 x 1)", fmt_time),
        ],
        references=(),
    )
    for row in sizes:
        table.add(row["preset"], **row)
    table.notes.append(
        "Generated weights are float32, one set per target, shared by all samples of a target "
        "(batched matrix products over (targets, samples, features)). Saved for backward: the "
        "distinct storages autograd keeps for one training step's backward (activations and "
        "generated weights, parameters excluded); weights+grads+AdamW: 4 float32 copies."
    )
    return table


def variants_tables(rows: list[dict[str, Any]], paper_cm: float | None = None) -> list[Table]:
    """The tables of ``scripts/iknet_capacity.py``: one row per IKNet variant (a preset with
    fields replaced, a data size, a batch, a length), then the command that made each row.

    Args:
        rows: one dict per variant: ``variant``, ``preset``, ``overrides``, ``robot``,
            ``train_size``, ``batch``, ``steps``, ``train_s``, ``parameters``, the protocol's
            fields (``mean_cm`` ...), and ``training`` (optimiser settings replaced), ``date``
            and ``command`` where they were recorded.
        paper_cm: the paper's mean on this robot, for the notes.

    Returns:
        The results table and the table of commands.
    """
    main = Table(
        "IKNet variants, position targets, 1000 test targets x 100 raw samples",
        [
            Column("robot", "robot"), Column("preset", "preset"),
            Column("replaced", "fields replaced", lambda x: json.dumps(x) if x else "—"),
            Column("parameters", "parameters", lambda x: f"{x / 1e6:.2f} M"),
            Column("train_size", "train pairs", lambda x: f"{x / 1e6:.3g} M"),
            Column("seed", "seed"), Column("batch", "batch"), Column("steps", "steps"),
            Column("seen", "pairs seen", lambda x: f"{x / 1e6:.3g} M"),
            Column("train_s", "train time", fmt_time),
            Column("mean_cm", "mean (cm)", _cm), Column("median_cm", "median (cm)", _cm),
            Column("acc_10cm", "< 10 cm", _pct), Column("acc_2cm", "< 2 cm", _pct),
            Column("best10_cm", "best of 10 (cm)", _cm),
            Column("diversity", "diversity (rad)", lambda x: f"{x:.3f}"),
            Column("date", "measured"),
        ],
        references=(),
    )  # fmt: skip
    commands = Table("Commands", [Column("command", "command", lambda x: f"`{x}`")], references=())
    for row in rows:
        seen = row["steps"] * row["batch"] if "batch" in row else None
        replaced = {**row.get("overrides", {}), **row.get("training", {})}
        main.add(row["variant"], seen=seen, replaced=replaced,
                 **{k: v for k, v in row.items() if k not in ("variant", "replaced")})  # fmt: skip
        commands.add(row["variant"], command=row.get("command"))
    main.notes += [f"The paper's IKNet on this robot: {paper_cm} cm mean."] if paper_cm else []
    main.notes += [
        "Mean, median and shares over all 100 000 samples; best of 10: mean over targets of the "
        "smallest error of the first 10. Diversity: mean pairwise joint distance (rad).",
        "Pairs seen = steps x batch: a data set of at least that many pairs is seen once "
        "(fresh pairs); a smaller one is repeated.",
        "Training as benchmarks/iknet.py trains (AdamW lr 0.003, grad-norm clip 0.3, warm-up "
        "then cosine decay over the steps, the weights of the best validation error kept), on "
        "the CPU; train time depends on the threads and the load of the shared machine.",
        "Fields replaced: the preset's (IKNetConfig; `target_noise` in metres), and the "
        "optimiser's `weight_decay` and `ema_decay` (TrainConfig; the protocol: 0 and none).",
        "A dash: not recorded for that row (rows measured before the script wrote every field).",
    ]
    return [main, commands]

"""Figures of run results: training curves and benchmark tables (re-exported by
:mod:`torchik.plot`, which holds the figures of arms and samples). Also the figure helper both
modules share. matplotlib is imported inside the functions, never when torchik is imported.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from torchik.files import MAX_DATA_BYTES, read_text
from torchik.train.progress import read_log

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_benchmark", "plot_training_curves"]

_SAMPLE_COLOR = "tab:blue"


def _figure(width: float, height: float) -> Figure:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(
            "torchik.plot needs matplotlib: pip install 'torchik[plot]' (or matplotlib)"
        ) from None
    return Figure(figsize=(width, height), layout="constrained")


# ---------------------------------------------------------------------------- training
def _read_log(source: str | os.PathLike | Mapping[str, Sequence[float]]) -> dict[str, np.ndarray]:
    if isinstance(source, Mapping):
        return {k: np.asarray(v, dtype=float) for k, v in source.items()}
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"no training log at {os.fspath(source)!r}")
    rows = read_log(path)
    if not rows:
        raise ValueError(
            f"{os.fspath(source)!r} has no rows yet: the run stopped before its first log row"
        )
    return {k: np.array([r[k] for r in rows]) for k in rows[0]}


def plot_training_curves(source: str | os.PathLike | Mapping[str, Sequence[float]]) -> Figure:
    """Training loss and the validation metric of a run of :func:`torchik.train.train`.

    Args:
        source: the run's ``log.csv``, or a dict of lists with its columns (``step``, ``loss``,
            ``seconds`` and ``val_position_error`` or ``val_loss``).

    Returns:
        A Figure with three axes: loss vs step, validation vs step, validation vs wall time
        (time to accuracy). The validation metric is the position error (mm, log scale) where
        it was logged, else the validation loss.
    """
    log = _read_log(source)
    for key in ("step", "loss", "seconds"):
        if key not in log:
            raise ValueError(f"the training log has no {key!r} column")
    error = log.get("val_position_error")
    use_error = error is not None and bool(np.isfinite(error).any())
    val = (
        cast(np.ndarray, error) * 1000
        if use_error
        else log.get("val_loss", np.full_like(log["loss"], np.nan))
    )
    ok = np.isfinite(val)
    fig = _figure(13.0, 3.8)
    ax_loss, ax_step, ax_time = fig.subplots(1, 3)
    ax_loss.plot(log["step"], log["loss"], color="k", lw=1.2)
    ax_loss.set(xlabel="step", ylabel="training loss", title="training loss")
    name = "validation position error (mm)" if use_error else "validation loss"
    for ax, x, xlabel in (
        (ax_step, log["step"], "step"),
        (ax_time, log["seconds"], "wall time (s)"),
    ):
        ax.plot(x[ok], val[ok], "o-", color=_SAMPLE_COLOR, ms=3)
        ax.set(xlabel=xlabel, ylabel=name)
        if use_error and ok.any() and (val[ok] > 0).all():
            ax.set_yscale("log")
    ax_step.set_title("validation vs step")
    ax_time.set_title("time to accuracy")
    for ax in (ax_loss, ax_step, ax_time):
        ax.grid(alpha=0.3)
    return fig


# ---------------------------------------------------------------------------- benchmarks
_METRICS = (("time_s", "time per call (s)"), ("per_target_s", "time per target (s)"),
            ("wall_s", "wall time (s)"))  # fmt: skip


_NOT_GROUPS = {"method", "status", "settings", "pose_reference", "jacobian_reference"}


_NOT_TIMES = {"iqr_s"}  # spreads of a timing, not timings
_ERRORS = (("mean_cm", "mean distance to the target (cm)"), ("mmd", "posterior mismatch (MMD²)"))
"""Drawn when a table has no timing: its error column."""


def _bar_table(table: Mapping[str, Any]) -> tuple[str, str, list[dict[str, Any]]] | None:
    """``(metric key, axis label, rows)`` of a table worth a bar chart, else None: the first
    timing of :data:`_METRICS`, else any other (a key ending in ``_s`` or ``seconds``), else an
    error of :data:`_ERRORS`, that at least two rows that ran have; tables of training curves
    (rows with a ``step``) are left out."""
    rows = [r for r in table.get("rows", []) if r.get("status", "ok") == "ok" and "method" in r]
    if any("step" in r for r in rows):
        return None
    labels = dict(_METRICS) | dict(_ERRORS)
    others = [k for r in rows for k in r if k.endswith(("_s", "seconds")) and k not in _NOT_TIMES]
    for key in dict.fromkeys([*dict(_METRICS), *others, *dict(_ERRORS)]):
        rows_with = [r for r in rows if _is_number(r.get(key))]
        if len(rows_with) >= 2:
            return key, labels.get(key, key.replace("_", " ")), rows_with
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _group(row: Mapping[str, Any]) -> str:
    """A row's comparison group: its text fields other than the method (and its batch)."""
    parts = [str(v) for k, v in row.items() if isinstance(v, str) and k not in _NOT_GROUPS]
    if "batch" in row:
        parts.append(f"batch {row['batch']}")
    return " ".join(parts)


def _draw_bars(ax: Axes, key: str, rows: list[dict[str, Any]], colors: dict[str, Any]) -> None:
    """Horizontal bars: one tick per bar (method) without groups, else one tick per group with
    its bars coloured by method and a legend."""
    groups = list(dict.fromkeys(_group(r) for r in rows))
    grouped = groups != [""]
    y, ticks, labels, seen = 0.0, [], [], set()
    for group in groups:
        members = [r for r in rows if _group(r) == group]
        for r in members:
            first = r["method"] not in seen
            seen.add(r["method"])
            ax.barh(y, r[key], color=colors[r["method"]], height=0.8,
                    label=r["method"] if grouped and first else None)  # fmt: skip
            if "success" in r:
                ax.text(r[key], y, f" {100 * r['success']:.1f} %", va="center", fontsize=7)
            if not grouped:
                ticks.append(y)
                labels.append(r["method"])
            y += 1
        if grouped:
            ticks.append(y - (len(members) + 1) / 2)
            labels.append(group)
        y += 0.8 if grouped else 0.0  # a gap between groups
    ax.set_yticks(ticks, labels, fontsize=8)
    ax.invert_yaxis()
    if all(r[key] > 0 for r in rows):
        ax.set_xscale("log")
        ax.set_xlim(right=3 * max(r[key] for r in rows))  # room for the success labels
    ax.grid(axis="x", alpha=0.3, which="major")
    if grouped:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))


def plot_benchmark(json_path: str | os.PathLike) -> Figure:
    """Bar charts of a benchmark result file (``benchmarks/results/*.json``).

    Every table whose rows have a timing (``time_s``, ``per_target_s``, ``wall_s``, else another
    key ending in ``_s`` or ``seconds``; without one, an error: ``mean_cm`` or ``mmd``) becomes
    one axes of horizontal bars (on a log scale when
    every value is positive): one bar per row that ran (status ``ok``),
    grouped by the row's text fields (e.g. operation and dtype) and batch, coloured by method,
    annotated with the success rate where there is one.

    Returns:
        A Figure with one axes per such table.
    """
    import matplotlib

    result = json.loads(read_text(json_path, MAX_DATA_BYTES))
    if not isinstance(result, dict) or not all(
        isinstance(t, dict) for t in result.get("tables", [])
    ):
        raise ValueError(f"{os.fspath(json_path)!r} is not a benchmark results file")
    candidates = [(t, _bar_table(t)) for t in result.get("tables", [])]
    tables = [(t, found) for t, found in candidates if found is not None]
    if not tables:
        raise ValueError(f"{os.fspath(json_path)!r} has no table with timings to plot")
    methods = list(dict.fromkeys(r["method"] for _, (_, _, rows) in tables for r in rows))
    cmap = "tab10" if len(methods) <= 10 else "tab20"
    palette = [matplotlib.colormaps[cmap](i % 20) for i in range(len(methods))]
    colors = dict(zip(methods, palette, strict=True))
    heights = [0.2 * len(rows) + 1.4 for _, (_, _, rows) in tables]
    fig = _figure(9.0, sum(heights))
    axes = fig.subplots(len(tables), 1, squeeze=False, height_ratios=heights)[:, 0]
    for ax, (table, (key, label, rows)) in zip(axes, tables, strict=True):
        _draw_bars(ax, key, rows, colors)
        scale = ", log scale" if ax.get_xscale() == "log" else ""
        ax.set(xlabel=f"{label}{scale}", title=table.get("title", ""))
    stamp = result.get("stamp", {})
    fig.suptitle(f"{os.path.basename(json_path)}: {stamp.get('cpu', '?')}, "
                 f"{stamp.get('cores', '?')} cores, torch {stamp.get('torch', '?')}")  # fmt: skip
    return fig

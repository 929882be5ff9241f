"""The result files of a :func:`torchik.tune.tune` study, written into its run folder.

- ``best.json``: the best trial's settings with the study's budget, family and preset: a file
  that ``torchik train --config best.json`` reads;
- ``trials.csv``: one row per trial (number, state, value, seconds, seed, settings, metrics);
- ``history.png``: the objective per trial and the best so far (the search curve);
- ``importances.png``: Optuna's parameter importances (fANOVA), where two or more trials
  completed with settings that differ.

The study itself stays in its storage; ``optuna-dashboard RUN/study.journal`` (or the
storage URL) browses it live.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from torchik.files import save_figure, write_text

__all__ = ["best_config", "search_curve", "trial_budget", "write_results", "write_trials_csv"]


def best_config(study, config) -> dict[str, Any] | None:
    """The best trial's settings as ``torchik train --config`` reads them (``None``: no trial
    completed)."""
    if not any(t.state.name == "COMPLETE" for t in study.get_trials(deepcopy=False)):
        return None
    best = study.best_trial
    head = {"model": config.family}
    if config.preset is not None:
        head["preset"] = config.preset
    return {**head, **trial_budget(config), **best.user_attrs.get("config", best.params)}


def trial_budget(config) -> dict[str, Any]:
    """The :class:`~torchik.train.TrainConfig` fields every trial of a study shares (its
    budget and seed); searched settings go on top."""
    every = min(config.val_every, config.steps)
    return {
        "steps": config.steps, "batch_size": config.batch_size, "seed": config.seed,
        "warmup_steps": min(100, config.steps // 10), "val_every": every,
    }  # fmt: skip


def search_curve(study) -> list[tuple[int, float, float]]:
    """The search curve: ``(trial number, value, best so far)`` of every finished trial from
    the first completed one on, in trial order. The value and the best are those of completed
    trials (a pruned or failed trial has value ``nan`` and keeps the best: a pruned trial's
    value is a partial one)."""
    out, best = [], math.inf
    finished = ("COMPLETE", "PRUNED", "FAIL")
    for trial in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
        complete = trial.state.name == "COMPLETE"
        if complete:
            best = min(best, trial.value)
        if trial.state.name in finished and best < math.inf:
            out.append((trial.number, trial.value if complete else math.nan, best))
    return out


_ATTRS = ("val_position_error", "posterior_mismatch", "resimulation", "parameters")


def write_trials_csv(study, path: Path) -> Path:
    """One row per trial: number, state, value, seconds, seed, every setting, the metrics."""
    trials = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    names = sorted({k for t in trials for k in t.user_attrs.get("config", t.params)})
    columns = ["number", "state", "value", "seconds", "seed", *names, *_ATTRS, "note"]
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    for t in trials:
        seconds = t.duration.total_seconds() if t.duration is not None else None
        note = "interrupted" if t.user_attrs.get("interrupted") else ""
        if t.user_attrs.get("baseline"):
            note = "baseline (the starting config)"
        if "retry_of" in t.user_attrs:
            note = f"retry of {t.user_attrs['retry_of']}"
        row = {"number": t.number, "state": t.state.name, "value": t.value,
               "seconds": seconds, "seed": t.user_attrs.get("seed"), "note": note}  # fmt: skip
        row.update(t.user_attrs.get("config", t.params))
        row.update({k: t.user_attrs.get(k) for k in _ATTRS})
        writer.writerow(row)
    write_text(path, text.getvalue())
    return path


def _history_png(study, path: Path, label: str) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = search_curve(study)
    if not curve:
        return None
    number, value, best = zip(*curve, strict=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(number, value, "o", alpha=0.5, label="trial")
    ax.step(number, best, where="post", color="C3", label="best so far")
    positive = all(v > 0 for v in value if not math.isnan(v))
    ax.set(xlabel="trial", ylabel=label, yscale="log" if positive else "linear")
    ax.set_title(study.study_name)
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


def _importances_png(study, path: Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna

    try:
        importances = optuna.importance.get_param_importances(study)
    except (RuntimeError, ValueError):  # fewer than two completed trials, nothing varies
        return None
    if not importances:
        return None
    names = list(importances)[::-1]
    fig, ax = plt.subplots(figsize=(6, 0.4 * len(names) + 1.2))
    ax.barh(names, [importances[n] for n in names])
    ax.set(xlabel="importance (fANOVA, normalised)", title=study.study_name)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


def write_results(study, out_dir: Path, config) -> dict[str, Path]:
    """Write ``best.json``, ``trials.csv`` and the plots (where matplotlib is installed) into
    ``out_dir``; returns the files written by kind."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"trials": write_trials_csv(study, out_dir / "trials.csv")}
    best = best_config(study, config)
    if best is not None:
        write_text(out_dir / "best.json", json.dumps(best, indent=2) + "\n")
        files["best"] = out_dir / "best.json"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return files
    history = _history_png(study, out_dir / "history.png", config.objective)
    importances = _importances_png(study, out_dir / "importances.png")
    files.update({k: v for k, v in (("history", history), ("importances", importances)) if v})
    return files

"""The Ray Tune backend of ``torchik tune`` (the ``ray`` extra): the same objective as
:func:`torchik.tune.tune` (:func:`torchik.tune.objective.build_trial`, the same metrics and
seeds) under Ray Tune, with Optuna's TPE as the search algorithm (``OptunaSearch`` over the
same space) and ASHA stopping trials from their intermediate validations. Ray runs locally
(``ray.init()`` with ``cpus`` CPUs, one per trial) or joins an existing cluster (``address``,
e.g. ``"ray://head:10001"`` or ``"auto"``).

Results go into the run folder as for the Optuna backend: ``best.json`` (read by
``torchik train --config``), ``trials.csv``; Ray's own records are in ``OUT/ray``.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import time
from pathlib import Path
from typing import Any

from torchik.files import write_text
from torchik.tune.objective import (
    baseline_params,
    build_trial,
    final_objective,
    make_problem,
    validation_value,
)
from torchik.tune.results import trial_budget
from torchik.tune.space import Choice, Float, Int, Param, default_space, suggest
from torchik.tune.study import TuneConfig, TuneResult

__all__ = ["tune_ray"]

METRIC = "objective"


def _define(space: dict[str, Param], trial) -> dict[str, Any]:
    """``OptunaSearch``'s define-by-run space: suggest every searched setting and return the
    fixed ones (Ray merges them into the trial's config)."""
    params = suggest(trial, space)
    return {k: v for k, v in params.items() if not isinstance(space[k], Float | Int | Choice)}


def _trainable(params: dict[str, Any], config: TuneConfig, problem) -> None:
    """One Ray trial: train, report every validation (ASHA may stop it), report the final
    objective last."""
    import torch
    from ray import tune as ray_tune

    from torchik.train.loop import train

    torch.set_num_threads(config.threads)
    model, train_config = build_trial(config, params, problem.train_set.spec)

    def report(step: int, metrics: dict[str, float]) -> None:
        value = validation_value(model, metrics, problem, config)
        if value is not None:
            ray_tune.report({METRIC: value, "step": step})

    result = train(model, problem.train_set, problem.val_set, train_config,
                   robot=problem.robot, callback=report)  # fmt: skip
    value, final = final_objective(result, problem, config)
    # one step past the last validation: ASHA stops a trial at max_t = steps + 1, after this
    ray_tune.report({METRIC: value, "step": config.steps + 1, **final, "done": True})


def tune_ray(
    config: TuneConfig,
    out_dir: str | Path,
    space: dict[str, Param] | None = None,
    address: str | None = None,
    cpus: int | None = None,
    progress: bool = True,
) -> TuneResult:
    """Run ``config``'s search on Ray Tune (Optuna TPE search, ASHA).

    Args:
        config: the study's settings (``sampler`` and ``pruner`` are Optuna's: Ray uses TPE
            and ASHA).
        out_dir: the run folder (results; Ray's records in ``out_dir/ray``).
        space: default :func:`torchik.tune.default_space`.
        address: an existing Ray cluster; ``None`` starts a local Ray.
        cpus: CPUs of the local Ray (default: all).
        progress: Ray's progress table on stdout.

    Returns:
        A :class:`~torchik.tune.TuneResult`.
    """
    import ray
    from ray import tune as ray_tune
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search.optuna import OptunaSearch

    start, out = time.perf_counter(), Path(out_dir).resolve()
    space = default_space(config.family) if space is None else space
    if not ray.is_initialized():
        local = {"num_cpus": cpus, "include_dashboard": False} if address is None else {}
        ray.init(address=address, log_to_driver=False, configure_logging=False, **local)
    every = min(config.val_every, config.steps)
    problem = make_problem(config)
    first = baseline_params(config, space, problem.robot.dof) if config.baseline else None
    search = OptunaSearch(functools.partial(_define, space), METRIC, "min", seed=config.seed,
                          points_to_evaluate=None if first is None else [first])  # fmt: skip
    trainable = ray_tune.with_parameters(_trainable, config=config, problem=problem)
    tuner = ray_tune.Tuner(
        ray_tune.with_resources(trainable, {"cpu": config.threads}),
        tune_config=ray_tune.TuneConfig(
            num_samples=config.trials,
            search_alg=search,
            scheduler=ASHAScheduler(time_attr="step", metric=METRIC, mode="min",
                                    max_t=config.steps + 1, grace_period=every),
        ),
        run_config=ray_tune.RunConfig(
            name=config.study_name, storage_path=str(out / "ray"), verbose=1 if progress else 0
        ),
    )  # fmt: skip
    grid = tuner.fit()
    return _results(grid, config, out, time.perf_counter() - start, first)


def _results(
    grid, config: TuneConfig, out: Path, seconds: float, first: dict | None = None
) -> TuneResult:
    """Write ``best.json`` and ``trials.csv`` from Ray's result grid (``first``: the
    baseline trial's settings, whose value the result carries)."""
    rows = []
    for result in grid:
        metrics = result.metrics or {}
        value = metrics.get(METRIC) if metrics.get("done") else None
        state = "COMPLETE" if value is not None else ("FAIL" if result.error else "PRUNED")
        rows.append({"trial": result.path and Path(result.path).name, "state": state,
                     "value": value, "config": result.config})  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    files = {"trials": out / "trials.csv"}
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(["trial", "state", "value", "config"])
    for row in rows:
        writer.writerow([row["trial"], row["state"], row["value"], json.dumps(row["config"])])
    write_text(files["trials"], text.getvalue())
    done = [r for r in rows if r["value"] is not None]
    curve, best = [], math.inf
    for row in done:
        best = min(best, row["value"])
        curve.append(best)
    if not done:
        return TuneResult(math.nan, {}, len(rows), files, seconds, [], _count(rows))
    top = min(done, key=lambda r: r["value"])
    base = [r["value"] for r in done if first is not None and r["config"].items() >= first.items()]
    head = {"model": config.family} | ({"preset": config.preset} if config.preset else {})
    files["best"] = out / "best.json"
    settings = {**head, **trial_budget(config), **top["config"]}
    write_text(files["best"], json.dumps(settings, indent=2) + "\n")
    return TuneResult(top["value"], top["config"], len(rows), files, seconds, curve,
                      _count(rows), baseline_value=base[0] if base else math.nan)  # fmt: skip


def _count(rows: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["state"]] = counts.get(row["state"], 0) + 1
    return counts

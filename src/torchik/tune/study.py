"""Hyperparameter search over a model family's config and the training settings, on Optuna.

:func:`tune` runs a study: each trial draws settings from a search space
(:mod:`torchik.tune.space`), trains the family with :func:`torchik.train.train` and returns the
objective, to minimise: the validation FK position error (``"position_error"``), or on a planar
or the rail arm the posterior protocol's posterior mismatch (``"posterior_mismatch"``, MMD² to a
rejection-sampled ground truth) or re-simulation error (``"resimulation"``). Intermediate
validations reach the pruner (median or Hyperband) through ``train``'s callback. Samplers:
TPE (default), a Gaussian process (Optuna's ``GPSampler``, the Bayesian optimisation the
report ran with scikit-optimize) and random search as a control. Every seed is fixed and stored
in the study (``user_attrs``): the training seed is the same for every trial, each worker's
sampler seed is ``seed + worker``.

Storage: by default a journal file ``study.journal`` in the run folder; a study killed at any
moment continues with ``resume=True``, where only the trials that were running are lost (they
are marked failed and their settings queued again). Any Optuna storage URL
(``sqlite:///...``, ``postgresql://...``) lets workers on many machines join one study: run
the same command on each (each worker's sampler seed then includes its process id, recorded in
its trials). ``jobs`` runs that many worker processes here. The results
(:mod:`torchik.tune.results`) are written into the run folder.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import multiprocessing
import os
import socket
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from torchik.checks import check_choice, check_int, check_threads, intra_op_threads
from torchik.files import pid_alive
from torchik.tune.objective import (
    InvalidSettings,
    baseline_params,
    check_settings,
    make_objective,
    make_problem,
    problem_robot,
)
from torchik.tune.progress import TrialProgress
from torchik.tune.results import search_curve, write_results
from torchik.tune.space import Param, default_space, parse_space, space_to_json

__all__ = [
    "JOURNAL",
    "OBJECTIVES",
    "PRUNERS",
    "SAMPLERS",
    "TuneConfig",
    "TuneResult",
    "counted_trials",
    "open_study",
    "tune",
]

OBJECTIVES = ("position_error", "posterior_mismatch", "resimulation")
SAMPLERS = ("tpe", "gp", "random")
PRUNERS = ("median", "hyperband", "none")
JOURNAL = "study.journal"
"""The embedded storage's file in the run folder (also what ``optuna-dashboard`` opens)."""


@dataclass(frozen=True)
class TuneConfig:
    """Settings of a study (stored in it, so that a resumed or joined study is the same one).

    Attributes:
        family: the model family searched.
        robot: a bundled robot, ``planar:L1,L2,...`` or ``rail_arm``.
        objective: one of :data:`OBJECTIVES` (the posterior ones need a planar or the rail arm).
        trials: trials in the study, all workers together (pruned and failed ones count;
            trials interrupted by a kill do not).
        steps: training steps of a trial.
        val_every: steps between validations (the pruner's intermediate values).
        batch_size: rows per step (searchable too: put it in the space).
        train_size: training pairs (the report: a 10^4 subset).
        val_size: validation pairs.
        preset: the model config the searched settings replace fields of (``None``: the
            family's default for the robot, ``"tiny"``, ``"small"``).
        posterior_targets: test targets of the posterior objectives.
        posterior_samples: ground-truth and model samples per target.
        sampler: one of :data:`SAMPLERS`.
        pruner: one of :data:`PRUNERS`.
        seed: the training seed of every trial; data, targets and samplers derive theirs.
        threads: torch threads per worker.
        baseline: a new study's first trial is the config it starts from
            (:func:`~torchik.tune.objective.baseline_params`), so that its best is never
            worse than the defaults.
    """

    family: str
    robot: str = "planar:1,1,1,1"
    objective: str = "position_error"
    trials: int = 20
    steps: int = 1000
    val_every: int = 100
    batch_size: int = 256
    train_size: int = 10_000
    val_size: int = 500
    preset: str | None = None
    posterior_targets: int = 20
    posterior_samples: int = 200
    sampler: str = "tpe"
    pruner: str = "median"
    seed: int = 0
    threads: int = 1
    baseline: bool = True

    def __post_init__(self) -> None:
        for name in ("family", "robot"):
            if not isinstance(getattr(self, name), str):
                value = getattr(self, name)
                raise TypeError(f"{name} must be a str, got {type(value).__name__} {value!r:.40}")
        for name in ("trials", "steps", "val_every", "batch_size", "train_size", "val_size"):
            check_int(name, getattr(self, name), 1)
        for name in ("posterior_targets", "posterior_samples"):
            check_int(name, getattr(self, name), 1)
        check_threads("threads", self.threads)
        check_int("seed", self.seed, 0)
        check_choice("objective", self.objective, OBJECTIVES)
        check_choice("sampler", self.sampler, SAMPLERS)
        check_choice("pruner", self.pruner, PRUNERS)
        if self.preset is not None:
            check_choice("preset", self.preset, ("tiny", "small"))
        arm = self.robot == "rail_arm" or self.robot.startswith("planar:")
        if self.objective != "position_error" and not arm:
            raise ValueError(f"objective {self.objective!r} needs a planar arm or the rail arm")

    @property
    def study_name(self) -> str:
        """The default study name: family, robot and objective."""
        robot = self.robot.replace(":", "").replace(",", "-").replace("/", "_")
        return f"{self.family}_{robot}_{self.objective}"


@dataclass
class TuneResult:
    """What :func:`tune` returns.

    Attributes:
        best_value: the best objective value (``nan`` where no trial completed).
        best_config: every setting of the best trial (searched and fixed), as in ``best.json``.
        trials: trials counted in the study (see :attr:`TuneConfig.trials`).
        files: the result files written, by kind (``best``, ``trials``, ``history``, ...).
        seconds: wall time of this call.
        curve: the best value after each finished trial from the first completed one on
            (the search curve, :func:`torchik.tune.results.search_curve`).
        states: trials by state name (``COMPLETE``, ``PRUNED``, ``FAIL``, ...).
        trial_seconds: the durations of the study's finished trials added up, over every
            call that ran them (a resumed study's :attr:`seconds` counts this call alone).
        baseline_value: the objective of the baseline trial (:attr:`TuneConfig.baseline`;
            ``nan`` where it did not complete).
    """

    best_value: float
    best_config: dict[str, Any]
    trials: int
    files: dict[str, Path] = field(default_factory=dict)
    seconds: float = 0.0
    curve: list[float] = field(default_factory=list)
    states: dict[str, int] = field(default_factory=dict)
    trial_seconds: float = 0.0
    baseline_value: float = math.nan


# ---------------------------------------------------------------------------- the study
def _storage(storage: str | None, out_dir: Path):
    """An Optuna storage: the run folder's journal file, a ``.journal`` path (both a
    :class:`~torchik.tune.journal.JournalFile`), or an RDB URL."""
    import optuna

    from torchik.tune.journal import open_journal

    if storage is None or storage.endswith(".journal"):
        path = out_dir / JOURNAL if storage is None else Path(storage)
        path.parent.mkdir(parents=True, exist_ok=True)
        return open_journal(path)
    for attempt in range(5):
        try:
            with warnings.catch_warnings():  # the heartbeat is marked experimental
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(storage, heartbeat_interval=30, grace_period=120)
        except Exception as err:  # sqlalchemy's errors (no server, bad URL, missing driver)
            if _lost_race(err) and attempt < 4:
                time.sleep(0.5 + attempt)
                continue
            text = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise ConnectionError(f"cannot reach the storage {_safe(storage)}: {text}") from None
    raise AssertionError("unreachable")


def _lost_race(err: Exception) -> bool:
    """Workers that start together on a new database race to create its tables: the loser
    gets an IntegrityError, or (SQLite) "table ... already exists" / "database is locked"."""
    kind, text = type(err).__name__, str(err)
    racing = "already exists" in text or "database is locked" in text
    return kind == "IntegrityError" or (kind == "OperationalError" and racing)


def _safe(url: str) -> str:
    """``url`` without a password."""
    head, at, tail = url.rpartition("@")
    if not at or "://" not in head:
        return url
    scheme, _, user = head.partition("://")
    return f"{scheme}://{user.split(':')[0]}:***@{tail}" if ":" in user else url


def _sampler(config: TuneConfig, seed: int):
    import optuna

    startup = max(1, min(10, config.trials // 3))
    if config.sampler == "gp":
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=startup)
    if config.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup)


def _pruner(config: TuneConfig):
    import optuna

    if config.pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=0)
    if config.pruner == "hyperband":
        every = min(config.val_every, config.steps)
        return optuna.pruners.HyperbandPruner(min_resource=every, max_resource=config.steps)
    return optuna.pruners.NopPruner()


_IDENTITY = ("family", "robot", "objective")
"""Settings a study is identified by: joining or resuming one with other values is refused."""


def open_study(
    config: TuneConfig,
    storage,
    name: str,
    create: bool,
    sampler_seed: int | None = None,
    must_exist: bool = False,
):
    """The study ``name`` in ``storage``, created (with ``config`` and the space stored in its
    ``user_attrs``) where ``create`` and it does not exist yet.

    Raises:
        ValueError: it exists with another family, robot or objective; or ``must_exist`` and
            it does not.
    """
    import optuna

    exists = name in optuna.study.get_all_study_names(storage)
    if must_exist and not exists:
        raise ValueError(f"there is no study {name!r} to resume")
    if not (create or exists):
        raise ValueError(f"there is no study {name!r} in the storage")
    seed = config.seed if sampler_seed is None else sampler_seed
    kw = {"sampler": _sampler(config, seed), "pruner": _pruner(config)}
    study = None
    if not exists:
        try:  # another worker may create it at the same moment: then load that one
            study = optuna.create_study(storage=storage, study_name=name, **kw)
        except optuna.exceptions.DuplicatedStudyError:
            pass
    if study is None:
        study = optuna.load_study(study_name=name, storage=storage, **kw)
    saved = study.user_attrs.get("tune_config")
    if saved is None:
        study.set_user_attr("tune_config", dataclasses.asdict(config))
        return study
    for key in _IDENTITY:
        if saved.get(key) != getattr(config, key):
            raise ValueError(
                f"study {name!r} already exists with {key} {saved.get(key)!r}, not "
                f"{getattr(config, key)!r}: choose another study name (nothing was changed)"
            )
    return study


def counted_trials(study) -> int:
    """Trials that count against the budget: finished, pruned or failed, not interrupted."""
    from optuna.trial import TrialState

    states = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    trials = study.get_trials(deepcopy=False, states=states)
    return sum(not t.user_attrs.get("interrupted", False) for t in trials)


def _worker_name() -> str:
    """This process, as recorded in each trial it runs (``user_attrs["worker"]``)."""
    return f"{socket.gethostname()}:{os.getpid()}"


HEARTBEAT_S = 60.0
"""How often a running trial records that its worker is alive (``user_attrs["beat"]``, seconds
since the epoch)."""

STALE_S = 600.0
"""A running trial of another machine whose last beat is older than this counts as abandoned
(ten beats: room for clocks that disagree and a storage that is slow to answer)."""


def _abandoned(trial, now: float | None = None) -> bool:
    """Whether a running trial's worker is gone: a process of this machine that no longer runs,
    or this process itself (whose trials are not running while it resumes); on another machine,
    a trial whose last beat (:data:`HEARTBEAT_S`) is older than :data:`STALE_S`. The trials of
    live workers are left alone. A trial without a worker or a beat (an older torchik's) counts
    as abandoned where this machine cannot tell."""
    host, _, pid = str(trial.user_attrs.get("worker", "")).rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        beat = trial.user_attrs.get("beat")
        now = time.time() if now is None else now
        return not isinstance(beat, (int, float)) or now - beat > STALE_S
    return int(pid) == os.getpid() or not pid_alive(int(pid))


@contextmanager
def _beating(trial, interval: float = HEARTBEAT_S) -> Iterator[None]:
    """Record ``trial``'s beat now and every ``interval`` seconds until the block ends (a
    daemon thread; a beat that the storage refuses ends the beating, the trial goes on)."""
    done = threading.Event()

    def beat() -> None:
        while not done.wait(interval):
            try:
                trial.set_user_attr("beat", time.time())
            except Exception:  # the storage went away, or the trial finished first
                return

    trial.set_user_attr("beat", time.time())
    thread = threading.Thread(target=beat, name="torchik-tune-beat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _requeue_interrupted(study) -> int:
    """Mark the trials that a killed worker left running as failed (``interrupted``), and
    queue the settings of every interrupted trial (killed, or stopped by Ctrl-C or a full
    disk) again, once; returns how many were queued. The trials of live workers (another
    process running the same study) keep running."""
    from optuna.trial import TrialState

    storage = study._storage
    for trial in study.get_trials(states=(TrialState.RUNNING,)):
        if not _abandoned(trial):
            continue
        storage.set_trial_user_attr(trial._trial_id, "interrupted", True)
        storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
    trials = study.get_trials()
    retried = {t.user_attrs["retry_of"] for t in trials if "retry_of" in t.user_attrs}
    stale = [
        t
        for t in trials
        if t.state == TrialState.FAIL
        and t.user_attrs.get("interrupted")
        and t.number not in retried
    ]
    for trial in stale:
        study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})
    return len(stale)


def _worker(
    config: TuneConfig, space: dict, storage_url, out_dir, name, seed, share, bar=None
) -> None:
    """One worker: ``share`` trials at most, stopping early once the study has its budget;
    its sampler's ``seed`` is recorded in each of its trials. A trial stopped by Ctrl-C is
    marked ``interrupted`` (``resume`` runs it again)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with intra_op_threads(config.threads, "threads"):  # restored after: the caller's process
        _optimize(config, space, storage_url, out_dir, name, seed, share, bar)


def _worker_process(*args) -> None:
    """:func:`_worker` as a process of its own: an error is one line on stderr and exit
    status 1 (the parent names the workers that failed), not a traceback."""
    import sys

    try:
        _worker(*args)
    except (OSError, ValueError) as err:
        print(f"torchik: tune worker {os.getpid()}: error: {err}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:  # Ctrl-C reached every worker: the parent says how to resume
        raise SystemExit(130) from None


def _optimize(config: TuneConfig, space: dict, storage_url, out_dir, name, seed, share, bar):
    """The body of :func:`_worker`, with the worker's threads set."""
    import optuna

    study = open_study(config, _storage(storage_url, Path(out_dir)), name, False, seed)
    if share <= 0 or counted_trials(study) >= config.trials:
        return
    problem = make_problem(config)

    def stop(study, _trial) -> None:
        done = counted_trials(study)
        if bar is not None:
            bar.advance(done)
        if done >= config.trials:
            study.stop()

    objective = make_objective(config, space, problem)
    failed = _FailedTrials()

    def run(trial) -> float:
        trial.set_user_attr("worker", _worker_name())
        trial.set_user_attr("sampler_seed", seed)
        try:
            with _beating(trial):
                return objective(trial)
        except KeyboardInterrupt:
            trial.set_user_attr("interrupted", True)
            failed.numbers.add(trial.number)  # Optuna's traceback of it: not a failure
            raise
        except OSError as err:  # past Optuna, which would record it and log its traceback:
            raise _Stopped(err) from None  # the trial stays running, resume runs it again
        except (FloatingPointError, InvalidSettings) as err:
            return failed.record(trial, err)
        except optuna.TrialPruned:
            raise
        except Exception as err:  # it stops the study, raised to the caller: not logged too
            trial.set_user_attr("error", " ".join(str(err).split()) or type(err).__name__)
            failed.numbers.add(trial.number)
            raise

    optuna_log = logging.getLogger("optuna.study._optimize")  # where it logs failed trials
    optuna_log.addFilter(failed)
    try:
        _optimize_share(study, run, share, stop, config.trials)
    except _Stopped as stopped:
        raise stopped.error from None
    except Exception as err:
        behind = _os_error_behind(err)
        if behind is err:
            raise
        raise behind from None
    finally:
        optuna_log.removeFilter(failed)


def _optimize_share(study, run, share: int, stop, budget: int) -> None:
    """``study.optimize`` for this worker's ``share`` of trials; where another worker had
    finished a trial this one ran too (:func:`_told_elsewhere`), it goes on until the study
    has its ``budget`` (the ``stop`` callback ends it there too)."""
    while True:
        try:
            study.optimize(run, n_trials=share, callbacks=[stop], gc_after_trial=False)
            return
        except ValueError as err:
            if not _told_elsewhere(err):
                raise
            if counted_trials(study) >= budget:
                return


def _told_elsewhere(err: Exception) -> bool:
    """Whether Optuna refused to record a trial that another worker had already finished:
    two workers on one SQLite database can both take the same queued trial (SQLite has no
    row locks), and the second to finish gets "Cannot tell a COMPLETE trial." The first's
    result stands; the second worker goes on with its share."""
    text = str(err)
    return isinstance(err, ValueError) and text.startswith("Cannot tell a ") and "trial" in text


class _FailedTrials(logging.Filter):
    """Trials that diverged or drew settings their model refuses: each fails with its reason in
    one line on stderr and in its ``error`` attribute, the study going on; Optuna's own lines
    about them (a traceback where the objective raised) are dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.numbers: set[int] = set()

    def record(self, trial: Any, err: Exception) -> float:
        """Record ``trial``'s failure; nan, which Optuna takes as a failed trial."""
        reason = str(err).removeprefix(f"trial {trial.number}: ")  # InvalidSettings names it
        trial.set_user_attr("error", reason)
        self.numbers.add(trial.number)
        tqdm.write(f"torchik: tune: trial {trial.number} failed: {reason}", file=sys.stderr)
        return math.nan

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not any(text.startswith(f"Trial {n} failed ") for n in self.numbers)


class _Stopped(BaseException):
    """An OSError of a trial (a full disk), carried past Optuna's handling of trial errors."""

    def __init__(self, error: OSError):
        super().__init__(str(error))
        self.error = error


def _os_error_behind(err: Exception) -> Exception:
    """The OSError that ``err`` was raised while handling (Optuna turns a failed journal write
    after a trial into "AssertionError: Should not reach."), else ``err``."""
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, OSError):
            return cause
        cause = cause.__context__
    return err


def _shares(left: int, jobs: int) -> list[int]:
    return [left // jobs + (i < left % jobs) for i in range(jobs)]


def tune(
    config: TuneConfig,
    out_dir: str | Path,
    space: dict[str, Param] | None = None,
    storage: str | None = None,
    study_name: str | None = None,
    resume: bool = False,
    jobs: int = 1,
    progress: bool = True,
) -> TuneResult:
    """Run (or continue, or join) the study and write its results into ``out_dir``.

    Args:
        config: the study's settings.
        out_dir: the run folder: the journal storage (without ``storage``) and the results.
        space: the search space (default :func:`torchik.tune.default_space`); an
            existing study keeps the space it was created with (another one is refused).
        storage: an Optuna storage URL (``sqlite:///f.db``, ``postgresql://...``) or a
            ``.journal`` file; ``None``: ``out_dir/study.journal``.
        study_name: default :attr:`TuneConfig.study_name`.
        resume: continue the study in the run folder's journal (required where it exists),
            re-queueing the trials a kill interrupted; the running trials of live worker
            processes on this machine are left to them. With a shared ``storage`` an existing
            study is always joined; ``resume`` only re-queues its running trials (those of
            other machines too: do that once their workers are stopped).
        jobs: worker processes on this machine.
        progress: show a bar of counted trials on stderr.

    Returns:
        A :class:`TuneResult`.

    Raises:
        ValueError: bad settings, a study that exists with another family, robot or
            objective, or (embedded storage) an existing study without ``resume``.
        ConnectionError: the storage cannot be reached.
    """
    check_int("jobs", jobs, 1)
    start, out = time.perf_counter(), Path(out_dir)
    dof = problem_robot(config.robot)[0].dof  # an unknown robot fails here, before a study
    check_settings(config, default_space(config.family) if space is None else space, dof)
    name = study_name or config.study_name
    study, space = _prepare_study(config, space, storage, out, name, resume, dof)
    left = max(0, config.trials - counted_trials(study))
    title = f"tuning {config.family} on {config.robot}: study {name!r}"
    bar = TrialProgress(config.trials, config.trials - left, enabled=progress, title=title)
    try:
        _run_workers(config, space, storage, out, name, _shares(left, jobs), study, bar)
    finally:
        bar.close()
    files = write_results(study, out, config)
    best = study.best_trial if search_curve(study) else None
    value = float(best.value) if best is not None else math.nan
    config_ = best.user_attrs.get("config", best.params) if best is not None else {}
    seconds = time.perf_counter() - start
    curve = [best for *_, best in search_curve(study)]
    trials = study.get_trials(deepcopy=False)
    states = Counter(t.state.name for t in trials)
    spent = sum(t.duration.total_seconds() for t in trials if t.duration is not None)
    base = [t.value for t in trials if t.user_attrs.get("baseline") and t.value is not None]
    return TuneResult(value, config_, counted_trials(study), files, seconds, curve,
                      dict(states), spent, base[0] if base else math.nan)  # fmt: skip


def _prepare_study(config, space, storage, out: Path, name: str, resume: bool, dof: int):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    embedded = storage is None
    store = _storage(storage, out)
    exists = name in optuna.study.get_all_study_names(store)
    if embedded and exists and not resume:
        raise ValueError(
            f"{out} already holds study {name!r}: pass --resume to continue it, or another "
            "--out (nothing was changed)"
        )
    if embedded and resume and not exists:
        raise ValueError(f"--resume: {out / JOURNAL} holds no study {name!r}")
    study = open_study(config, store, name, True)
    stored = study.user_attrs.get("space")
    if stored is None:
        space = default_space(config.family) if space is None else space
        study.set_user_attr("space", space_to_json(space))
        if config.baseline:
            params = baseline_params(config, space, dof)
            study.enqueue_trial(params, user_attrs={"baseline": True}, skip_if_exists=True)
    elif space is not None and space_to_json(space) != stored:
        raise ValueError(
            f"study {name!r} searches another space ({json.dumps(stored)}): give its space "
            "file or none (nothing was changed)"
        )
    if stored is not None:  # an existing study's space: every trial of it checked too
        space = parse_space(stored, config.family, base={})
        check_settings(config, space, dof)
    if resume:
        _requeue_interrupted(study)
    return study, space


def _run_workers(config, space, storage, out, name, shares, study, bar) -> None:
    """The workers: in this process for one job, else one spawned process each. Worker ``i``'s
    sampler seed is ``seed + i``; on a shared storage, whose workers on other machines run
    the same command, the process id is added so that no two workers propose alike."""
    base = config.seed + (0 if storage is None else 1000 * (os.getpid() % 1_000_000))
    if len(shares) == 1:
        _worker(config, space, storage, str(out), name, base, shares[0], bar)
        return
    context = multiprocessing.get_context("spawn")
    procs = [
        context.Process(
            target=_worker_process, args=(config, space, storage, str(out), name, base + i, n)
        )
        for i, n in enumerate(shares)
    ]
    for proc in procs:
        proc.start()
    try:
        while any(p.is_alive() for p in procs):
            time.sleep(1.0)
            bar.advance(counted_trials(study))
    finally:
        for proc in procs:
            proc.join(timeout=None if proc.exitcode is not None else 5.0)
            if proc.is_alive():
                proc.terminate()
    failed = [i for i, p in enumerate(procs) if p.exitcode not in (0, None)]
    if failed:
        raise RuntimeError(f"tune worker(s) {failed} failed (exit codes "
                           f"{[procs[i].exitcode for i in failed]})")  # fmt: skip

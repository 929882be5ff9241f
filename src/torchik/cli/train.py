"""``torchik train``: model sizes by preset, a run folder that is never overwritten unasked, and
Ctrl-C that says how to resume."""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from torchik.checks import intra_op_threads
from torchik.cli.common import (
    _ERRORS,
    _INTERRUPTED,
    _NOT_DATA,
    _TARGET_KINDS,
    _check_target_kind_fits,
    _common,
    _end_link,
    _message,
    _positive,
    _positive_int,
    _provenance,
    _resume_command,
    _robot,
    _robot_for,
    _std,
    _torch_file,
)
from torchik.files import load_tensors, read_text, write_text


def add_parser(sub) -> None:
    p = sub.add_parser(
        "train", help="train a learned IK model on a data set, or on pairs made by FK as it goes"
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help="a file written by 'torchik dataset'")
    source.add_argument("--stream", metavar="ROBOT",
                        help="fresh pairs made by FK every step instead of a file: a bundled "
                             "name, planar:L1,L2,... or a URDF (with --targets, --sampler, "
                             "--std, --link)")  # fmt: skip
    p.add_argument("--targets", choices=_TARGET_KINDS,
                   help="--stream's target kind (default position)")  # fmt: skip
    p.add_argument("--sampler", choices=("uniform", "normal"),
                   help="--stream's joint sampler (default uniform in the limits)")  # fmt: skip
    p.add_argument("--std", type=float, nargs="+",
                   help="--stream's normal sampler std (with --sampler normal): one, or one "
                        "per joint (default 0.2)")  # fmt: skip
    p.add_argument("--link", help="--stream's end link (default: the robot's end link)")
    p.add_argument("--model", help="model family (iknet, mlp, ...); may come from --config FILE")
    p.add_argument(
        "--config",
        nargs="+",
        default=[],
        metavar="KEY=VALUE|FILE",
        help="model or training settings, e.g. width=64 batch_size=256 lr=1e-3, or a JSON/YAML "
        "file of them (such as the best.json of 'torchik tune'; its 'model' and 'preset' "
        "keys stand for --model and --preset); key=value pairs go on top of files",
    )
    p.add_argument("--preset", choices=("tiny", "small", "paper"),
                   help="model size: tiny (tests, seconds), small (CPU minutes), paper (the "
                        "paper's, a GPU); default: the family's, sized for the robot")  # fmt: skip
    length = p.add_mutually_exclusive_group()
    length.add_argument("--steps", type=_positive_int,
                        help="training steps (default: TrainConfig's)")  # fmt: skip
    length.add_argument("--minutes", type=_positive,
                        help="train for about this long: the speed is measured first and the "
                             "steps set so that the whole learning-rate schedule fits (one "
                             "process; the steps are printed, resume with --steps N)")  # fmt: skip
    p.add_argument("--out", help="run folder (default: runs/FAMILY_ROBOT)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier run in OUT")
    p.add_argument("--threads", type=_positive_int, default=1,
                   help="CPU threads (default 1: these small models train fastest on one, and "
                        "more threads on a busy machine stall each other)")  # fmt: skip
    p.add_argument("--nproc", type=_positive_int, default=1,
                   help="train on N processes with torch.distributed (gloo on the CPU; with "
                        "--device cuda, NCCL and one GPU each); the global batch stays "
                        "batch_size (default 1; torchrun works too)")  # fmt: skip
    p.add_argument("--val-fraction", type=float, default=0.1, help="rows held out (default 0.1)")
    p.add_argument("--robot", help="robot for the validation error (default: the data's)")
    _common(p)  # fmt: skip
    p.set_defaults(func=run)


def _convert(text: str, default: Any, name: str) -> Any:
    """``text`` as the type of the field's ``default`` (None defaults: number, bool or None)."""
    lowered = text.strip().lower()
    if lowered in ("none", "null") and not isinstance(default, bool | int | float | str):
        return None
    try:
        if isinstance(default, bool) or (default is None and lowered in ("true", "false")):
            if lowered not in ("true", "false", "1", "0"):
                raise ValueError
            return lowered in ("true", "1")
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float) or default is None:
            return float(text)
    except ValueError:
        raise ValueError(f"--config {name}={text}: not a valid {type(default).__name__}") from None
    return text


def _split_config(pairs: Sequence[str], model_config: type, train_config: type):
    """``key=value`` pairs -> (model config kwargs, train config kwargs)."""
    fields = [{f.name: f for f in dataclasses.fields(c)} for c in (model_config, train_config)]
    out: tuple[dict, dict] = ({}, {})
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep:
            raise ValueError(f"--config expects key=value, got {pair!r}")
        for kwargs, known in zip(out, fields, strict=True):
            if key in known:
                kwargs[key] = _convert(value, known[key].default, key)
                break
        else:
            names = ", ".join(sorted({*fields[0], *fields[1]} - {"device", "progress"}))
            raise ValueError(f"unknown --config key {key!r}; known keys: {names}")
    return out


def _config_files(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    """``(settings of the --config files, the key=value pairs)``; a file's ``model`` and
    ``preset`` fill ``args.model`` and ``args.preset`` (and must agree with them if given)."""
    from torchik.tune.space import read_mapping

    settings: dict[str, Any] = {}
    for item in args.config:
        if "=" not in item:
            settings.update(read_mapping(item))
    seed = settings.pop("seed", None)
    if seed is not None and not any(a.split("=")[0] == "--seed" for a in getattr(args, "argv", [])):
        args.seed = seed  # the file's seed made the tuned model's initial weights
    for key in ("model", "preset"):
        value = settings.pop(key, None)
        given = getattr(args, key)
        if value is not None and given is not None and value != given:
            raise ValueError(f"--{key} {given} differs from the --config file's {key} {value!r}")
        setattr(args, key, given or value)
    if args.model is None:
        raise ValueError("--model is required (or a --config file with a 'model' key)")
    return settings, [item for item in args.config if "=" in item]


def _split_settings(settings: dict[str, Any], model_config: type, train_config: type):
    """A mapping of typed settings -> (model config kwargs, train config kwargs)."""
    fields = [{f.name for f in dataclasses.fields(c)} for c in (model_config, train_config)]
    unknown = sorted(set(settings) - fields[0] - fields[1])
    if unknown:
        names = ", ".join(sorted((fields[0] | fields[1]) - {"device", "progress"}))
        raise ValueError(f"unknown --config key {unknown[0]!r}; known keys: {names}")
    model = {k: v for k, v in settings.items() if k in fields[0]}
    return model, {k: v for k, v in settings.items() if k not in fields[0]}


_DATA_RECORD = "train_data.json"
_RUN_FILES = ("checkpoint.pt", "best.pt", "model.pt", "log.csv", _DATA_RECORD)


def run(args: argparse.Namespace) -> int:
    """``torchik train``: train a model family on a data set file into a run folder, with
    ``args.threads`` CPU threads (the previous number is restored afterwards)."""
    from torchik.train import distributed

    _check_stream_options(args)
    if args.minutes is not None:
        _check_minutes(args, distributed.launched())
    if _launches(args):
        return _launch(args)
    errors = os.environ.get(_ERRORS_DIR) if distributed.launched() else None
    try:
        with (
            intra_op_threads(args.threads, "--threads"),
            distributed.group_from_env(args.device) as device,
        ):
            args.device = device
            return _train(args)
    except Exception as err:
        if errors is None or not _report_to_launcher(errors, err):
            raise
        return 1


_STREAM_OPTIONS = ("targets", "sampler", "std", "link")


def _check_stream_options(args: argparse.Namespace) -> None:
    """Refuse ``--stream``'s options with ``--data`` (whose file fixes its targets and end
    link: they were ignored) and ``--std`` without ``--sampler normal``.

    Raises:
        ValueError: in one line.
    """
    if args.stream is None:
        given = [f"--{name}" for name in _STREAM_OPTIONS if getattr(args, name) is not None]
        if given:
            raise ValueError(
                f"{', '.join(given)}: --stream's options; --data's file fixes its targets, "
                "joints and end link ('torchik dataset' sets them)"
            )
        return
    _std(args)


def _launches(args: argparse.Namespace) -> bool:
    """Whether this process starts the ``--nproc`` workers (and trains in none of them)."""
    from torchik.train import distributed

    return args.nproc > 1 and not distributed.launched()


def _reports(args: argparse.Namespace) -> bool:
    """Whether this process names what it chose (the end link): one process, rank 0 of the
    workers (each worker chooses too), not the process that launches them (it only checks
    every setting first)."""
    from torchik.train import distributed

    return distributed.is_main() and not _launches(args)


_ERRORS_DIR = "TORCHIK_TRAIN_ERRORS"
"""The environment variable naming the folder where the workers of ``--nproc`` write their
errors, for the launching process to print each once."""

_TORCHRUN = "import sys; from torchik.cli.train import _torchrun; sys.exit(_torchrun(sys.argv[1:]))"


def _launch(args: argparse.Namespace) -> int:
    """Check every setting here (one line, before a process starts), then run this command on
    ``args.nproc`` processes under ``torchrun`` (one machine); Ctrl-C or SIGTERM reach it once,
    forwarded, and the workers' errors are printed once each."""
    import shutil
    import subprocess
    import tempfile

    _setup(args)  # nothing in --out changes: the first worker claims it again
    print(f"training on {args.nproc} processes (torch.distributed)", file=sys.stderr, flush=True)
    errors = tempfile.mkdtemp(prefix="torchik-train-")
    try:
        env = {**os.environ, _ERRORS_DIR: errors}
        # a session of its own: a terminal's Ctrl-C reaches torchrun once, from this process
        proc = subprocess.Popen(_workers_command(args), env=env, start_new_session=True)
        code = _wait_forwarding_signals(proc)
        messages = _launcher_errors(errors)
    finally:
        shutil.rmtree(errors, ignore_errors=True)
    for message in messages:
        print(f"torchik: error: {message}", file=sys.stderr)
    return 1 if messages and code != _INTERRUPTED else code


def _workers_command(args: argparse.Namespace) -> list[str]:
    """The ``torchrun`` command of ``--nproc``: each worker runs this command as given,
    ``--nproc N`` included (a worker under torchrun does not launch again), so that the resume
    line of Ctrl-C keeps it."""
    return [sys.executable, "-c", _TORCHRUN, str(args.nproc), *args.argv]


def _wait_forwarding_signals(proc: Any) -> int:
    """``proc``'s exit status, SIGINT and SIGTERM passed on to it meanwhile (as 130: Ctrl-C
    that only stops this process would leave the workers running)."""
    import signal
    import threading

    def forward(signum: int, _frame: Any) -> None:
        proc.send_signal(signum)

    caught = (signal.SIGINT, signal.SIGTERM)
    main = threading.current_thread() is threading.main_thread()
    old = {sig: signal.signal(sig, forward) for sig in caught} if main else {}
    try:
        return proc.wait()
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _torchrun(argv: list[str]) -> int:
    """``torchrun --standalone --nproc-per-node=argv[0] -m torchik argv[1:]`` without its own
    logging and tracebacks (the workers say what failed; the launching process prints it): 0,
    1 where a worker failed, 128 + N on signal N. The command is not parsed by torchrun, whose
    abbreviations take ``--nproc`` for its own ``--nproc-per-node``."""
    import logging

    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args
    from torch.distributed.run import run as torchrun

    logging.disable(logging.ERROR)  # the elastic agent's lines about its workers
    try:
        options = parse_args(["--standalone", f"--nproc-per-node={argv[0]}", "-m", "torchik"])
        options.training_script_args = argv[1:]
        torchrun(options)
    except SignalException as err:
        return 128 + int(err.sigval)
    except ChildFailedError as err:
        codes = {failure.exitcode for failure in err.failures.values()}
        return _INTERRUPTED if codes == {_INTERRUPTED} else 1
    except Exception as err:  # the rendezvous: a port, the network
        print(f"torchik: error: torchrun: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    return 0


def _report_to_launcher(folder: str, err: Exception) -> bool:
    """Write this worker's error (one line, as the command line prints it) for the launching
    process to print; whether it is one the command line reports in one line (otherwise its
    traceback shows)."""
    import time

    from torchik.train import distributed

    if not isinstance(err, _ERRORS):
        return False
    text = _message(err)
    rank = int(os.environ.get("RANK", distributed.world()[0]))
    name = f"{time.time_ns():020d}-{rank}.txt"  # read back in the order they failed
    write_text(Path(folder) / name, text)
    return True


def _launcher_errors(folder: str) -> list[str]:
    """The workers' errors in ``folder``, each once, in the order they happened."""
    messages: list[str] = []
    for path in sorted(Path(folder).glob("*.txt")):
        text = path.read_text(encoding="utf-8").strip()
        if text and text not in messages:
            messages.append(text)
    return messages


@dataclasses.dataclass
class _Setup:
    """What ``torchik train`` checked and built before training: nothing in ``out`` changes
    before every one of these holds."""

    config: Any
    source: Any
    val: Any
    robot: Any
    rows: str
    provenance: dict
    out: Path
    preset: str
    model: Any
    found: list[str]


def _settings(args: argparse.Namespace) -> tuple[type, dict, Any]:
    """``(model family, model config kwargs, TrainConfig)`` of the options and --config."""
    from torchik.train.engine import TrainConfig

    files, pairs = _config_files(args)
    cls = _family(args.model)
    model_kw, train_kw = _split_settings(files, cls.Config, TrainConfig)
    pair_kw = _split_config(pairs, cls.Config, TrainConfig)
    model_kw, train_kw = {**model_kw, **pair_kw[0]}, {**train_kw, **pair_kw[1]}
    if args.steps is not None:
        train_kw["steps"] = args.steps
    config = TrainConfig(**{**train_kw, "device": args.device, "seed": args.seed})
    if not 0 <= args.val_fraction < 1:
        raise ValueError(f"--val-fraction must be in [0, 1), got {args.val_fraction}")
    return cls, model_kw, config


def _setup(args: argparse.Namespace) -> _Setup:
    """Every setting checked, the data read, the model built and ``--out`` claimed; the files
    of an earlier run that ``--overwrite`` replaces are listed in ``found``, not yet deleted."""
    from torchik.train import distributed

    given = _run_folder(Path(args.out)) if args.out is not None else None  # before any work
    cls, model_kw, config = _settings(args)
    source, val, robot, rows, provenance = _training_data(args, config)
    spec = source.spec
    out = given or _run_folder(Path(f"runs/{args.model}_{spec.robot}"))
    found = _claim_on_rank_0(out, args.resume, args.overwrite, provenance)
    preset, model_config = _model_config(cls, args.preset, model_kw, spec.dof)
    torch.manual_seed(args.seed)  # the initial weights: one --seed, one run, bit for bit
    model = cls(spec, model_config)
    _check_batches(source, config, max(args.nproc, distributed.world()[1]))
    if args.minutes is not None:
        config = _fit_minutes(args, model, source, config)
    return _Setup(config, source, val, robot, rows, provenance, out, preset, model, found)


def _run_folder(out: Path) -> Path:
    """``out``, refused where a file stands in the way of the folder (``--out run.png``, an
    image that is there; or a file among its parents): the error the folder's creation would
    raise once the data was read and the model built ("'run.png' is a file, not a folder")."""
    for path in (out, *out.parents):
        if os.path.lexists(path):
            if not path.is_dir():
                raise FileExistsError(errno.EEXIST, "File exists", str(path))
            break
    return out


def _check_batches(source: Any, config: Any, processes: int) -> None:
    """Refuse a batch that the training set cannot fill or the processes cannot share (what
    :func:`torchik.train.train` refuses, checked before an earlier run is replaced)."""
    from torchik.learn.data import IKDataset
    from torchik.train.engine import check_batch_size

    rows = len(source) if isinstance(source, IKDataset) else None
    try:
        check_batch_size(config.batch_size, rows, processes)
    except ValueError as err:  # how to change it, in the command's terms
        raise ValueError(f"{err}: set another with --config batch_size=N") from None


def _train(args: argparse.Namespace) -> int:
    from torchik.train import distributed
    from torchik.train.loop import train

    setup = _setup(args)
    main, out, config = distributed.is_main(), setup.out, setup.config
    if main:
        for name in setup.found:  # --overwrite: only now that everything is checked
            (out / name).unlink()
        size = sum(p.numel() for p in setup.model.parameters())
        print(f"training {args.model} ({setup.preset}, {size:,} parameters) on {setup.rows} for "
              f"{config.steps} steps; run folder {out}", file=sys.stderr, flush=True)  # fmt: skip
    step, recorded = [0], [False]

    def callback(n: int, _: dict) -> None:  # rank 0's: the data is recorded with a checkpoint
        step[0] = n
        recorded[0] = recorded[0] or _record_data(out, setup.provenance)

    try:
        result = train(setup.model, setup.source, setup.val, config, out, resume=args.resume,
                       robot=setup.robot, callback=callback)  # fmt: skip
    except KeyboardInterrupt as err:  # TrainingInterrupted knows the step, a resumed one too
        if main:
            _record_data(out, setup.provenance)
            print(_interrupted(out, getattr(err, "step", step[0]), args.argv), file=sys.stderr)
        return _INTERRUPTED
    if main:
        result.model.save(out / "model.pt")
        write_text(out / _DATA_RECORD, json.dumps(setup.provenance) + "\n")
        print(_train_summary(result, setup.robot is not None, out))
    return 0


def _check_minutes(args: argparse.Namespace, launched: bool) -> None:
    """Refuse ``--minutes`` where its measured steps cannot hold: a resume (the run's schedule
    is set) and several processes (each would measure its own)."""
    if args.resume:
        raise ValueError(
            "--minutes measures the speed anew, which would change the schedule of the run "
            "being resumed: resume with --steps N, the steps printed when it started"
        )
    if args.nproc > 1 or launched:
        raise ValueError("--minutes works on one process; give --steps with --nproc or torchrun")


def _fit_minutes(args: argparse.Namespace, model: Any, source: Any, config: Any) -> Any:
    """``config`` with the steps that fill ``--minutes`` on this machine, measured."""
    from torchik.train.budget import steps_for_minutes

    print(f"measuring the training speed for --minutes {args.minutes:g}...", file=sys.stderr)
    steps = steps_for_minutes(model, source, config, args.minutes)
    # what the resume line of Ctrl-C prints
    args.argv = _replace_option(args.argv, "--minutes", ["--steps", str(steps)])
    warmup = min(config.warmup_steps, max(1, steps // 10))
    return dataclasses.replace(config, steps=steps, warmup_steps=warmup)


def _replace_option(argv: Sequence[str], option: str, replacement: list[str]) -> list[str]:
    """``argv`` with each ``option VALUE`` (or ``option=VALUE``) replaced by ``replacement``."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == option or arg.startswith(f"{option}="):
            skip = arg == option
            out += replacement
        else:
            out.append(arg)
    return out


def _claim_on_rank_0(out: Path, resume: bool, overwrite: bool, provenance: dict) -> list[str]:
    """:func:`_claim_out` and, to resume, :func:`_check_resumed_data` on rank 0 alone (the
    files to replace; none on the other ranks); its verdict reaches every rank."""
    from torchik.train import distributed

    error, found = None, []
    if distributed.is_main():
        try:
            found = _claim_out(out, resume, overwrite)
            if resume:
                _check_resumed_data(out, provenance)
        except ValueError as err:
            error = str(err)
    error = distributed.broadcast(error)
    if error is not None:
        raise ValueError(error)
    return found


def _training_data(args: argparse.Namespace, config) -> tuple[Any, Any, Any, str, dict]:
    """``(training source, validation set or None, robot or None, description of the rows,
    provenance for train_data.json)`` from ``--data`` (a held-out ``--val-fraction``) or
    ``--stream`` (a validation draw of ``val_targets`` pairs apart from the stream)."""
    from torchik.learn.data import FKStream, load_dataset

    if args.stream is None:
        data = load_dataset(_torch_file(args.data, _NOT_DATA))
        parts = data.split((1 - args.val_fraction, args.val_fraction), seed=args.seed)
        val = parts[1] if len(parts[1]) else None
        robot = _robot_for(data.spec, args.robot)
        return parts[0], val, robot, f"{len(parts[0])} rows", _provenance(args.data, data)
    robot = _robot(args.stream)
    link = _end_link(args, robot, quiet=not _reports(args))
    targets = args.targets or "position"
    _check_target_kind_fits(robot, link, targets)
    stream = FKStream(robot, link, targets, args.sampler or "uniform", seed=args.seed, **_std(args))
    val = stream.draw(config.val_targets, seed=args.seed + 1) if args.val_fraction > 0 else None
    rows = f"fresh {targets} pairs of {robot.name} made by FK each step"
    return stream, val, robot, rows, {"stream": repr(stream)}


def _family(name: str) -> type[Any]:
    from torchik.models.registry import families

    if name not in families():
        raise ValueError(f"unknown model family {name!r}; choose one of {sorted(families())}")
    return families()[name]


def _model_config(cls, preset: str | None, overrides: dict, dof: int) -> tuple[str, Any]:
    """``(description, config)``: ``--preset``'s sizes, else the family's default for a robot
    of ``dof`` joints (``Config.for_dof`` where a family has one); ``--config`` on top."""
    makers = {"tiny": lambda **kw: dataclasses.replace(cls.tiny_config(), **kw)}
    makers.update({n: getattr(cls.Config, n) for n in ("small", "paper") if hasattr(cls.Config, n)})
    if preset is None:
        if hasattr(cls.Config, "for_dof"):
            return f"default size for {dof} joints", cls.Config.for_dof(dof, **overrides)
        return "default size", cls.Config(**overrides)
    if preset not in makers:
        raise ValueError(
            f"the {cls.family} family has no {preset!r} preset; its presets: {', '.join(makers)}"
        )
    return f"{preset} preset", makers[preset](**overrides)


def _claim_out(out: Path, resume: bool, overwrite: bool) -> list[str]:
    """Refuse to train over an earlier run in ``out`` unless asked to resume or overwrite it;
    returns the files of the run that ``overwrite`` replaces (the caller deletes them once
    every setting is checked, so that no stale checkpoint outlives the new run)."""
    from torchik.train.loop import CHECKPOINT

    if resume and overwrite:
        raise ValueError("--resume continues the run in --out, --overwrite replaces it: pick one")
    if resume:
        if not (out / CHECKPOINT).is_file():
            raise ValueError(f"--resume: there is no {out / CHECKPOINT} to resume from")
        return []
    found = [name for name in _RUN_FILES if (out / name).exists()]
    if found and not overwrite:
        raise ValueError(
            f"{out} already holds a run ({', '.join(found)}): pass --resume to continue it, "
            "--overwrite to replace it, or another --out"
        )
    return found


def _check_resumed_data(out: Path, provenance: dict) -> None:
    """Refuse to resume the run in ``out`` on another data set than its ``train_data.json``
    records (the same rows under another path are the same data: they are told by hash)."""
    record = out / _DATA_RECORD
    if "sha256" not in provenance or not record.is_file():
        return  # a stream, or a run without a record (an older torchik's): nothing to compare
    try:
        trained = json.loads(read_text(record))
        old, digest = str(trained["path"]), trained["sha256"]
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"--resume: {record} cannot be read: the run's data is unknown") from None
    if digest != provenance["sha256"]:
        raise ValueError(
            f"--resume: the run in {out} was trained on {old}, and --data {provenance['path']} "
            f"holds other rows: resume with --data {old}, or train on the new data as a new run "
            "(another --out, or --overwrite to replace this one)"
        )


def _record_data(out: Path, provenance: dict) -> bool:
    """Write ``out/train_data.json`` (what ``eval`` and a resume check the data against) once
    the run has a checkpoint; whether it was written."""
    from torchik.train.loop import CHECKPOINT

    if not (out / CHECKPOINT).is_file():
        return False
    write_text(out / _DATA_RECORD, json.dumps(provenance) + "\n")
    return True


def _interrupted(out: Path, step: int, argv: Sequence[str]) -> str:
    """The line an interrupted ``train`` prints: where it stopped and how to resume."""
    from torchik.train.loop import CHECKPOINT

    path = out / CHECKPOINT
    if not path.is_file():
        return f"interrupted at step {step}, before the first checkpoint: nothing to resume"
    try:
        saved = load_tensors(path, "cpu")["training"]["step"]
    except Exception:  # a torch error of any type, or a checkpoint without training state
        return f"interrupted at step {step}; {path} cannot be read: nothing to resume"
    step = max(step, saved)  # a resumed run stopped before its first step is at its checkpoint
    where = f"at step {step}" + (f" (last checkpoint at step {saved})" if saved != step else "")
    return f"interrupted {where}; resume with: {_resume_command(list(argv), out)}"


def _train_summary(result, metric_is_error: bool, out: Path) -> str:
    text = f"trained {result.model.family} for {result.steps} steps in {result.seconds:.1f} s"
    if result.best_val is not None:
        best = (
            f"{result.best_val * 1000:.2f} mm" if metric_is_error else f"loss {result.best_val:.4g}"
        )
        text += f"; best validation {best} at step {result.best_step}"
    return (
        f"{text}\nsaved {out / 'model.pt'} (resume from {out / 'checkpoint.pt'}, curve in log.csv)"
    )

"""Special files for every path argument: every command and function that reads or writes a
file, given a FIFO, a character device (``/dev/full``'s numbers; ``/dev/zero`` for inputs), a
directory, a symbolic link (to nothing, to a FIFO), a path in a missing folder, or a 16 GB
sparse file.

Passing, for an input: refused in one line (the CLI: exit 1 and one ``torchik: error:`` line;
a function: a ValueError, TypeError or OSError) within the deadline, or run (a link to a
regular file, a missing output's link written through). For an output: the same, and the
special file is still what it was (a device never turned into a regular file, a link never
replaced). A hang (over :data:`HANG_S`), a traceback, a multi-line message or a replaced
special file is a finding.

CI runs three special files per entry point, every kind among them
(``tests/fuzz/test_paths.py``); ``make fuzz`` runs every pair
(``python -m tests.fuzz.paths``) and prints the table for ``benchmarks/results/fuzz.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import stat
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

HANG_S = 20
TUNE = ["tune", "--model", "cvae", "--robot", "planar:1,1,1", "--preset", "tiny", "--steps",
        "10", "--val-every", "10", "--batch-size", "32", "--train-size", "100", "--val-size",
        "20", "--trials", "1", "--quiet"]  # fmt: skip
TRAIN = ["--model", "mlp", "--preset", "tiny", "--steps", "1", "--config", "batch_size=8",
         "val_every=0"]  # fmt: skip


# ---------------------------------------------------------------------------- special files
def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _device(path: Path) -> Path:
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # /dev/full's numbers; needs root
    return path


def _huge(path: Path) -> Path:
    with open(path, "wb") as file:
        file.truncate(2**34)  # sparse: 16 GB to read, nothing on the disk
    return path


SPECIAL: dict[str, Callable[[Path], Path]] = {
    "fifo": _fifo,
    "device": _device,
    "dev-zero": lambda path: Path("/dev/zero"),  # inputs only: never written
    "directory": lambda path: (path.mkdir(), path)[1],
    "dangling-link": lambda path: (path.symlink_to(path.parent / "nothing"), path)[1],
    "link-to-fifo": lambda path: (path.symlink_to(_fifo(path.parent / "fifo")), path)[1],
    "missing-folder": lambda path: path.parent / "no" / "such" / path.name,
    "huge": _huge,
}


# ---------------------------------------------------------------------------- entry points
def _good(folder: str) -> dict[str, str]:
    """A data set, a model and a training log made once in ``folder`` for the entries."""
    from torchik.cli import main

    out = Path(folder)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(["dataset", "snake2", "-n", "64", "--out", str(out / "data.pt")])
        main(["train", "--data", str(out / "data.pt"), *TRAIN, "--out", str(out / "run")])
    return {"data": str(out / "data.pt"), "model": str(out / "run" / "model.pt")}


def _cli(argv: list[str]) -> str:
    from torchik.cli import main

    stderr = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
        code = main(argv)
    lines = [x for x in stderr.getvalue().strip().splitlines() if x.startswith("torchik: e")]
    if code in (0, 3):
        return "ran"
    if code == 1 and len(lines) == 1 and "Traceback" not in stderr.getvalue():
        raise ValueError(lines[0])
    return f"cli exit {code}: {stderr.getvalue()[-300:]!r}"


def _library(name: str, path: str, good: dict[str, str]) -> str:
    import torchik
    from torchik import models
    from torchik.learn import load_dataset
    from torchik.models.checkpoint import read_checkpoint
    from torchik.tune.space import read_space
    from torchik.viewer.scene import load_solutions

    calls = {
        "models.load": lambda: models.load(path),
        "read_checkpoint": lambda: read_checkpoint(path),
        "load_dataset": lambda: load_dataset(path),
        "Robot.from_urdf": lambda: torchik.Robot.from_urdf(Path(path)),
        "read_space": lambda: read_space(path, "mlp"),
        "load_solutions": lambda: load_solutions(path, torchik.load_robot("snake2")),
        "IKDataset.save": lambda: load_dataset(good["data"]).save(path),
        "IKModel.save": lambda: models.load(good["model"]).save(path),
    }
    calls[name]()
    return "ran"


# name: (suffix, output?, how to run it with ``path`` and the good files)
ENTRIES: dict[str, tuple[str, bool, Callable[[str, dict, Path], str]]] = {
    "cli info ROBOT": (".urdf", False, lambda p, g, d: _cli(["info", p, "--samples", "10"])),
    "cli solve --model": (".pt", False, lambda p, g, d: _cli(
        ["solve", "snake2", "--position", "0.1", "0.1", "--model", p, "-n", "2"])),
    "cli eval --model": (".pt", False, lambda p, g, d: _cli(
        ["eval", "--model", p, "--data", g["data"], "-n", "1", "--limit", "4"])),
    "cli eval --data": (".pt", False, lambda p, g, d: _cli(
        ["eval", "--model", g["model"], "--data", p, "-n", "1", "--limit", "4"])),
    "cli train --data": (".pt", False, lambda p, g, d: _cli(
        ["train", "--data", p, *TRAIN, "--out", str(d / "r")])),
    "cli train --config": (".json", False, lambda p, g, d: _cli(
        ["train", "--stream", "snake2", "--model", "mlp", "--config", p, "--steps", "1",
         "--out", str(d / "r")])),
    "cli tune --space": (".json", False, lambda p, g, d: _cli(
        [*TUNE, "--space", p, "--out", str(d / "t")])),
    "cli plot training": (".csv", False, lambda p, g, d: _cli(
        ["plot", "training", p, "--out", str(d / "x.png")])),
    "cli plot benchmark": (".json", False, lambda p, g, d: _cli(
        ["plot", "benchmark", p, "--out", str(d / "x.png")])),
    "cli dataset --out": (".pt", True, lambda p, g, d: _cli(
        ["dataset", "snake2", "-n", "10", "--out", p])),
    "cli plot --out": (".png", True, lambda p, g, d: _cli(
        ["plot", "arm", "snake2", "--position", "0.1", "0.1", "-n", "2", "--out", p])),
    "cli train --out": ("", True, lambda p, g, d: _cli(
        ["train", "--data", g["data"], *TRAIN, "--out", p])),
    "cli tune --out": ("", True, lambda p, g, d: _cli([*TUNE, "--out", p])),
    "cli tune --storage": (".journal", True, lambda p, g, d: _cli(
        [*TUNE, "--storage", p, "--out", str(d / "t")])),
    **{name: (suffix, out, lambda p, g, d, name=name: _library(name, p, g))
       for name, suffix, out in [
           ("models.load", ".pt", False), ("read_checkpoint", ".pt", False),
           ("load_dataset", ".pt", False), ("Robot.from_urdf", ".urdf", False),
           ("read_space", ".json", False), ("load_solutions", ".json", False),
           ("IKDataset.save", ".pt", True), ("IKModel.save", ".pt", True)]},
}  # fmt: skip


def _expired(*_) -> None:
    raise TimeoutError(f"no answer in {HANG_S} s")


def run_one(entry: str, kind: str, folder: Path, good: dict) -> tuple[str, float, str]:
    """``(result, seconds, message)`` of ``entry`` given a special file of ``kind``."""
    suffix, output, call = ENTRIES[entry]
    case = Path(tempfile.mkdtemp(prefix=f"{entry.replace(' ', '_').replace('/', '_')}-{kind}",
                                 dir=folder))  # fmt: skip
    if output and kind == "dev-zero":
        return "skipped (never written)", 0.0, ""
    try:
        path = SPECIAL[kind](case / f"special{suffix}")
    except PermissionError:
        return "skipped (needs root)", 0.0, ""
    mode = os.lstat(path).st_mode if os.path.lexists(path) else None
    start, previous = time.perf_counter(), signal.signal(signal.SIGALRM, _expired)
    try:
        signal.alarm(HANG_S)
        result, message = call(str(path), good, case), ""
    except TimeoutError as err:
        result, message = "HANG", str(err)
    except (ValueError, TypeError, OSError) as err:
        result, message = "refused", str(err).strip()
        if "\n" in message:
            result = "refused (multi-line message)"
    except Exception as err:  # noqa: BLE001 - a leak is what the fuzz looks for
        result, message = f"LEAK {type(err).__name__}", str(err)[:200]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    if mode is not None and (not os.path.lexists(path) or os.lstat(path).st_mode != mode):
        result = f"REPLACED ({result})"
    return result, time.perf_counter() - start, message


def finding(result: str) -> bool:
    """A hang, a leak, a multi-line message or a replaced special file."""
    return not (result in ("refused", "ran") or result.startswith("skipped"))


def run(pairs: list[tuple[str, str]]) -> list[tuple[str, str, str, float, str]]:
    """``(entry, kind, result, seconds, message)`` of every ``(entry, kind)`` pair."""
    rows = []
    with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryDirectory() as made:
        good = _good(made)
        for entry, kind in pairs:
            rows.append((entry, kind, *run_one(entry, kind, Path(folder), good)))
    return rows


def sample(per_entry: int) -> list[tuple[str, str]]:
    """``per_entry`` kinds for each entry point, in turn, so that every kind comes up."""
    kinds = list(SPECIAL)
    return [(entry, kinds[(i * per_entry + j) % len(kinds)])
            for i, entry in enumerate(ENTRIES) for j in range(per_entry)]  # fmt: skip


def table(rows) -> str:
    """A markdown table: one row per special file, the results over every entry point."""
    out = ["| special file | entry points | results | slowest | findings |"]
    out.append("|---|---|---|---|---|")
    for kind in SPECIAL:
        mine = [r for r in rows if r[1] == kind]
        counts = Counter(r[2].split(" (")[0] for r in mine)
        text = ", ".join(f"{k} {v}" for k, v in counts.most_common())
        slowest = max((r[3] for r in mine), default=0.0)
        bad = sum(finding(r[2]) for r in mine)
        out.append(f"| {kind} | {len(mine)} | {text} | {slowest:.2f} s | {bad} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entry", action="append", choices=list(ENTRIES))
    args = parser.parse_args(argv)
    rows = run([(e, k) for e in args.entry or list(ENTRIES) for k in SPECIAL])
    print(table(rows))
    bad = [r for r in rows if finding(r[2])]
    for entry, kind, result, seconds, message in bad:
        print(f"- {entry} / {kind}: {result} ({seconds:.2f} s) {message[:200]}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

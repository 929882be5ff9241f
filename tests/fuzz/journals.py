"""Damaged tune journals, and concurrent writers on a disk that fills.

A damaged journal is the ``study.journal`` of a small finished study with one mutation: cut at
a random byte (a torn last record), a torn record with the next record appended to it (what
Optuna did once space was freed), 1 to 10 flipped bits, a line dropped, duplicated, swapped with
another or replaced by garbage, or an empty file. Each is opened by :func:`open_journal` (then
the study loaded and its trials read) and by ``torchik tune --resume``. Passing: it opens intact,
or recovered (a torn record dropped with a warning), or it is refused in one line naming the
file, in under a second (the CLI: one ``torchik: error:`` line, exit 1); ``--resume`` may run
the trials the damage lost.

A concurrent case runs 4 threads, each appending records through its own
:class:`~torchik.tune.journal.JournalFile` while writes fail as on a full disk (a random part
of the record written, then ENOSPC) 30 % of the time. Passing: the file holds every record
whose append returned, once, none whose append failed, and no torn line.

``tests/fuzz/test_journals.py`` runs a bounded sample in CI; ``make fuzz`` runs
``python -m tests.fuzz.journals --n 300`` and prints the table for ``benchmarks/results/fuzz.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import json
import random
import shutil
import tempfile
import threading
import time
import warnings
from collections import Counter
from functools import cache
from pathlib import Path

import optuna

from torchik import cli
from torchik.tune import journal
from torchik.tune.journal import JournalFile, open_journal, repair_records
from torchik.tune.study import JOURNAL, TuneConfig, counted_trials, tune

SLOW_S = 1.0
NAME = "cvae_planar1-1-1_position_error"
SETTINGS = dict(  # a trial of ~0.1 s
    family="cvae", robot="planar:1,1,1", trials=2, steps=30, val_every=10, batch_size=64,
    train_size=300, val_size=50, preset="tiny",
)  # fmt: skip
CLI = ["tune", "--model", "cvae", "--robot", "planar:1,1,1", "--preset", "tiny", "--steps", "30",
       "--val-every", "10", "--batch-size", "64", "--train-size", "300", "--val-size", "50",
       "--quiet", "--trials", "2", "--resume"]  # fmt: skip


@cache
def good_journal() -> bytes:
    """The journal of a finished study of two trials."""
    with tempfile.TemporaryDirectory() as folder:
        tune(TuneConfig(**SETTINGS), folder, progress=False)
        return (Path(folder) / JOURNAL).read_bytes()


# ---------------------------------------------------------------------------- mutations
def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data))]


def _torn_append(rng, data):
    lines = _lines(data)
    k = rng.randrange(len(lines) - 1)
    return b"".join(lines[:k] + [lines[k][: rng.randrange(1, len(lines[k]) - 1)]] + lines[k + 1 :])


def _flip(rng, data):
    out = bytearray(data)
    for _ in range(rng.randint(1, 10)):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def _line(rng, data):
    lines = _lines(data)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    how = rng.choice(["drop", "duplicate", "swap", "garbage"])
    if how == "drop":
        del lines[i]
    elif how == "duplicate":
        lines.insert(j, lines[i])
    elif how == "swap":
        lines[i], lines[j] = lines[j], lines[i]
    else:
        lines[i] = rng.choice([b"\n", b"null\n", b"{}\n", b'{"op_code": 3}\n', bytes(9) + b"\n"])
    return b"".join(lines)


MUTATIONS = {
    "truncate": _truncate,
    "torn-append": _torn_append,
    "flip": _flip,
    "line": _line,
    "empty": lambda rng, data: b"",
}


def crafted(seed: int) -> tuple[str, bytes]:
    """The ``seed``-th damaged journal: ``(kind, bytes)``."""
    rng = random.Random(seed)
    kind = list(MUTATIONS)[seed % len(MUTATIONS)]
    return kind, MUTATIONS[kind](rng, good_journal())


# ---------------------------------------------------------------------------- entry points
def _open(path: Path) -> str:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        storage = open_journal(path)
        names = optuna.study.get_all_study_names(storage)
        for name in names:
            counted_trials(optuna.load_study(study_name=name, storage=storage))
    return "recovered" if any("dropped" in str(w.message) for w in caught) else "intact"


def _resume(path: Path) -> str:
    stderr = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
        code = cli.main([*CLI, "--out", str(path.parent)])
    lines = stderr.getvalue().strip().splitlines()
    errors = [line for line in lines if not line.startswith("torchik: warning: ")]
    if code == 0:
        return "ran"
    if code == 1 and len(errors) == 1 and errors[0].startswith("torchik: error:"):
        raise ValueError(errors[0])
    return f"cli exit {code}: {stderr.getvalue()[-300:]!r}"


ENTRY_POINTS = {"open_journal": _open, "cli tune --resume": _resume}
OK = ("intact", "recovered", "ran", "refused", "whole")


def run_one(seed: int, entry: str, folder: Path) -> tuple[str, str, float, str]:
    """``(kind, result, seconds, message)`` of the ``seed``-th journal through ``entry``."""
    if entry == "concurrent":
        start = time.process_time()
        result = concurrent_appends(seed, folder)
        return "concurrent", result, time.process_time() - start, ""
    kind, data = crafted(seed)
    case = folder / f"case{seed}"
    shutil.rmtree(case, ignore_errors=True)
    case.mkdir()
    (case / JOURNAL).write_bytes(data)
    start = time.process_time()
    try:
        result, message = ENTRY_POINTS[entry](case / JOURNAL), ""
    except (ValueError, TypeError, OSError) as err:
        message = str(err)
        result = "refused"
        if "\n" in message.strip():
            result = "refused (multi-line message)"
        elif entry == "open_journal" and str(case / JOURNAL) not in message:
            result = "refused (no file named)"
    except Exception as err:  # noqa: BLE001 - a leak is what the fuzz looks for
        result, message = f"LEAK {type(err).__name__}", str(err)[:200]
    return kind, result, time.process_time() - start, message


def concurrent_appends(seed: int, folder: Path, threads: int = 4, each: int = 25) -> str:
    """Threads appending through their own :class:`JournalFile` while 30 % of the writes fail
    part-way with ENOSPC; ``"whole"`` where the file holds exactly the records that were
    appended, else what is wrong."""
    rng, lock, real = random.Random(seed), threading.Lock(), journal._append
    path = folder / f"concurrent{seed}.journal"
    path.unlink(missing_ok=True)
    written: list[int] = []

    def flaky(target: Path, data: bytes) -> None:
        with lock:
            fail, cut = rng.random() < 0.3, rng.randrange(len(data))
        if fail:
            real(target, data[:cut])
            raise OSError(errno.ENOSPC, "No space left on device")
        real(target, data)

    def worker(t: int) -> None:
        backend = JournalFile(path)
        for i in range(each):
            with contextlib.suppress(OSError):
                backend.append_logs([{"op_code": 4, "worker_id": f"w{t}", "n": t * each + i}])
                with lock:
                    written.append(t * each + i)

    journal._append = flaky
    try:
        pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
    finally:
        journal._append = real
    kept, dropped = repair_records(path.read_bytes(), str(path))
    found = [json.loads(line)["n"] for line in kept.splitlines()]
    if dropped:
        return f"TORN {dropped}"
    return (
        "whole"
        if sorted(found) == sorted(written)
        else f"LOST/EXTRA {len(found)} vs {len(written)}"
    )


def finding(result: str, seconds: float) -> bool:
    """Anything but a pass, or a refusal slower than :data:`SLOW_S`."""
    return result not in OK or (result == "refused" and seconds > SLOW_S)


def run(seeds: range, entries: list[str]) -> list[tuple[str, int, str, str, float, str]]:
    """``(entry, seed, kind, result, seconds, message)`` of every seed through every entry."""
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for entry in entries:
            for seed in seeds:
                rows.append((entry, seed, *run_one(seed, entry, Path(folder))))
    return rows


def table(rows) -> str:
    """A markdown table: per entry point, cases, results counted, slowest refusal, findings."""
    out = [
        "| entry point | cases | results | slowest refusal | findings |",
        "|---|---|---|---|---|",
    ]
    for entry in [*ENTRY_POINTS, "concurrent"]:
        mine = [r for r in rows if r[0] == entry]
        if mine:
            counts = Counter(r[3] for r in mine)
            slowest = max((r[4] for r in mine if r[3] == "refused"), default=0.0)
            text = ", ".join(f"{k} {v}" for k, v in counts.most_common())
            bad = sum(finding(r[3], r[4]) for r in mine)
            out.append(f"| `{entry}` | {len(mine)} | {text} | {slowest * 1000:.0f} ms | {bad} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="journals per entry point")
    parser.add_argument("--concurrent", type=int, default=50, help="concurrent cases")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    rows = run(range(args.n), list(ENTRY_POINTS)) + run(range(args.concurrent), ["concurrent"])
    print(table(rows))
    bad = [r for r in rows if finding(r[3], r[4])]
    for entry, seed, kind, result, seconds, message in bad[:40]:
        print(f"- {entry} seed {seed} {kind}: {result} ({seconds:.2f} s) {message[:200]}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

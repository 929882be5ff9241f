"""Results you can trust later: a machine stamp, and tables written as markdown plus JSON.

A number means little without the machine, the load and the versions it came from. A
:class:`Report` takes a :func:`machine_stamp` when it is created and writes ``<name>.md`` (the
stamp as a table, then the intro and the tables) and ``<name>.json`` (the same, plain JSON
values) when it is written; every file in ``benchmarks/results/`` is one.

Example:
    >>> import tempfile
    >>> from experiments.table import Column, Table
    >>> table = Table("FK of my arm", [Column("seconds", "time")])
    >>> _ = table.add("mine", seconds=0.002)
    >>> report = Report("mine", "My arm", tables=[table])
    >>> md, js = report.write(tempfile.mkdtemp())
    >>> md.read_text().splitlines()[0], js.suffix
    ('# My arm', '.json')

On a shared machine, :func:`wait_for_quiet` waits for the other jobs to leave the cores before a
timing starts, and the stamp records the load average at the start and at the end.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.metadata as metadata
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from experiments.table import Table
from torchik.files import write_text

__all__ = [
    "GIT_COMMIT_ENV",
    "PARENT_ENV",
    "Report",
    "command_line",
    "cpu_busy_fraction",
    "cpu_model",
    "dist_version",
    "git_commit",
    "gpu_name",
    "jsonable",
    "load_average",
    "load_warning",
    "machine_stamp",
    "wait_for_quiet",
]

PARENT_ENV = "TORCHIK_BENCH_PARENT"
"""Environment variable a driver (``benchmarks/run.py``) sets to the command that launched it;
the stamp records it as ``launched_by``."""

_HERE = Path(__file__).resolve()
_CHECKOUT = _HERE.parents[3] if _HERE.parents[2].name == "src" else None
"""The folder above ``src/`` when torchik runs from a source checkout (else None: an installed
torchik must not report the commit of a repository its environment happens to sit in)."""


def cpu_model() -> str:
    """The CPU model name from ``/proc/cpuinfo`` (else :func:`platform.processor`)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def dist_version(dist: str) -> str:
    """The installed version of a distribution (``"pin"``, ``"torch"``), or ``"not installed"``."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def gpu_name() -> str:
    """The name of the first CUDA device torch sees, or ``"none"``."""
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"


GIT_COMMIT_ENV = "TORCHIK_GIT_COMMIT"
"""An environment variable that names the commit being run where the checkout's own git data
would name another: a copy of the working tree sent to another machine (a GPU machine's copy
carries an older snapshot's ``.git``). ``make gpu-check`` passes it through to the stamps."""


def git_commit(root: str | os.PathLike | None = None) -> str:
    """The short commit of a git checkout, with ``+dirty(src)`` when ``src/`` has changes; or
    the value of :data:`GIT_COMMIT_ENV` where it is set (with ``(given)``).

    Args:
        root: The checkout (default: the one torchik is imported from, if any).

    Returns:
        The commit, or ``"unknown"`` outside a checkout or without git.
    """
    given = os.environ.get(GIT_COMMIT_ENV, "").strip()
    if given:
        return f"{given} (given)"
    root = Path(root) if root is not None else _CHECKOUT
    if root is None:
        return "unknown"
    try:
        run: dict[str, Any] = dict(capture_output=True, text=True, check=True, timeout=10, cwd=root)
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], **run).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], **run).stdout
        return head + ("+dirty(src)" if dirty.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def command_line(root: str | os.PathLike | None = None) -> str:
    """The command that is running, interpreter included, as a shell line.

    Args:
        root: Paths under this folder are written relative to it (the interpreter keeps its
            symlinks, e.g. ``.venv/bin/python``); default: the current directory.
    """
    root = Path(root) if root is not None else Path.cwd()
    executable = sys.executable
    with contextlib.suppress(ValueError):
        executable = str(Path(os.path.abspath(executable)).relative_to(root))
    return shlex.join([executable, *sys.argv])


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages, rounded to 0.01 (NaN where the OS has none)."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,) * 3
    return [round(x, 2) for x in load]


def machine_stamp(
    anchors: Iterable[str] = (), *, root: str | os.PathLike | None = None
) -> dict[str, Any]:
    """Everything a reader needs to judge where a number came from.

    Args:
        anchors: Distributions whose versions go into the stamp too (the libraries compared).
        root: The checkout for the command line and the git commit (see :func:`command_line`;
            default: the current directory, and the checkout torchik is imported from).

    Returns:
        ``date`` (UTC), ``command``, ``launched_by`` (:data:`PARENT_ENV`), ``cpu``, ``cores``,
        ``torch_threads``, ``load_average_at_start``, ``gpu``, the versions of ``python``,
        ``torch``, ``numpy``, ``numba`` and ``torchik`` (with its git commit) and ``anchors``
        (distribution -> version), in this order.
    """
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command_line(root),
        "launched_by": os.environ.get(PARENT_ENV, ""),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average_at_start": load_average(),
        "gpu": gpu_name(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "numba": dist_version("numba"),  # compiles the CPU's IK loop (torchik.kinematics.native)
        "torchik": f"{dist_version('torchik')} (git {git_commit(root)})",
        "anchors": {dist: dist_version(dist) for dist in anchors},
    }


def cpu_busy_fraction(interval: float = 0.5) -> float:
    """The share of all cores' time spent busy during the next ``interval`` seconds.

    Read from ``/proc/stat`` (NaN where there is none). Called while this process sleeps, it
    measures the other jobs on the machine.
    """

    def snapshot() -> tuple[int, int]:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        return sum(values), values[3] + values[4]  # all jiffies; idle + iowait

    try:
        total0, idle0 = snapshot()
        time.sleep(interval)
        total1, idle1 = snapshot()
    except (OSError, ValueError, IndexError):
        return math.nan
    return round(1.0 - (idle1 - idle0) / max(1, total1 - total0), 3)


def wait_for_quiet(
    max_wait_s: float, threshold: float = 0.25, notify: Callable[[str], None] | None = None
) -> float:
    """Wait until other jobs keep less than ``threshold`` of the cores busy.

    Machines are often shared, and another job on a 2-core machine multiplies timings.

    Args:
        max_wait_s: Give up after this many seconds (0: do not wait).
        threshold: The busy share of all cores (:func:`cpu_busy_fraction`) that counts as quiet.
        notify: Called with one line when the wait starts (e.g. a logger).

    Returns:
        The seconds waited, rounded to 0.1.
    """
    start = time.perf_counter()
    if max_wait_s > 0 and cpu_busy_fraction(0.25) >= threshold:
        if notify is not None:
            notify("other jobs keep the CPU busy: waiting for a quieter machine")
        while time.perf_counter() - start < max_wait_s and cpu_busy_fraction() >= threshold:
            pass
    return round(time.perf_counter() - start, 1)


def load_warning(stamp: dict[str, Any]) -> str | None:
    """A one-line flag for a report measured on a loaded machine, or None.

    Flagged when a 1-minute load average of the stamp (``load_average_at_start``, or
    ``load_average_at_end``) exceeds its ``cores``: other jobs shared the cores, so timings are
    slower than on a quiet machine (accuracies are not affected).
    """
    cores = stamp.get("cores")
    loads = [stamp.get(k) for k in ("load_average_at_start", "load_average_at_end")]
    peak = max((load[0] for load in loads if load), default=math.nan)
    if not cores or not peak > cores:
        return None
    return (
        f"> **Loaded machine**: the 1-minute load average reached {peak:.1f} on {cores} cores; "
        "timings here are slower than on a quiet machine (accuracies are not affected).\n"
    )


def jsonable(value: Any) -> Any:
    """Plain JSON values: dict keys as strings, tuples as lists, numpy scalars as Python
    numbers, NaN and infinities as None (JSON has neither)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass
class Report:
    """A result: the machine stamp on top, then an intro and tables.

    Attributes:
        name: The file name, without suffix, of ``<name>.md`` and ``<name>.json``.
        title: The markdown title.
        intro: Lines of markdown between the stamp and the tables.
        tables: The :class:`~experiments.table.Table` objects, written in order.
        stamp: The :func:`machine_stamp` (taken when the report is created); add keys freely.
        started: :func:`time.perf_counter` at creation, for the stamp's ``duration_s``.
        measured_here: the tables were measured by this process (``False``: written from
            results measured elsewhere, whose stamp is given; no load or duration is added).
    """

    name: str
    title: str
    intro: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    stamp: dict[str, Any] = field(default_factory=machine_stamp)
    started: float = field(default_factory=time.perf_counter)
    measured_here: bool = True

    def stamp_markdown(self) -> str:
        """The stamp as a two-column markdown table (the command in backticks)."""
        lines = ["| machine | |", "|---|---|"]
        for key, value in self.stamp.items():
            if isinstance(value, dict):
                value = ", ".join(f"{k} {v}" for k, v in value.items())
            lines.append(f"| {key} | `{value}` |" if key == "command" else f"| {key} | {value} |")
        return "\n".join(lines) + "\n"

    def write(self, out_dir: str | os.PathLike) -> tuple[Path, Path]:
        """Write ``<name>.md`` and ``<name>.json`` into ``out_dir`` (created if missing).

        The stamp gains ``load_average_at_end`` and ``duration_s`` (since creation) first,
        when :attr:`measured_here`; a machine busier than its cores is flagged under the stamp
        (:func:`load_warning`). A ``## Reading`` section written by hand at the end of an
        earlier ``<name>.md`` is kept at the end of the new one, flagged as written for the
        earlier numbers (:func:`kept_reading`).

        Returns:
            The paths of the markdown and the JSON file.
        """
        if self.measured_here:
            self.stamp["load_average_at_end"] = load_average()
            self.stamp["duration_s"] = round(time.perf_counter() - self.started, 1)
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        parts = [f"# {self.title}\n", self.stamp_markdown()]
        parts += [warning] if (warning := load_warning(self.stamp)) else []
        parts += ["\n".join(self.intro) + "\n"] if self.intro else []
        parts += [table.markdown() for table in self.tables]
        md, js = out / f"{self.name}.md", out / f"{self.name}.json"
        reading = kept_reading(md.read_text()) if md.is_file() else None
        write_text(md, "\n".join(parts + ([reading] if reading else [])))
        tables = [t.as_json() for t in self.tables]
        payload = {"stamp": self.stamp, "intro": self.intro, "tables": tables}
        write_text(js, json.dumps(jsonable(payload), indent=1, ensure_ascii=False) + "\n")
        return md, js


#: The heading of a reading written by hand below a report's tables.
READING = "## Reading"
_KEPT = "> Kept from an earlier run of this report"


def kept_reading(markdown: str) -> str | None:
    r"""The hand-written ``## Reading`` section at the end of a report's markdown, flagged for
    the next version of the file: its text was written for the numbers of the run stamped
    ``date`` in ``markdown`` (``None`` when there is no such section). A section flagged
    already is returned as it is, with the date of the run it was written for.

    >>> old = "# T\n| date | 2026-01-02 |\n\n## Reading (by hand)\n\n- faster\n"
    >>> reading = kept_reading(old).splitlines()
    >>> reading[0], reading[4]
    ('## Reading (by hand)', '- faster')
    >>> reading[2].startswith("> Kept from an earlier run of this report (2026-01-02)")
    True
    """
    lines = markdown.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(READING)), None)
    if start is None:
        return None
    if any(line.startswith(_KEPT) for line in lines[start:]):  # flagged already: as it was
        return "\n".join(lines[start:]) + "\n"
    date = next((line.split("|")[2].strip() for line in lines[:start]
                 if line.startswith("| date |")), "date unknown")  # fmt: skip
    body = lines[start + 1 :]
    while body and not body[0].strip():
        body.pop(0)
    flag = f"{_KEPT} ({date}): written for its numbers, check it against the tables above."
    return "\n".join([lines[start], "", flag, "", *body]) + "\n"

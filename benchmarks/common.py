"""Shared benchmark helpers: machine stamp, fixtures, anchors and writing results.

Timings come from ``torchik.protocols.time_call`` and tables are ``torchik.protocols.table``'s
(re-exported here).

The protocols live in ``shared/BENCHMARKS.md``. Importing this module sets
``torch.set_num_threads(os.cpu_count())`` as those protocols ask; benchmarks are scripts, so
that side effect is intended here (it would not be in the library).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib
import importlib.metadata as metadata
import io
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from torchik.protocols import Timing, time_call
from torchik.protocols.table import Column, Table, fmt_pct, fmt_sci, fmt_time

__all__ = ["Column", "Table", "Timing", "fmt_pct", "fmt_sci", "fmt_time", "time_call"]

REPO = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO / "benchmarks" / "results"
#: Distributions whose versions go into every stamp (the `bench` extra of pyproject.toml).
ANCHOR_DISTS = ("pytorch-kinematics", "pin", "pytracik", "ikpy", "scipy")
#: Environment variable run.py sets so that a stamp also names the command that launched it.
PARENT_ENV = "TORCHIK_BENCH_PARENT"

# the protocol: all cores. BENCH_THREADS overrides it where other jobs hold cores (a thread
# pool larger than the free cores spins and slows every library by an order of magnitude).
torch.set_num_threads(int(os.environ.get("BENCH_THREADS", 0)) or os.cpu_count() or 1)


# ----------------------------------------------------------------------------- machine stamp
def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (falls back to `platform.processor()`)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def dist_version(dist: str) -> str:
    """Installed version of a distribution, or ``"not installed"``."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def gpu_name() -> str:
    """Name of the first CUDA device torch sees, or ``"none"``."""
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"


def git_commit() -> str:
    """Short commit of the repository the benchmark ran from (``+dirty`` if modified)."""
    try:
        run = dict(capture_output=True, text=True, check=True, timeout=10, cwd=REPO)
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], **run).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], **run).stdout
        return head + ("+dirty(src)" if dirty.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _relative(path: str) -> str:
    with contextlib.suppress(ValueError):
        return str(Path(os.path.abspath(path)).relative_to(REPO))  # keep .venv symlinks
    return path


def command_line() -> str:
    """The exact command that is running, interpreter included, relative to the repo root."""
    return shlex.join([_relative(sys.executable), *sys.argv])


def machine_stamp() -> dict[str, Any]:
    """Everything a reader needs to judge where a number came from."""
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command_line(),
        "launched_by": os.environ.get(PARENT_ENV, ""),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average_at_start": load_average(),
        "gpu": gpu_name(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "torchik": f"{dist_version('torchik')} (git {git_commit()})",
        "anchors": {dist: dist_version(dist) for dist in ANCHOR_DISTS},
    }


# ---------------------------------------------------------------------------------- timing
def time_calls(
    fns: dict[str, Callable[[], object]], reps: int | None = None, **options: Any
) -> dict[str, Timing]:
    """``torchik.protocols.time_call`` of each call in turn (same options; ``reps`` is ignored:
    the repeats are adaptive)."""
    return {name: time_call(fn, **options) for name, fn in fns.items()}


# --------------------------------------------------------------------- anchors and fixtures
@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence stdout and stderr, C-level writes included (anchor parsers print warnings)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


def try_import(module: str) -> tuple[Any | None, str | None]:
    """Import an anchor; on any failure return ``(None, reason)`` so a row can say so."""
    try:
        with quiet():
            return importlib.import_module(module), None
    except Exception as exc:  # any import failure means the anchor is missing
        return None, f"{type(exc).__name__}: {exc}"


def describe(exc: BaseException) -> str:
    """One-line description of an exception for a table's status column."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:120]}" if text else type(exc).__name__


def shared_dir() -> Path | None:
    """The project's ``shared/`` folder (``$TORCHIK_SHARED``, ``./shared`` or ``../shared``)."""
    for candidate in (os.environ.get("TORCHIK_SHARED"), REPO / "shared", REPO.parent / "shared"):
        if candidate and (Path(candidate) / "fixtures" / "urdf").is_dir():
            return Path(candidate)
    return None


def fixture_urdf(name: str) -> Path | None:
    """Path of a third-party fixture URDF (never copied into the repo), or None if absent."""
    shared = shared_dir()
    path = shared / "fixtures" / "urdf" / name if shared else None
    return path if path and path.is_file() else None


@dataclass(frozen=True)
class ChainSpec:
    """The movable joints from a URDF's root to `tip`, in root-to-tip order."""

    urdf: Path
    root: str
    tip: str
    joint_names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    path: tuple[str, ...]  # link, joint, link, ..., joint, tip: every element, fixed joints too

    @property
    def dof(self) -> int:
        return len(self.joint_names)


def read_chain(urdf: Path, tip: str) -> ChainSpec:
    """Walk a URDF from `tip` up to its root with the standard library (no anchor needed)."""
    robot = ET.parse(urdf).getroot()
    by_child = {j.find("child").get("link"): j for j in robot.findall("joint")}
    names, lower, upper, link, path = [], [], [], tip, [tip]
    while link in by_child:
        joint = by_child[link]
        path += [joint.get("name"), joint.find("parent").get("link")]
        if joint.get("type") not in ("fixed", "floating", "planar") and joint.find("mimic") is None:
            limit = joint.find("limit")
            continuous = joint.get("type") == "continuous" or limit is None
            names.append(joint.get("name"))
            lower.append(-math.inf if continuous else float(limit.get("lower", 0.0)))
            upper.append(math.inf if continuous else float(limit.get("upper", 0.0)))
        link = joint.find("parent").get("link")
    lo, hi = np.array(lower[::-1]), np.array(upper[::-1])
    return ChainSpec(urdf, link, tip, tuple(names[::-1]), lo, hi, tuple(path[::-1]))


def write_urdf_variant(
    src: Path,
    dst: Path,
    limits: dict[str, tuple[float, float]] | None = None,
    strip_safety_controller: bool = True,
) -> Path:
    """Write a modified copy of `src` to `dst` (a temporary folder, never the repository).

    `limits` overrides ``<limit lower upper>`` per joint name. `strip_safety_controller` removes
    ``<safety_controller>`` tags, which pytracik's parser reads as zero-width joint limits.
    """
    tree = ET.parse(src)
    for joint in tree.getroot().findall("joint"):
        if strip_safety_controller:
            for tag in joint.findall("safety_controller"):
                joint.remove(tag)
        if limits and joint.get("name") in limits:
            lo, hi = limits[joint.get("name")]
            joint.find("limit").set("lower", repr(float(lo)))
            joint.find("limit").set("upper", repr(float(hi)))
    tree.write(dst, encoding="unicode")  # no declaration: some parsers refuse one in a str
    return dst


def load_average() -> list[float]:
    """1-, 5- and 15-minute load averages (NaN where the platform has none)."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,) * 3
    return [round(x, 2) for x in load]


def cpu_busy_fraction(interval: float = 0.5) -> float:
    """Share of all cores' time spent busy during the next `interval` s (/proc/stat; else NaN).

    Called while this process sleeps, it measures the other jobs on the machine.
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


def wait_for_quiet(max_wait_s: float, threshold: float = 0.25) -> float:
    """Wait up to `max_wait_s` until other jobs keep < `threshold` of the cores busy (machines
    here are shared: another job on 2 cores multiplies timings); returns seconds waited."""
    start = time.perf_counter()
    if max_wait_s > 0 and cpu_busy_fraction(0.25) >= threshold:
        log("other jobs keep the CPU busy: waiting for a quieter machine")
        while time.perf_counter() - start < max_wait_s and cpu_busy_fraction() >= threshold:
            pass
    return round(time.perf_counter() - start, 1)


def add_common_args(parser: argparse.ArgumentParser) -> None:
    """Options every benchmark script takes (run.py forwards them)."""
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="results folder")
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait up to SECONDS for other jobs to leave the CPU idle before starting",
    )


def train_small_iknet(
    data: Any, steps: int, *, batch: int = 256, warmup: int = 200, log_parts: int = 10
) -> tuple[Any, float]:
    """An IKNet (small preset, model seed 0) trained on ``data`` with the benchmarks' recipe:
    AdamW lr 3e-3, ``warmup`` steps then cosine decay to 2 %, grad-norm clip 0.3, no validation
    and no checkpoints. Returns the model and the training wall time (s)."""
    from torchik.models import IKNet, IKNetConfig
    from torchik.train import TrainConfig, train

    torch.manual_seed(0)
    start = time.perf_counter()
    model = IKNet(data.spec, IKNetConfig.small())
    config = TrainConfig(
        steps=steps, batch_size=batch, lr=3e-3, warmup_steps=warmup, min_lr_ratio=0.02,
        grad_clip=0.3, log_every=max(1, steps // log_parts), val_every=0, checkpoint_every=0,
    )  # fmt: skip
    model = train(model, data, config=config).model
    return model, time.perf_counter() - start


def _jsonable(value: Any) -> Any:
    """Plain JSON values: numpy scalars to Python, NaN and inf to None."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass
class Report:
    """A benchmark's output: the machine stamp on top, then its tables."""

    name: str
    title: str
    intro: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    stamp: dict[str, Any] = field(default_factory=machine_stamp)
    started: float = field(default_factory=time.perf_counter)

    def _stamp_markdown(self) -> str:
        lines = ["| machine | |", "|---|---|"]
        for key, value in self.stamp.items():
            if isinstance(value, dict):
                value = ", ".join(f"{k} {v}" for k, v in value.items())
            lines.append(f"| {key} | `{value}` |" if key == "command" else f"| {key} | {value} |")
        return "\n".join(lines) + "\n"

    def write(self, out_dir: Path = RESULTS_DIR) -> tuple[Path, Path]:
        """Write ``<name>.md`` and ``<name>.json`` and return their paths."""
        self.stamp["load_average_at_end"] = load_average()
        self.stamp["duration_s"] = round(time.perf_counter() - self.started, 1)
        out_dir.mkdir(parents=True, exist_ok=True)
        parts = [f"# {self.title}\n", self._stamp_markdown()]
        parts += ["\n".join(self.intro) + "\n"] if self.intro else []
        parts += [table.markdown() for table in self.tables]
        md, js = out_dir / f"{self.name}.md", out_dir / f"{self.name}.json"
        md.write_text("\n".join(parts))
        payload = {"stamp": self.stamp, "intro": self.intro}
        payload["tables"] = [t.as_json() for t in self.tables]
        js.write_text(json.dumps(_jsonable(payload), indent=1, ensure_ascii=False) + "\n")
        return md, js


_T0 = time.perf_counter()


def log(message: str) -> None:
    """Progress line on stderr, prefixed with the wall time since this module was imported."""
    print(f"[{time.perf_counter() - _T0:7.1f} s] {message}", file=sys.stderr, flush=True)

"""What the benchmark scripts share beyond the library: threads, paths, anchors, arguments, log.

Stamps, reports and timings are the library's (``experiments.report``, ``.table``,
``.timing``), re-exported here with the anchors' versions in every stamp. Importing this module
sets ``torch.set_num_threads`` as ``shared/BENCHMARKS.md`` asks: benchmarks are scripts, so
that side effect is intended here (it would not be in the library).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import math
import os
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # experiments/ (and tests/) are not installed: use the checkout's
    sys.path.insert(0, str(REPO))

from experiments import report as _report  # noqa: E402
from experiments.report import dist_version  # noqa: E402
from experiments.table import Column, Table  # noqa: E402
from torchik.checks import check_threads  # noqa: E402

__all__ = ["Column", "Table", "dist_version"]  # the experiments', re-exported for the scripts

RESULTS_DIR = REPO / "benchmarks" / "results"
#: Distributions whose versions go into every stamp (the `bench` extra of pyproject.toml).
ANCHOR_DISTS = ("pytorch-kinematics", "pin", "pytracik", "ikpy", "scipy")

# the protocol: all cores. BENCH_THREADS overrides it where other jobs hold cores (a thread
# pool larger than the free cores spins and slows every library by an order of magnitude).
THREADS = int(os.environ.get("BENCH_THREADS", 0)) or os.cpu_count() or 1
torch.set_num_threads(check_threads("BENCH_THREADS", THREADS))


def machine_stamp() -> dict[str, Any]:
    """The library's stamp, with the anchors' versions and paths relative to this checkout."""
    return _report.machine_stamp(ANCHOR_DISTS, root=REPO)


@dataclass
class Report(_report.Report):
    """``experiments.report.Report`` stamped by :func:`machine_stamp`."""

    stamp: dict[str, Any] = field(default_factory=machine_stamp)


def wait_for_quiet(max_wait_s: float, threshold: float = 0.25) -> float:
    """``experiments.report.wait_for_quiet``, logging when it waits."""
    return _report.wait_for_quiet(max_wait_s, threshold, notify=log)


# --------------------------------------------------------------------- anchors and fixtures
@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence stdout and stderr, C-level writes included (anchor parsers print warnings)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved, devnull = (os.dup(1), os.dup(2)), os.open(os.devnull, os.O_WRONLY)
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


def shared_dir() -> Path | None:
    """The project's ``shared/`` folder (``$TORCHIK_SHARED``, ``./shared`` or ``../shared``)."""
    for candidate in (os.environ.get("TORCHIK_SHARED"), REPO / "shared", REPO.parent / "shared"):
        if candidate and (Path(candidate) / "fixtures" / "urdf").is_dir():
            return Path(candidate)
    return None


def fixture_urdf(name: str) -> Path | None:
    """Path of a third-party fixture URDF (never copied into the repo), or None if absent."""
    path = shared / "fixtures" / "urdf" / name if (shared := shared_dir()) else None
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
        for tag in joint.findall("safety_controller") if strip_safety_controller else ():
            joint.remove(tag)
        if limits and joint.get("name") in limits:
            lo, hi = limits[joint.get("name")]
            joint.find("limit").set("lower", repr(float(lo)))
            joint.find("limit").set("upper", repr(float(hi)))
    tree.write(dst, encoding="unicode")  # no declaration: some parsers refuse one in a str
    return dst


# --------------------------------------------------------------------------- scripts
def add_common_args(parser: argparse.ArgumentParser) -> None:
    """Options every benchmark script takes (run.py forwards them)."""
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="results folder")
    help_wait = "wait up to SECONDS for other jobs to leave the CPU idle before starting"
    parser.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS", help=help_wait)


_T0 = time.perf_counter()


def log(message: str) -> None:
    """Progress line on stderr, prefixed with the wall time since this module was imported."""
    print(f"[{time.perf_counter() - _T0:7.1f} s] {message}", file=sys.stderr, flush=True)

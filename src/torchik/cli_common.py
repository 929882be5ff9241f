"""What the ``torchik`` commands share (:mod:`torchik.cli` and :mod:`torchik.cli_train` both
import this module, and it imports neither): robots and end links from command-line names,
torch files checked before torch reads them, models from ``--model`` and printed records."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch

_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


# ---------------------------------------------------------------------------- robots and inputs
def _urdf_model(name: str):
    """The parsed URDF of a bundled robot, ``planar:L1,L2,...`` or a URDF file."""
    from torchik import robots
    from torchik.urdf import parse_urdf

    if name in robots.BUNDLED:
        return parse_urdf(robots.bundled_urdf(name))
    if name.startswith("planar:"):
        try:
            lengths = [float(v) for v in name[len("planar:") :].split(",")]
        except ValueError:
            raise ValueError(f"planar arm lengths must be numbers, got {name!r}") from None
        return parse_urdf(robots.planar_arm_urdf(lengths))
    if os.path.exists(name) or name.lower().endswith(".urdf"):
        return parse_urdf(Path(name))
    known = ", ".join(robots.list_robots())
    raise ValueError(
        f"unknown robot {name!r}: use a bundled robot ({known}), 'planar:L1,L2,...' or the "
        "path of a URDF file"
    )


def _robot(name: str):
    """A float64 CPU :class:`~torchik.Robot` for ``name`` (see :func:`_urdf_model`)."""
    from torchik.robot import Robot

    return Robot(_urdf_model(name), dtype=torch.float64)


def _robot_for(spec, name: str | None):
    """The robot a model or data set was made for: ``name`` if given (checked against the
    spec's hash), else the bundled robot of the spec's name when its hash matches, else None."""
    from torchik.data import robot_hash
    from torchik.robots import BUNDLED

    explicit = name is not None
    name = name if explicit else spec.robot
    if not explicit and name not in BUNDLED:
        return None
    robot = _robot(name)
    if robot_hash(robot) == spec.robot_hash:
        return robot
    if explicit:
        raise ValueError(f"robot {name!r} is not the robot {spec.robot!r} this file was made for")
    return None


def _require_robot(spec, name: str | None):
    robot = _robot_for(spec, name)
    if robot is None:
        raise ValueError(
            f"robot {spec.robot!r} is not bundled with this torchik: pass --robot URDF_OR_NAME"
        )
    return robot


def _end_link(args, robot) -> str:
    """``--link`` if given, else :func:`torchik.robots.default_end_link`, named on stderr when
    the robot came from a file (a bundled robot's end link is documented)."""
    from torchik.robots import default_end_link

    if args.link is not None:
        robot.link_index(args.link)  # a clear error for unknown links
        return args.link
    link = default_end_link(robot)
    if _is_file(getattr(args, "stream", None) or args.robot):
        print(
            f"torchik: end link {link} (the deepest leaf of the longest moving chain; --link "
            "chooses another)",
            file=sys.stderr,
        )
    return link


def _is_file(name: str) -> bool:
    from torchik.robots import BUNDLED

    return name not in BUNDLED and not name.startswith("planar:")


def _torch_file(path: str, what: str) -> str:
    """``path``, checked to be a torch archive before torch reads it (torch's own messages for
    other files, such as "pop from empty list" for a URDF, say nothing to a user)."""
    import zipfile

    if os.path.isfile(path) and not zipfile.is_zipfile(path):
        with open(path, "rb") as f:
            head = f.read(256).lstrip()
        kind = "an XML file (a URDF?)" if head.startswith(b"<") else "not a torch file"
        raise ValueError(f"{path!r} is {kind}: {what}")
    return path


# ---------------------------------------------------------------------------- models
def _load_model(name: str, robot_name: str | None, device: torch.device):
    from torchik.models import load, load_pretrained

    if name == "pretrained":
        if not robot_name:
            raise ValueError("--model pretrained needs the robot: pass --robot NAME")
        return load_pretrained(robot_name).to(device)
    what = "--model takes 'pretrained' or a file written by 'torchik train' (RUN/model.pt)"
    return load(_torch_file(name, what), map_location=device)


# ---------------------------------------------------------------------------- output
def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3e}"
    return "" if value is None else str(value)


def _print_records(records: list[dict[str, Any]], fmt: str) -> None:
    """Rows of equal keys as an aligned table, JSON (a list of objects) or CSV."""
    if fmt == "json":
        print(json.dumps(records, indent=1))
        return
    keys = list(records[0]) if records else []
    if fmt == "csv":
        import csv

        writer = csv.DictWriter(sys.stdout, fieldnames=keys, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in records)
        return
    cells = [keys] + [[_cell(r[k]) for k in keys] for r in records]
    widths = [max(len(row[i]) for row in cells) for i in range(len(keys))]
    text = [all(isinstance(r[k], str) for r in records) for k in keys]  # left-aligned
    for row in cells:
        aligned = zip(row, widths, text, strict=True)
        print("  ".join(c.ljust(w) if left else c.rjust(w) for c, w, left in aligned))

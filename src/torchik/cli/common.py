"""What the ``torchik`` commands share (every module of :mod:`torchik.cli` imports this one, and
it imports none of them): the one-line argparse error, argument types, robots and end links from
command-line names, ``--position``/``--pose`` targets, torch files checked before torch reads
them, models from ``--model`` and printed records."""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

import torch
from torch import Tensor

from torchik.checks import check_device

_INTERRUPTED = 130  # 128 + SIGINT, as shells report it (and _torchik_cli, which imports no torch)
_ERRORS = (ValueError, TypeError, OSError, RuntimeError, ArithmeticError, ImportError, MemoryError)
"""The errors the command line reports in one line (others show their traceback)."""
_TARGET_KINDS = ("position", "pose", "planar")
_NOT_DATA = "--data takes a file written by 'torchik dataset ROBOT -n N --out FILE'"


# A negative number, in scientific notation too, and -inf, -nan (for _finite's message): an
# argument value, not an option (argparse's own pattern took -5e-1 for an unknown option).
_NEGATIVE_NUMBER = re.compile(r"^-((\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|inf(inity)?|nan)$", re.I)


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (argparse prints the whole usage first) that reads
    ``-5e-1`` as a number."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_NUMBER

    def error(self, message: str) -> None:  # type: ignore[override]
        _usage_error(self.prog, message)


def _usage_error(prog: str, message: str) -> NoReturn:
    """A malformed command line: one line on stderr, exit status 2 (as argparse's errors)."""
    print(f"{prog}: error: {message} (see --help)", file=sys.stderr)
    raise SystemExit(2)


# ---------------------------------------------------------------------------- argument types
def _device_arg(text: str) -> str:
    """A torch device this machine has (:func:`torchik.checks.check_device`)."""
    try:
        check_device("device", text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _non_negative(text: str) -> float:
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _positive(text: str) -> float:
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _coordinate(text: str) -> float:
    """A number of a target (``--position``, ``--pose``): finite and within ±1e9, as a URDF's
    numbers (:data:`torchik.description.reading.MAX_MAGNITUDE`; 1e300 made errors of inf, a
    quaternion of 1e300 a NaN target)."""
    from torchik.description.reading import MAX_MAGNITUDE

    value = _finite(text)
    if abs(value) > MAX_MAGNITUDE:
        limit = f"{MAX_MAGNITUDE:.0e}".replace("e+0", "e")  # 1e9, not 1e+09
        raise argparse.ArgumentTypeError(f"must be within ±{limit}, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def _dpi(text: str) -> int:
    """``--dpi``: a whole number in [1, 1200] (a figure of 100 000 dpi is gigabytes)."""
    value = _positive_int(text)
    if value > 1200:
        raise argparse.ArgumentTypeError(f"must be at most 1200, got {text}")
    return value


def _common(parser: argparse.ArgumentParser, device: bool = True, seed: bool = True) -> None:
    if device:
        parser.add_argument("--device", type=_device_arg, default="cpu",
                            help="cpu, cuda, cuda:N or mps (default: cpu)")  # fmt: skip
    if seed:
        parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")


def _add_out(parser: argparse.ArgumentParser, help: str) -> None:
    """``--out FILE`` (required) and ``--overwrite``, for :func:`_new_output`."""
    parser.add_argument("--out", required=True, help=help)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out file")


def _new_output(path: str, overwrite: bool) -> None:
    """Refuse ``--out`` before the work: a bad path (:func:`torchik.files.output_file`), or an
    existing file unless ``--overwrite`` (a run may name it: a data set replaced by a smaller
    one silently changed what the run's provenance points to)."""
    from torchik.files import output_file

    target = output_file(path)
    if not overwrite and os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, f"{path!r} exists: pass --overwrite to replace it "
                              "(nothing was written)")  # fmt: skip


# ---------------------------------------------------------------------------- robots and inputs
def _urdf_model(name: str):
    """The parsed description of a bundled robot, ``planar:L1,L2,...``, a URDF or an MJCF file
    (told apart by content: an MJCF file's root element is ``<mujoco>``)."""
    from torchik.description import bundled as robots
    from torchik.description.mjcf import is_mjcf, parse_mjcf
    from torchik.description.urdf import parse_urdf

    if name in robots.BUNDLED:
        return parse_urdf(robots.bundled_urdf(name))
    if name.startswith("planar:"):
        lengths = _planar_lengths(name)
        try:
            urdf = robots.planar_arm_urdf(lengths)
        except ValueError as err:  # a length that is not positive (counted from 1)
            raise ValueError(f"{name!r}: {err}") from None
        return parse_urdf(urdf)
    if os.path.exists(name) or name.lower().endswith((".urdf", ".xml", ".mjcf")):
        return parse_mjcf(Path(name)) if is_mjcf(name) else parse_urdf(Path(name))
    known = ", ".join(robots.list_robots())
    raise ValueError(
        f"unknown robot {name!r}: use a bundled robot ({known}), 'planar:L1,L2,...' or the "
        "path of a URDF or MJCF file"
    )


def _planar_lengths(name: str) -> list[float]:
    """The link lengths of ``planar:L1,L2,...`` (numbers; their values are the library's to
    check)."""
    try:
        return [float(v) for v in name[len("planar:") :].split(",")]
    except ValueError:
        raise ValueError(f"planar arm lengths must be numbers, got {name!r}") from None


def _robot(name: str):
    """A float64 CPU :class:`~torchik.Robot` for ``name`` (see :func:`_urdf_model`)."""
    from torchik.robot.robot import Robot

    return Robot(_urdf_model(name), dtype=torch.float64)


def _robot_for(spec, name: str | None):
    """The robot a model or data set was made for: ``name`` if given (checked against the
    spec's hash), else the bundled robot of the spec's name when its hash matches, else None."""
    from torchik.description.bundled import BUNDLED
    from torchik.learn.spec import robot_hash

    explicit = name is not None
    name = name if explicit else spec.robot
    if not explicit and name not in BUNDLED:
        return None
    assert name is not None  # given, or the spec's
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


def _std(args: argparse.Namespace) -> dict[str, Any]:
    """``std=`` for :func:`~torchik.learn.make_dataset` or :class:`~torchik.learn.FKStream`
    from ``--std`` (none given: the library's default). Refused with the uniform sampler, which
    draws within the limits and has no std (it was ignored).

    Raises:
        ValueError: ``--std`` without ``--sampler normal``.
    """
    if args.std is None:
        return {}
    if args.sampler != "normal":
        raise ValueError("--std is the normal sampler's spread: add --sampler normal (the "
                         "uniform sampler draws within the limits and has none)")  # fmt: skip
    return {"std": args.std[0] if len(args.std) == 1 else args.std}


def _end_link(args, robot, quiet: bool = False) -> str:
    """``--link`` if given, else :func:`torchik.description.default_end_link`, named on stderr when
    the robot came from a file (a bundled robot's end link is documented) unless ``quiet`` (a
    process of several that is not the one to say it)."""
    from torchik.description.end_link import default_end_link

    if args.link is not None:
        robot.link_index(args.link)  # a clear error for unknown links
        return args.link
    link = default_end_link(robot)
    if not quiet and _is_file(getattr(args, "stream", None) or args.robot):
        print(
            f"torchik: end link {link} (the tool frame of the longest moving chain; --link "
            "chooses another)",
            file=sys.stderr,
        )
    return link


def _model_link(args, robot, model) -> str:
    """The link ``solve`` and ``plot arm`` place: ``--link``, else the one ``model`` (None: no
    ``--model``) was trained for, else the robot's end link (:func:`_end_link`); a model's link
    the robot lacks is refused as the model of another robot."""
    if model is None or args.link is not None:
        return _end_link(args, robot)
    if model.spec.link not in robot.link_names:
        from torchik.models.pipeline import check_model_fits

        check_model_fits(model, robot)  # raises: says which robot and link the model is for
    return model.spec.link


def _is_file(name: str) -> bool:
    from torchik.description.bundled import BUNDLED

    return name not in BUNDLED and not name.startswith("planar:")


def _torch_file(path: str, what: str) -> str:
    """``path``, checked to be a torch file before torch reads it
    (:func:`torchik.files.torch_file_problem`), the message saying what the flag takes."""
    from torchik.files import torch_file_problem

    problem = torch_file_problem(path) if os.path.isfile(path) else None
    if problem is not None:
        raise ValueError(f"{path!r} is not a readable torch file: {problem}; {what}")
    return path


# ---------------------------------------------------------------------------- targets
def _add_target(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument(
        "--position", type=_coordinate, nargs="+", metavar="X",
        help="target position x y z (m); x y for planar arms (orientation free)",
    )  # fmt: skip
    group.add_argument(
        "--pose", type=_coordinate, nargs=7, metavar=("X", "Y", "Z", "QW", "QX", "QY", "QZ"),
        help="target pose: position (m) and unit quaternion w x y z",
    )  # fmt: skip


def _target(args, robot, link: str) -> tuple[Tensor, bool]:
    """``(pose (4, 4), False)`` from ``--pose`` or ``(position (3,), True)`` from
    ``--position`` (float64); two numbers are x, y of an arm moving in the plane z = 0."""
    from torchik.geometry.rotations import quat_to_rotmat
    from torchik.geometry.transforms import pose_to_matrix

    if args.position is not None:
        values = torch.tensor(args.position, dtype=torch.float64)
        if len(values) not in (2, 3):
            raise ValueError(f"--position takes x y z (x y for planar arms), got {len(values)}")
        if len(values) == 2:
            if not _is_planar(robot, link):
                raise ValueError(f"{robot.name}'s {link} leaves the plane z = 0: pass x y z")
            values = torch.cat((values, values.new_zeros(1)))
        return values, True
    position = torch.tensor(args.pose[:3], dtype=torch.float64)
    quat = torch.tensor(args.pose[3:], dtype=torch.float64)
    if not quat.norm() > 1e-9:
        raise ValueError("the quaternion of --pose must not be zero")
    return pose_to_matrix(position, quat_to_rotmat(quat / quat.norm())), False


def _check_target_kind_fits(robot, link: str, targets: str) -> None:
    """Refuse ``--targets planar`` for a link that leaves the plane z = 0: its x, y alone would
    be an ill-posed problem (``solve`` refuses x y for it too)."""
    if targets == "planar" and not _is_planar(robot, link):
        raise ValueError(
            f"--targets planar: {robot.name}'s {link} leaves the plane z = 0, so x y do not "
            "place it: use --targets position"
        )


def _is_planar(robot, link: str) -> bool:
    """Whether ``link`` stays in the plane z = 0 (checked on random configurations)."""
    q = robot.random_configuration(64, torch.Generator().manual_seed(0))
    with torch.no_grad():
        return bool(robot.link_positions(q, link)[:, 2].abs().max() < 1e-9)


def _encode_for(model, target: Tensor, position_only: bool, bundled: str | None) -> Tensor:
    """The model's ``(T,)`` encoding of a ``--position``/``--pose`` target
    (:func:`torchik.learn.as_target`), in the model's dtype and device; ``bundled`` names a
    bundled model (for :func:`_check_target_kind`)."""
    from torchik.learn.data import as_target

    _check_target_kind(model, position_only, bundled)
    return as_target(target, model.spec.targets).to(model.target_mean)


def _check_target_kind(model, position_only: bool, bundled: str | None) -> None:
    """Refuse ``--position`` for a model of full poses, naming the bundled position model of
    the robot where there is one (``panda`` -> ``panda_position``)."""
    from torchik.models import PRETRAINED

    if model.spec.targets != "pose" or not position_only:
        return
    other = f"{model.spec.robot}_position"
    hint = f", or --model {other} (positions)" if bundled and other in PRETRAINED else ""
    raise ValueError(f"this model was trained on full poses: pass --pose, not --position{hint}")


# ---------------------------------------------------------------------------- models
def _load_model(name: str, robot_name: str | None, device: torch.device):
    """The model of ``--model``: ``pretrained`` (the bundled model of ``robot_name``), a bundled
    model's name (:data:`torchik.models.PRETRAINED`) or a file of ``torchik train``."""
    from torchik.models import PRETRAINED, load_pretrained
    from torchik.models.registry import load

    bundled = _bundled(name, robot_name)
    if bundled is not None:
        return load_pretrained(bundled).to(device)
    takes = (f"'pretrained', a bundled model ({', '.join(PRETRAINED)}) or a file written by "
             "'torchik train' (RUN/model.pt)")  # fmt: skip
    if not os.path.exists(name):
        raise ValueError(f"--model {name!r} is no file nor bundled model: it takes {takes}")
    return load(_torch_file(name, f"--model takes {takes}"), map_location=device)


def _bundled(name: str, robot_name: str | None) -> str | None:
    """The bundled model that ``--model`` names (``pretrained``: the robot's), else None."""
    from torchik.models import PRETRAINED

    if name == "pretrained":
        if not robot_name:
            raise ValueError("--model pretrained needs the robot: pass --robot NAME")
        return robot_name
    return name if name in PRETRAINED else None


def _provenance(path: str, data) -> dict[str, Any]:
    """What ``eval`` needs to recognise the training data: its path and a hash of its rows."""
    import hashlib

    digest = hashlib.sha256(data.q.numpy().tobytes())
    digest.update(data.target.numpy().tobytes())
    return {"path": os.path.abspath(path), "rows": len(data), "sha256": digest.hexdigest()}


# ---------------------------------------------------------------------------- output
def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3e}"
    return "" if value is None else str(value)


def _json_safe(value: Any) -> Any:
    """``value`` with every NaN or infinite float as ``None`` (JSON has no NaN: a bare ``NaN``
    breaks every JSON reader)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def _print_records(records: list[dict[str, Any]], fmt: str) -> None:
    """Rows of equal keys as an aligned table, JSON (a list of objects) or CSV."""
    if fmt == "json":
        print(json.dumps(_json_safe(records), indent=1, allow_nan=False))
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


def _message(err: BaseException) -> str:
    """``err`` as the one line the command line prints (and a worker of ``--nproc`` writes)."""
    filename = getattr(err, "filename", None)
    if isinstance(filename, str):  # the file written, not its temporary (torchik.files)
        filename = re.sub(r"\.tmp\d+$", "", filename)
    if isinstance(err, FileNotFoundError) and filename:
        return f"file not found: {filename}"
    if isinstance(err, FileExistsError) and filename and os.path.isfile(filename):
        return f"{filename!r} is a file, not a folder"  # a folder was to be made there
    text = str(err)
    if isinstance(err, OSError) and err.strerror:  # without Python's "[Errno 28] "
        text = err.strerror if filename is None else f"{err.strerror}: {filename}"
    text = " ".join(text.split()) or type(err).__name__
    return text if len(text) <= 500 else text[:497] + "..."


def _resume_command(argv: list[str] | tuple[str, ...], out: Path) -> str:
    """``argv`` as the command that continues its run in ``out``, to paste as it is:
    ``--overwrite`` left out, ``--resume`` (and ``--out`` where it was not given) added."""
    import shlex

    command = [a for a in argv if a not in ("--overwrite", "--resume")] + ["--resume"]
    if not any(a == "--out" or a.startswith("--out=") for a in argv):
        command[-1:-1] = ["--out", str(out)]
    return f"torchik {shlex.join(command)}"

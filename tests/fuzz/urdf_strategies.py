"""Hypothesis strategies for URDF fuzzing: valid random trees, then mutations of them.

:func:`urdf_trees` draws a valid kinematic tree as an ``ElementTree`` element (every joint type,
origins, axes and limits from ordinary to extreme finite values, mimic joints).
:func:`mutated_urdfs` damages one: attributes set to odd values, elements removed, duplicated or
re-linked (cycles, two parents, unknown links), then possibly the text itself (truncated, odd
characters, a DOCTYPE, an encoding declaration, UTF-16/32 bytes). :func:`check_source` loads a
result and says what happened; the only acceptable outcomes are a clean load with finite FK and
gradients, or a :class:`~torchik.description.URDFError`.
"""

from __future__ import annotations

import copy
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import torch
from hypothesis import strategies as st

from tests.drawn_warnings import mimic_limits_allowed
from torchik import Robot
from torchik.description import URDFError

ACCEPTABLE = ("loaded", "URDFError")
HANG_S = 5.0
KINDS = ("revolute", "continuous", "prismatic", "fixed")
EXTREMES = (0.0, -0.0, 1e9, -1e9, 1e-9, 1e-300, 5e-324, 3.0e8, 1e-12, 6.283185307179586)
ODD_NUMBERS = (
    "nan", "inf", "-inf", "1e400", "1e308", "-1e308", "1e10", "1e-400", "", " ", "0x10", "1_0",
    "١", "+-1", ".", "e5", "1e", "--1", "1" * 400, "0.1.2", "\u00a01", "1\x00",
)  # fmt: skip
ODD_VECTORS = ("0 0 0", "1 2", "1 2 3 4", "1e200 1e200 1e200", "1e-200 0 0", "nan 0 1")
ODD_NAMES = ("", " ", "l0", "l1", "j0", "j1", "\udc80", "x" * 300, "a b", "<", "&")
ODD_TYPES = ("floating", "planar", "", "Revolute", "helical", "fixed", "revolute")
ATTRIBUTES = ("name", "type", "link", "xyz", "rpy", "lower", "upper", "joint", "multiplier",
              "offset")  # fmt: skip
INSERTS = (
    "<", ">", "&", "&amp;", "&bogus;", "]]>", "<!DOCTYPE r [<!ENTITY a 'b'>]>", "\udc80", "\x00",
    '<link name="l0"/>', '<joint name="j1" type="fixed"/>', "<robot>", "</robot>", "\ufeff",
)  # fmt: skip
ENCODINGS = ("utf-8", "utf-16", "utf-32", "latin-1", "no-such-codec", "ascii")

moderate = st.floats(-10, 10, allow_nan=False)
numbers = st.one_of(
    st.floats(-10, 10, allow_nan=False, allow_subnormal=True), st.sampled_from(EXTREMES)
)


def _vector(draw: st.DrawFn) -> str:
    return " ".join(repr(draw(numbers)) for _ in range(3))


@st.composite
def urdf_trees(draw: st.DrawFn, max_links: int = 10) -> ET.Element:
    """A valid ``<robot>`` element: a random tree of 1 to ``max_links`` links."""
    count = draw(st.integers(1, max_links))
    robot = ET.Element("robot", name="fuzz")
    for i in range(count):
        ET.SubElement(robot, "link", name=f"l{i}")
    actuated: list[str] = []
    for i in range(1, count):
        kind = draw(st.sampled_from(KINDS))
        joint = ET.SubElement(robot, "joint", name=f"j{i}", type=kind)
        ET.SubElement(joint, "parent", link=f"l{draw(st.integers(0, i - 1))}")
        ET.SubElement(joint, "child", link=f"l{i}")
        ET.SubElement(joint, "origin", xyz=_vector(draw), rpy=_vector(draw))
        if kind == "fixed":
            continue
        axis = _vector(draw)
        ET.SubElement(joint, "axis", xyz=axis if axis.strip("0. -") else "0 0 1")
        if kind != "continuous":
            low, high = sorted((draw(numbers), draw(numbers)))
            ET.SubElement(joint, "limit", lower=repr(low), upper=repr(high))
        if actuated and draw(st.booleans()):  # of a joint that mimics nothing: no overflow
            ET.SubElement(
                joint, "mimic", joint=draw(st.sampled_from(actuated)),
                multiplier=repr(draw(moderate)), offset=repr(draw(moderate)),
            )  # fmt: skip
        else:
            actuated.append(f"j{i}")
    return robot


def _pick(draw: st.DrawFn, robot: ET.Element) -> ET.Element:
    return draw(st.sampled_from(list(robot.iter())))


def _set_attribute(draw: st.DrawFn, robot: ET.Element) -> None:
    value = st.sampled_from(ODD_NUMBERS + ODD_VECTORS + ODD_NAMES + ODD_TYPES)
    _pick(draw, robot).set(draw(st.sampled_from(ATTRIBUTES)), draw(value))


def _remove(draw: st.DrawFn, robot: ET.Element) -> None:
    parents = [(p, c) for p in robot.iter() for c in p]
    if parents:
        parent, child = draw(st.sampled_from(parents))
        parent.remove(child)


def _duplicate(draw: st.DrawFn, robot: ET.Element) -> None:
    _pick(draw, robot).append(copy.deepcopy(_pick(draw, robot)))


def _relink(draw: st.DrawFn, robot: ET.Element) -> None:
    refs = robot.findall("joint/parent") + robot.findall("joint/child")
    names = [link.get("name", "") for link in robot.iterfind("link")] + ["ghost"]
    if refs:
        draw(st.sampled_from(refs)).set("link", draw(st.sampled_from(names)))


def _mimic(draw: st.DrawFn, robot: ET.Element) -> None:
    joints = robot.findall("joint")
    if joints:
        target = draw(st.sampled_from(joints))
        source = draw(st.sampled_from(joints)).get("name", "")
        multiplier = draw(st.sampled_from(("1e3", "-1e3", "1e9", "0", "1")))
        ET.SubElement(target, "mimic", joint=source, multiplier=multiplier)


def _extreme(draw: st.DrawFn, robot: ET.Element) -> None:
    """Any finite float (1e-320 to 1e308) in a numeric attribute: overflow and underflow."""
    numeric = [(e, a) for e in robot.iter() for a in e.attrib if a in NUMERIC]
    if numeric:
        element, attribute = draw(st.sampled_from(numeric))
        values = st.floats(allow_nan=False, allow_infinity=False)
        count = 3 if attribute in ("xyz", "rpy") else 1
        element.set(attribute, " ".join(repr(draw(values)) for _ in range(count)))


NUMERIC = ("xyz", "rpy", "lower", "upper", "multiplier", "offset")
TREE_MUTATIONS = (_set_attribute, _remove, _duplicate, _relink, _mimic, _extreme, _extreme)


@st.composite
def mutated_urdfs(draw: st.DrawFn) -> str | bytes:
    """The text (``str``) or file content (``bytes``) of a damaged URDF."""
    robot = draw(urdf_trees())
    for _ in range(draw(st.integers(0, 3))):
        draw(st.sampled_from(TREE_MUTATIONS))(draw, robot)
    text = ET.tostring(robot, encoding="unicode")
    action = draw(st.sampled_from(("keep", "truncate", "insert", "declare", "encode")))
    if action == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    if action == "insert":
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.sampled_from(INSERTS)) + text[at:]
    if action in ("declare", "encode"):
        encoding = draw(st.sampled_from(ENCODINGS))
        declared = f'<?xml version="1.0" encoding="{encoding}"?>' if action == "declare" else ""
        codec = encoding if action == "encode" and encoding != "no-such-codec" else "utf-8"
        try:
            return (declared + text).encode(codec, errors="surrogatepass")
        except UnicodeEncodeError:  # latin-1 or ascii and a character beyond them
            return (declared + text).encode(codec, errors="replace")
    return text


def check_source(source: str | bytes, folder: Path | None = None) -> tuple[str, str, float]:
    """Load ``source`` (bytes through a file in ``folder``) and classify what happened.

    Returns:
        ``(outcome, detail, seconds)``: outcome ``"loaded"``, ``"URDFError"``, ``"hang"`` (over
        ``HANG_S``), ``"non-finite"`` (FK or its gradient in float32 or float64) or
        ``"crash: <exception type>"``; detail a one-line description.
    """
    if isinstance(source, bytes) and folder is None:  # a folder of its own, removed after
        with tempfile.TemporaryDirectory() as made:
            return check_source(source, Path(made))
    if isinstance(source, bytes):
        folder = Path(folder)
        (folder / "fuzz.urdf").write_bytes(source)
        source = str(folder / "fuzz.urdf")
    start = time.perf_counter()
    try:
        with mimic_limits_allowed():  # urdf_trees draws a mimic joint's limits at random
            robot = Robot.from_urdf(source, dtype=torch.float64)
        outcome, detail = _check_fk(robot), ""
    except URDFError as err:
        outcome, detail = "URDFError", str(err)
    except Exception as err:  # noqa: BLE001 - a crash is what we look for
        outcome, detail = f"crash: {type(err).__name__}", str(err)
    seconds = time.perf_counter() - start
    if seconds > HANG_S:
        outcome = "hang"
    return outcome, detail[:300].replace("\n", " "), seconds


def _check_fk(robot: Robot) -> str:
    """``"loaded"`` if FK and its gradient are finite at random, lower and upper values."""
    generator = torch.Generator().manual_seed(0)
    for dtype in (torch.float64, torch.float32):
        robot = robot.to(dtype)
        limits = torch.stack((robot.lower, robot.upper, robot.neutral()))
        limits = torch.where(limits.isfinite(), limits, robot.neutral())  # unlimited: no bound
        q = torch.cat((robot.random_configuration(20, generator=generator), limits))
        q.requires_grad_()
        poses = robot.forward_kinematics(q)
        poses.sum().backward()
        if not (torch.isfinite(poses).all() and torch.isfinite(q.grad).all()):
            return "non-finite"
    return "loaded"

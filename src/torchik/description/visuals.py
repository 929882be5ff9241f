"""The visual geometry of a URDF for the viewer: boxes, cylinders, spheres and meshes per link.

:func:`torchik.description.parse_urdf` reads the kinematics only; this module reads the ``<visual>``
elements of the same file (through the same safe XML reader) and finds mesh files next to the
URDF, through ``package://`` (``ROS_PACKAGE_PATH`` and the folders above the URDF) or
``file://``. Nothing here imports viser or loads a mesh: it says what to draw and where.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from torchik.description.reading import parse_xml, read_source

__all__ = ["Visual", "read_visuals", "resolve_mesh", "origin_matrix"]

SHAPES = ("box", "cylinder", "sphere", "mesh")


@dataclass(frozen=True)
class Visual:
    """One ``<visual>`` of a link.

    Attributes:
        link: the link it belongs to.
        shape: ``"box"``, ``"cylinder"``, ``"sphere"`` or ``"mesh"``.
        origin: ``(4, 4)`` pose of the geometry in the link frame, ``T_link_visual``.
        size: box ``(x, y, z)``; cylinder ``(radius, length)`` along z; sphere ``(radius,)``;
            mesh ``(sx, sy, sz)`` scale (m).
        path: the mesh file, resolved (meshes only).
        color: ``(r, g, b)`` in 0..255 from the URDF material, if it gives one.
    """

    link: str
    shape: str
    origin: np.ndarray
    size: tuple[float, ...]
    path: Path | None = None
    color: tuple[int, int, int] | None = None


def origin_matrix(xyz: tuple[float, ...], rpy: tuple[float, ...]) -> np.ndarray:
    """``(4, 4)`` transform of a URDF origin: translation ``xyz``, fixed-axis roll-pitch-yaw.

    Example:
        >>> origin_matrix((1.0, 0.0, 0.0), (0.0, 0.0, 0.0))[:3, 3]
        array([1., 0., 0.])
    """
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    out = np.eye(4)
    out[:3, :3] = [
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ]
    out[:3, 3] = xyz
    return out


def _floats(text: str | None, n: int, default: tuple[float, ...]) -> tuple[float, ...]:
    if text is None:
        return default
    values = tuple(float(v) for v in text.split())
    if len(values) != n or not all(np.isfinite(values)):
        raise ValueError(f"expected {n} finite numbers, got {text!r}")
    return values


def _color(material: ET.Element | None, named: dict[str, tuple[int, int, int]]):
    if material is None:
        return None
    color = material.find("color")
    if color is not None and color.get("rgba"):
        rgba = _floats(color.get("rgba"), 4, (0.7, 0.7, 0.7, 1.0))
        return tuple(int(round(255 * min(max(c, 0.0), 1.0))) for c in rgba[:3])
    return named.get(material.get("name", ""))


def resolve_mesh(filename: str, urdf_dir: Path | None) -> Path | None:
    """The mesh file a URDF names, or ``None`` when it is not found.

    ``package://PKG/REST`` is looked for as ``ROOT/PKG/REST`` for every ``ROOT`` in
    ``ROS_PACKAGE_PATH`` and every folder above the URDF, then as ``REST`` under the URDF's
    folder and its parent (a package checked out under another name); ``file://PATH`` is
    ``PATH``; a relative name is relative to the URDF's folder.

    Example:
        >>> resolve_mesh("package://nowhere/mesh.stl", None) is None
        True
    """
    if filename.startswith("file://"):
        candidates = [Path(filename[len("file://") :])]
    elif filename.startswith("package://"):
        package, _, rest = filename[len("package://") :].partition("/")
        roots = [Path(p) for p in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if p]
        here = [urdf_dir, *urdf_dir.parents] if urdf_dir is not None else []
        candidates = [root / package / rest for root in [*roots, *here]]
        candidates += [d / rest for d in here[:2]]
    else:
        candidates = [urdf_dir / filename] if urdf_dir is not None else [Path(filename)]
    return next((c for c in candidates if c.is_file()), None)


def _geometry(geometry: ET.Element, urdf_dir: Path | None):
    """``(shape, size, path)`` of a ``<geometry>``; ``path`` is None for an unfound mesh."""
    for shape in SHAPES:
        element = geometry.find(shape)
        if element is None:
            continue
        if shape == "box":
            return shape, _floats(element.get("size"), 3, (0.1, 0.1, 0.1)), None
        if shape == "cylinder":
            return (
                shape,
                (float(element.get("radius", 0.05)), float(element.get("length", 0.1))),
                None,
            )
        if shape == "sphere":
            return shape, (float(element.get("radius", 0.05)),), None
        scale = _floats(element.get("scale"), 3, (1.0, 1.0, 1.0))
        return shape, scale, resolve_mesh(element.get("filename", ""), urdf_dir)
    return None, (), None


def read_visuals(source: str | os.PathLike) -> tuple[list[Visual], list[str]]:
    """The visual geometry of a URDF file or text, and what of it could not be used.

    Args:
        source: a URDF path or text (see :func:`torchik.description.parse_urdf`); mesh names of text
            are relative to the current folder.

    Returns:
        ``(visuals, skipped)``: every usable ``<visual>`` in file order, and one message per
        visual left out (a mesh file not found, an unknown or malformed geometry).

    Raises:
        URDFError: the file is missing or not safe, well-formed XML.

    Example:
        >>> visuals, skipped = read_visuals('<robot name="r"><link name="a"><visual>'
        ...     '<geometry><box size="1 2 3"/></geometry></visual></link></robot>')
        >>> visuals[0].shape, visuals[0].size, skipped
        ('box', (1.0, 2.0, 3.0), [])
    """
    data, label = read_source(source, None)
    urdf_dir = Path(source).resolve().parent if label is not None else None
    robot = parse_xml(data)
    named = {}
    for material in robot.findall("material"):
        if (color := _color(material, {})) is not None:
            named[material.get("name", "")] = color
    visuals: list[Any] = []  # Visual, and the skipped ones described (str)
    skipped: list[Any] = []
    for link in robot.findall("link"):
        for element in link.findall("visual"):
            try:
                visual = _visual(link.get("name", ""), element, urdf_dir, named)
            except ValueError as err:
                visual = f"link {link.get('name')!r}: {err}"
            (visuals if isinstance(visual, Visual) else skipped).append(visual)
    return visuals, skipped


def _visual(link: str, element: ET.Element, urdf_dir, named) -> Visual | str:
    geometry = element.find("geometry")
    shape, size, path = _geometry(geometry, urdf_dir) if geometry is not None else (None, (), None)
    if shape is None:
        return f"link {link!r}: a visual without a box, cylinder, sphere or mesh"
    if shape == "mesh" and path is None:
        name = geometry.find("mesh").get("filename", "")  # type: ignore[union-attr]
        return f"link {link!r}: mesh {name!r} not found"
    origin = element.find("origin")
    xyz = _floats(origin.get("xyz") if origin is not None else None, 3, (0.0, 0.0, 0.0))
    rpy = _floats(origin.get("rpy") if origin is not None else None, 3, (0.0, 0.0, 0.0))
    color = _color(element.find("material"), named)
    return Visual(link, shape, origin_matrix(xyz, rpy), size, path, color)

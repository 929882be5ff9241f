"""Reading a robot description's bytes and XML safely, and strict number parsing: the input
side of :mod:`torchik.description.urdf` and :mod:`torchik.description.visuals`.

Nothing here resolves entities or external resources; every problem is a :class:`URDFError`.
"""

from __future__ import annotations

import functools
import math
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import NoReturn
from xml.parsers import expat

from torchik.files import FileRefused, read_regular_file

__all__ = [
    "MAX_MAGNITUDE",
    "MAX_URDF_BYTES",
    "URDFError",
    "finite_number",
    "looks_like_xml",
    "parse_xml",
    "read_number",
    "read_source",
    "read_vector",
    "brief",
]


class URDFError(ValueError):
    """A robot description that torchik cannot load; the message says why and where."""


# Unambiguous alternatives, so a long malformed number fails in linear time (no backtracking).
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


MAX_URDF_BYTES = 32 * 2**20  # the largest real URDFs are a few MB; pass max_bytes=None to lift


# Every length, angle, limit, multiplier and offset (mimic chains composed) stays within this, so
# that joint values, poses and their sums over any tree that fits in MAX_URDF_BYTES stay finite
# even in float32 (max 3.4e38); real descriptions are many orders of magnitude below it.
MAX_MAGNITUDE = 1e9


def read_source(source: str | os.PathLike, max_bytes: int | None) -> tuple[str | bytes, str | None]:
    """Return ``(xml data, file name or None for text)``."""
    if isinstance(source, str) and (looks_like_xml(source) or not source.strip()):
        # Leading whitespace would put an <?xml ...?> declaration out of place; an empty
        # string is empty text, not the current directory.
        if max_bytes is not None and len(source) > max_bytes:
            raise URDFError(f"the URDF text has {len(source)} characters, over {max_bytes}")
        return source.lstrip(), None
    path = Path(source)
    label = ascii(str(path))[1:-1]  # one printable line whatever the name holds
    try:
        # Whitespace before an <?xml ...?> declaration is an expat error, yet common in real
        # files (urdfdom loads them): drop it, as text sources do.
        return read_regular_file(path, max_bytes).lstrip(b" \t\r\n"), label
    except FileRefused as err:
        raise URDFError(f"{label}: {err}") from None
    except FileNotFoundError:
        raise URDFError(f"URDF file not found: {label}") from None
    except OSError as err:
        raise URDFError(f"cannot read URDF file {label}: {err.strerror or err}") from None
    except (ValueError, UnicodeError) as err:  # a NUL or an unencodable character in the name
        raise URDFError(f"cannot read URDF file {label}: {err}") from None


def looks_like_xml(text: str) -> bool:
    return text.lstrip().startswith("<") or "<robot" in text


class _Root(Exception):
    """Raised by :func:`xml_root_tag`'s handler to stop at the first element."""


def xml_root_tag(source: str | os.PathLike, max_bytes: int | None = MAX_URDF_BYTES) -> str:
    """The name of the root element of an XML file (``"robot"`` for URDF, ``"mujoco"`` for
    MJCF), read safely (:func:`read_source`) without building the tree.

    Raises:
        URDFError: the file cannot be read, or holds no element.
    """
    data, _ = read_source(source, max_bytes)

    def first(name: str, _attrs: object) -> None:
        raise _Root(name)

    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _refuse_doctype
    parser.StartElementHandler = first
    try:
        parser.Parse(data, True)
    except _Root as found:
        return str(found.args[0])
    except (expat.ExpatError, LookupError, ValueError, UnicodeError) as err:
        raise URDFError(f"not well-formed XML: {err}") from None
    raise URDFError("the file holds no XML element")


def parse_xml(data: str | bytes) -> ET.Element:
    """Parse XML with expat, refusing DTDs so that no entity is ever declared or expanded."""
    if not data.strip():
        raise URDFError("the URDF is empty")
    builder = ET.TreeBuilder()
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _refuse_doctype
    parser.EntityDeclHandler = _refuse_entity
    parser.ExternalEntityRefHandler = _refuse_entity
    parser.StartElementHandler = builder.start
    parser.EndElementHandler = builder.end
    try:
        parser.Parse(data, True)
    except URDFError:
        raise
    except expat.ExpatError as err:
        raise URDFError(f"not well-formed XML: {err}") from None
    except (LookupError, ValueError, UnicodeError) as err:  # unknown, UTF-32 or bad encoding
        raise URDFError(f"cannot decode the XML: {err}") from None
    return builder.close()


def _refuse_doctype(*_: object) -> None:
    raise URDFError("a <!DOCTYPE> is not allowed in URDF (entities are never expanded)")


def _refuse_entity(*_: object) -> NoReturn:
    raise URDFError("an <!ENTITY> is not allowed in URDF (entities are never expanded)")


def read_vector(text: str, where: str, limit: float = MAX_MAGNITUDE) -> tuple[float, float, float]:
    parts = text.split(maxsplit=3)
    if len(parts) != 3:
        raise URDFError(f"{where} needs 3 numbers, got {len(text.split())} in {brief(text)}")
    x, y, z = (read_number(part, where, limit) for part in parts)
    return (x, y, z)


def read_number(text: str, where: str, limit: float = MAX_MAGNITUDE) -> float:
    value = finite_number(text)
    if value is None:
        raise URDFError(f"{where} has {brief(text)}, which is not a finite number")
    if abs(value) > limit:
        raise URDFError(f"{where} has {brief(text)}, beyond the supported ±{limit:g}")
    return value


@functools.lru_cache(maxsize=4096)  # descriptions repeat "0", "1" and "0 0 0" a lot
def finite_number(text: str) -> float | None:
    """The value of a strictly formatted finite number, else ``None``."""
    # A strict pattern rather than float() alone: float() also takes 'nan', 'inf' and '1_0'.
    value = text.strip()
    if not _NUMBER.fullmatch(value) or not math.isfinite(float(value)):
        return None
    return float(value)


def brief(value: object, width: int = 80) -> str:
    """``repr(value)``, cut to about ``width`` characters for an error message."""
    text = repr(value)
    return text if len(text) <= width else f"{text[: width - 5]}...{text[-2:]}"

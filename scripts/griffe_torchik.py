"""Griffe extension for the docs site: torchik's docstrings as mkdocstrings renders them.

The docstrings are Google style with two habits of their own, adapted here at build time so that
the source stays as it is: an ``Example:`` section (griffe reads ``>>>`` lines as code only
under ``Examples:``), and Sphinx roles (``:func:`~torchik.x.y```), shown as inline code.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.M)
ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj):`~?([^`]+)`")


def _role(match: re.Match) -> str:
    text = match.group(0)
    name = match.group(1)
    return f"``{name.rsplit('.', 1)[-1] if '`~' in text else name}``"


class TorchikDocstrings(griffe.Extension):
    """Rewrite ``Example:`` to ``Examples:`` and Sphinx roles to inline code."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            value = EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
            obj.docstring.value = ROLE.sub(_role, value)

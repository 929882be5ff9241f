"""Result tables of the protocols: rows of values, markdown and JSON, speed ratios.

One :class:`Table` per table of ``benchmarks/results/``; the protocol functions return them and
``benchmarks/`` writes them under a machine stamp.

Example:
    >>> t = Table("demo", [Column("seconds", "time", fmt_time)], time_key="seconds",
    ...           references=("slow",))
    >>> _ = t.add("slow", seconds=2.0); _ = t.add("fast", seconds=0.5)
    >>> print(t.markdown().splitlines()[-1])
    | fast | 500 ms | 4.00× | ok |
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Column", "Table", "Tables", "fmt_pct", "fmt_ratio", "fmt_sci", "fmt_time"]


def fmt_time(seconds: float) -> str:
    """Human units: 412 ns, 3.10 µs, 12.4 ms, 1.52 s."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def fmt_pct(x: float) -> str:
    """A fraction as a percentage with one decimal: ``0.987 -> '98.7 %'``."""
    return f"{100 * x:.1f} %"


def fmt_sci(x: float) -> str:
    """Scientific notation with one decimal: ``1.2e-07``."""
    return f"{x:.1e}"


def fmt_ratio(x: float) -> str:
    """A speed ratio: ``3.45×``."""
    return f"{x:.2f}×"


@dataclass(frozen=True)
class Column:
    """One table column: the row field it shows, its header and how to format a value."""

    key: str
    header: str
    fmt: Callable[[Any], str] = str


@dataclass
class Table:
    """Rows of results; a speed ratio column per reference method.

    A row's ratio against reference R is R's ``time_key`` divided by the row's, taken from the
    R row with the same values of ``case_keys`` (so > 1 means "faster than R").
    """

    title: str
    columns: list[Column]
    case_keys: tuple[str, ...] = ()
    time_key: str | None = None
    references: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(self, method: str, status: str = "ok", **values: Any) -> dict[str, Any]:
        """Append a row; ``status`` is "ok", "missing: …", "not available yet: …" or "failed: …"."""
        row = {"method": method, "status": status, **values}
        self.rows.append(row)
        return row

    def row(self, method: str) -> dict[str, Any]:
        """The first row of ``method`` (KeyError if none)."""
        for row in self.rows:
            if row["method"] == method:
                return row
        raise KeyError(method)

    def _reference_row(self, ref: str, row: dict[str, Any]) -> dict[str, Any] | None:
        for other in self.rows:
            same_case = all(other.get(k) == row.get(k) for k in self.case_keys)
            if other["method"] == ref and other["status"] == "ok" and same_case:
                return other
        return None

    def fill_ratios(self) -> None:
        """Set ``speedup_vs_<reference>`` in every row (None where it has no reference row)."""
        if self.time_key is None:
            return
        for ref in self.references:
            for row in self.rows:
                base = self._reference_row(ref, row)
                mine = row.get(self.time_key)
                ok = base is not None and row["status"] == "ok" and mine
                row[f"speedup_vs_{ref}"] = base[self.time_key] / mine if ok and base else None

    def markdown(self) -> str:
        """The table in markdown: title, header, one line per row, then the notes."""
        self.fill_ratios()
        cols = [Column("method", "method"), *self.columns]
        if self.time_key is not None:
            cols += [
                Column(f"speedup_vs_{r}", f"× faster than {r}", fmt_ratio) for r in self.references
            ]
        cols.append(Column("status", "status"))
        lines = [f"## {self.title}", ""]
        lines.append("| " + " | ".join(c.header for c in cols) + " |")
        lines.append("|" + "---|" * len(cols))
        for row in self.rows:
            cells = [c.fmt(row[c.key]) if row.get(c.key) is not None else "—" for c in cols]
            lines.append("| " + " | ".join(cells) + " |")
        lines += [""] + [f"- {note}" for note in self.notes]
        return "\n".join(lines).rstrip() + "\n"

    def as_json(self) -> dict[str, Any]:
        """Title, notes and rows (ratios filled in), for ``json.dumps``."""
        self.fill_ratios()
        return {"title": self.title, "notes": self.notes, "rows": self.rows}


class Tables(list):
    """Several :class:`Table` of one protocol, printed one after the other."""

    def markdown(self) -> str:
        """Every table's markdown, separated by blank lines."""
        return "\n".join(table.markdown() for table in self)

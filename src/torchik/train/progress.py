"""Progress of long work on stderr: a tqdm bar on a terminal, plain lines in a log file.

A bar is drawn only where stderr is a terminal; redirected output (CI logs, ``nohup``, a
notebook's captured stream) gets one line per report instead, so log files stay readable.
"""

from __future__ import annotations

import csv
import io
import math
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from torchik.files import MAX_DATA_BYTES, output_file, read_text, write_text

__all__ = ["LOG_COLUMNS", "Progress", "clock", "read_log", "write_log"]

LOG_COLUMNS = ("step", "loss", "lr", "val_loss", "val_position_error", "seconds")
"""The columns of a training log (``log.csv``); ``lr`` is the rate the row's step ran at."""


def clock(seconds: float) -> str:
    """``h:mm:ss`` (or ``m:ss``) of a duration."""
    if not math.isfinite(seconds):
        return "?"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    """Steps done out of ``total``, with rows of samples per step: rate, samples/s and ETA.

    Args:
        total: the last step.
        start: the step work starts from (a resumed run starts past 0).
        rows_per_step: samples consumed by one step (the batch size), for samples/s.
        enabled: ``False`` shows nothing.
        title: printed once at the start, so work never looks frozen before its first report.
        stream: where to write (default ``sys.stderr``).
        bar: ``True``/``False`` forces a tqdm bar or plain lines; ``None``: a bar on a terminal.
        heartbeat: plain lines only: seconds without a report after which :meth:`advance`
            prints the step, rates and ETA by itself (a slow start never looks frozen); the
            first step done prints one too.
    """

    def __init__(
        self,
        total: int,
        start: int = 0,
        rows_per_step: int = 1,
        enabled: bool = True,
        title: str = "",
        stream: TextIO | None = None,
        bar: bool | None = None,
        heartbeat: float = 10.0,
    ):
        self.total, self.start, self.rows = total, start, rows_per_step
        self.heartbeat, self._last_line = heartbeat, time.perf_counter()
        self.enabled, self.stream = enabled, stream or sys.stderr
        self.t0, self.step = time.perf_counter(), start
        use_bar = self.stream.isatty() if bar is None else bar
        self._bar = self._make_bar(title) if enabled and use_bar else None
        if enabled and self._bar is None and title:
            print(title, file=self.stream, flush=True)

    def _make_bar(self, title: str) -> Any:
        from tqdm.auto import tqdm

        return tqdm(
            total=self.total, initial=self.start, desc=title, unit="step", file=self.stream,
            dynamic_ncols=True, leave=True,
        )  # fmt: skip

    def rates(self) -> tuple[float, float, float]:
        """Steps/s and samples/s since the start, and the seconds left at that rate."""
        elapsed = max(time.perf_counter() - self.t0, 1e-9)
        steps = (self.step - self.start) / elapsed
        left = (self.total - self.step) / steps if steps > 0 else math.inf
        return steps, steps * self.rows, left

    def advance(self, step: int) -> None:
        """Step ``step`` is done (cheap: call it every step)."""
        if self._bar is not None and step > self.step:
            self._bar.update(step - self.step)
        first = self.step == self.start and step > self.start
        self.step = step
        if self._bar is None and (first or time.perf_counter() - self._last_line > self.heartbeat):
            self.report({})

    def report(self, fields: dict[str, str]) -> None:
        """Show ``fields`` (name -> formatted value) with the rates: the bar's postfix, or a
        line ``step N/total  x it/s  y samples/s  name value ...  ETA m:ss``."""
        if not self.enabled:
            return
        steps, samples, left = self.rates()
        if self._bar is not None:
            self._bar.set_postfix({**fields, "samples/s": f"{samples:,.0f}"}, refresh=False)
            return
        text = "".join(f"  {k} {v}" for k, v in fields.items())
        self._last_line = time.perf_counter()
        print(
            f"step {self.step:>7}/{self.total}  {steps:7.1f} it/s  {samples:9,.0f} samples/s"
            f"{text}  ETA {clock(left)}",
            file=self.stream,
            flush=True,
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


# ---------------------------------------------------------------------------- log files
def read_log(path: Path, upto: float = math.inf) -> list[dict[str, float]]:
    """The rows of an existing log with ``step <= upto`` (a killed run may have logged more);
    empty cells read as NaN, a missing file as no rows. Without ``upto``: every row, whatever
    its columns (the caller checks them)."""
    if not path.exists():
        return []
    text = io.StringIO(read_text(path, MAX_DATA_BYTES), newline="")
    rows = [{k: float(v) if v else math.nan for k, v in r.items()} for r in csv.DictReader(text)]
    return rows if upto == math.inf else [r for r in rows if r["step"] <= upto]


def write_log(path: Path, rows: list[dict[str, float]], append: bool = False) -> None:
    """Write ``rows`` (``repr`` of each float, so values read back exactly), or append them
    (to a new file: after the header).

    The columns are :data:`LOG_COLUMNS`: the training log ``log.csv`` of
    :func:`torchik.train.train`; rewritten whole through :func:`torchik.files.write_text` (a log
    that does not exist yet gets its header first, even with ``append``)."""
    append = append and path.exists()
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=LOG_COLUMNS)
    if not append:
        writer.writeheader()
    for row in rows:
        writer.writerow({k: repr(int(row[k]) if k == "step" else row[k]) for k in LOG_COLUMNS})
    if not append:
        write_text(path, text.getvalue())
        return
    with output_file(path).open("a", newline="") as f:
        f.write(text.getvalue())

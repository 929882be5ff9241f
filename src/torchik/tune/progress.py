"""Progress of a study on stderr: trials counted out of its budget, their pace and the time
left; a tqdm bar on a terminal, a line per finished trial elsewhere (a log file stays readable).
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from torchik.train.progress import clock

__all__ = ["TrialProgress"]


class TrialProgress:
    """Trials done out of ``total`` (training has :class:`torchik.train.Progress`, in steps).

    Args:
        total: the study's trial budget.
        start: trials it had counted before (a resumed study).
        enabled: ``False`` shows nothing.
        title: printed once at the start.
        stream: where to write (default ``sys.stderr``).
        bar: ``True``/``False`` forces a tqdm bar or plain lines; ``None``: a bar on a terminal.
    """

    def __init__(self, total: int, start: int = 0, enabled: bool = True, title: str = "",
                 stream: TextIO | None = None, bar: bool | None = None):  # fmt: skip
        self.total, self.start, self.done, self.enabled = total, start, start, enabled
        self.stream, self.t0 = stream or sys.stderr, time.perf_counter()
        use_bar = self.stream.isatty() if bar is None else bar
        self._bar: Any = None
        if enabled and use_bar:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, initial=start, desc=title, unit="trial",
                             file=self.stream, dynamic_ncols=True, leave=True)  # fmt: skip
        elif enabled and title:
            print(title, file=self.stream, flush=True)

    def advance(self, done: int) -> None:
        """The study has counted ``done`` trials (cheap: call it after every trial)."""
        if done <= self.done:
            return
        if self._bar is not None:
            self._bar.update(done - self.done)
        self.done = done
        if self.enabled and self._bar is None:
            print(self.line(), file=self.stream, flush=True)

    def line(self) -> str:
        """``trial N/total  x s/trial  ETA m:ss`` (the pace of this call's trials)."""
        seconds = (time.perf_counter() - self.t0) / max(self.done - self.start, 1)
        left = seconds * (self.total - self.done)
        return f"trial {self.done}/{self.total}  {seconds:.1f} s/trial  ETA {clock(left)}"

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

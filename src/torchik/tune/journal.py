"""A study's journal file (``study.journal``): Optuna's file backend, made to survive a full disk
and to name damage in one line.

Optuna appends one JSON record a line. A writer that fails in the middle of a record (a full
disk, a kill) leaves a torn last line; Optuna's next append lands on the same line, and from
then on every read fails ("Expecting ',' delimiter: line 1 column 77"), so the study is lost.
:class:`JournalFile`:

- appends under the journal's lock and, when a write fails, cuts the file back to its last
  complete record before raising (``OSError``: "no space left on PATH"): a full disk never
  leaves a torn record;
- on opening, and before each append, drops a torn record left by an earlier writer (the
  bytes after the last line end, or a torn start that a later append ran into: the complete
  record after it is kept), with a warning that says what was dropped;
- refuses a journal damaged elsewhere (a line in the middle that is not a record, or a record
  that Optuna cannot replay) with a ValueError naming the file and the line.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import warnings
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock, JournalStorage

from torchik.files import MAX_DATA_BYTES, atomic_write, output_file, read_regular_file

__all__ = ["JournalFile", "open_journal", "repair_records"]

_RECORD_START = b'{"op_code":'
_DAMAGED = "the journal is damaged: restore it from a backup, or move it away to start again"


def repair_records(data: bytes, name: str) -> tuple[bytes, list[str]]:
    """The complete records of a journal's bytes, and what was dropped to get them.

    A torn record is dropped: the bytes after the last line end, or the start of a line that
    a later record was appended to (that record is kept).

    Args:
        data: the journal's content.
        name: the file, for the message.

    Returns:
        ``(records, dropped)``: the records, one a line, and a description of each dropped part.

    Raises:
        ValueError: a line that is no record and holds none (damage, not a torn write).

    Example:
        >>> repair_records(b'{"op_code":0}\\n{"op_co', "study.journal")
        (b'{"op_code":0}\\n', ['a torn last record of 7 bytes'])
    """
    *lines, tail = data.split(b"\n")
    kept, dropped = [], []
    for number, line in enumerate(lines, 1):
        start = line.rfind(_RECORD_START)
        if start < 0 or not _is_record(line[start:]):
            raise ValueError(f"{name}: line {number} is not a journal record; {_DAMAGED}")
        if start > 0:
            dropped.append(f"a torn record of {start} bytes before the record of line {number}")
        kept.append(line[start:] + b"\n")
    if tail:
        dropped.append(f"a torn last record of {len(tail)} bytes")
    return b"".join(kept), dropped


def _is_record(line: bytes) -> bool:
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(record, dict) and isinstance(record.get("op_code"), int)


class JournalFile(JournalFileBackend):
    """Optuna's ``JournalFileBackend`` that drops torn records and never leaves one.

    Args:
        path: the journal file (created if missing; a symbolic link is followed; a device, a
            FIFO or a directory is refused).

    Raises:
        ValueError: ``path`` is not a regular file, or the journal is damaged (the message
            names the file and the line).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = output_file(path)  # before Optuna opens it: a FIFO would block
        self._guard = JournalFileSymlinkLock(str(self.path))
        super().__init__(str(self.path), self._guard)
        self.replaying = 0
        with self._locked():
            self._repair()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self._guard.acquire()
        try:
            yield
        finally:
            self._guard.release()

    def _repair(self) -> int:
        """Drop torn records (the lock held); returns the size of the complete records."""
        data = read_regular_file(self.path, MAX_DATA_BYTES)
        kept, dropped = repair_records(data, str(self.path))
        if dropped:
            if data.startswith(kept):  # only a torn end: cut it, the lines before stay put
                os.truncate(self.path, len(kept))
            else:
                atomic_write(self.path, lambda tmp: Path(tmp).write_bytes(kept))
            warnings.warn(
                f"{self.path}: dropped {'; '.join(dropped)} (written when the disk was full or "
                "a writer was killed); every complete record is kept",
                stacklevel=3,
            )
        return len(kept)

    def read_logs(self, log_number_from: int) -> Generator[dict[str, Any], None, None]:
        """Optuna's records from ``log_number_from`` on; :attr:`replaying` counts them (the
        line of a record that cannot be replayed)."""
        for number, record in enumerate(super().read_logs(log_number_from), log_number_from):
            self.replaying = number + 1
            yield record

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        """Append ``logs`` under the lock; a failed write is cut off again.

        Raises:
            OSError: the write failed ("no space left on PATH" for a full disk); the journal
                holds its complete records only.
        """
        text = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs)
        with self._locked():
            size = os.path.getsize(self.path)
            if size and not _ends_a_line(self.path, size):
                size = self._repair()
            try:
                _append(self.path, text.encode("utf-8"))
            except OSError as err:
                with contextlib.suppress(OSError):  # else the next open cuts it
                    os.truncate(self.path, size)
                raise _failed_write(err, self.path) from err


def _ends_a_line(path: Path, size: int) -> bool:
    with open(path, "rb") as file:
        file.seek(size - 1)
        return file.read(1) == b"\n"


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def _failed_write(err: OSError, path: Path) -> OSError:
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        text = (
            f"no space left on {path}: the study's last change was not recorded (the journal "
            "keeps every complete record); free some space, then run again with --resume"
        )
    else:
        text = f"cannot write {path}: {err.strerror or err}"
    return OSError(err.errno, text)


def open_journal(path: str | os.PathLike) -> JournalStorage:
    """An Optuna ``JournalStorage`` on a :class:`JournalFile`.

    Raises:
        ValueError: ``path`` is not a regular file, or the journal is damaged: a line that is
            no record, or a record Optuna cannot replay (the message names the file and the
            line; Optuna's own error was a 29-line ``KeyError: 'distribution'``).
    """
    backend = JournalFile(path)
    try:
        return JournalStorage(backend)
    except OSError:
        raise
    except Exception as err:  # noqa: BLE001 - whatever a damaged record makes Optuna raise
        what = f"{type(err).__name__}: {err}".splitlines()[0]
        raise ValueError(
            f"{backend.path}: line {backend.replaying} cannot be replayed ({what}); {_DAMAGED}"
        ) from None

"""Files torchik writes and reads: output paths that are never replaced by accident, atomic
saving that says when the disk is full, ``torch.load`` that never runs code nor inflates a zip
bomb, and reading only regular files of bounded size.

Every file torchik writes goes through :func:`atomic_write` (``torch.save``:
:func:`atomic_save`; text: :func:`write_text`; figures: :func:`save_figure`), or is checked by
:func:`output_file` first where it is appended to; every torch file it reads through
:func:`load_tensors`; text inputs (robot descriptions, settings files, logs) through
:func:`read_regular_file` or :func:`read_text`.

An output path that exists must be a regular file (a device such as ``/dev/full``, a FIFO or a
directory is refused, never replaced); a symbolic link is written through: its target gets the
new content and the link stays.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import pickle
import re
import stat
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, cast

import torch

__all__ = [
    "MAX_DATA_BYTES",
    "MAX_INFLATION",
    "MAX_TEXT_BYTES",
    "FileRefused",
    "atomic_save",
    "atomic_write",
    "load_tensors",
    "output_file",
    "pid_alive",
    "read_head",
    "read_regular_file",
    "read_text",
    "save_figure",
    "torch_file_problem",
    "write_text",
]

MAX_TEXT_BYTES = 2**20
"""The largest settings file (``--config``, ``--space``, JSON records) :func:`read_text` reads
by default: real ones are a few KB."""

MAX_DATA_BYTES = 2**30
"""The largest data file read whole (a training log, a study's journal, benchmark results,
saved solutions): :func:`read_text` is given this bound for them."""

MAX_INFLATION = 16
"""How many times its own size a torch file's zip entries may inflate to. ``torch.save`` stores
its entries uncompressed (a ratio of 1); a file of compressed entries that would inflate more is
refused before anything is decompressed (a zip bomb)."""

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


class FileRefused(ValueError):
    """A path torchik will not read or write: not a regular file, or larger than the limit."""


# ---------------------------------------------------------------------------- writing
def output_file(path: str | os.PathLike) -> Path:
    """The file to write for ``path``, checked: ``path`` itself, or the file a symbolic link
    points to (written through, so that the link stays a link).

    Args:
        path: where a file is to be written.

    Returns:
        The path to write (symbolic links resolved).

    Raises:
        FileRefused: something that is not a regular file is there (a device, a FIFO, a
            socket, a directory): it is never replaced; or ``path`` is empty.
        FileNotFoundError: its folder does not exist (the message names the folder).
        NotADirectoryError: its folder is a file.
        PermissionError: its folder is not writable.

    Example:
        >>> output_file("/dev/null")
        Traceback (most recent call last):
        ...
        torchik.files.FileRefused: '/dev/null' is a character device, not a regular file: ...
    """
    if not os.fspath(path):  # Path("") is the current folder
        raise FileRefused("the output path is empty: give a file name; nothing was written")
    given = Path(path)
    target = Path(os.path.realpath(given)) if given.is_symlink() else given
    try:
        mode = os.stat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):
        _check_folder(path, target)
        return target
    if not stat.S_ISREG(mode):
        raise FileRefused(
            f"{os.fspath(path)!r} is {_kind(mode)}, not a regular file: nothing was written"
        )
    return target


def _check_folder(path: str | os.PathLike, target: Path) -> None:
    """Refuse to create ``target`` (given as ``path``) in a folder that is missing, not a
    folder, or not writable (the write would fail only after the work, naming a temporary
    file)."""
    folder = target.parent
    name = os.fspath(path)
    if not os.path.exists(folder):
        raise FileNotFoundError(errno.ENOENT, f"the folder {os.fspath(folder)!r} does not "
                                f"exist: {name!r} was not written")  # fmt: skip
    if not os.path.isdir(folder):
        raise NotADirectoryError(errno.ENOTDIR, f"{os.fspath(folder)!r} is a file, not a "
                                 f"folder: {name!r} was not written")  # fmt: skip
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, f"the folder {os.fspath(folder)!r} is not "
                              f"writable: {name!r} was not written")  # fmt: skip


def _kind(mode: int) -> str:
    kinds = {
        stat.S_ISDIR: "a directory",
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    return next((text for test, text in kinds.items() if test(mode)), "a special file")


def atomic_write(path: str | os.PathLike, write: Callable[[str], object]) -> Path:
    """Write ``path`` through a temporary file and ``os.replace``: a killed writer never leaves
    a half-written ``path``, and a full disk leaves the earlier file as it was.

    ``path`` is checked by :func:`output_file` first (a symbolic link is written through).
    Temporary files of ``path`` left by writers that were killed (their process is gone) are
    removed.

    Args:
        path: the file.
        write: writes the whole content into the file name it is given.

    Returns:
        The file written (symbolic links resolved).

    Raises:
        FileRefused: ``path`` is not a regular file (see :func:`output_file`).
        OSError: the folder does not exist or is not writable (see :func:`output_file`), or
            the disk is full ("no space left on ..."); an error of the temporary file names
            ``path``.
    """
    target = output_file(path)
    _remove_orphans(os.fspath(target))
    tmp = f"{target}.tmp{os.getpid()}"
    try:
        if os.path.lexists(tmp):  # left by an earlier process of this id
            os.remove(tmp)
        write(tmp)
        os.replace(tmp, target)
    except OSError as err:
        if err.errno in _NO_SPACE:
            raise OSError(err.errno, f"no space left on {os.fspath(path)}: it was not "
                          "written (an earlier file there is unchanged)") from err  # fmt: skip
        if tmp in (err.filename, err.filename2) and err.strerror:  # name the file, not tmp
            raise OSError(err.errno, err.strerror, os.fspath(path)) from err
        raise
    finally:
        if os.path.lexists(tmp):
            os.remove(tmp)
    return target


def atomic_save(obj: Any, path: str | os.PathLike) -> None:
    """``torch.save(obj, path)`` through :func:`atomic_write`.

    Model checkpoints go through :func:`torchik.models.checkpoint.save_checkpoint`, which adds
    their content hash.

    Raises:
        FileRefused, OSError: as for :func:`atomic_write` (a full disk: "no space left on").
    """

    def save(tmp: str) -> None:
        with open(tmp, "wb") as file:  # a file object: a full disk is an OSError (ENOSPC),
            torch.save(obj, file)  # where a path gives torch's "unexpected pos"

    atomic_write(path, save)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` through :func:`atomic_write`: UTF-8, line ends as they are."""
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8", newline=""))


def save_figure(figure: Any, path: str | os.PathLike, **options: Any) -> None:
    """``figure.savefig(path, **options)`` (a matplotlib figure) through :func:`atomic_write`,
    in the format of ``path``'s suffix (PNG without one)."""
    kind = Path(path).suffix.lstrip(".").lower() or "png"
    atomic_write(path, lambda tmp: figure.savefig(tmp, format=kind, **options))


def _remove_orphans(path: str) -> None:
    """Remove ``path.tmp<PID>`` files whose process no longer runs (a writer killed mid-save)."""
    folder, base = os.path.split(path)
    pattern = re.compile(re.escape(base) + r"\.tmp(\d+)")
    if not os.path.isdir(folder or "."):  # torch.save says so
        return
    for name in os.listdir(folder or "."):
        match = pattern.fullmatch(name)
        if match and not pid_alive(int(match.group(1))):
            try:
                os.remove(os.path.join(folder, name))
            except OSError:  # another writer removed it first
                pass


def pid_alive(pid: int) -> bool:
    """Whether a process of id ``pid`` runs on this machine (the writer of a temporary file,
    the worker of a trial)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # another user's process
        return True
    return True


# ---------------------------------------------------------------------------- reading
def load_tensors(
    path: str | os.PathLike, map_location: Any, what: str = "torchik checkpoint"
) -> Any:
    """``torch.load(path, weights_only=True)`` of a regular file whose zip entries are checked
    first.

    The file is opened non-blocking and must be a regular file (a FIFO would block forever);
    its bytes must be a torch file's (:func:`torch_file_problem`: an image, text, a pickle of
    another writer, an empty, truncated or damaged file is named as such); a zip archive (what
    ``torch.save`` writes) whose entries would inflate to more than :data:`MAX_INFLATION` times
    the file's size is refused before anything is decompressed (``torch`` checks each
    tensor's declared size against its entry).

    Args:
        path: the file.
        map_location: as for ``torch.load``.
        what: what the file should be, for the messages.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a regular file, a zip bomb, a corrupt or foreign file, or pickled code;
            the message names the file.
    """
    name = os.fspath(path)
    try:
        with _open_regular(path) as (file, info):
            problem = _torch_problem(file, info.st_size)
            if problem is None:
                _check_inflation(file, info.st_size)
                return _torch_load(file, map_location, name, what)
    except FileRefused as err:
        raise FileRefused(f"{name!r}: {err}") from None
    raise ValueError(f"{name!r} is not a readable {what}: {problem}")


def _torch_load(file: IO[bytes], map_location: Any, name: str, what: str) -> Any:
    """``torch.load(file, weights_only=True)``, its errors as one ValueError naming ``name``."""
    try:
        with warnings.catch_warnings():  # its "please file an issue" for a protocol it reads
            warnings.filterwarnings("ignore", "Detected pickle protocol", UserWarning)
            return torch.load(file, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:  # not torch's advice to retry with weights_only=False
        opcodes = _operand(err)
        if opcodes == []:  # a byte that is no opcode of any protocol
            raise ValueError(f"{name!r} is not a readable {what}: {_DAMAGED}") from err
        # an operation of protocol 4 or later refused (such as FRAME, which every such pickle
        # opens with), not an object: tensors, maybe, of torch.save(..., pickle_protocol=4)
        if any(op.proto >= 4 for op in opcodes or []):
            raise ValueError(
                f"{name!r} is not a readable {what}: it was pickled with protocol 4 or later "
                "(torch.save's pickle_protocol), which torch reads only by running pickled "
                "code: save it with the default protocol"
            ) from err
        found = re.search(r"GLOBAL ([\w.]+)", str(err))
        found_what = f"it would import {found.group(1)}" if found else "it holds objects"
        raise ValueError(
            f"{name!r} is refused: {found_what}; a {what} holds tensors and plain types only, "
            "and pickled code is never run"
        ) from err
    except Exception as err:  # torch raises many types for corrupt or foreign files
        reason = (str(err).splitlines() or [type(err).__name__])[0]
        raise ValueError(f"{name!r} is not a readable {what}: {reason}") from err


def _operand(err: pickle.UnpicklingError) -> list[Any] | None:
    """The pickle opcodes (``pickletools.opcodes``) whose byte torch's loader called an
    unsupported operand, ``[]`` for a byte that is no opcode at all (the pickle is damaged),
    ``None`` where it refused something else."""
    import pickletools

    found = re.search(r"Unsupported operand (\d+)", str(err))
    if found is None:
        return None
    return [op for op in pickletools.opcodes if op.code == chr(int(found.group(1)))]


_ZIP = b"PK\x03\x04"  # what torch.save writes
_PICKLE = b"\x80"  # torch's legacy format: a pickle (protocol 2 or later)
_TRUNCATED = "it is truncated or damaged (not a complete file: a copy or a save cut short?)"
_DAMAGED = "it is damaged (its bytes differ from those saved: a bad copy or disk?)"


def torch_file_problem(path: str | os.PathLike) -> str | None:
    """Why the regular file ``path`` is not a torch file, as a clause ("it is empty", "it is
    truncated or damaged (...)", "it is a PNG image, not a file of torch.save", ...), or
    ``None`` where it may be one (its bytes are read, not its suffix; nothing is unpickled).

    Raises:
        FileRefused: not a regular file.
        OSError: it cannot be opened.
    """
    with _open_regular(path) as (file, info):
        return _torch_problem(file, info.st_size)


def _torch_problem(file: IO[bytes], size: int) -> str | None:
    """:func:`torch_file_problem` of an open file (left at its start)."""
    head = file.read(16)
    file.seek(0)
    if not head:
        return "it is empty"
    if head.startswith(_PICKLE):
        return _pickle_problem(file, head)
    if not head.startswith(_ZIP):
        return f"it is {_foreign(head)}, not a file of torch.save"
    try:
        return _zip_problem(file, size)
    finally:
        file.seek(0)


def _zip_problem(file: IO[bytes], size: int) -> str | None:
    """:func:`torch_file_problem` of a zip archive: its entries must lie within the file, and
    its pickles (stored, as torch.save writes them) match their checksums: a damaged pickle
    said "it holds objects" or "it would import torch._utils._rebuil" (it is read, not run)."""
    try:  # a zip archive lists its entries at its end: a file cut short has none
        with zipfile.ZipFile(file) as archive:
            entries = archive.infolist()
            end = max((e.header_offset + e.compress_size for e in entries), default=0)
            if max(end, sum(e.compress_size for e in entries)) > size:  # beyond the end, or
                return _TRUNCATED  # more than the file holds
            for entry in entries:
                if entry.filename.endswith(".pkl") and entry.compress_type == zipfile.ZIP_STORED:
                    with archive.open(entry) as pickled:  # reading to its end checks its CRC
                        while pickled.read(2**20):
                            pass
    except zipfile.BadZipFile as err:
        return _DAMAGED if "CRC" in str(err) else _TRUNCATED
    except (NotImplementedError, RuntimeError):  # a header damaged into a zip version,
        return _DAMAGED  # compression or encryption (a password) that torch.save never writes
    except (OSError, EOFError, ValueError):  # a cut one may say EINVAL
        return _TRUNCATED
    return None


def _pickle_problem(file: IO[bytes], head: bytes) -> str | None:
    """:func:`torch_file_problem` of a file that starts as a pickle: None for torch's legacy
    format (``_use_new_zipfile_serialization=False``) whose five pickles (the magic number,
    the format's version, the machine's, the object, its storages' keys) are complete before
    the tensors' bytes. Their operations are read (:func:`pickletools.genops`), never run: a
    cut or random file said "EOFError", or "it holds objects" (torch's loader refused it)."""
    import mmap
    import pickletools

    from torch.serialization import MAGIC_NUMBER

    try:
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # a file system without mmap: torch.load says what it is
        return None
    with mapped:
        data = cast(IO[bytes], mapped)  # read(n) stops at its end (a file's would allocate n)
        try:
            ops = [(op.name, arg) for op, arg, _ in pickletools.genops(data)]
        except ValueError:  # the end reached (a file cut short), or an unknown operation
            cut = data.tell() >= len(mapped)
            return _TRUNCATED if cut else f"it is {_foreign(head)}, not a file of torch.save"
        if MAGIC_NUMBER not in [arg for _, arg in ops]:
            imports = _imported(ops)
            code = f"; it would import {imports}, and pickled code is never run" if imports else ""
            return f"it is a pickle, not a file of torch.save (pickle.dump wrote it?){code}"
        try:
            for _ in range(4):
                for _ in pickletools.genops(data):
                    pass
        except ValueError:
            return _TRUNCATED
    return None


def _imported(ops: list[tuple[str, Any]]) -> str | None:
    """The first name a pickle's operations (``pickletools.genops``'s names and arguments)
    would import: GLOBAL's ``"module name"``, or STACK_GLOBAL's two strings before it."""
    strings: list[str] = []
    for name, arg in ops:
        if name == "GLOBAL":
            return str(arg).replace(" ", ".")
        if name == "STACK_GLOBAL" and len(strings) >= 2:
            return ".".join(strings[-2:])
        if isinstance(arg, str):
            strings.append(arg)
    return None


def _foreign(head: bytes) -> str:
    """What a file that is neither a zip archive nor a pickle looks like, from its first bytes."""
    if head.startswith(b"\x89PNG"):
        return "a PNG image"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")  # a UTF-8 BOM, white space
    if text.startswith(b"<"):
        return "an XML file (a URDF?)"
    if text[:1] in (b"{", b"["):
        return "JSON text"
    printable = all(32 <= c < 127 or c in b"\t\r\n" for c in head)
    return "text" if printable else "neither a zip archive nor a pickle"


def _check_inflation(file: IO[bytes], size: int) -> None:
    """Refuse a zip archive whose entries would inflate to over :data:`MAX_INFLATION` times
    ``size`` (their sizes are read from its central directory; nothing is decompressed)."""
    if not zipfile.is_zipfile(file):
        file.seek(0)
        return  # torch's legacy format, or not torch's: torch.load says what it is
    file.seek(0)
    with zipfile.ZipFile(file) as archive:
        inflated = sum(entry.file_size for entry in archive.infolist())
    file.seek(0)
    if inflated > MAX_INFLATION * size + 2**16:
        raise FileRefused(
            f"its zip entries would inflate to {inflated:,} bytes, {inflated / max(size, 1):,.0f} "
            f"times the file's {size:,} (at most {MAX_INFLATION}): refused before reading"
        )


@contextlib.contextmanager
def _open_regular(path: str | os.PathLike) -> Iterator[tuple[IO[bytes], os.stat_result]]:
    """``path`` opened for reading without blocking (a FIFO opens at once, with no writer),
    with its ``stat``; refused unless it is a regular file."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise FileRefused(f"{_kind(info.st_mode)}, not a regular file: it is never read")
    with os.fdopen(fd, "rb") as file:
        yield file, info


def read_regular_file(path: str | os.PathLike, max_bytes: int | None) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``, checked before reading.

    Opened non-blocking, so that a FIFO is refused instead of waiting for a writer forever.

    Raises:
        FileRefused: not a regular file (a FIFO, a device, a directory), or too large.
        OSError: the file cannot be opened (``FileNotFoundError`` among others).
    """
    with _open_regular(path) as (file, info):
        if max_bytes is not None and info.st_size > max_bytes:
            raise FileRefused(f"{info.st_size} bytes, over the limit of {max_bytes} (max_bytes=)")
        # In chunks, not read(max_bytes + 1): that would allocate the whole limit up front.
        chunks, size, limit = [], 0, math.inf if max_bytes is None else max_bytes
        while chunk := file.read(2**20):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # the file grew while we read it
                raise FileRefused(f"over the limit of {max_bytes} bytes (max_bytes=)")
    return b"".join(chunks)


def read_head(path: str | os.PathLike, size: int = 4096) -> bytes:
    """The first ``size`` bytes of a regular file (fewer if it is shorter), to tell what kind
    of file it is before reading it whole; opened non-blocking, as :func:`read_regular_file`.

    Raises:
        FileRefused: not a regular file (the message names it).
        OSError: the file cannot be opened (``FileNotFoundError`` among others).
    """
    try:
        with _open_regular(path) as (file, _):
            return file.read(size)
    except FileRefused as err:
        raise FileRefused(f"{os.fspath(path)!r}: {err}") from None


def read_text(path: str | os.PathLike, max_bytes: int | None = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes`` (:func:`read_regular_file`).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a regular file, too large, or not UTF-8 text; the message names the
            file (``FileRefused`` for the first two).
        OSError: the file cannot be read (a directory, no permission).
    """
    name = os.fspath(path)
    try:
        return read_regular_file(path, max_bytes).decode("utf-8")
    except FileRefused as err:
        raise FileRefused(f"{name!r}: {err}") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"{name!r} is not UTF-8 text (byte {err.start})") from None

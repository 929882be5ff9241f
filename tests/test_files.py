"""torchik.files: output paths never replaced by accident (devices, FIFOs, directories; links
written through), atomic writes that name a full disk, torch files read only when regular and
not a zip bomb, text read only from regular files of bounded size."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import zipfile
from pathlib import Path

import pytest
import torch

from torchik import files
from torchik.files import (
    MAX_INFLATION,
    FileRefused,
    atomic_save,
    atomic_write,
    load_tensors,
    output_file,
    read_regular_file,
    read_text,
    save_figure,
    write_text,
)


@contextlib.contextmanager
def deadline(seconds: int = 10):
    """Fail instead of hanging (a FIFO read blocks forever without a writer)."""

    def expired(*_):
        raise TimeoutError(f"blocked for {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def special_files(folder: Path) -> dict[str, Path]:
    """A FIFO, a directory and (as root) a character device like ``/dev/full`` in ``folder``."""
    found = {"fifo": folder / "fifo", "directory": folder / "dir"}
    os.mkfifo(found["fifo"])
    found["directory"].mkdir()
    with contextlib.suppress(PermissionError):  # mknod needs root
        os.mknod(folder / "full", stat.S_IFCHR | 0o666, os.makedev(1, 7))
        found["device"] = folder / "full"
    return found


def _kind(path: Path) -> int:
    return stat.S_IFMT(os.lstat(path).st_mode)


# ---------------------------------------------------------------------------- writing
def test_output_file_refuses_what_is_not_a_regular_file_and_writes_through_links(tmp_path):
    for name, path in special_files(tmp_path).items():
        kind = _kind(path)
        for write in (lambda p: atomic_save({"a": 1}, p), lambda p: write_text(p, "x")):
            with pytest.raises(FileRefused, match="not a regular file: nothing was written"):
                write(path)
            assert _kind(path) == kind, f"the {name} was replaced"
    (tmp_path / "target.txt").write_text("old")
    (tmp_path / "link").symlink_to("target.txt")
    write_text(tmp_path / "link", "new")
    assert (tmp_path / "link").is_symlink() and (tmp_path / "target.txt").read_text() == "new"
    (tmp_path / "dangling").symlink_to("made.txt")
    assert output_file(tmp_path / "dangling") == tmp_path / "made.txt"
    write_text(tmp_path / "dangling", "made")
    assert (tmp_path / "dangling").is_symlink() and (tmp_path / "made.txt").read_text() == "made"
    (tmp_path / "to_fifo").symlink_to("fifo")
    with pytest.raises(FileRefused, match="'.*to_fifo' is a FIFO"):
        write_text(tmp_path / "to_fifo", "x")


def test_a_full_disk_leaves_the_earlier_file_and_says_so(tmp_path, monkeypatch):
    path = tmp_path / "model.pt"
    atomic_save({"step": 1}, path)

    def full(obj, file):
        file.write(b"PK\x03\x04 half a checkpoint")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.torch, "save", full)
    with pytest.raises(OSError, match=f"no space left on {path}: it was not written") as err:
        atomic_save({"step": 2}, path)
    assert err.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert load_tensors(path, "cpu") == {"step": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]  # no temporary left


def test_torch_save_to_a_full_device_is_an_oserror_not_torchs_unexpected_pos(tmp_path):
    """Through a file object, ``torch.save`` on a full disk raises the OSError itself (with a
    path, torch says "[enforce fail at inline_container.cc] unexpected pos")."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")

    def into_full_device(tmp: str) -> None:
        with open("/dev/full", "wb") as file:
            torch.save({"w": torch.zeros(10_000)}, file)

    with pytest.raises(OSError, match="no space left on"):
        atomic_write(tmp_path / "x.pt", into_full_device)


def test_write_text_and_save_figure(tmp_path):
    write_text(tmp_path / "a.csv", "a,b\r\n1,2\r\n")
    assert (tmp_path / "a.csv").read_bytes() == b"a,b\r\n1,2\r\n"  # line ends kept

    class Figure:
        def savefig(self, name, format, dpi):
            Path(name).write_text(f"{format} {dpi}")

    save_figure(Figure(), tmp_path / "f.SVG", dpi=7)
    save_figure(Figure(), tmp_path / "g", dpi=8)
    assert (tmp_path / "f.SVG").read_text() == "svg 7" and (tmp_path / "g").read_text() == "png 8"
    with pytest.raises(FileNotFoundError):
        write_text(tmp_path / "no" / "such" / "folder.txt", "x")


def test_output_file_refuses_a_missing_file_or_unwritable_folder_and_an_empty_path(
    tmp_path, monkeypatch
):
    """A path in a missing folder failed only after the work, naming the temporary file
    (``file not found: nodir/s.json.tmp8202``); ``''`` was "a directory"."""
    with pytest.raises(FileNotFoundError, match="the folder '.*nodir' does not exist: '.*s.json"):
        output_file(tmp_path / "nodir" / "s.json")
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(NotADirectoryError, match="'.*f.txt' is a file, not a folder"):
        output_file(tmp_path / "f.txt" / "s.json")
    (tmp_path / "dangling").symlink_to("nodir/made.txt")
    with pytest.raises(FileNotFoundError, match="the folder '.*nodir' does not exist"):
        output_file(tmp_path / "dangling")
    with pytest.raises(FileRefused, match="the output path is empty"):
        output_file("")
    monkeypatch.setattr(files.os, "access", lambda path, mode: False)  # root may write anywhere
    with pytest.raises(PermissionError, match="the folder '.*' is not writable: '.*new.txt'"):
        write_text(tmp_path / "new.txt", "x")
    assert output_file(tmp_path / "f.txt") == tmp_path / "f.txt"  # a file there: its own check


def test_an_error_of_the_temporary_file_names_the_file_written(tmp_path):
    def denied(tmp: str) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", tmp)

    with pytest.raises(PermissionError) as err:
        atomic_write(tmp_path / "x.pt", denied)
    assert err.value.filename == str(tmp_path / "x.pt") and ".tmp" not in str(err.value)


# ---------------------------------------------------------------------------- reading
def test_load_tensors_refuses_special_files_without_blocking(tmp_path):
    with deadline():
        for path in special_files(tmp_path).values():
            with pytest.raises(FileRefused, match="not a regular file: it is never read"):
                load_tensors(path, "cpu")
        with pytest.raises(FileNotFoundError):
            load_tensors(tmp_path / "missing.pt", "cpu")


def _bomb(path: Path, numel: int) -> None:
    """A torch file whose entries are deflated: zeros compress about 1000 to 1."""
    torch.save({"w": torch.zeros(numel)}, path.with_suffix(".plain"))
    with (
        zipfile.ZipFile(path.with_suffix(".plain")) as plain,
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as bomb,
    ):
        for entry in plain.infolist():
            bomb.writestr(entry.filename, plain.read(entry.filename))


def test_load_tensors_says_what_a_file_that_is_no_torch_file_is(tmp_path):
    """A truncated checkpoint said "[Errno 22] Invalid argument" or miniz's "failed finding
    central directory"; a CSV or PNG file said "is refused: it holds objects ... pickled code
    is never run" (torch read it as a pickle)."""
    atomic_save({"w": torch.arange(1000.0)}, tmp_path / "good.pt")
    blob = (tmp_path / "good.pt").read_bytes()
    cases = {
        "a.csv": (b"step,loss\n1,2\n", "it is text, not a file of torch.save"),
        "a.png": (b"\x89PNG\r\n\x1a\n" + bytes(64), "it is a PNG image, not a file of torch"),
        "a.json": (b' {"a": 1}', "it is JSON text, not a file of torch.save"),
        "a.urdf": (b"<robot/>", "it is an XML file (a URDF?), not a file of torch.save"),
        "a.bin": (bytes(range(256)), "it is neither a zip archive nor a pickle, not a file"),
        "empty.pt": (b"", "it is empty"),
    }
    truncated = "it is truncated or damaged (not a complete file: a copy or a save cut short?)"
    for cut in (10, 200, len(blob) // 2, len(blob) - 1):
        cases[f"cut{cut}.pt"] = (blob[:cut], truncated)
    cases["middle.pt"] = (blob[:300] + blob[-3000:], truncated)  # its end, not its entries
    for name, (content, says) in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError) as err:
            load_tensors(tmp_path / name, "cpu", "torch file of configurations")
        expected = f"'{tmp_path / name}' is not a readable torch file of configurations: {says}"
        assert str(err.value).startswith(expected), str(err.value)
        assert files.torch_file_problem(tmp_path / name) == str(err.value).split(": ", 1)[1]
    assert files.torch_file_problem(tmp_path / "good.pt") is None
    torch.save({"w": torch.ones(2)}, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    assert files.torch_file_problem(tmp_path / "legacy.pt") is None  # a pickle: torch reads it
    assert torch.equal(load_tensors(tmp_path / "legacy.pt", "cpu")["w"], torch.ones(2))


def test_a_damaged_pickle_or_one_of_another_writer_is_not_said_to_hold_objects(tmp_path):
    """A cut legacy checkpoint said "EOFError" or "it would import torch._utils._rebuil", random
    bytes that start as a pickle, a pickle of pickle.dump, a zip checkpoint with a damaged
    data.pkl and tensors saved with pickle_protocol=4 said "it holds objects"; a header's
    encryption flag raised zipfile's RuntimeError ("password required")."""
    import pickle

    torch.save({"w": torch.arange(50.0)}, tmp_path / "legacy.pt",
               _use_new_zipfile_serialization=False)  # fmt: skip
    legacy = (tmp_path / "legacy.pt").read_bytes()
    torch.save({"w": torch.arange(50.0)}, tmp_path / "good.pt")
    zipped = bytearray((tmp_path / "good.pt").read_bytes())
    with zipfile.ZipFile(tmp_path / "good.pt") as archive:  # a byte of data.pkl's last part
        entry = next(e for e in archive.infolist() if e.filename.endswith("data.pkl"))
    at = zipped.index(b"\x80\x02", entry.header_offset) + entry.compress_size - 5
    zipped[at] ^= 0xFF
    encrypted = bytearray((tmp_path / "good.pt").read_bytes())
    encrypted[encrypted.index(b"PK\x01\x02") + 8] |= 1  # a central header's flag: a password
    truncated = "it is truncated or damaged (not a complete file"
    cases = {
        "random.pt": (b"\x80\x11\xfe" + bytes(range(200)), "it is neither a zip archive nor a"),
        "pickled.pt": (pickle.dumps({"w": [1.0]}, protocol=2), "it is a pickle, not a file of"),
        "damaged.pt": (bytes(zipped), "it is damaged (its bytes differ from those saved"),
        "encrypted.pt": (bytes(encrypted), "it is damaged (its bytes differ from those saved"),
        **{f"cut{n}.pt": (legacy[:n], truncated) for n in (8, 20, 100, 300)},
    }
    for name, (content, says) in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError) as err:
            load_tensors(tmp_path / name, "cpu")
        assert f"is not a readable torchik checkpoint: {says}" in str(err.value), name
        assert files.torch_file_problem(tmp_path / name) == str(err.value).split(": ", 1)[1]
    torch.save({"w": torch.ones(2)}, tmp_path / "p4.pt", pickle_protocol=4)
    assert files.torch_file_problem(tmp_path / "p4.pt") is None  # torch.load says why
    with pytest.raises(ValueError, match="it was pickled with protocol 4 or later .* save it"):
        load_tensors(tmp_path / "p4.pt", "cpu")


def test_a_pickle_of_unknown_opcodes_with_a_good_checksum_is_damaged_and_torch_says_nothing(
    tmp_path,
):
    """A data.pkl rewritten with its checksum (tests.fuzz.checkpoints --start 91000, seed
    91032) whose second byte, the protocol, is 224 and which holds a byte that is no opcode:
    "it holds objects", after torch's UserWarning asking to file an issue."""
    import warnings

    torch.save({"w": torch.arange(5.0)}, tmp_path / "good.pt")
    with zipfile.ZipFile(tmp_path / "good.pt") as archive:
        parts = {e.filename: archive.read(e) for e in archive.infolist()}
    with zipfile.ZipFile(tmp_path / "bad.pt", "w") as archive:  # checksums written anew
        for name, data in parts.items():
            if name.endswith("data.pkl"):
                data = b"\x80\xe0\xa1" + data[3:]  # protocol 224, then no opcode (161)
            archive.writestr(name, data)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="bad.pt' is not a readable .*: it is damaged"):
            load_tensors(tmp_path / "bad.pt", "cpu")
        torch.save({"w": torch.ones(2)}, tmp_path / "p4.pt", pickle_protocol=4)
        with pytest.raises(ValueError, match="protocol 4 or later"):
            load_tensors(tmp_path / "p4.pt", "cpu")
    assert not [w for w in said if "pickle protocol" in str(w.message)], said


def test_read_head_reads_the_first_bytes_of_a_regular_file_only(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"0123456789")
    assert files.read_head(tmp_path / "a.txt", 4) == b"0123"
    assert files.read_head(tmp_path / "a.txt") == b"0123456789"
    with deadline():
        for path in special_files(tmp_path).values():
            with pytest.raises(FileRefused, match="not a regular file: it is never read"):
                files.read_head(path)


def test_load_tensors_refuses_a_zip_bomb_before_inflating_it(tmp_path, monkeypatch):
    _bomb(tmp_path / "bomb.pt", 2_000_000)  # 8 MB of zeros in about 8 KB
    loads = []
    monkeypatch.setattr(files.torch, "load", lambda *args, **kw: loads.append(args))
    with pytest.raises(FileRefused, match=f"inflate to 8,000,.* bytes.*most {MAX_INFLATION}"):
        load_tensors(tmp_path / "bomb.pt", "cpu")
    assert not loads  # refused before torch read (and inflated) anything
    monkeypatch.undo()
    _bomb(tmp_path / "small.pt", 1000)  # a compressed file within the ratio still loads
    assert load_tensors(tmp_path / "small.pt", "cpu")["w"].shape == (1000,)
    atomic_save({"w": torch.randn(100_000)}, tmp_path / "plain.pt")  # torch.save: stored entries
    assert load_tensors(tmp_path / "plain.pt", "cpu")["w"].shape == (100_000,)


def test_read_text_regular_files_of_bounded_size(tmp_path):
    with deadline():
        for path in [*special_files(tmp_path).values(), Path("/dev/zero")]:
            with pytest.raises(FileRefused, match="not a regular file"):
                read_text(path)
    (tmp_path / "big.json").write_text("x" * 100)
    with pytest.raises(FileRefused, match="'.*big.json': 100 bytes, over the limit of 10"):
        read_text(tmp_path / "big.json", 10)
    assert read_text(tmp_path / "big.json", None) == "x" * 100
    (tmp_path / "latin.json").write_bytes(b"{\xe9}")
    with pytest.raises(ValueError, match="latin.json' is not UTF-8 text"):
        read_text(tmp_path / "latin.json")
    assert read_regular_file(tmp_path / "big.json", 100) == b"x" * 100

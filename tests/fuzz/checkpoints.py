"""Crafted checkpoints thrown at every entry point that reads one.

A crafted file is a small valid checkpoint (a tiny model of each family for the 2-joint snake,
or a training checkpoint) with one mutation: a config or spec field set to nonsense (width
10^9, NaN limits, a string depth), weights dropped, reshaped, NaN, or expanded views, the
layout or hash damaged, bytes flipped, the file truncated, pickled code, and the zip archive
itself damaged (its entries deflated, a tensor's entry a 1 GB zip bomb, an entry dropped, emptied,
swapped or renamed, a size in the central directory that lies). Half of the dict
mutations re-stamp the content hash, so the checks behind the hash are reached too.

Every file must be refused with a ValueError or TypeError (the CLI: exit code 1 and one
``torchik: error:`` line) in under a second, or load intact: the model holds exactly what
the file says. Anything else is a finding.

``tests/fuzz/test_checkpoints.py`` runs a bounded sample in CI; ``make fuzz`` runs
``python -m tests.fuzz.checkpoints --n 1000`` and prints the table for
``benchmarks/results/fuzz.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import math
import os
import pickle
import random
import resource
import shutil
import struct
import tempfile
import time
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import torch

import torchik
from torchik import cli, models
from torchik.learn import make_dataset
from torchik.models import families
from torchik.models.checkpoint import content_hash, read_checkpoint
from torchik.train import TrainConfig, train
from torchik.train.loop import CHECKPOINT

ROBOT = "snake2"
REFUSED = (ValueError, TypeError)
SLOW_S = 1.0
"""CPU seconds a refusal may take (this process only: other jobs on the machine do not count)."""


# ---------------------------------------------------------------------------- the good files
@cache
def _data():
    return make_dataset(torchik.load_robot(ROBOT), 64, seed=0)


def _tiny(family: str):
    cls = families()[family]
    torch.manual_seed(0)
    model = cls(_data().spec, cls.tiny_config())
    model.set_normalization(_data().q, _data().target)
    return model


@cache
def good_checkpoint(family: str) -> dict[str, Any]:
    """The checkpoint dict of a tiny seeded ``family`` model of the snake."""
    return _tiny(family).checkpoint()


@cache
def good_training_checkpoint() -> dict[str, Any]:
    """A resumable training checkpoint (one step of an MLP)."""
    with tempfile.TemporaryDirectory() as folder:
        train(_tiny("mlp"), _data(), config=_train_config(), out_dir=folder)
        return torch.load(Path(folder) / CHECKPOINT, weights_only=True)


def _train_config() -> TrainConfig:
    return TrainConfig(steps=1, batch_size=16, progress=False, val_every=0, checkpoint_every=1)


def _to_bytes(obj: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


# ---------------------------------------------------------------------------- mutations
NONSENSE = [10**9, 10**7, 2**63, -1, 0, math.nan, math.inf, -math.inf, 1.5, "3", None, True, [4]]


def _set(rng: random.Random, mapping: dict, key: str | None = None) -> dict:
    key = rng.choice(sorted(mapping)) if key is None else key
    return {**mapping, key: rng.choice(NONSENSE)}


def _config(rng, ckpt):
    return {**ckpt, "config": _set(rng, ckpt["config"])}


def _config_size(rng, ckpt):  # the files: a huge width or depth
    sizes = [k for k, v in ckpt["config"].items() if type(v) is int]
    key = rng.choice(sizes)
    return {**ckpt, "config": {**ckpt["config"], key: rng.choice([10**9, 10**7, 65536, 2**40])}}


def _config_all_big(rng, ckpt):  # every size at its bound: too many parameters in all
    config = {k: (16 if "depth" in k or k in ("blocks", "transforms") else 65536)
              if type(v) is int else v for k, v in ckpt["config"].items()}  # fmt: skip
    return {**ckpt, "config": config}


def _spec(rng, ckpt):
    spec = dict(ckpt["spec"])
    key = rng.choice(sorted(spec))
    if key in ("lower", "upper", "continuous") and rng.random() < 0.5:
        values = list(spec[key])
        values[rng.randrange(len(values))] = rng.choice(NONSENSE)
        spec[key] = values
    else:
        spec = _set(rng, spec, key)
    return {**ckpt, "spec": spec}


def _weights(rng, ckpt):
    state = dict(ckpt["state_dict"])
    name = rng.choice(sorted(state))
    tensor = state[name]
    how = rng.choice(["drop", "extra", "shape", "nan", "inf", "type", "int", "expanded"])
    if how == "drop":
        del state[name]
    elif how == "extra":
        state["bogus.weight"] = torch.zeros(3)
    elif how == "shape":
        state[name] = torch.zeros(tensor.numel() + 1)
    elif how in ("nan", "inf") and tensor.is_floating_point() and tensor.numel():
        tensor = tensor.clone()
        tensor.view(-1)[rng.randrange(tensor.numel())] = math.nan if how == "nan" else math.inf
        state[name] = tensor
    elif how == "type":
        state[name] = rng.choice([[1.0, 2.0], 3, "w", None])
    elif how == "int":
        state[name] = tensor.to(torch.int64)
    else:
        state[name] = torch.zeros(1).expand(10**9)
    return {**ckpt, "state_dict": state}


def _layout(rng, ckpt):
    key = rng.choice(["format_version", "family", "config", "spec", "state_dict", "sha256"])
    if rng.random() < 0.3:
        return {k: v for k, v in ckpt.items() if k != key}
    value = rng.choice([*NONSENSE, "mlp", "nosuch", 99, {}, torch.zeros(2), "0" * 64])
    return {**ckpt, key: value}


def _nested(rng, ckpt):
    deep: Any = 0
    for _ in range(rng.choice([10, 300])):
        deep = [deep]
    return {**ckpt, "config": {**ckpt["config"], "width": deep}}


def _training(rng, ckpt):
    training = ckpt.get("training")
    if not isinstance(training, dict):
        return _layout(rng, ckpt)
    if rng.random() < 0.5:
        key = rng.choice(sorted(training))
        return {**ckpt, "training": {k: v for k, v in training.items() if k != key}}
    return {**ckpt, "training": _set(rng, training)}


DICT_MUTATIONS: dict[str, Callable] = {
    "config": _config,
    "config-size": _config_size,
    "config-all-big": _config_all_big,
    "spec": _spec,
    "weights": _weights,
    "layout": _layout,
    "nested": _nested,
    "training": _training,
}


def _flip(rng, blob: bytes) -> bytes:
    data = bytearray(blob)
    for _ in range(rng.randint(1, 40)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return bytes(data)


def _truncate(rng, blob: bytes) -> bytes:
    return blob[: rng.randrange(len(blob))]


class _Evil:
    def __reduce__(self):
        return (exec, ("raise SystemExit('pickled code ran')",))


def _code(rng, ckpt) -> bytes:
    return (
        _to_bytes({**ckpt, "config": _Evil()})
        if rng.random() < 0.5
        else pickle.dumps(_Evil(), protocol=2)
    )


def _entries(blob: bytes) -> list[tuple[zipfile.ZipInfo, bytes]]:
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        return [(info, archive.read(info)) for info in archive.infolist()]


def _rezip(entries: list[tuple[zipfile.ZipInfo, bytes]], deflate: bool = False) -> bytes:
    buffer = io.BytesIO()
    kind = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zipfile.ZipFile(buffer, "w", kind) as archive:
        for info, data in entries:
            archive.writestr(info.filename, data)
    return buffer.getvalue()


def _zip_deflate(rng, blob: bytes) -> bytes:  # compressed entries: within the ratio, they load
    return _rezip(_entries(blob), deflate=True)


BOMB = 2**30
"""What a zip-bomb entry inflates to: the issue's 1 GB (its file: 976 KB)."""


@cache
def _deflated_zeros(size: int) -> tuple[int, bytes]:
    """``(crc32, raw deflate stream)`` of ``size`` zero bytes, made once (4.7 MB for 1 GB)."""
    crc, packer, chunk, parts = 0, zlib.compressobj(1, zlib.DEFLATED, -15), bytes(2**24), []
    for _ in range(size // len(chunk)):
        crc = zlib.crc32(chunk, crc)
        parts.append(packer.compress(chunk))
    return crc, b"".join([*parts, packer.flush()])


def _raw_zip(entries: list[tuple[str, int, int, int, bytes]]) -> bytes:
    """A zip archive of ``(name, method, crc, size, data)`` entries, ``data`` as stored (zipfile
    cannot write an entry compressed beforehand)."""
    out, central = bytearray(), bytearray()
    for name, method, crc, size, data in entries:
        raw, offset = name.encode(), len(out)
        head = (20, 0, method, 0, 0x21, crc, len(data), size, len(raw))
        out += struct.pack("<4s5H3I2H", b"PK\x03\x04", *head, 0) + raw + data
        central += struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, *head, 0, 0, 0, 0, 0, offset)
        central += raw
    end = struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, len(entries), len(entries),
                      len(central), len(out), 0)  # fmt: skip
    return bytes(out + central + end)


def _zip_bomb(rng, blob: bytes) -> bytes:  # a tensor's entry inflating to 1 GB from 5 MB
    entries = [(i.filename, 0, zlib.crc32(d), len(d), d) for i, d in _entries(blob)]
    data = [i for i, entry in enumerate(entries) if "/data/" in entry[0]]
    i = rng.choice(data)
    crc, stream = _deflated_zeros(BOMB)
    entries[i] = (entries[i][0], zipfile.ZIP_DEFLATED, crc, BOMB, stream)
    return _raw_zip(entries)


def _zip_entry(rng, blob: bytes) -> bytes:  # an entry dropped, emptied, swapped or renamed
    entries = _entries(blob)
    i, j = rng.randrange(len(entries)), rng.randrange(len(entries))
    how = rng.choice(["drop", "empty", "swap", "rename"])
    if how == "drop":
        del entries[i]
    elif how == "empty":
        entries[i] = (entries[i][0], b"")
    elif how == "swap":
        entries[i], entries[j] = (entries[i][0], entries[j][1]), (entries[j][0], entries[i][1])
    else:
        entries[i] = (zipfile.ZipInfo(entries[i][0].filename + "x"), entries[i][1])
    return _rezip(entries)


def _zip_size(rng, blob: bytes) -> bytes:  # a central directory that lies about a size
    data = bytearray(blob)
    heads = [m for m in range(len(data) - 4) if data[m : m + 4] == b"PK\x01\x02"]
    at = rng.choice(heads) + rng.choice([20, 24])  # compressed or uncompressed size
    data[at : at + 4] = rng.choice([0, 2**32 - 2, 10**9, 12345]).to_bytes(4, "little")
    return bytes(data)


BYTE_MUTATIONS: dict[str, Callable] = {
    "flip": _flip,
    "truncate": _truncate,
    "zip-deflate": _zip_deflate,
    "zip-bomb": _zip_bomb,
    "zip-entry": _zip_entry,
    "zip-size": _zip_size,
}
KINDS = [*DICT_MUTATIONS, *BYTE_MUTATIONS, "code"]


@cache  # the CI sample hands each file to five entry points
def crafted(seed: int, training: bool = False) -> tuple[str, bytes, dict[str, Any]]:
    """The ``seed``-th crafted file: ``(description, bytes, the good checkpoint it came from)``.

    With ``training``, the good file is a training checkpoint (for ``train(resume=True)``).
    """
    rng = random.Random(seed)
    family = "mlp" if training else sorted(families())[seed % len(families())]
    good = good_training_checkpoint() if training else good_checkpoint(family)
    kind = KINDS[seed % len(KINDS)]  # 15 kinds, 7 families: every pair within 105 seeds
    if kind == "code":
        return f"{family}/code", _code(rng, good), good
    if kind in BYTE_MUTATIONS:
        return f"{family}/{kind}", BYTE_MUTATIONS[kind](rng, _to_bytes(good)), good
    bad = DICT_MUTATIONS[kind](rng, good)
    restamp = rng.random() < 0.5 and isinstance(bad, dict) and "state_dict" in bad
    if restamp:
        with contextlib.suppress(Exception):  # unhashable nonsense stays unstamped
            bad = {**bad, "sha256": content_hash(bad)}
    return f"{family}/{kind}{'+rehash' if restamp else ''}", _to_bytes(bad), good


# ---------------------------------------------------------------------------- entry points
def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)  # a spec's limit 1 loads as 1.0: the same number
    return value


def _intact(model, path: Path) -> bool:
    """The loaded model holds exactly what the file says (family, config, spec, weights)."""
    ckpt = torch.load(path, weights_only=True)
    keys = ("family", "config", "spec", "state_dict")
    return content_hash(_plain({k: ckpt[k] for k in keys})) == content_hash(
        _plain({k: model.checkpoint()[k] for k in keys})
    )


def _load(path: Path, folder: Path) -> str:
    return "intact" if _intact(models.load(path), path) else "loaded DAMAGED"


def _read(path: Path, folder: Path) -> str:
    read_checkpoint(path)
    return "read"


def _resume(path: Path, folder: Path) -> str:
    out = folder / "run"
    out.mkdir(exist_ok=True)
    shutil.copyfile(path, out / CHECKPOINT)
    train(_tiny("mlp"), _data(), config=_train_config(), out_dir=out, resume=True)
    try:
        read_checkpoint(path)
    except ValueError:
        return "resumed DAMAGED"
    return "resumed"


def _cli(argv: list[str]) -> str:
    stderr = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
        code = cli.main(argv)
    lines = [x for x in stderr.getvalue().strip().splitlines() if "torchik: warning:" not in x]
    if code in (0, 3):  # 3: solve ran, and no sample was within tolerance
        return "ran"
    if code == 1 and len(lines) == 1 and lines[0].startswith("torchik: error:"):
        raise ValueError(lines[0])
    return f"cli exit {code}: {stderr.getvalue()[-300:]!r}"


def _solve(path: Path, folder: Path) -> str:
    return _cli(["solve", ROBOT, "--position", "0.1", "0.05", "0.0", "--model", str(path),
                 "-n", "2", "--format", "json"])  # fmt: skip


def _eval(path: Path, folder: Path) -> str:
    data = folder / "data.pt"
    if not data.exists():
        _data().save(data)
    return _cli(["eval", "--model", str(path), "--data", str(data), "-n", "2", "--limit", "4"])


ENTRY_POINTS: dict[str, Callable[[Path, Path], str]] = {
    "models.load": _load,
    "read_checkpoint": _read,
    "train(resume=True)": _resume,
    "cli solve --model": _solve,
    "cli eval --model": _eval,
}


@dataclasses.dataclass
class Outcome:
    """What one entry point did with one crafted file."""

    seed: int
    file: str
    entry: str
    result: str  # "refused", "intact", "read", "ran", "resumed", or a finding
    seconds: float
    message: str

    @property
    def finding(self) -> bool:
        ok = self.result in ("refused", "intact", "read", "ran", "resumed")
        return not ok or (self.result == "refused" and self.seconds > SLOW_S)


def run_one(seed: int, entry: str, folder: Path) -> Outcome:
    """Write the ``seed``-th crafted file into ``folder`` and hand it to ``entry``."""
    name, blob, _ = crafted(seed, training=entry == "train(resume=True)")
    path = folder / f"crafted{seed}.pt"
    path.write_bytes(blob)
    start = time.process_time()
    try:
        with memory_cap(MEMORY_CAP):
            result, message = ENTRY_POINTS[entry](path, folder), ""
    except REFUSED as err:
        result, message = "refused", str(err).splitlines()[0] if str(err) else type(err).__name__
        if "\n" in str(err).strip():
            result = "refused (multi-line message)"
        elif "allocate" in message or "MemoryError" in message:
            result = "OUT OF MEMORY"  # refused only once an allocation failed
    except BaseException as err:  # noqa: BLE001 - a leak is what the fuzz looks for
        if isinstance(err, KeyboardInterrupt):
            raise
        result, message = f"LEAK {type(err).__name__}", str(err)[:200]
    return Outcome(seed, name, entry, result, time.process_time() - start, message)


MEMORY_CAP = 2**29
"""Address space a file may take beyond what the process holds (512 MB): a zip bomb that is
inflated (1 GB) fails to allocate, and is a finding."""


@contextlib.contextmanager
def memory_cap(extra: int):
    """Limit this process's address space to what it maps now plus ``extra`` bytes."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    pages = int(Path("/proc/self/statm").read_text().split()[0])
    cap = pages * os.sysconf("SC_PAGE_SIZE") + extra
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard < 0 else min(cap, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def run(seeds: range, entries: list[str]) -> list[Outcome]:
    """Every crafted file of ``seeds`` through every entry point of ``entries``."""
    outcomes = []
    with tempfile.TemporaryDirectory() as folder:
        for entry in entries:
            for seed in seeds:
                outcomes.append(run_one(seed, entry, Path(folder)))
    return outcomes


def table(outcomes: list[Outcome]) -> str:
    """A markdown table: per entry point, files, results counted, slowest refusal, findings."""
    rows = [
        "| entry point | files | results | slowest refusal | findings |",
        "|---|---|---|---|---|",
    ]
    for entry in ENTRY_POINTS:
        mine = [o for o in outcomes if o.entry == entry]
        if not mine:
            continue
        counts = Counter(o.result for o in mine)
        slowest = max((o.seconds for o in mine if o.result == "refused"), default=0.0)
        findings = sum(o.finding for o in mine)
        text = ", ".join(f"{k} {v}" for k, v in counts.most_common())
        rows.append(f"| `{entry}` | {len(mine)} | {text} | {slowest * 1000:.0f} ms | {findings} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="crafted files per entry point")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--entry", action="append", choices=list(ENTRY_POINTS))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    outcomes = run(range(args.start, args.start + args.n), args.entry or list(ENTRY_POINTS))
    print(table(outcomes))
    findings = [o for o in outcomes if o.finding]
    for o in findings[:40]:
        print(f"- seed {o.seed} {o.file} -> {o.entry}: {o.result} ({o.seconds:.2f} s) {o.message}")
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())

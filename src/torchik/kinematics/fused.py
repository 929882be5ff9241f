"""Fused FK, FK backward and Jacobian kernels in Triton: one kernel per robot structure.

The chain walk of :mod:`torchik.kinematics` launches a few small operations per joint; on a GPU
they wait on memory and launches. Here the walk of a robot (its parents, joint kinds and the
links asked for) is written out as straight-line Triton code, generated once per structure: each
program instance takes a block of configurations and keeps every frame in registers, 12 numbers
per frame, reading ``q`` once and writing the poses once. The constant transforms and the mimic
multipliers are a small table in the kernel's arguments, in the dtype of ``q`` (float32 or
float64), built once per flattened tree and kept on the device with it; constants that are
exactly 0 or ±1 are written into the code instead (a kernel per pattern of them, see
:func:`_pattern`), so calibrated origins need a new kernel only where they change that pattern
(IK's float32 kernels have every constant written in: a kernel per robot, :data:`BAKED`).
After the first call with a tree nothing is copied from the host and nothing read back: calls
can be captured in a CUDA graph.

- :func:`forward_kinematics`: poses ``(B, L, 4, 4)``, differentiable in ``q`` through a fused
  backward kernel (``dL/dθ = a . (Σ_l Σ_k c_k(T_l) x c_k(G_l) - o x Σ_l g_l)``, see
  :mod:`torchik.kinematics`).
- :func:`jacobian`: the geometric Jacobian ``(B, 6, D)`` of one link and its pose.
- :func:`lm_step`: one Levenberg-Marquardt step of single-link IK (residual, damped step,
  projection into the limits) per configuration.
- :func:`lm_loop`: a chunk of iterations of the fixed-shape IK loop (:mod:`torchik.ik.fixed`)
  with that step, each row's state kept in registers from one iteration to the next.

Use. A robot takes this path when its :attr:`~torchik.robot.Robot.backend` says so: by default
(``"auto"``) for CUDA tensors when Triton is installed, where :func:`supports` allows it. Without
a GPU the kernels run in Triton's interpreter (``TRITON_INTERPRET=1`` set before Triton is
imported, ``backend="fused"``), which is how the tests check them against
:mod:`torchik.kinematics.reference` on the CPU.
"""

from __future__ import annotations

import itertools
import linecache
import math
import os
import struct
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import Tensor

from torchik.kinematics import reference as kinematics
from torchik.kinematics.reference import REVOLUTE, KinematicTree

__all__ = [
    "available", "forward_kinematics", "jacobian", "lm_loop", "lm_step", "runs_on", "supports",
]  # fmt: skip

BLOCK = 128
"""Configurations per program instance."""

WARPS = 4
"""Warps per program instance (``num_warps``)."""

STORES = "rows"
"""How outputs are stored: ``"rows"`` (the packed tile of :class:`_Code` reshaped to
``(BLOCK, 2^k)``, a row's values side by side, stored by a two-dimensional pointer block: wide
vector stores), ``"tiles"`` (the packed tile stored through its ``k`` axes of two), ``"scalar"``
(one strided store per value) or ``"whole"`` (as tiles, but the Jacobian's ``6 D`` values of a
row in one tile instead of one tile per Jacobian row): variants ``benchmarks/gpu_probe.py``
times. On an H200 (Panda, float32, 4 M configurations, 2026-11-28) rows against tiles: FK of
one link 0.105 against 0.319 ms, of every link 1.01 against 7.75 ms, the Jacobian 1.03 against
2.58 ms; the backward and the LM step within 3 % (``benchmarks/results/gpu_kernels.md``)."""

_KERNELS: dict[tuple, Any] = {}
"""Compiled kernels (``triton.jit`` functions, launched as ``kernel[grid](...)``) by structure."""
_COUNTER = itertools.count()


def available() -> bool:
    """Whether Triton can be imported."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def runs_on(q: Tensor) -> bool:
    """Whether the kernels can run on ``q``'s device: CUDA, or any device in Triton's
    interpreter (``TRITON_INTERPRET=1``, which Triton reads when it is imported)."""
    return q.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def supports(q: Tensor, tree: KinematicTree | None = None) -> bool:
    """Whether FK of ``q`` can take the fused kernels: Triton present, a device they run on
    (:func:`runs_on`), no ``torch.func`` transform, forward-mode AD or ``torch.compile``
    tracing at work, and (given the ``tree``) constants that need no gradient. Which robots
    use them is :attr:`torchik.robot.Robot.backend`'s choice."""
    if not runs_on(q) or not available():
        return False
    if torch.compiler.is_compiling() or kinematics._is_functorch_wrapped(q):
        return False
    if kinematics._is_dual(q):
        return False
    return tree is None or not _learnable(tree)


def _learnable(tree: KinematicTree) -> bool:
    """Whether a gradient reaches ``tree``'s constants (learnable origins: a tree of new values
    at every call)."""
    return tree.w_joint.requires_grad or tree.w_link.requires_grad


# ---------------------------------------------------------------------------- the constants
def _table(tree: KinematicTree, links: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    """The constants: 12 per joint (``C`` rows 0-2), 12 per link, then multipliers, offsets."""
    c_joint = tree.w_joint.transpose(-1, -2)[:, :3, :].reshape(-1)
    c_link = tree.w_link[list(links)].transpose(-1, -2)[:, :3, :].reshape(-1)
    parts = (c_joint, c_link, tree.multiplier, tree.offset)
    return torch.cat([p.detach().to(dtype).reshape(-1) for p in parts])


def _pattern(table: Tensor, every: bool = False) -> tuple[float | None, ...]:
    """Per table entry: ``0.0``, ``1.0`` or ``-1.0`` where it is exactly that, else ``None``;
    with ``every``, the value itself wherever a float32 literal holds it exactly.

    A kernel is generated per pattern: a term with a zero constant is left out and a unit one
    needs no product, which removes about half the arithmetic and the loads of the bundled arms
    (axis alignments are signed permutations, many URDF offsets are zero, and mimic-free robots
    have unit multipliers and zero offsets). Calibrated constants with another pattern get their
    own kernel. One difference from the reference path: a NaN or infinite frame entry times a
    zero constant is left out instead of making a NaN.

    ``every`` (:func:`_every`: the IK kernels' float32 tables): every normal float32 value is
    written into the code too (Triton reads a Python float of that range as a float32
    constant, the value itself), so the kernel loads none of them: one kernel per robot's
    values. The G1's two-hand loop kernel compiled for sm_90 in 68 s instead of 77 (medians of
    three, alternating), spilling 620 bytes a thread instead of 864, 195 spill loads a loop
    instead of 266; the Panda's took 151 registers instead of 199
    (``benchmarks/kernel_compile.py``). Other values
    (subnormal, infinite, NaN) are loaded as before.
    """

    def known(v: float) -> bool:
        return v in (0.0, 1.0, -1.0) or (every and _FLOAT32_NORMAL <= abs(v) <= _FLOAT32_MAX)

    return tuple(v if known(v) else None for v in table.tolist())


_FLOAT32_NORMAL, _FLOAT32_MAX = 2.0**-126, (2.0 - 2.0**-23) * 2.0**127
"""The range of normal float32 values: Triton makes a Python float within it a float32
constant (outside, a float64 one)."""

BAKED = ("lm", "lm_loop")
"""The kinds of kernel whose float32 constants are written into their code (:func:`_pattern`'s
``every``): IK's, where no gradient reaches the constants and a robot's values stay (FK's
kernels serve calibration, whose values change every step: a kernel per step)."""


STILL = True
"""Whether :func:`lm_loop`'s kernel leaves out of its loop the joints that move no target link
(the G1's legs when its hands are placed): their Jacobian columns are zero, so a step only
clamps them into their limits, yet the loop carried each one's value, best value and limits
in registers (the G1's two-hand kernel, compiled for sm_90: 620/624 bytes a thread of spill
stores/loads with them, 312/256 without; ``benchmarks/kernel_compile.py``). Such a joint is
loaded, clamped and stored once after the loop instead, with the same values: the clamped
value where the row stepped, its best value the one of the iteration that was best (loaded
where it came first in the launch, clamped where later). Not with joints that wrap (their
projection is not exactly idempotent): a kernel with wrapping code carries every joint."""


def _every(kind: str, tree: KinematicTree, dtype: torch.dtype) -> bool:
    """Whether a ``kind`` kernel of ``tree`` in ``dtype`` has every constant written in:
    :data:`BAKED` kinds in float32, of a tree whose constants need no gradient
    (:func:`_learnable`, which :func:`supports` sends elsewhere anyway)."""
    return kind in BAKED and dtype == torch.float32 and not _learnable(tree)


# ---------------------------------------------------------------------------- the code writer
def _width(n: int) -> int:
    """``log2`` of the smallest power of two ``>= n`` (the tile of ``n`` values)."""
    return max(n - 1, 0).bit_length()


def _times(x: str, k: str | float) -> str | None:
    """``x * k`` for a constant ``k`` known exactly (``0``: no term, ``±1``: no product)."""
    if k == 0.0:
        return None
    if k == 1.0:
        return x
    if k == -1.0:
        return f"-{x}"
    return f"{x} * {k}"


def _constant(k: str | float) -> str:
    """A block of the constant ``k`` (a table variable, or a value known exactly)."""
    if isinstance(k, str):
        return f"zero + {k}"
    return "zero" if k == 0.0 else f"zero + {k}"


class _Code:
    """Lines of a kernel being written: the walk of a tree over a block of ``BLOCK`` rows.

    Conventions of the generated code: ``row`` (the block's rows), ``ok`` (rows inside the
    batch), ``zero`` (zeros in ``q``'s dtype); ``f{j}_{r}{c}`` the 3x4 frame of joint ``j``,
    ``l{i}_{r}{c}`` that of requested link ``i``; ``k{i}`` entry ``i`` of the constant table
    (loaded once, on first use; entries known exactly are not loaded at all, see
    :func:`_pattern`: in IK's float32 kernels, every normal value).

    Outputs are stored by tiles: a row's ``n`` consecutive values (a pose, a Jacobian row, a
    gradient) are joined in registers by ``tl.join`` into one ``[BLOCK, 2, ..., 2]`` tensor and
    stored at once, which Triton stages through shared memory so that consecutive threads write
    consecutive addresses: whole 32-byte sectors, where ``n`` strided scalar stores write 4 or 8
    bytes of a different sector per thread. Inputs are loaded by strided scalar loads, whose
    neighbours then hit the cache (tile loads were tried: they cost registers and, mixed with
    tile stores, make Triton convert layouts at every join), but for the loop kernel's
    targets and restart seeds, loaded once before its loop by tiles (:meth:`load_tile`: each
    memory operation costs compile time).
    """

    def __init__(self, tree: KinematicTree, links: tuple[int, ...], pattern: tuple):
        self.tree, self.links, self.pattern = tree, links, pattern
        self.lines: list[str] = []
        self.depth = 1  # indentation (2 inside a loop)
        self.loaded: set[int] = set()
        self.axes: set[str] = set()  # the axis variables written: "tile{k}", "flat{k}"
        self.literals: dict[float, str] = {}
        self.zeros: set[tuple[int, int]] = set()  # Jacobian entries (row, column) known zero
        self._fresh = itertools.count()
        j_count = len(tree.parent)
        self.link_at, self.mult_at = 12 * j_count, 12 * (j_count + len(links))
        self.off_at = self.mult_at + j_count

    def add(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self._fresh)}"

    def const(self, index: int) -> str | float:
        """Table entry ``index``: its value where known exactly, else its variable."""
        known = self.pattern[index]
        if known is not None:
            return known
        if index not in self.loaded:
            self.loaded.add(index)
            self.add(f"k{index} = tl.load(c_ptr + {index})")
        return f"k{index}"

    def literal(self, value: float) -> str:
        """A block of ``value`` in ``q``'s dtype, exact in float64 (a bare float literal in
        Triton code is a float32 constant)."""
        name = f"K{len(self.literals)}"
        if value not in self.literals:
            self.literals[value] = name
            self.add(f"{name} = tl.full([BLOCK], {value!r}, q_ptr.dtype.element_ty)")
        return self.literals[value]

    def sum(self, terms: Sequence[str | None], empty: str = "zero") -> str:
        kept = [t for t in terms if t is not None]
        return " + ".join(kept) if kept else empty

    def frame(self, name: str, parent: str | None, at: int) -> None:
        """``name = parent @ C`` (``C`` the 3x4 constant at table offset ``at``)."""
        for r in range(3):
            for c in range(4):
                if parent is None:
                    self.add(f"{name}{r}{c} = {_constant(self.const(at + 4 * r + c))}")
                    continue
                terms = [_times(f"{parent}{r}{m}", self.const(at + 4 * m + c)) for m in range(3)]
                tail = [f"{parent}{r}3"] if c == 3 else []
                self.add(f"{name}{r}{c} = {self.sum([*terms, *tail])}")

    def theta(self, j: int, q: dict[int, str]) -> str:
        """The value of joint ``j``, ``multiplier * q[source] + offset``, from the loaded ``q``."""
        src = int(self.tree.source[j])
        scaled = _times(q[src], self.const(self.mult_at + j))
        offset = self.const(self.off_at + j)
        terms = [scaled if scaled is not None else "zero"]
        if offset != 0.0:
            terms.append(str(offset))
        self.add(f"t{j} = {self.sum(terms)}")
        return f"t{j}"

    def joint(self, j: int, q: dict[int, str]) -> None:
        """Frame ``f{j}_`` of joint ``j`` after its motion, from its parent's."""
        tree = self.tree
        parent = None if tree.parent[j] < 0 else f"f{tree.parent[j]}_"
        self.frame(f"f{j}_", parent, 12 * j)
        t = self.theta(j, q)
        if tree.kind[j] == REVOLUTE:
            self.add(f"c{j} = tl.cos({t})")
            self.add(f"s{j} = tl.sin({t})")
            for r in range(3):
                a, b = f"f{j}_{r}0", f"f{j}_{r}1"
                self.add(f"{a}, {b} = c{j} * {a} + s{j} * {b}, c{j} * {b} - s{j} * {a}")
        else:
            for r in range(3):
                self.add(f"f{j}_{r}3 = f{j}_{r}3 + {t} * f{j}_{r}2")

    def link_frame(self, i: int) -> str:
        """Frame ``l{i}_`` of requested link ``i`` (its joint's frame must be written)."""
        j = self.tree.link_joint[self.links[i]]
        self.frame(f"l{i}_", None if j < 0 else f"f{j}_", self.link_at + 12 * i)
        return f"l{i}_"

    def walk(self, on_link, every_column: bool = False, loaded: bool = False) -> tuple[int, ...]:
        """Every needed joint's frame; ``on_link(i, j)`` as soon as requested link ``i``'s
        joint ``j`` (``-1``: the root) is written, so that its frame's registers are freed
        early. Loads the columns of ``q`` that the joints use (``every_column``: all, as
        ``q{c}``; ``loaded``: they are, load none). Returns the needed joints."""
        tree = self.tree
        needed = kinematics._ancestors(tree, self.links)
        columns = list(range(tree.dof)) if every_column else self.used_columns()
        q = {c: f"q{c}" for c in columns} if loaded else self.load_q(columns)
        hanging: dict[int, list[int]] = {}
        for i, link in enumerate(self.links):
            hanging.setdefault(tree.link_joint[link], []).append(i)
        for i in hanging.get(-1, []):
            on_link(i, -1)
        for j in needed:
            self.joint(j, q)
            for i in hanging.get(j, []):
                on_link(i, j)
        return needed

    def used_columns(self) -> list[int]:
        """The columns of ``q`` that the joints moving the requested links read (sorted)."""
        tree = self.tree
        return sorted({int(tree.source[j]) for j in kinematics._ancestors(tree, self.links)})

    def load_q(self, columns: list[int]) -> dict[int, str]:
        """The ``columns`` of ``q`` in use, one strided load each (the row's other loads then
        hit the cache; a tile load, as for the stores, costs more registers here)."""
        dof = self.tree.dof
        for col in columns:
            self.add(f"q{col} = tl.load(q_ptr + row * {dof} + {col}, mask=ok, other=0.0)")
        return {col: f"q{col}" for col in columns}

    def load_tile(self, ptr: str, stride: int, at: int, names: list[str]) -> None:
        """``names[i] = ptr[row * stride + at + i]`` by one load of a ``(BLOCK, 2^k)`` tile,
        cut into columns by ``tl.split`` (halves of halves): one memory operation where
        :meth:`load_q`'s way takes one per value, the same values. Triton's coalescing pass
        walks the whole kernel once per memory operation, so the loop kernel of a large tree
        took minutes to compile (``benchmarks/kernel_compile.py``: the G1's two hands, sm_90,
        Triton 3.9: 123 s, 119 of them in Triton's GPU passes). Its targets and restart seeds
        loaded so: 94-104 s, with restarts in the kernel 111 s against 187, and the loop's
        machine code as long, its spills within 10 %. Loaded so, the carried ``q`` and best
        ``q`` took 25 s in all but spilled a quarter more inside the loop: they stay strided."""
        n, k = len(names), _width(len(names))
        if k == 0:
            self.add(f"{names[0]} = tl.load({ptr} + row * {stride} + {at}, mask=ok, other=0.0)")
            return
        self.flat_cols(k)
        mask = "ok[:, None]" if n == 1 << k else f"ok[:, None] & (flat_cols{k} < {n})"
        tile = self.fresh("ld")
        self.add(f"{tile} = tl.load({ptr} + row[:, None] * {stride} + {at} + flat_cols{k}, "
                 f"mask={mask}, other=0.0)")  # fmt: skip
        self._unpack(tile, list(range(1 << k)), names)

    def _unpack(self, tile: str, columns: list[int], names: list[str]) -> None:
        """The ``(BLOCK, len(columns))`` ``tile``'s columns into ``names`` (padding dropped)."""
        if len(columns) == 1:
            if columns[0] < len(names):
                self.add(f"{names[columns[0]]} = {tile}")
            return
        even, odd = self.fresh("ev"), self.fresh("od")
        pairs = (
            tile if len(columns) == 2 else f"tl.reshape({tile}, (BLOCK, {len(columns) // 2}, 2))"
        )
        self.add(f"{even}, {odd} = tl.split({pairs})")
        self._unpack(even, columns[0::2], names)
        self._unpack(odd, columns[1::2], names)

    # -------------------------------------------------------------- tiles
    def flat_cols(self, k: int) -> str:
        """``flat_cols{k}``, the columns ``[1, 2^k]`` of a row's values laid side by side
        (written once)."""
        if f"flat{k}" not in self.axes:
            self.axes.add(f"flat{k}")
            self.add(f"flat_cols{k} = tl.arange(0, {1 << k})[None, :]")
        return f"flat_cols{k}"

    def tile_axes(self, k: int) -> tuple[str, str, str]:
        """``rows``, ``cols`` and ``oks`` of a ``[BLOCK, 2, ..., 2]`` (``k`` twos) tile."""
        if f"tile{k}" not in self.axes:
            self.axes.add(f"tile{k}")
            pad = lambda a: ", ".join(":" if b == a else "None" for b in range(k + 1))  # noqa: E731
            cols = " + ".join(f"{1 << (k - a)} * two[{pad(a)}]" for a in range(1, k + 1))
            self.add(f"rows{k} = row[{pad(0)}]")
            self.add(f"oks{k} = ok[{pad(0)}]")
            self.add(f"cols{k} = {cols}")
        return f"rows{k}", f"cols{k}", f"oks{k}"

    def pack(self, values: list[str]) -> str:
        """The ``2^k`` values joined into a tile whose row-major order is theirs."""
        if len(values) == 1:
            return values[0]
        name = self.fresh("tile")
        self.add(f"{name} = tl.join({self.pack(values[0::2])}, {self.pack(values[1::2])})")
        return name

    def store_tile(self, ptr: str, stride: int, at: int, values: list[str]) -> None:
        """Store ``values`` at ``ptr + row * stride + at + (0, 1, ...)``."""
        n, k = len(values), _width(len(values))
        if STORES == "scalar":
            for i, value in enumerate(values):
                self.add(f"tl.store({ptr} + row * {stride} + {at + i}, {value}, mask=ok)")
            return
        if k == 0:
            self.add(f"tl.store({ptr} + row * {stride} + {at}, {values[0]}, mask=ok)")
            return
        if STORES == "rows":  # the tile as (BLOCK, 2^k): a row's values contiguous
            self._store_rows(ptr, stride, at, values, k)
            return
        rows, cols, oks = self.tile_axes(k)
        tile = self.pack(values + ["zero"] * ((1 << k) - n))
        mask = oks if n == 1 << k else f"{oks} & ({cols} < {n})"
        self.add(f"tl.store({ptr} + {rows} * {stride} + {at} + {cols}, {tile}, mask={mask})")

    def _store_rows(self, ptr: str, stride: int, at: int, values: list[str], k: int) -> None:
        """:meth:`store_tile` of the packed tile reshaped to ``(BLOCK, 2^k)`` (row-major, the
        values' order), stored by a two-dimensional pointer block whose last axis is one
        ``arange``: Triton sees ``2^k`` contiguous values a row (vector stores), where the
        ``k`` axes of two each allow two."""
        n, width = len(values), 1 << k
        self.flat_cols(k)
        tile, flat = self.pack(values + ["zero"] * (width - n)), self.fresh("flat")
        self.add(f"{flat} = tl.reshape({tile}, (BLOCK, {width}))")
        mask = "ok[:, None]" if n == width else f"ok[:, None] & (flat_cols{k} < {n})"
        self.add(f"tl.store({ptr} + row[:, None] * {stride} + {at} + flat_cols{k}, {flat}, "
                 f"mask={mask})")  # fmt: skip

    def store_pose(self, ptr: str, stride: int, at: int, frame: str) -> None:
        """Store the 3x4 ``frame`` and the row ``[0, 0, 0, 1]`` as a 4x4 matrix."""
        values = [f"{frame}{r}{c}" for r in range(3) for c in range(4)]
        self.store_tile(ptr, stride, at, values + ["zero", "zero", "zero", "zero + 1.0"])

    def source(self, name: str, args: str) -> str:
        head = [
            f"def {name}({args}, B, BLOCK: tl.constexpr):",
            "    row = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
            "    ok = row < B",
            "    zero = tl.zeros([BLOCK], dtype=q_ptr.dtype.element_ty)",
            "    two = tl.arange(0, 2)",
        ]
        return "\n".join(head + self.lines) + "\n"


def _compile(source: str, name: str) -> Any:
    """``triton.jit`` of generated source (registered with :mod:`linecache` so that Triton and
    tracebacks can read it)."""
    import triton
    import triton.language as tl

    filename = f"<torchik.kinematics.fused {name} {next(_COUNTER)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope: dict[str, Any] = {"tl": tl, "triton": triton}
    exec(compile(source, filename, "exec"), scope)  # noqa: S102 (our own generated code)
    return triton.jit(scope[name])


# ---------------------------------------------------------------------------- the kernels
def _forward_kernel(code: _Code) -> Any:
    """Poses ``(B, L', 4, 4)``: each link's pose stored as soon as its joint is walked."""
    n = len(code.links)
    code.walk(lambda i, j: code.store_pose("out_ptr", 16 * n, 16 * i, code.link_frame(i)))
    return _compile(code.source("fk", "q_ptr, c_ptr, out_ptr"), "fk")


def _backward_kernel(code: _Code) -> Any:
    """``dL/dq (B, D)`` from the upstream gradient ``G (B, L', 4, 4)``.

    Per link ``i`` below a joint: ``m_i = Σ_k c_k(T_i) x c_k(G_i)`` and ``g_i`` (G's
    translation), added to its joint's own sums as soon as its frame is made (so that only six
    sums per joint stay in registers, not six numbers per link); per joint, the sums over its
    subtree are its own plus its children's (one addition per link and per joint, not one per
    pair); then ``dθ_j = a_j . (Σm - o_j x Σg)`` (revolute) or ``a_j . Σg`` (prismatic).
    """
    tree = code.tree
    own: set[int] = set()  # joints whose own links' sums are started

    def on_link(i: int, j: int) -> None:
        if j < 0:  # a link that no joint moves adds nothing
            return
        frame, base = code.link_frame(i), f"g_ptr + row * gs0 + {i} * gs1"
        for e in range(12):  # strided loads: a contiguous row's 64 bytes are 2 cache sectors
            at = f"{base} + {e // 4} * gs2 + {e % 4} * gs3"
            code.add(f"g{i}_{e // 4}{e % 4} = tl.load({at}, mask=ok, other=0.0)")
        for x, (y, z) in enumerate(((1, 2), (2, 0), (0, 1))):
            terms = [f"{frame}{y}{k} * g{i}_{z}{k} - {frame}{z}{k} * g{i}_{y}{k}" for k in range(4)]
            started = f"om{j}_{x} + " if j in own else ""
            code.add(f"om{j}_{x} = {started}" + " + ".join(terms))
            code.add(f"og{j}_{x} = {started.replace('om', 'og')}g{i}_{x}3")
        own.add(j)

    needed = code.walk(on_link)
    columns: dict[int, list[str | None]] = {}
    for j in reversed(needed):
        children = [c for c in needed if tree.parent[c] == j]
        for x in range(3):
            for total, part in (("sm", "om"), ("sg", "og")):
                terms = [f"{total}{c}_{x}" for c in children]
                terms += [f"{part}{j}_{x}"] if j in own else []
                code.add(f"{total}{j}_{x} = " + " + ".join(terms))
        code.add(f"d{j} = " + _joint_gradient(tree.kind[j] == REVOLUTE, j))
        src = int(tree.source[j])
        columns.setdefault(src, []).append(_times(f"d{j}", code.const(code.mult_at + j)))
    values = [code.sum(columns.get(col, [])) for col in range(tree.dof)]
    code.store_tile("out_ptr", tree.dof, 0, values)
    args = "q_ptr, c_ptr, g_ptr, out_ptr, gs0, gs1, gs2, gs3"  # gs: G's strides (0: expanded)
    return _compile(code.source("fk_backward", args), "fk_backward")


def _joint_gradient(revolute: bool, j: int) -> str:
    """``a . (Σm - o x Σg)`` (revolute) or ``a . Σg`` (prismatic) of joint ``j``."""
    a = [f"f{j}_{x}2" for x in range(3)]
    if not revolute:
        return " + ".join(f"{a[x]} * sg{j}_{x}" for x in range(3))
    o, m, g = [f"f{j}_{x}3" for x in range(3)], f"sm{j}_", f"sg{j}_"
    v = [f"({m}{x} - ({o[(x + 1) % 3]} * {g}{(x + 2) % 3} - {o[(x + 2) % 3]} * {g}{(x + 1) % 3}))"
         for x in range(3)]  # fmt: skip
    return " + ".join(f"{a[x]} * {v[x]}" for x in range(3))


def _jacobian_columns(code: _Code, needed: tuple[int, ...], link: int = 0) -> list[list[str]]:
    """The 6 rows of each column of ``q``'s Jacobian of requested link ``link`` (``l{link}_``
    written): ``a x (p - o)`` and ``a`` (revolute), ``a`` and 0 (prismatic) of the joints of
    its chain, times the mimic multipliers, summed per entry of ``q`` (``"zero"`` where no
    joint moves it)."""
    tree = code.tree
    chain = set(kinematics._ancestors(tree, (code.links[link],)))
    cols: dict[int, list[list[str | None]]] = {}
    for j in (j for j in needed if j in chain):
        a = [f"f{j}_{x}2" for x in range(3)]
        if tree.kind[j] == REVOLUTE:
            d = [f"(l{link}_{x}3 - f{j}_{x}3)" for x in range(3)]
            lin = [f"({a[(x + 1) % 3]} * {d[(x + 2) % 3]} - {a[(x + 2) % 3]} * {d[(x + 1) % 3]})"
                   for x in range(3)]  # fmt: skip
            rows = lin + a
        else:
            rows = a + ["zero", "zero", "zero"]
        mult = code.const(code.mult_at + j)
        cols.setdefault(int(tree.source[j]), []).append([_times(v, mult) for v in rows])
    return [[code.sum([t[r] for t in cols.get(col, [])]) for col in range(tree.dof)]
            for r in range(6)]  # fmt: skip


def _jacobian_kernel(code: _Code) -> Any:
    """The Jacobian ``(B, 6, D)`` of the one requested link and its pose ``(B, 4, 4)``."""
    needed = code.walk(lambda i, j: code.store_pose("pose_ptr", 16, 0, code.link_frame(i)))
    dof = code.tree.dof
    rows = _jacobian_columns(code, needed)
    if STORES == "whole":
        code.store_tile("jac_ptr", 6 * dof, 0, [value for values in rows for value in values])
    for r, values in enumerate(rows if STORES != "whole" else []):
        code.store_tile("jac_ptr", 6 * dof, r * dof, values)
    return _compile(code.source("jac", "q_ptr, c_ptr, jac_ptr, pose_ptr"), "jac")


# ---------------------------------------------------------------------------- the LM step
_ATAN_P = (-8.750608600031904122785e-1, -1.615753718733365076637e1, -7.500855792314704667340e1,
           -1.228866684490136173410e2, -6.485021904942025371773e1)  # fmt: skip
_ATAN_Q = (2.485846490142306297962e1, 1.650270098316988542046e2, 4.328810604912902668951e2,
           4.853903996359136964868e2, 1.945506571482613964425e2)  # fmt: skip
"""Cephes' ``atan`` on ``[-0.2, 0.66]``: ``x + x z P(z) / Q(z)``, ``z = x²`` (about 2e-16)."""


def _atan2(code: _Code, s: str, c: str, out: str) -> None:
    """``out = atan2(s, c)`` for ``s >= 0`` (Triton's interpreter has no ``atan2``): the
    smaller of ``s, |c|`` over the larger is in ``[0, 1]``, reduced as Cephes does above
    0.66 (``atan x = π/4 + atan((x - 1) / (x + 1))``), then mapped to the octant."""
    one, big = code.literal(1.0), f"{out}_big"
    code.add(f"{out}_ac = tl.abs({c})")
    code.add(f"{big} = tl.maximum({s}, {out}_ac)")
    code.add(f"{out}_x = tl.minimum({s}, {out}_ac) / tl.where({big} > 0, {big}, {one})")
    code.add(f"{out}_far = {out}_x > 0.66")
    code.add(f"{out}_r = tl.where({out}_far, ({out}_x - 1.0) / ({out}_x + 1.0), {out}_x)")
    code.add(f"{out}_z = {out}_r * {out}_r")
    p, q = code.literal(_ATAN_P[0]), f"{out}_z + {code.literal(_ATAN_Q[0])}"
    for k in range(1, 5):
        p = f"({p}) * {out}_z + {code.literal(_ATAN_P[k])}"
        q = f"({q}) * {out}_z + {code.literal(_ATAN_Q[k])}"
    code.add(f"{out}_t = {out}_r + {out}_r * ({out}_z * ({p}) / ({q}))")
    code.add(f"{out}_t = tl.where({out}_far, {out}_t + {code.literal(math.pi / 4)}, {out}_t)")
    code.add(f"{out}_t = tl.where({s} > {out}_ac, {code.literal(math.pi / 2)} - {out}_t, "
             f"{out}_t)")  # fmt: skip
    code.add(f"{out} = tl.where({c} < 0, {code.literal(math.pi)} - {out}_t, {out}_t)")


def _load_inputs(
    code: _Code,
    poses: tuple[bool, ...],
    wraps: tuple[bool, bool],
    tiles: bool = False,
    columns: Sequence[int] | None = None,
) -> None:
    """What every step reads: each requested link's target ``P{i}_{x}`` (and ``T{i}_{r}{c}``
    for a pose), the weights ``w{r}``, the limits ``lo{c}``, ``hi{c}`` and the masks
    ``cont{c}``, ``turn{c}`` of the joints ``columns`` (default: all; see
    :func:`_load_limits`), loaded once, before a loop of steps. Targets are stored per row,
    link after link: positions ``(B, T, 3)``, rotations ``(B, R, 3, 3)`` of the ``R`` pose
    links; ``tiles``: each by one load (:meth:`_Code.load_tile`)."""
    links, rotations = len(poses), sum(poses)
    positions = [f"P{i}_{x}" for i in range(links) for x in range(3)]
    turns = [f"T{i}_{e // 3}{e % 3}" for i, pose in enumerate(poses) if pose for e in range(9)]
    if tiles:
        code.load_tile("tp_ptr", 3 * links, 0, positions)
        if turns:
            code.load_tile("tr_ptr", 9 * rotations, 0, turns)
    else:
        for i, name in enumerate(positions):
            code.add(f"{name} = tl.load(tp_ptr + row * {3 * links} + {i}, mask=ok, other=0.0)")
        for e, name in enumerate(turns):
            code.add(f"{name} = tl.load(tr_ptr + row * {9 * rotations} + {e}, mask=ok, "
                     "other=0.0)")  # fmt: skip
    for r in range(sum(6 if pose else 3 for pose in poses)):
        code.add(f"w{r} = tl.load(w_ptr + {r})")
    _load_limits(code, wraps, range(code.tree.dof) if columns is None else columns)


def _load_limits(code: _Code, wraps: tuple[bool, bool], columns: Iterable[int]) -> None:
    """The limits ``lo{c}``, ``hi{c}`` and the masks ``cont{c}``, ``turn{c}`` (where some
    joint wraps) of the joints ``columns``."""
    for c in columns:
        code.add(f"lo{c} = tl.load(lo_ptr + {c})")
        code.add(f"hi{c} = tl.load(hi_ptr + {c})")
        for name, on in zip(("cont", "turn"), wraps, strict=True):
            if on:
                code.add(f"{name}{c} = tl.load({name}_ptr + {c}) != 0")


def _residual(code: _Code, poses: tuple[bool, ...]) -> int:
    """``e{r}`` (as :func:`torchik.ik.base.pose_residual`, link after link), ``we{r} = w_r
    e_r`` and ``cost`` from the inputs of :func:`_load_inputs`; returns the rows ``m``."""
    m = 0
    for i, pose in enumerate(poses):
        for x in range(3):
            code.add(f"e{m + x} = P{i}_{x} - l{i}_{x}3")
        if pose:  # vee(R_t Rᵀ) = sin θ u = ½ Σ_k r_k x t_k; cos θ = (tr(R_t Rᵀ) - 1) / 2
            for x, (y, z) in enumerate(((1, 2), (2, 0), (0, 1))):
                terms = " + ".join(f"l{i}_{y}{k} * T{i}_{z}{k} - l{i}_{z}{k} * T{i}_{y}{k}"
                                   for k in range(3))  # fmt: skip
                code.add(f"sa{i}_{x} = 0.5 * ({terms})")
            trace = " + ".join(f"l{i}_{r}{c} * T{i}_{r}{c}" for r in range(3) for c in range(3))
            code.add(f"cs{i} = 0.5 * ({trace} - 1.0)")
            code.add(f"sn{i} = tl.sqrt(sa{i}_0 * sa{i}_0 + sa{i}_1 * sa{i}_1 + sa{i}_2 * sa{i}_2)")
            _atan2(code, f"sn{i}", f"cs{i}", f"ang{i}")
            one = code.literal(1.0)
            code.add(f"sc{i} = tl.where(sn{i} > 0, ang{i} / tl.where(sn{i} > 0, sn{i}, {one}), "
                     f"{one})")  # fmt: skip
            for x in range(3):
                code.add(f"e{m + x + 3} = sa{i}_{x} * sc{i}")
        m += 6 if pose else 3
    for r in range(m):
        code.add(f"we{r} = w{r} * e{r}")
    code.add("cost = " + " + ".join(f"we{r} * we{r}" for r in range(m)))
    return m


def _free_limit_columns(code: _Code, m: int, wraps: tuple[bool, bool]) -> None:
    """Zero the columns ``J{r}_{c}`` of clamped joints on a limit that ``Jᵀ W e`` pushes out
    (:func:`torchik.ik.lm.free_limit_columns`); entries known to be zero stay out."""
    for c in range(code.tree.dof):
        rows = [r for r in range(m) if (r, c) not in code.zeros]
        if not rows:
            continue
        code.add(f"gr{c} = " + " + ".join(f"J{r}_{c} * (w{r} * we{r})" for r in rows))
        free = [f"{name}{c}" for name, on in zip(("cont", "turn"), wraps, strict=True) if on]
        out = f"((q{c} <= lo{c}) & (gr{c} < 0)) | ((q{c} >= hi{c}) & (gr{c} > 0))"
        clamped = " & ".join(f"~{f}" for f in free)
        code.add(f"bl{c} = {clamped} & ({out})" if free else f"bl{c} = {out}")
        for r in rows:
            code.add(f"J{r}_{c} = tl.where(bl{c}, zero, J{r}_{c})")


def _damped_solve(code: _Code, m: int, per_row: bool) -> None:
    """``y = (Jw Jwᵀ + λI)⁻¹ W^½ e`` by an unrolled Cholesky factorisation, ``Jw{r}_{c} =
    w_r J{r}_{c}``, ``λ = μ (cost + floor)`` (:func:`torchik.ik.lm.damped_step`); products of
    entries known to be zero are left out (another link's joints)."""
    dof = code.tree.dof
    mu = "tl.load(mu_ptr + row, mask=ok, other=1.0)" if per_row else "(zero + mu_hi) + mu_lo"
    code.add(f"lam = ({mu}) * (cost + ((zero + floor_hi) + floor_lo))")
    live = [[c for c in range(dof) if (r, c) not in code.zeros] for r in range(m)]
    for r in range(m):
        for c in live[r]:
            code.add(f"jw{r}_{c} = w{r} * J{r}_{c}")
    for i in range(m):
        for j in range(i + 1):
            both = [c for c in live[i] if c in live[j]]
            a = " + ".join(f"jw{i}_{c} * jw{j}_{c}" for c in both) or "zero"
            known = "".join(f" - L{i}_{k} * L{j}_{k}" for k in range(j))
            if i == j:
                code.add(f"L{i}_{i} = tl.sqrt({a} + lam{known})")
            else:
                code.add(f"L{i}_{j} = ({a}{known}) / L{j}_{j}")
    for i in range(m):  # L z = W^½ e, then Lᵀ y = z
        known = "".join(f" - L{i}_{k} * z{k}" for k in range(i))
        code.add(f"z{i} = (we{i}{known}) / L{i}_{i}")
    for i in reversed(range(m)):
        known = "".join(f" - L{k}_{i} * y{k}" for k in range(i + 1, m))
        code.add(f"y{i} = (z{i}{known}) / L{i}_{i}")


def _project(code: _Code, wraps: tuple[bool, bool], columns: Iterable[int]) -> None:
    """``n{c}`` of the joints ``columns`` into the limits (``p{c}``) as
    :func:`torchik.geometry.joints.project_to_limits` with ``wraps=full_turn`` and
    ``canonical=continuous``."""
    pi, two_pi = code.literal(math.pi), code.literal(2 * math.pi)
    for c in columns:
        value = f"n{c}"
        if wraps[1]:  # full turn: lower + ((q - lower) mod 2π), torch.remainder's sign
            code.add(f"rm{c} = (n{c} - lo{c}) % {two_pi}")
            code.add(f"rm{c} = tl.where(rm{c} < 0, rm{c} + {two_pi}, rm{c})")
            code.add(f"n{c}_in = tl.where(turn{c}, lo{c} + rm{c}, n{c})")
            value = f"n{c}_in"
        code.add(f"p{c} = tl.minimum(tl.maximum({value}, lo{c}), hi{c})")
        if wraps[0]:  # continuous: wrap_angle, into (-π, π]
            code.add(f"wa{c} = n{c} - {two_pi} * tl.ceil((n{c} - {pi}) / {two_pi})")
            code.add(f"wa{c} = tl.where(wa{c} <= -{pi}, wa{c} + {two_pi}, wa{c})")
            code.add(f"wa{c} = tl.where(wa{c} > {pi}, wa{c} - {two_pi}, wa{c})")
            code.add(f"p{c} = tl.where(cont{c}, wa{c}, p{c})")


def _lm_body(code: _Code, poses: tuple[bool, ...], per_row: bool, wraps: tuple[bool, bool],
             columns: Sequence[int] | None = None) -> int:  # fmt: skip
    """From ``q{c}`` (loaded) and the inputs of :func:`_load_inputs`: the residual ``e{r}``,
    ``cost`` and the projected next ``p{c}`` of one step (of the joints ``columns``, default
    all: the others must move no requested link), the requested links' residuals and
    Jacobians stacked (a pose: 6 rows, a position: 3); returns the residual rows ``m``."""
    dof = code.tree.dof
    columns = range(dof) if columns is None else columns
    needed = code.walk(lambda i, j: code.link_frame(i), every_column=True, loaded=True)
    m = 0
    for i, pose in enumerate(poses):
        size = 6 if pose else 3
        for r, values in enumerate(_jacobian_columns(code, needed, i)[:size]):
            for c, value in enumerate(values):
                if value == "zero":  # no joint of the link's chain moves it
                    code.zeros.add((m + r, c))
                code.add(f"J{m + r}_{c} = {value}")
        m += size
    _residual(code, poses)
    _free_limit_columns(code, m, wraps)
    _damped_solve(code, m, per_row)
    for c in columns:
        terms = [f"jw{r}_{c} * y{r}" for r in range(m) if (r, c) not in code.zeros]
        code.add(f"n{c} = q{c} + " + " + ".join(terms) if terms else f"n{c} = q{c}")
    _project(code, wraps, columns)
    return m


_LM_ARGS = ("q_ptr, c_ptr, tp_ptr, tr_ptr, w_ptr, mu_ptr, mu_hi, mu_lo, floor_hi, floor_lo, "
            "lo_ptr, hi_ptr, cont_ptr, turn_ptr")  # fmt: skip


def _lm_kernel(
    code: _Code, pose: bool, per_row: bool, wraps: tuple[bool, bool], residual: bool
) -> Any:
    """One Levenberg-Marquardt step of each row (see :func:`lm_step`); with ``residual``,
    the residual at ``q`` is stored too."""
    dof = code.tree.dof
    code.load_q(list(range(dof)))
    _load_inputs(code, (pose,), wraps)
    m = _lm_body(code, (pose,), per_row, wraps)
    if residual:
        code.store_tile("err_ptr", m, 0, [f"e{r}" for r in range(m)])
    code.store_tile("out_ptr", dof, 0, [f"p{c}" for c in range(dof)])
    return _compile(code.source("lm_step", _LM_ARGS + ", err_ptr, out_ptr"), "lm_step")


_STATE = (("bc", "best_cost"), ("it", "iterations"), ("fin", "finished"))
_STALLS = (("seedc", "seed_cost"), ("st", "stall"), ("age", "age"))
"""The per-row state of :func:`lm_loop` besides ``best_q``: its name in the kernel (names that
the step's code does not use: its ``sc`` is the rotation residual's scale) and its key in
``state``, in the order of the kernel's arguments (then ``stalled_ptr``, ``it0_ptr``)."""


def _lm_loop_kernel(
    code: _Code,
    poses: tuple[bool, ...],
    wraps: tuple[bool, bool],
    track: bool,
    groups: bool = False,
    fresh: bool = False,
) -> Any:
    """``n_iters`` Levenberg-Marquardt iterations of each row in one launch, its state in
    registers (see :func:`lm_loop`): per iteration the residual, the convergence test (every
    requested link within both tolerances), the best point, the stall counters (``track``)
    and the step of the rows not finished; with ``groups``, first the early stop of the
    previous launch over each target's slots and (``fresh``) the restarts of its stalled
    rows, and last each finished row's mark on its target."""
    dof = code.tree.dof
    still = _still(code, wraps)
    moving = [c for c in range(dof) if c not in still]
    code.load_q(moving)  # the carried values: strided loads (see _Code.load_tile)
    for c in moving:
        code.add(f"bq{c} = tl.load(bq_ptr + row * {dof} + {c}, mask=ok, other=0.0)")
    for name, _ in _STATE + (_STALLS if track else ()):
        code.add(f"{name} = tl.load({name}_ptr + row, mask=ok, other=0)")
    code.add("fin = fin != 0")
    code.add("it0 = tl.load(it0_ptr)")
    if groups:
        _groups_start(code, dof, fresh, moving)
    _load_inputs(code, poses, wraps, tiles=True, columns=moving)
    code.tile_axes(_width(dof))  # made before the loop: the stores after it use them
    if still:  # when each row was last best (0: never, 1: first iteration, 2: later), stepped
        code.add("bw = tl.zeros([BLOCK], dtype=tl.int32)")
        code.add("mv = fin & ~fin")
    code.add("for i in range(0, n_iters):")
    code.depth = 2
    code.add("at = it0 + i")
    _lm_body(code, poses, False, wraps, moving)
    _convergence(code, poses)
    code.add("live = ~fin")
    code.add("better = live & ((cost < bc) | conv)")
    for c in moving:
        code.add(f"bq{c} = tl.where(better, q{c}, bq{c})")
    code.add("bc = tl.where(better, cost, bc)")
    code.add("it = tl.where(live & conv & (at < max_iters), at, it)")
    code.add("fin = fin | conv")
    if still:
        code.add("bw = tl.where(better & (at > it0), 2, tl.where(better, 1, bw))")
        code.add("mv = mv | ~fin")
    if track:
        code.add(f"progress = cost < {_pair('keep')} * seedc")
        code.add("seedc = tl.where(progress, cost, seedc)")
        code.add("st = tl.where(progress, st * 0, st + 1)")
        code.add("age = age + 1")
    for c in moving:
        code.add(f"q{c} = tl.where(fin, q{c}, p{c})")
    code.depth = 1
    _still_joints(code, still, wraps, groups and fresh)
    _lm_loop_stores(code, dof, track, groups)
    state = ", ".join(f"{name}_ptr" for name, _ in _STATE + _STALLS)
    args = (f"{_LM_ARGS}, bq_ptr, {state}, stalled_ptr, it0_ptr, n_iters, max_iters, tolp_hi, "
            "tolp_lo, tolr_hi, tolr_lo, keep_hi, keep_lo, patience, attempt_iters, "
            "group_ptr, read_ptr, write_ptr, fresh_ptr, attempt_ptr")  # fmt: skip
    return _compile(code.source("lm_loop", args), "lm_loop")


def _pair(name: str) -> str:
    """A float64 constant of the loop kernel, passed as two float32 halves ``{name}_hi``
    and ``{name}_lo``."""
    return f"((zero + {name}_hi) + {name}_lo)"


def _convergence(code: _Code, poses: tuple[bool, ...]) -> None:
    """``conv``: every requested link within both tolerances, the angle ``|e[3:6]|`` as the
    usual iteration's linearization takes it."""
    code.add("conv = ok")
    o = 0
    for pose in poses:
        e = [f"e{o + x}" for x in range(6)]
        code.add(f"conv = conv & (tl.sqrt({e[0]} * {e[0]} + {e[1]} * {e[1]} + {e[2]} * {e[2]})"
                 f" < {_pair('tolp')})")  # fmt: skip
        if pose:
            code.add(f"conv = conv & (tl.sqrt({e[3]} * {e[3]} + {e[4]} * {e[4]} + "
                     f"{e[5]} * {e[5]}) < {_pair('tolr')})")  # fmt: skip
        o += 6 if pose else 3


def _still(code: _Code, wraps: tuple[bool, bool]) -> list[int]:
    """The joints that move none of the requested links (no joint of their chains reads
    them), which :func:`_lm_loop_kernel` leaves out of its loop (:data:`STILL`): none where
    some joint wraps."""
    if not STILL or any(wraps):
        return []
    used = set(code.used_columns())
    return [c for c in range(code.tree.dof) if c not in used]


def _still_joints(code: _Code, still: list[int], wraps: tuple[bool, bool], fresh: bool) -> None:
    """After :func:`_lm_loop_kernel`'s loop, the ``still`` joints' ``q{c}`` and ``bq{c}``
    as the loop would have left them (see :data:`STILL`): the value at the launch's start
    (loaded, or the fresh seed's where the row restarted, ``rs``), clamped into the limits
    where the row stepped (``mv``); the best value unchanged where no iteration was better
    (``bw`` 0), the start's where the first one was last best (1), the clamped one where a
    later one was (2)."""
    dof = code.tree.dof
    for c in still:
        code.add(f"q{c} = tl.load(q_ptr + row * {dof} + {c}, mask=ok, other=0.0)")
        if fresh:
            code.add(f"q{c} = tl.where(rs, tl.load(fresh_ptr + row * {dof} + {c}, mask=ok, "
                     f"other=0.0), q{c})")  # fmt: skip
        code.add(f"n{c} = q{c}")
    _load_limits(code, wraps, still)
    _project(code, wraps, still)
    for c in still:
        code.add(f"bq{c} = tl.load(bq_ptr + row * {dof} + {c}, mask=ok, other=0.0)")
        code.add(f"bq{c} = tl.where(bw == 2, p{c}, tl.where(bw == 1, q{c}, bq{c}))")
        code.add(f"q{c} = tl.where(mv, p{c}, q{c})")


def _lm_loop_stores(code: _Code, dof: int, track: bool, groups: bool) -> None:
    """The end of :func:`_lm_loop_kernel`: ``q``, the best point and the state stored, with
    the stall verdict (``track``) and each finished row's mark on its target (``groups``)."""
    code.store_tile("q_ptr", dof, 0, [f"q{c}" for c in range(dof)])
    code.store_tile("bq_ptr", dof, 0, [f"bq{c}" for c in range(dof)])
    for name, _ in _STATE + (_STALLS if track else ()):
        code.add(f"tl.store({name}_ptr + row, {name}, mask=ok)")
    if track:
        # (age * 0 + attempt_iters): a block, whatever Triton makes of the integer argument
        code.add("late = (st >= patience) | ((age * 0 + attempt_iters > 0) & "
                 "(age >= attempt_iters))")  # fmt: skip
        code.add("tl.store(stalled_ptr + row, late & ~fin, mask=ok)")
    if groups:  # read by the next launch: no program of this one reads what another marks
        code.add("tl.atomic_or(write_ptr + grp, fin.to(tl.int32), mask=ok & fin)")


def _groups_start(code: _Code, dof: int, fresh: bool, moving: list[int]) -> None:
    """The start of a launch with ``groups`` (see :func:`lm_loop`): a row whose target had a
    finished slot at the end of the previous launch (``read``) finishes, its ``iterations``
    that launch's last where it never converged before it (as
    :func:`torchik.ik.fixed.finish_groups`); with ``fresh``, a row still stalled takes its next
    seed, its stall counters start over and its ``attempt`` counts one more (as
    :func:`torchik.ik.fixed.restart`; the joints ``moving`` take it here, the others after
    the loop, :func:`_still_joints`)."""
    code.add("grp = tl.load(group_ptr + row, mask=ok, other=0)")
    code.add("had = ok & (tl.load(read_ptr + grp, mask=ok, other=0) != 0)")
    code.add("it = tl.where(had & (it == max_iters) & (it0 - 1 < max_iters), it0 - 1, it)")
    code.add("fin = fin | had")
    if not fresh:
        return
    code.add("rs = (tl.load(stalled_ptr + row, mask=ok, other=0) != 0) & ~fin")
    code.load_tile("fresh_ptr", dof, 0, [f"fr{c}" for c in range(dof)])
    for c in moving:
        code.add(f"q{c} = tl.where(rs, fr{c}, q{c})")
    code.add('seedc = tl.where(rs, float("inf"), seedc)')
    code.add("st = tl.where(rs, st * 0, st)")
    code.add("age = tl.where(rs, age * 0, age)")
    code.add("att = tl.load(attempt_ptr + row, mask=ok, other=0)")
    code.add("tl.store(attempt_ptr + row, att + rs.to(att.dtype), mask=ok)")


_WRITERS: dict[str, Callable[..., Any]] = {
    "fk": _forward_kernel,
    "backward": _backward_kernel,
    "jac": _jacobian_kernel,
    "lm": _lm_kernel,
    "lm_loop": _lm_loop_kernel,
}
"""How each kind of kernel is written."""


def _structure(tree: KinematicTree) -> tuple:
    """What a kernel is generated from (read from the device once per tree)."""

    def build() -> tuple:
        source = tuple(tree.source.tolist())
        return (tree.parent, tree.kind, tree.link_joint, tree.dof, source, tree.identity_map)

    return tree.cached(("fused", "structure"), build)


def _kernel(
    kind: str, tree: KinematicTree, links: tuple[int, ...], pattern: tuple, options: tuple = ()
) -> Any:
    """The kernel of ``kind`` for this structure, links, pattern of constants and writer
    ``options`` (generated and compiled once per process)."""
    key = (kind, _structure(tree), links, pattern, options, STORES, STILL)
    if key not in _KERNELS:
        _KERNELS[key] = _WRITERS[kind](_Code(tree, links, pattern), *options)
    return _KERNELS[key]


# ---------------------------------------------------------------------------- the functions
def _prepared(
    kind: str, tree: KinematicTree, links: tuple[int, ...], q: Tensor, options: tuple = ()
) -> tuple:
    """The kernel and its constant table on ``q``'s device, in its dtype: built on the first
    call for this tree, links, dtype, device and options, and kept with the tree (whose
    constants never change in place), so later calls copy nothing from the host."""

    def build() -> tuple[Any, Tensor]:
        table = _table(tree, links, q.dtype)
        pattern = _pattern(table, _every(kind, tree, q.dtype))
        return _kernel(kind, tree, links, pattern, options), table.to(q.device)

    return tree.cached(("fused", kind, links, q.dtype, q.device, options, STORES, STILL), build)


def _launch(kind: str, tree: KinematicTree, links: tuple[int, ...], q: Tensor, *outs: Tensor | int):
    batch = q.shape[0]
    if batch == 0:
        return
    kernel, table = _prepared(kind, tree, links, q)
    _run(kernel, (_cdiv(batch, BLOCK),), q, table, *outs, batch)


def _run(kernel: Any, grid: tuple[int, ...], *args: Any) -> Any:
    """Launch ``kernel`` on ``grid``: the one place where kernels start (the capture tests
    record everything around it). Returns what Triton returns (the compiled kernel on a GPU,
    whose ``n_regs``, ``n_spills`` and ``metadata.shared`` ``scripts/gpu_probe.py`` reads)."""
    return kernel[grid](*args, BLOCK=BLOCK, num_warps=WARPS)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class _FusedFK(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: Tensor, tree: KinematicTree, links: tuple[int, ...]) -> Tensor:
        q = q.contiguous()
        out = q.new_empty(q.shape[0], len(links), 4, 4)
        _launch("fk", tree, links, q, out)
        ctx.save_for_backward(q)
        ctx.tree, ctx.links = tree, links
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        (q,) = ctx.saved_tensors
        out = torch.empty_like(q)  # the kernel writes every column
        # G as it comes, by its strides: the gradient of a sum is an expanded tensor of ones,
        # which .contiguous() would write out in full (4 M poses: 268 MB) before the kernel
        _launch("backward", ctx.tree, ctx.links, q, grad, out, *grad.stride())
        return out, None, None


def forward_kinematics(q: Tensor, tree: KinematicTree, links: tuple[int, ...]) -> Tensor:
    """Poses of ``links`` by the fused kernel: the same as
    :func:`torchik.kinematics.forward_kinematics`, differentiable in ``q`` (first order).

    Args:
        q: ``(B, D)`` joint values, float32 or float64.
        tree: the flattened robot (its constants are read, not differentiated).
        links: link indices.

    Returns:
        ``(B, L', 4, 4)`` homogeneous transforms.
    """
    return _FusedFK.apply(q, tree, tuple(links))


def jacobian(q: Tensor, tree: KinematicTree, link: int) -> tuple[Tensor, Tensor]:
    """Geometric Jacobian ``(B, 6, D)`` of ``link`` and its pose ``(B, 4, 4)`` by the fused
    kernel (as :func:`torchik.kinematics.jacobian`; not differentiable)."""
    q = q.detach().contiguous()
    jac = q.new_empty(q.shape[0], 6, tree.dof)
    pose = q.new_empty(q.shape[0], 4, 4)
    _launch("jac", tree, (link,), q, jac, pose)
    return jac, pose


def _float32_pair(x: float) -> tuple[float, float]:
    """``x`` as float32 ``hi + lo`` (Triton passes Python floats as float32; their sum in
    float64 is ``x`` to about 1e-15, and no tensor has to be made from it)."""
    hi = struct.unpack("f", struct.pack("f", x))[0]
    return hi, x - hi


def _check_lm(q: Tensor, tree: KinematicTree, position: Tensor, rotmat: Tensor | None,
              named: dict[str, Any], fn: str = "lm_step") -> None:  # fmt: skip
    """Shapes, dtypes and devices of :func:`lm_step`'s arguments (no value is read)."""
    batch, dof = q.shape[0], tree.dof
    shapes: dict[str, tuple[Tensor, tuple[int, ...]]] = {
        "q": (q, (batch, dof)),
        "target_position": (position, (batch, 3)),
    }
    if rotmat is not None:
        shapes["target_rotmat"] = (rotmat, (batch, 3, 3))
    m = 3 if rotmat is None else 6
    for name, value in named.items():
        if isinstance(value, Tensor):
            sizes = {"weights": (m,), "damping": (batch,), "residual": (batch, m)}
            size: tuple[int, ...] = sizes.get(name, (dof,))
            shapes[name] = (value, size)
    for name, (value, size) in shapes.items():
        if tuple(value.shape) != size:
            raise ValueError(f"{fn}: {name} must have shape {size}, got {tuple(value.shape)}")
        if value.device != q.device:
            raise ValueError(f"{fn}: {name} is on {value.device}, q on {q.device}")
        masks = ("continuous", "full_turn")
        if value.dtype != (torch.bool if name in masks else q.dtype):
            raise TypeError(f"{fn}: {name} has dtype {value.dtype}, q {q.dtype}")


def lm_step(
    q: Tensor,
    tree: KinematicTree,
    link: int,
    target_position: Tensor,
    target_rotmat: Tensor | None,
    weights: Tensor,
    damping: float | Tensor,
    lower: Tensor,
    upper: Tensor,
    *,
    damping_floor: float = 1e-6,
    continuous: Tensor | None = None,
    full_turn: Tensor | None = None,
    residual: Tensor | None = None,
) -> Tensor:
    """One Levenberg-Marquardt step of single-link IK for every row, in one kernel launch.

    Per row, in registers: the pose and Jacobian of ``link`` (:func:`jacobian`); the residual
    ``e = [p_target - p, log(R_target Rᵀ)]`` of :func:`torchik.ik.base.pose_residual` (its
    first three rows without ``target_rotmat``) and ``cost = |W^½ e|²``; the Jacobian columns
    of clamped joints that sit on a limit and that ``Jᵀ W e`` pushes outwards set to zero
    (:func:`torchik.ik.lm.free_limit_columns`); the step ``δ = Jwᵀ (Jw Jwᵀ + λI)⁻¹ W^½ e``,
    ``Jw = W^½ J``, ``λ = damping * (cost + damping_floor)`` (:func:`torchik.ik.lm.damped_step`,
    solved by a Cholesky factorisation instead of LU); and ``q + δ`` projected into the limits
    as :meth:`torchik.ik.base.JointLimits.project` does with shared limits (full-turn joints
    moved by whole turns, then everything clamped, continuous joints wrapped to (-π, π]).

    That is what the IK loop does per iteration with :class:`torchik.ik.LevenbergMarquardt`
    (``adaptive=False``): ``linearize``, ``step``, ``problem.project``. Left to the caller:
    adaptive damping (its accepted or undone steps), per-row joint boxes
    (:meth:`~torchik.ik.base.JointLimits.within`), several links, floating bases (the tree is
    the fixed-base part), and the convergence test (from the residual at ``q``, which the
    kernel writes into ``residual`` if given; the fixed-shape IK loop does this with
    ``LevenbergMarquardt(fused_step=True)``). It reads nothing back to the host and copies
    nothing to the device after the first call with a tree, so a loop of calls can be
    captured in a CUDA graph. An IK loop calls it as::

        limits, s = problem.limits, solver.settings
        q = fused.lm_step(q, robot.tree, robot.link_index(target.link), target.position,
                          target.rotmat, problem.weights(s.rotation_weight), s.damping,
                          limits.lower, limits.upper, damping_floor=s.damping_floor,
                          continuous=limits.continuous, full_turn=limits.full_turn)

    Args:
        q: ``(B, D)`` joint values (float32 or float64; CUDA, or any device in Triton's
            interpreter).
        tree: the flattened robot (:attr:`torchik.robot.Robot.tree`, fixed base).
        link: the link index.
        target_position: ``(B, 3)``.
        target_rotmat: ``(B, 3, 3)``, or ``None`` to place the origin only.
        weights: ``(m,)`` square roots of the residual weights, ``m = 6`` (``3`` without
            ``target_rotmat``), e.g. ``[1, 1, 1, r, r, r]``.
        damping: ``μ``, a float or ``(B,)`` per row.
        lower, upper: ``(D,)`` joint limits.
        damping_floor: keeps ``λ`` positive at the solution (m²).
        continuous: ``(D,)`` bool, joints wrapped to (-π, π] (``None``: none).
        full_turn: ``(D,)`` bool, limited joints moved by whole turns into their range
            (``None``: none); the joints in neither mask are the clamped ones.
        residual: ``(B, m)`` written with the residual ``e`` at ``q`` (as
            :func:`torchik.ik.base.pose_residual`: position then rotation), or ``None``.

    Returns:
        ``(B, D)`` the next joint values (not differentiable).
    """
    named = dict(weights=weights, damping=damping, lower=lower, upper=upper,
                 continuous=continuous, full_turn=full_turn, residual=residual)  # fmt: skip
    _check_lm(q, tree, target_position, target_rotmat, named)
    if residual is not None and not residual.is_contiguous():
        raise ValueError("lm_step: residual must be contiguous (the kernel writes into it)")
    q = q.detach().contiguous()
    out = torch.empty_like(q)
    if q.shape[0] == 0:
        return out
    per_row = isinstance(damping, Tensor)
    wraps = (continuous is not None, full_turn is not None)
    options = (target_rotmat is not None, per_row, wraps, residual is not None)
    kernel, table = _prepared("lm", tree, (link,), q, options)
    mu = _float32_pair(0.0 if per_row else float(damping))
    given = (
        target_position,
        target_rotmat,
        weights,
        damping if isinstance(damping, Tensor) else None,
    )
    pointers = [q if t is None else t.detach().contiguous() for t in given]  # q: unused
    masks = [q if t is None else t.contiguous() for t in (continuous, full_turn)]
    err = q if residual is None else residual  # q: unused
    _run(kernel, (_cdiv(q.shape[0], BLOCK),), q, table, *pointers, *mu,
         *_float32_pair(damping_floor), lower.contiguous(), upper.contiguous(), *masks, err, out,
         q.shape[0])  # fmt: skip
    return out


def _check_state(q: Tensor, state: dict[str, Tensor]) -> None:
    """Shapes, dtypes, devices and layout of :func:`lm_loop`'s state (no value is read)."""
    batch, dof = q.shape
    kinds = {
        "best_q": ((batch, dof), q.dtype), "best_cost": ((batch,), q.dtype),
        "iterations": ((batch,), torch.long), "finished": ((batch,), torch.bool),
        "it": ((), torch.long), "seed_cost": ((batch,), q.dtype),
        "stall": ((batch,), torch.long), "age": ((batch,), torch.long),
        "stalled": ((batch,), torch.bool),
    }  # fmt: skip
    for name, value in state.items():
        shape, dtype = kinds[name]
        if tuple(value.shape) != shape or value.dtype != dtype or value.device != q.device:
            got = f"{value.dtype} {tuple(value.shape)} on {value.device}"
            raise ValueError(f"lm_loop: {name} must be {dtype} {shape} on {q.device}, got {got}")
        if not value.is_contiguous():
            raise ValueError(f"lm_loop: {name} must be contiguous (the kernel writes into it)")


def check_loop(q: Tensor, tree: KinematicTree, position: Tensor, rotmat: Tensor | None,
               named: dict[str, Any], state: dict[str, Tensor]) -> bool:  # fmt: skip
    """The arguments of :func:`lm_loop` (and of :func:`torchik.kinematics.native.lm_loop`):
    shapes, dtypes, devices, the state's keys and layout (no value is read). Returns whether
    the state holds the stall counters."""
    _check_lm(q, tree, position, rotmat, named, "lm_loop")
    track = "stall" in state
    needed = {"best_q", "it", *(key for _, key in _STATE)}
    needed |= {*(key for _, key in _STALLS), "stalled"} if track else set()
    if set(state) != needed:
        raise ValueError(f"lm_loop: state must hold {sorted(needed)}, got {sorted(state)}")
    _check_state(q, state)
    if not q.is_contiguous():
        raise ValueError("lm_loop: q must be contiguous (the kernel writes into it)")
    return track


def lm_loop(
    q: Tensor,
    tree: KinematicTree,
    link: int | Sequence[int],
    target_position: Tensor | Sequence[Tensor],
    target_rotmat: Tensor | None | Sequence[Tensor | None],
    weights: Tensor,
    damping: float,
    lower: Tensor,
    upper: Tensor,
    state: dict[str, Tensor],
    *,
    n_iters: int,
    max_iters: int,
    tol_position: float,
    tol_rotation: float,
    damping_floor: float = 1e-6,
    continuous: Tensor | None = None,
    full_turn: Tensor | None = None,
    patience: int = 4,
    min_improvement: float = 1e-3,
    attempt_iters: int = 0,
    groups: dict[str, Tensor] | None = None,
) -> None:
    """``n_iters`` iterations of the fixed-shape IK loop with :func:`lm_step`'s step, in one
    kernel launch: every row's state stays in registers between iterations.

    Per row and iteration ``at = it + i`` (``i < n_iters``), as :func:`torchik.ik.fixed.iterate`
    does with ``early_stop`` per row: the residual at ``q`` (several links: stacked, link after
    link); converged if every link's position error is under ``tol_position`` and (pose targets)
    its angle under ``tol_rotation``; a row not yet finished keeps ``q`` as ``best_q`` if it
    converged or lowered ``best_cost``, records ``at`` in ``iterations`` when it first converges
    (``at < max_iters``), and steps unless it converged; finished rows are frozen. With the
    stall counters in ``state`` (``seed_cost``, ``stall``, ``age``, ``stalled``) it also counts
    stalls as :meth:`torchik.ik.base.IKSolver._track_progress` does and writes ``stalled`` at
    the end (``stall >= patience``, or ``age >= attempt_iters`` if that is positive, and not
    finished). Left to the caller: ``it += n_iters``, early stop over the slots of a target
    (rows finished by a sibling), restarts. Nothing is read back to the host: a loop of calls
    can be captured in a CUDA graph.

    Args:
        q: ``(B, D)`` joint values, updated in place (float32 or float64, contiguous).
        tree: the flattened robot (the arguments up to ``full_turn`` are :func:`lm_step`'s,
            ``damping`` a float).
        link: the link index, or ``T`` of them (whole-body IK's plain step: every joint
            moved, no posture).
        target_position: ``(B, 3)``, or one per link.
        target_rotmat: ``(B, 3, 3)``, or ``None`` to place the origin only; or one per link.
        weights: ``(m,)`` square roots of the residual weights, link after link.
        damping: ``μ``.
        lower: ``(D,)`` lower joint limits; ``upper`` the upper ones.
        upper: ``(D,)``.
        state: ``best_q (B, D)``, ``best_cost (B,)``, ``iterations (B,)`` long, ``finished
            (B,)`` bool, ``it ()`` long (the first iteration's number, read on the device), and
            optionally the stall counters ``seed_cost (B,)``, ``stall (B,)`` long, ``age (B,)``
            long, ``stalled (B,)`` bool: updated in place.
        n_iters: iterations in this launch.
        max_iters: iterations of the whole solve (see ``iterations``).
        tol_position: metres; ``tol_rotation``: radians.
        damping_floor: keeps ``λ`` positive at the solution.
        continuous: ``(D,)`` bool, joints wrapped to (-π, π], or ``None``.
        full_turn: ``(D,)`` bool, joints moved by whole turns, or ``None``.
        patience: the stall rule of :class:`torchik.ik.base.SolverSettings`, with
            ``min_improvement`` and ``attempt_iters``.
        min_improvement: see ``patience``.
        attempt_iters: see ``patience``.
        groups: the early stop over each target's slots, and the restarts, in the kernel
            too (left to the caller otherwise): ``group (B,)`` long, each row's target;
            ``read (G,)`` and ``write (G,)`` int32, the targets with a finished slot after
            the previous launch (read at the start: such a row finishes, its ``iterations``
            the previous launch's last, ``it - 1``, if still ``max_iters``) and after this one
            (each finished row's target marked at the end, atomically; pass the previous
            launch's ``write`` as ``read``, and as ``write`` one that marks no target not yet
            finished: zeros, or the previous launch's ``read``, as marks only grow);
            optionally ``fresh (B, D)`` with ``attempt (B,)`` long and the stall counters in
            ``state``: a row ``stalled`` by the previous launch and not finished takes its
            seed from ``fresh``, its ``seed_cost`` infinite, ``stall`` and ``age`` zero,
            ``attempt`` one more. After the last launch the caller settles its early stop
            (:func:`torchik.ik.fixed.finish_groups`).
    """
    links, positions, rotmats = _link_targets(link, target_position, target_rotmat)
    named = dict(lower=lower, upper=upper, continuous=continuous, full_turn=full_turn)
    track = _check_link_targets(q, tree, positions, rotmats, weights, named, state)
    extra = _check_groups(q, groups, track)
    if q.shape[0] == 0 or n_iters <= 0:
        return
    wraps = (continuous is not None, full_turn is not None)
    poses = tuple(r is not None for r in rotmats)
    options = (poses, wraps, track) + (() if groups is None else (True, "fresh" in groups))
    kernel, table = _prepared("lm_loop", tree, links, q, options)
    position = positions[0] if len(links) == 1 else torch.stack(positions, dim=1)
    turns = [r for r in rotmats if r is not None]
    rotmat = None if not turns else turns[0] if len(turns) == 1 else torch.stack(turns, dim=1)
    given = (position, rotmat, weights)
    pointers = [q if t is None else t.detach().contiguous() for t in given]  # q: unused
    masks = [q if t is None else t.contiguous() for t in (continuous, full_turn)]
    unused = state["iterations"]  # the stall pointers without track: never read
    rows = [state.get(key, unused) for _, key in _STATE + _STALLS] + [state.get("stalled", unused)]
    _run(kernel, (_cdiv(q.shape[0], BLOCK),), q, table, *pointers, q, *_float32_pair(damping),
         *_float32_pair(damping_floor), lower.contiguous(), upper.contiguous(), *masks,
         state["best_q"], *rows, state["it"], n_iters, max_iters, *_float32_pair(tol_position),
         *_float32_pair(tol_rotation), *_float32_pair(1.0 - min_improvement), patience,
         attempt_iters, *extra, q.shape[0])  # fmt: skip


def _check_groups(q: Tensor, groups: dict[str, Tensor] | None, track: bool) -> list[Tensor]:
    """The pointers ``group, read, write, fresh, attempt`` of :func:`lm_loop` (``q`` for those
    not given: never read), its ``groups`` checked (no value is read)."""
    if groups is None:
        return [q] * 5
    batch, dof = q.shape
    kinds = {"group": ((batch,), torch.long), "read": (None, torch.int32),
             "write": (None, torch.int32), "fresh": ((batch, dof), q.dtype),
             "attempt": ((batch,), torch.long)}  # fmt: skip
    needed = {"group", "read", "write"} | ({"fresh", "attempt"} if "fresh" in groups else set())
    if set(groups) != needed or ("fresh" in groups and not track):
        raise ValueError(f"lm_loop: groups must hold {sorted(needed)} (fresh seeds with the "
                         f"stall counters in state), got {sorted(groups)}")  # fmt: skip
    for name, value in groups.items():
        shape, dtype = kinds[name]
        if (
            (shape is not None and tuple(value.shape) != shape)
            or value.dtype != dtype
            or (value.device != q.device or not value.is_contiguous())
        ):
            raise ValueError(f"lm_loop: groups[{name!r}] must be contiguous {dtype} "
                             f"{shape or '(G,)'} on {q.device}, got {value.dtype} "
                             f"{tuple(value.shape)} on {value.device}")  # fmt: skip
    if groups["read"].shape != groups["write"].shape or groups["read"].dim() != 1:
        raise ValueError("lm_loop: groups' read and write must be (G,), one entry per target")
    return [groups[k] if k in groups else q for k in ("group", "read", "write", "fresh",
                                                       "attempt")]  # fmt: skip


def _link_targets(link, position, rotmat) -> tuple[tuple[int, ...], list, list]:
    """``(links, positions, rotmats)`` of :func:`lm_loop`'s (and
    :func:`torchik.kinematics.native.lm_loop`'s) target arguments: one link's, or several."""
    if isinstance(link, int):
        if not isinstance(position, Tensor) or not (rotmat is None or isinstance(rotmat, Tensor)):
            raise TypeError("lm_loop: one link takes one target_position and target_rotmat")
        return (link,), [position], [rotmat]
    links = tuple(int(i) for i in link)
    positions = [position] if isinstance(position, Tensor) else list(position)
    rotmats = [rotmat] if rotmat is None or isinstance(rotmat, Tensor) else list(rotmat)
    if not links or len(positions) != len(links) or len(rotmats) != len(links):
        raise ValueError(f"lm_loop: {len(links)} links need as many target positions and "
                         f"rotations, got {len(positions)} and {len(rotmats)}")  # fmt: skip
    return links, positions, rotmats


def _check_link_targets(
    q: Tensor,
    tree: Any,
    positions: list[Tensor],
    rotmats: list[Tensor | None],
    weights: Tensor,
    named: dict[str, Any],
    state: dict[str, Tensor],
) -> bool:
    """Every link's target arguments as :func:`check_loop` checks one's, and the weights
    ``(m,)`` against all of them (``tree``: anything with the ``dof`` of ``q``'s rows).
    Returns whether ``state`` counts stalls."""
    if len(positions) == 1:
        named = {**named, "weights": weights}
    for position, rotmat in zip(positions, rotmats, strict=True):
        track = check_loop(q, tree, position, rotmat, named, state)
    m = sum(3 if r is None else 6 for r in rotmats)
    if tuple(weights.shape) != (m,) or weights.dtype != q.dtype or weights.device != q.device:
        raise ValueError(f"lm_loop: weights must be a ({m},) {q.dtype} tensor on {q.device}, "
                         f"got {tuple(weights.shape)} {weights.dtype}")  # fmt: skip
    return track

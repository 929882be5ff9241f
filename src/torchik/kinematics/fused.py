"""Fused FK, FK backward and Jacobian kernels in Triton: one kernel per robot structure.

The chain walk of :mod:`torchik.kinematics` launches a few small operations per joint; on a GPU
they wait on memory and launches. Here the walk of a robot (its parents, joint kinds and the
links asked for) is written out as straight-line Triton code, generated once per structure: each
program instance takes a block of configurations and keeps every frame in registers, 12 numbers
per frame, reading ``q`` once and writing the poses once. The constant transforms and the mimic
multipliers are a small table in the kernel's arguments (so calibrated or learnable origins need
no new kernel), in the dtype of ``q`` (float32 or float64).

- :func:`forward_kinematics`: poses ``(B, L, 4, 4)``, differentiable in ``q`` through a fused
  backward kernel (``dL/dθ = a . (Σ_l Σ_k c_k(T_l) x c_k(G_l) - o x Σ_l g_l)``, see
  :mod:`torchik.kinematics`).
- :func:`jacobian`: the geometric Jacobian ``(B, 6, D)`` of one link and its pose.

Use. A robot takes this path when its :attr:`~torchik.robot.Robot.backend` says so: by default
(``"auto"``) for CUDA tensors when Triton is installed, where :func:`supports` allows it. Without
a GPU the kernels run in Triton's interpreter (``TRITON_INTERPRET=1`` set before Triton is
imported, ``backend="fused"``), which is how the tests check them against
:mod:`torchik.kinematics.reference` on the CPU.
"""

from __future__ import annotations

import itertools
import linecache
import os
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from torchik.kinematics import reference as kinematics
from torchik.kinematics.reference import REVOLUTE, KinematicTree

__all__ = ["available", "forward_kinematics", "jacobian", "runs_on", "supports"]

BLOCK = 128
"""Configurations per program instance."""

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
    return tree is None or not (tree.w_joint.requires_grad or tree.w_link.requires_grad)


# ---------------------------------------------------------------------------- the constants
def _table(tree: KinematicTree, links: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    """The constants: 12 per joint (``C`` rows 0-2), 12 per link, then multipliers, offsets."""
    c_joint = tree.w_joint.transpose(-1, -2)[:, :3, :].reshape(-1)
    c_link = tree.w_link[list(links)].transpose(-1, -2)[:, :3, :].reshape(-1)
    parts = (c_joint, c_link, tree.multiplier, tree.offset)
    return torch.cat([p.detach().to(dtype).reshape(-1) for p in parts])


def _pattern(table: Tensor) -> tuple[float | None, ...]:
    """Per table entry: ``0.0``, ``1.0`` or ``-1.0`` where it is exactly that, else ``None``.

    A kernel is generated per pattern: a term with a zero constant is left out and a unit one
    needs no product, which removes about half the arithmetic and the loads of the bundled arms
    (axis alignments are signed permutations, many URDF offsets are zero, and mimic-free robots
    have unit multipliers and zero offsets). Calibrated constants with another pattern get their
    own kernel. One difference from the reference path: a NaN or infinite frame entry times a
    zero constant is left out instead of making a NaN.
    """
    return tuple(v if v in (0.0, 1.0, -1.0) else None for v in table.tolist())


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
    :func:`_pattern`).

    Outputs are stored by tiles: a row's ``n`` consecutive values (a pose, a Jacobian row, a
    gradient) are joined in registers by ``tl.join`` into one ``[BLOCK, 2, ..., 2]`` tensor and
    stored at once, which Triton stages through shared memory so that consecutive threads write
    consecutive addresses: whole 32-byte sectors, where ``n`` strided scalar stores write 4 or 8
    bytes of a different sector per thread. Inputs are loaded by strided scalar loads, whose
    neighbours then hit the cache (tile loads were tried: they cost registers and, mixed with
    tile stores, make Triton convert layouts at every join).
    """

    def __init__(self, tree: KinematicTree, links: tuple[int, ...], pattern: tuple):
        self.tree, self.links, self.pattern = tree, links, pattern
        self.lines: list[str] = []
        self.loaded: set[int] = set()
        self.axes: set[int] = set()
        self._fresh = itertools.count()
        j_count = len(tree.parent)
        self.link_at, self.mult_at = 12 * j_count, 12 * (j_count + len(links))
        self.off_at = self.mult_at + j_count

    def add(self, line: str) -> None:
        self.lines.append("    " + line)

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

    def walk(self, on_link) -> tuple[int, ...]:
        """Every needed joint's frame; ``on_link(i, j)`` as soon as requested link ``i``'s
        joint ``j`` (``-1``: the root) is written, so that its frame's registers are freed
        early. Returns the needed joints."""
        tree = self.tree
        needed = kinematics._ancestors(tree, self.links)
        q = self.load_q(sorted({int(tree.source[j]) for j in needed}))
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

    def load_q(self, columns: list[int]) -> dict[int, str]:
        """The ``columns`` of ``q`` in use, one strided load each (the row's other loads then
        hit the cache; a tile load, as for the stores, costs more registers here)."""
        dof = self.tree.dof
        for col in columns:
            self.add(f"q{col} = tl.load(q_ptr + row * {dof} + {col}, mask=ok, other=0.0)")
        return {col: f"q{col}" for col in columns}

    # -------------------------------------------------------------- tiles
    def tile_axes(self, k: int) -> tuple[str, str, str]:
        """``rows``, ``cols`` and ``oks`` of a ``[BLOCK, 2, ..., 2]`` (``k`` twos) tile."""
        if k not in self.axes:
            self.axes.add(k)
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
        name = self.fresh("p")
        self.add(f"{name} = tl.join({self.pack(values[0::2])}, {self.pack(values[1::2])})")
        return name

    def store_tile(self, ptr: str, stride: int, at: int, values: list[str]) -> None:
        """Store ``values`` at ``ptr + row * stride + at + (0, 1, ...)``."""
        n, k = len(values), _width(len(values))
        if k == 0:
            self.add(f"tl.store({ptr} + row * {stride} + {at}, {values[0]}, mask=ok)")
            return
        rows, cols, oks = self.tile_axes(k)
        tile = self.pack(values + ["zero"] * ((1 << k) - n))
        mask = oks if n == 1 << k else f"{oks} & ({cols} < {n})"
        self.add(f"tl.store({ptr} + {rows} * {stride} + {at} + {cols}, {tile}, mask={mask})")

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
    tree, n = code.tree, len(code.links)
    own: set[int] = set()  # joints whose own links' sums are started

    def on_link(i: int, j: int) -> None:
        if j < 0:  # a link that no joint moves adds nothing
            return
        frame, base = code.link_frame(i), f"g_ptr + row * {16 * n} + {16 * i}"
        for e in range(12):  # strided loads: the row's 64 bytes are one or two cache sectors
            code.add(f"g{i}_{e // 4}{e % 4} = tl.load({base} + {e}, mask=ok, other=0.0)")
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
    return _compile(code.source("fk_backward", "q_ptr, c_ptr, g_ptr, out_ptr"), "fk_backward")


def _joint_gradient(revolute: bool, j: int) -> str:
    """``a . (Σm - o x Σg)`` (revolute) or ``a . Σg`` (prismatic) of joint ``j``."""
    a = [f"f{j}_{x}2" for x in range(3)]
    if not revolute:
        return " + ".join(f"{a[x]} * sg{j}_{x}" for x in range(3))
    o, m, g = [f"f{j}_{x}3" for x in range(3)], f"sm{j}_", f"sg{j}_"
    v = [f"({m}{x} - ({o[(x + 1) % 3]} * {g}{(x + 2) % 3} - {o[(x + 2) % 3]} * {g}{(x + 1) % 3}))"
         for x in range(3)]  # fmt: skip
    return " + ".join(f"{a[x]} * {v[x]}" for x in range(3))


def _jacobian_columns(code: _Code, needed: tuple[int, ...]) -> list[list[str]]:
    """The 6 rows of each column of ``q``'s Jacobian of link 0 (``l0_`` written): ``a x (p -
    o)`` and ``a`` (revolute), ``a`` and 0 (prismatic), times the mimic multipliers, summed per
    entry of ``q``."""
    tree = code.tree
    cols: dict[int, list[list[str | None]]] = {}
    for j in needed:
        a = [f"f{j}_{x}2" for x in range(3)]
        if tree.kind[j] == REVOLUTE:
            d = [f"(l0_{x}3 - f{j}_{x}3)" for x in range(3)]
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
    for r, values in enumerate(_jacobian_columns(code, needed)):
        code.store_tile("jac_ptr", 6 * dof, r * dof, values)
    return _compile(code.source("jac", "q_ptr, c_ptr, jac_ptr, pose_ptr"), "jac")


_WRITERS = {"fk": _forward_kernel, "backward": _backward_kernel, "jac": _jacobian_kernel}
"""How each kind of kernel is written."""


def _structure(tree: KinematicTree) -> tuple:
    """What a kernel is generated from (read from the device once per tree)."""

    def build() -> tuple:
        source = tuple(tree.source.tolist())
        return (tree.parent, tree.kind, tree.link_joint, tree.dof, source, tree.identity_map)

    return tree.cached(("fused", "structure"), build)


def _kernel(kind: str, tree: KinematicTree, links: tuple[int, ...], pattern: tuple) -> Any:
    """The kernel of ``kind`` for this structure, links and pattern of constants (generated
    and compiled once per process)."""
    key = (kind, _structure(tree), links, pattern)
    if key not in _KERNELS:
        _KERNELS[key] = _WRITERS[kind](_Code(tree, links, pattern))
    return _KERNELS[key]


# ---------------------------------------------------------------------------- the functions
def _prepared(kind: str, tree: KinematicTree, links: tuple[int, ...], q: Tensor) -> tuple:
    """The kernel and its constant table on ``q``'s device, in its dtype: built on the first
    call for this tree, links, dtype and device, and kept with the tree (whose constants never
    change in place), so later calls copy nothing from the host."""

    def build() -> tuple[Any, Tensor]:
        table = _table(tree, links, q.dtype)
        return _kernel(kind, tree, links, _pattern(table)), table.to(q.device)

    return tree.cached(("fused", kind, links, q.dtype, q.device), build)


def _launch(kind: str, tree: KinematicTree, links: tuple[int, ...], q: Tensor, *outs: Tensor):
    batch = q.shape[0]
    if batch == 0:
        return
    kernel, table = _prepared(kind, tree, links, q)
    _run(kernel, (_cdiv(batch, BLOCK),), q, table, *outs, batch)


def _run(kernel: Any, grid: tuple[int, ...], *args: Any) -> None:
    """Launch ``kernel`` on ``grid``: the one place where kernels start (the capture tests
    record everything around it)."""
    kernel[grid](*args, BLOCK=BLOCK)


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
        out = torch.zeros_like(q)
        _launch("backward", ctx.tree, ctx.links, q, grad.contiguous(), out)
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

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


# ---------------------------------------------------------------------------- the structure
def _below(tree: KinematicTree, links: tuple[int, ...]) -> dict[int, list[int]]:
    """Joint -> the positions in ``links`` of the requested links it moves."""
    out: dict[int, list[int]] = {}
    for pos, link in enumerate(links):
        j = tree.link_joint[link]
        while j >= 0:
            out.setdefault(j, []).append(pos)
            j = tree.parent[j]
    return out


def _table(tree: KinematicTree, links: tuple[int, ...], dtype: torch.dtype) -> Tensor:
    """The constants: 12 per joint (``C`` rows 0-2), 12 per link, then multipliers, offsets."""
    c_joint = tree.w_joint.transpose(-1, -2)[:, :3, :].reshape(-1)
    c_link = tree.w_link[list(links)].transpose(-1, -2)[:, :3, :].reshape(-1)
    parts = (c_joint, c_link, tree.multiplier, tree.offset)
    return torch.cat([p.detach().to(dtype).reshape(-1) for p in parts])


class _Code:
    """Lines of a kernel being written, with the constant-table offsets of the tree."""

    def __init__(self, tree: KinematicTree, links: tuple[int, ...]):
        self.tree, self.links = tree, links
        self.lines: list[str] = []
        j_count = len(tree.parent)
        self.link_at, self.mult_at = 12 * j_count, 12 * (j_count + len(links))
        self.off_at = self.mult_at + j_count

    def add(self, line: str) -> None:
        self.lines.append("    " + line)

    def const(self, index: int) -> str:
        return f"tl.load(c_ptr + {index})"

    def frame(self, name: str, parent: str | None, at: int) -> None:
        """``name = parent @ C`` (``C`` the 3x4 constant at table offset ``at``)."""
        for r in range(3):
            for c in range(4):
                k = self.const(at + 4 * r + c)
                if parent is None:
                    self.add(f"{name}{r}{c} = zero + {k}")
                    continue
                terms = " + ".join(
                    f"{parent}{r}{m} * {self.const(at + 4 * m + c)}" for m in range(3)
                )
                tail = f" + {parent}{r}3" if c == 3 else ""
                self.add(f"{name}{r}{c} = {terms}{tail}")

    def joint(self, j: int) -> None:
        """Frame ``f{j}`` of joint ``j`` after its motion, from its parent's."""
        tree = self.tree
        parent = None if tree.parent[j] < 0 else f"f{tree.parent[j]}_"
        self.frame(f"f{j}_", parent, 12 * j)
        src = int(tree.source[j])
        value = f"tl.load(q_ptr + row * {tree.dof} + {src}, mask=ok, other=0.0)"
        self.add(f"t{j} = {value} * {self.const(self.mult_at + j)} + {self.const(self.off_at + j)}")
        if tree.kind[j] == REVOLUTE:
            self.add(f"c{j} = tl.cos(t{j})")
            self.add(f"s{j} = tl.sin(t{j})")
            for r in range(3):
                a, b = f"f{j}_{r}0", f"f{j}_{r}1"
                self.add(f"{a}, {b} = c{j} * {a} + s{j} * {b}, c{j} * {b} - s{j} * {a}")
        else:
            for r in range(3):
                self.add(f"f{j}_{r}3 = f{j}_{r}3 + t{j} * f{j}_{r}2")

    def walk(self) -> tuple[int, ...]:
        """Every needed joint's frame, and each requested link's pose ``l{i}_``."""
        needed = kinematics._ancestors(self.tree, self.links)
        for j in needed:
            self.joint(j)
        for i, link in enumerate(self.links):
            j = self.tree.link_joint[link]
            self.frame(f"l{i}_", None if j < 0 else f"f{j}_", self.link_at + 12 * i)
        return needed

    def store_pose(self, base: str, frame: str) -> None:
        """Store the 3x4 ``frame`` and the row ``[0, 0, 0, 1]`` as a 4x4 matrix at ``base``."""
        for r in range(3):
            for c in range(4):
                self.add(f"tl.store({base} + {4 * r + c}, {frame}{r}{c}, mask=ok)")
        for c, v in enumerate(("zero", "zero", "zero", "zero + 1.0")):
            self.add(f"tl.store({base} + {12 + c}, {v}, mask=ok)")

    def source(self, name: str, args: str) -> str:
        head = [
            f"def {name}({args}, B, BLOCK: tl.constexpr):",
            "    row = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
            "    ok = row < B",
            "    zero = tl.zeros([BLOCK], dtype=q_ptr.dtype.element_ty)",
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


def _forward_kernel(tree: KinematicTree, links: tuple[int, ...]) -> Any:
    code = _Code(tree, links)
    code.walk()
    n = len(links)
    for i in range(n):
        code.store_pose(f"out_ptr + row * {16 * n} + {16 * i}", f"l{i}_")
    return _compile(code.source("fk", "q_ptr, c_ptr, out_ptr"), "fk")


def _backward_kernel(tree: KinematicTree, links: tuple[int, ...]) -> Any:
    code = _Code(tree, links)
    needed = code.walk()
    n = len(links)
    for i in range(n):  # m_i = Σ_k c_k(T_i) x c_k(G_i), g_i = G_i's translation
        base = f"g_ptr + row * {16 * n} + {16 * i}"
        for r in range(3):
            for c in range(4):
                code.add(f"g{i}_{r}{c} = tl.load({base} + {4 * r + c}, mask=ok, other=0.0)")
        for x, (y, z) in enumerate(((1, 2), (2, 0), (0, 1))):
            terms = " + ".join(
                f"l{i}_{y}{k} * g{i}_{z}{k} - l{i}_{z}{k} * g{i}_{y}{k}" for k in range(4)
            )
            code.add(f"m{i}_{x} = {terms}")
    below = _below(tree, links)
    grads: dict[int, list[str]] = {}
    for j in needed:
        ids = below[j]
        m = [" + ".join(f"m{i}_{x}" for i in ids) for x in range(3)]
        g = [" + ".join(f"g{i}_{x}3" for i in ids) for x in range(3)]
        a = [f"f{j}_{x}2" for x in range(3)]
        if tree.kind[j] == REVOLUTE:  # a . (m - o x g)
            o = [f"f{j}_{x}3" for x in range(3)]
            code.add(f"gx{j} = {g[0]}")
            code.add(f"gy{j} = {g[1]}")
            code.add(f"gz{j} = {g[2]}")
            v = [
                f"({m[0]}) - ({o[1]} * gz{j} - {o[2]} * gy{j})",
                f"({m[1]}) - ({o[2]} * gx{j} - {o[0]} * gz{j})",
                f"({m[2]}) - ({o[0]} * gy{j} - {o[1]} * gx{j})",
            ]
        else:
            v = [f"({g[x]})" for x in range(3)]
        code.add(f"d{j} = " + " + ".join(f"{a[x]} * ({v[x]})" for x in range(3)))
        grads.setdefault(int(tree.source[j]), []).append(f"d{j} * {code.const(code.mult_at + j)}")
    for col in range(tree.dof):
        value = " + ".join(grads.get(col, ["zero"]))
        code.add(f"tl.store(out_ptr + row * {tree.dof} + {col}, {value}, mask=ok)")
    return _compile(code.source("fk_backward", "q_ptr, c_ptr, g_ptr, out_ptr"), "fk_backward")


def _jacobian_kernel(tree: KinematicTree, link: int) -> Any:
    code = _Code(tree, (link,))
    needed = code.walk()
    cols: dict[int, list[list[str]]] = {}
    for j in needed:
        a = [f"f{j}_{x}2" for x in range(3)]
        if tree.kind[j] == REVOLUTE:  # a x (p - o), a
            d = [f"(l0_{x}3 - f{j}_{x}3)" for x in range(3)]
            lin = [f"{a[(x + 1) % 3]} * {d[(x + 2) % 3]} - {a[(x + 2) % 3]} * {d[(x + 1) % 3]}"
                   for x in range(3)]  # fmt: skip
            rows = lin + a
        else:
            rows = a + ["zero", "zero", "zero"]
        mult = code.const(code.mult_at + j)
        cols.setdefault(int(tree.source[j]), []).append([f"({v}) * {mult}" for v in rows])
    dof = tree.dof
    for col in range(dof):
        terms = cols.get(col)
        for r in range(6):
            value = " + ".join(t[r] for t in terms) if terms else "zero"
            code.add(f"tl.store(jac_ptr + row * {6 * dof} + {r * dof + col}, {value}, mask=ok)")
    code.store_pose("pose_ptr + row * 16", "l0_")
    return _compile(code.source("jac", "q_ptr, c_ptr, jac_ptr, pose_ptr"), "jac")


def _structure(tree: KinematicTree) -> tuple:
    """What a kernel is generated from (read from the device once per tree)."""

    def build() -> tuple:
        source = tuple(tree.source.tolist())
        return (tree.parent, tree.kind, tree.link_joint, tree.dof, source, tree.identity_map)

    return tree.cached(("fused", "structure"), build)


def _kernel(kind: str, tree: KinematicTree, links: tuple[int, ...]) -> Any:
    key = (kind, _structure(tree), links)
    if key not in _KERNELS:
        if kind == "fk":
            _KERNELS[key] = _forward_kernel(tree, links)
        elif kind == "backward":
            _KERNELS[key] = _backward_kernel(tree, links)
        else:
            _KERNELS[key] = _jacobian_kernel(tree, links[0])
    return _KERNELS[key]


# ---------------------------------------------------------------------------- the functions
def _prepared(kind: str, tree: KinematicTree, links: tuple[int, ...], q: Tensor) -> tuple:
    """The kernel and its constant table on ``q``'s device, in its dtype: built on the first
    call for this tree, links, dtype and device, and kept with the tree (whose constants never
    change in place), so later calls copy nothing from the host."""

    def build() -> tuple[Any, Tensor]:
        return _kernel(kind, tree, links), _table(tree, links, q.dtype).to(q.device)

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

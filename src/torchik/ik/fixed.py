"""The IK loop at a fixed shape, for accelerators: no shrinking index sets, no host reads.

The host loop (:meth:`IKSolver.solve <torchik.ik.base.IKSolver.solve>` on the CPU) drops the
rows that finished and re-seeds the stalled ones, which needs the host at every check: on a
GPU each check stalls the device, and the many tiny kernels of an iteration wait on their
launches (a 1000-pose solve was 3 450 launches for 5.9 ms of GPU work). Here every row steps in
every iteration and finished rows are frozen by masks (their ``q`` never changes again, so the
answers are the host loop's up to the rounding of batched products over another batch). The
iterations run in chunks of ``sync_every``; between chunks stalled rows get fresh seeds (drawn
for every row and kept where stalled: no boolean indexing) and the host reads two flags at once:
whether every row has finished, and whether any stalled (seeds are drawn only then).

On CUDA a chunk of iterations is captured once in a CUDA graph, per (solver settings, problem
structure, rows, dtype, device, robot), and replayed: one launch per chunk. A later solve of
the same shape copies its targets and seeds into the graph's buffers and replays it. Elsewhere,
and for solvers whose state is not a fixed set of tensors, the same chunk runs eagerly (the
fallback the CPU tests run).
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from torchik.ik.seeding import Seeder

# The solver and the problem are torchik.ik.base's IKSolver and IKProblem, which call this
# module: they are typed Any here so that the two modules do not import each other.
IKSolver = Any
IKProblem = Any

__all__ = [
    "Carry",
    "MAX_GRAPHS",
    "advance",
    "chunks",
    "clone_buffers",
    "copy_buffers",
    "finish_groups",
    "on_device",
    "on_side_stream",
    "restart",
    "run_fixed",
]

MAX_GRAPHS = 16
"""Captured runners kept (least recently used first out): a graph holds its buffers' memory.
A ``solve_ik`` call under ``early_stop`` uses a few: its first round and its retry rounds at
bucket sizes (:mod:`torchik.ik.rounds`)."""


@dataclass
class Carry:
    """Every tensor the iterations read and write, at fixed shapes (``N`` rows).

    Attributes:
        q: ``(N, dof)`` current configurations.
        best_q: ``(N, dof)`` the best ``q`` met per row (the converged one once converged).
        best_cost: ``(N,)`` its weighted cost.
        iterations: ``(N,)`` long, the iteration each row finished at (``max_iters`` if never).
        finished_groups: ``(N,)`` bool, the targets (groups) with a converged slot (indices
            ``< T`` used).
        finished: ``(N,)`` bool, the rows that stepped for the last time.
        it: ``()`` long, the next iteration's number.
        seed_cost, stall, age, attempt: the restart bookkeeping of
            :meth:`IKSolver._track_progress`; ``stalled`` ``(N,)`` bool its last verdict.
        state: the solver's per-row state (see :meth:`IKSolver.initial_state`).
    """

    q: Tensor
    best_q: Tensor
    best_cost: Tensor
    iterations: Tensor
    finished_groups: Tensor
    finished: Tensor
    it: Tensor
    seed_cost: Tensor
    stall: Tensor
    age: Tensor
    attempt: Tensor
    stalled: Tensor
    state: dict[str, Tensor] = field(default_factory=dict)

    @classmethod
    def start(cls, q: Tensor, state: dict[str, Tensor], max_iters: int) -> Carry:
        """The carry of fresh seeds ``q (N, dof)`` (already in the limits). The counters,
        flags and costs are rows of three tensors, made in 7 kernels instead of 15 (a GPU's
        launches: :mod:`torchik.ik.captured`)."""
        n, device = q.shape[0], q.device
        counts = torch.zeros(4, n, dtype=torch.long, device=device)  # iterations, stall, ...
        counts[0].fill_(max_iters)
        flags = torch.zeros(3, n, dtype=torch.bool, device=device)
        costs = q.new_full((2, n), torch.inf)
        return cls(
            q.clone(), q.clone(), costs[0], counts[0], flags[0], flags[1],
            torch.zeros((), dtype=torch.long, device=device), costs[1], counts[1], counts[2],
            counts[3], flags[2], dict(state),
        )  # fmt: skip

    def tensors(self) -> list[Tensor]:
        """Every tensor, in a fixed order (the state's by key)."""
        own = [getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "state"]
        return own + [self.state[k] for k in sorted(self.state)]


def iterate(solver: IKSolver, problem: IKProblem, c: Carry, max_iters: int, track: bool) -> None:
    """One iteration on every row of ``c``, in place (the tensors of ``c`` keep their storage,
    as a captured graph needs): linearize, note the best, freeze the finished rows, step the
    others; count stalls if ``track``. No host read."""
    both = solver.fused_iteration(problem, c.q)  # (next q, residual) in one kernel, or None
    lin = solver.linearize(problem, c.q) if both is None else both[1]
    done = problem.converged(lin)
    better = (lin.cost < c.best_cost) | done
    torch.where(better[:, None], c.q, c.best_q, out=c.best_q)  # in place: one kernel each
    torch.where(better, lin.cost, c.best_cost, out=c.best_cost)
    finished = done
    if solver.settings.early_stop:
        hits = torch.zeros_like(c.iterations).index_add_(0, problem.group, done.long())
        c.finished_groups.logical_or_(hits > 0)
        finished = c.finished_groups[problem.group]
    _record(c, finished, c.it, max_iters)
    c.finished.copy_(finished)
    stepped = _step(solver, problem, c, lin) if both is None else both[0]
    torch.where(finished[:, None], c.q, stepped, out=c.q)
    if track:
        c.stalled.copy_(_stalled(solver, lin.cost, c))
    c.it.add_(1)


def finish_groups(solver: IKSolver, problem: IKProblem, c: Carry, n: int, max_iters: int) -> None:
    """After ``n`` iterations in one kernel (:meth:`IKSolver.fused_loop`), which finished the
    rows that converged: under ``early_stop`` every slot of a target with a converged slot
    finishes too (its ``iterations`` the chunk's last), and is no longer stalled; ``it``
    advances by ``n``. No host read."""
    if solver.settings.early_stop:
        hits = torch.zeros_like(c.iterations).index_add_(0, problem.group, c.finished.long())
        c.finished_groups.logical_or_(hits > 0)
        torch.index_select(c.finished_groups, 0, problem.group, out=c.finished)
        _record(c, c.finished, c.it + (n - 1), max_iters)
        c.stalled.masked_fill_(c.finished, False)
    c.it.add_(n)


def _record(c: Carry, finished: Tensor, at: Tensor, max_iters: int) -> None:
    """``c.iterations`` of the ``finished`` rows that had none (``max_iters``) set to ``at``
    (``()`` long) where ``at < max_iters``: the minimum of the two, each row's first finish
    (in two kernels, where the tests and the choice took five)."""
    torch.minimum(c.iterations, torch.where(finished, at, max_iters), out=c.iterations)


def _step(solver: IKSolver, problem: IKProblem, c: Carry, lin: Any) -> Tensor:
    """The solver's step from ``c.q``, projected; the solver state written back into ``c``."""
    state = dict(c.state)
    stepped = problem.project(solver.step(problem, c.q, lin, state))
    for key, value in state.items():  # the step may assign new tensors: copy them back
        if key in c.state:
            c.state[key].copy_(value)
        else:  # a key the first step adds (adaptive LM): eager runs only, see capturable
            c.state[key] = value.clone()
    return stepped


def _stalled(solver: IKSolver, cost: Tensor, c: Carry) -> Tensor:
    """:meth:`IKSolver._track_progress` on the carry's counters (in place)."""
    s = solver.settings
    progress = cost < (1.0 - s.min_improvement) * c.seed_cost
    torch.where(progress, cost, c.seed_cost, out=c.seed_cost)
    c.stall.add_(1).masked_fill_(progress, 0)
    stalled = c.stall >= s.patience
    if s.attempt_iters:
        c.age.add_(1)
        stalled = stalled | (c.age >= s.attempt_iters)
    return stalled & ~c.finished


def advance(solver: IKSolver, problem: IKProblem, c: Carry, n: int, max_iters: int,
            track: bool) -> None:  # fmt: skip
    """``n`` iterations on every row of ``c``, in place: the solver's loop kernel
    (:meth:`IKSolver.fused_loop`) and :func:`finish_groups` where it has one, else ``n`` calls
    of :func:`iterate`. No host read."""
    if solver.fused_loop(problem, c, n, max_iters, track):
        finish_groups(solver, problem, c, n, max_iters)
        return
    for _ in range(n):
        iterate(solver, problem, c, max_iters, track)


def restart(
    solver: IKSolver, c: Carry, reseed: Seeder, ids: Tensor, masked: bool | None = None
) -> None:
    """Fresh seeds for the stalled rows; their counters and solver state start over.
    ``masked`` (default: off the CPU): without a host read, seeds are drawn for every row and
    kept where a row stalled. Else (the CPU, where reading is free and a draw, a pool of
    configurations and its FK, is not) only the stalled rows' seeds are drawn."""
    stalled = c.stalled
    c.attempt.add_(stalled)  # in place, each operation one kernel: no copies back
    masked = c.q.device.type != "cpu" if masked is None else masked
    if not masked:
        rows = torch.nonzero(stalled).flatten()
        c.q[rows] = reseed(ids[rows], c.attempt[rows]).to(c.q)
    else:
        fresh = reseed(ids, c.attempt).to(c.q)
        torch.where(stalled[:, None], fresh, c.q, out=c.q)
    c.seed_cost.masked_fill_(stalled, torch.inf)
    c.stall.masked_fill_(stalled, 0)
    c.age.masked_fill_(stalled, 0)
    for key, value in solver.initial_state(c.q).items():
        mask = stalled.view(-1, *([1] * (value.dim() - 1)))
        c.state[key].copy_(torch.where(mask, value, c.state[key]))
    c.stalled.zero_()


def run_fixed(
    solver: IKSolver,
    problem: IKProblem,
    q: Tensor,
    reseed: Seeder | None,
    max_iters: int,
    chunk: int,
) -> tuple[Tensor, Tensor]:
    """The fixed-shape loop: ``max_iters`` steps and ``max_iters + 1`` evaluations, in chunks
    of ``chunk`` iterations, stopping after the chunk in which every row finished.

    Args:
        solver: the solver (its :meth:`~torchik.ik.base.IKSolver.linearize` and ``step``).
        problem: ``N`` rows.
        q: ``(N, dof)`` seeds.
        reseed: fresh seeds for stalled rows (every row drawn), or ``None``.
        max_iters: the iterations.
        chunk: iterations between host checks (and restarts).

    Returns:
        The best ``q (N, dof)`` per row and the ``(N,)`` iterations each ran, as
        :meth:`~torchik.ik.base.IKSolver.solve`.
    """
    q = problem.project(q)
    ids = torch.arange(q.shape[0], device=q.device)
    track = reseed is not None
    carry = Carry.start(q, solver.initial_state(q), max_iters)
    with on_device(q.device):  # graphs are captured and replayed on the rows' device
        runner = _Runner.for_(solver, problem, carry, max_iters, track)
        c = runner.carry
        sizes = chunks(max_iters, chunk)
        for i, n in enumerate(sizes):
            runner.run(n)
            done, stalled = torch.stack((c.finished.all(), c.stalled.any())).tolist()  # a read
            if done:
                break
            if track and stalled and i + 1 < len(sizes):  # fresh seeds cost an FK
                restart(solver, c, reseed, ids)  # type: ignore[arg-type]
    return c.best_q.clone(), c.iterations.clone()


def chunks(max_iters: int, chunk: int) -> list[int]:
    """The lengths of the chunks of ``chunk`` iterations that make the fixed loop's
    ``max_iters + 1`` evaluations (the last one shorter where ``chunk`` does not divide)."""
    full, rest = divmod(max_iters + 1, chunk)
    return [chunk] * full + ([rest] if rest else [])


def on_device(device: torch.device) -> Any:
    """A context that makes a CUDA ``device`` the current one (side streams, captures and
    replays happen on the current device: a robot on ``cuda:1`` while ``cuda:0`` is current
    would launch its kernels outside the capture); nothing elsewhere."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


# ---------------------------------------------------------------------------- capture
class _Runner:
    """Runs chunks of :func:`iterate` on its own buffers: a captured CUDA graph where it can,
    eagerly otherwise. Captured runners are cached and reused by later solves of the same
    shape (:data:`MAX_GRAPHS`)."""

    _cache: OrderedDict[tuple, _Runner] = OrderedDict()

    def __init__(self, solver, problem, carry: Carry, max_iters: int, track: bool):
        self.solver, self.problem, self.carry = solver, problem, carry
        self.max_iters, self.track = max_iters, track
        self.graphs: dict[int, Any] = {}  # chunk length -> torch.cuda.CUDAGraph

    @classmethod
    def for_(cls, solver, problem, carry: Carry, max_iters: int, track: bool) -> _Runner:
        """A runner of this solve's ``problem`` from ``carry``: eager on them, or a cached
        capturing runner (CUDA, capturable solvers) whose buffers are loaded with them."""
        if not capturable(solver, carry.q):
            return cls(solver, problem, carry, max_iters, track)
        key = _key(solver, problem, carry.q, max_iters, track)
        runner = cls._cache.get(key)
        if runner is None or runner.tree() is not problem.robot.tree:
            runner = cls(solver, clone_buffers(problem), clone_buffers(carry), max_iters, track)
            runner.tree = weakref.ref(problem.robot.tree)  # type: ignore[method-assign]
            cls._cache[key] = runner
            while len(cls._cache) > MAX_GRAPHS:
                cls._cache.popitem(last=False)
        cls._cache.move_to_end(key)
        runner.load(problem, carry)
        return runner

    def tree(self) -> Any:  # a weak reference to the robot's tree for cached runners
        return None

    def load(self, problem, carry: Carry) -> None:
        """Copy ``problem`` and ``carry`` into the buffers a captured graph reads."""
        copy_buffers(self.problem, problem)
        for dst, src in zip(self.carry.tensors(), carry.tensors(), strict=True):
            dst.copy_(src)

    def run(self, n: int) -> None:
        """``n`` iterations: a replay of the chunk's graph (captured on first use, after one
        eager chunk that warms the libraries up), else eagerly (also where a capture failed)."""
        if not capturable(self.solver, self.carry.q) or self.graphs.get(n, 0) is None:
            self._eager(n)
        elif n in self.graphs:
            self.graphs[n].replay()
        else:
            self._capture(n)

    def _eager(self, n: int) -> None:
        advance(self.solver, self.problem, self.carry, n, self.max_iters, self.track)

    def _capture(self, n: int) -> None:
        """Run this chunk eagerly on a side stream (the warm-up CUDA graphs need), then
        capture the same chunk for the next times."""
        on_side_stream(lambda: self._eager(n))
        saved = [t.clone() for t in self.carry.tensors()]  # capture runs nothing, but be safe
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self._eager(n)
        except RuntimeError as err:  # an operation that cannot be captured: run eagerly
            torch.cuda.synchronize()
            warnings.warn(f"the IK loop runs eagerly: CUDA graph capture failed ({err})",
                          RuntimeWarning, stacklevel=4)  # fmt: skip
            self.graphs[n] = None
        else:
            self.graphs[n] = graph
        for dst, src in zip(self.carry.tensors(), saved, strict=True):
            dst.copy_(src)


def on_side_stream(run: Callable[[], Any]) -> Any:
    """``run()`` on a fresh CUDA side stream, the current one waiting for it: the eager
    warm-up a capture wants before it (the libraries' lazy set-up done off the capture)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = run()
    torch.cuda.current_stream().wait_stream(side)
    return out


def bucket(n: int) -> int:
    """The size a captured shape of ``n`` rows or targets is made for: the next power of two
    (1 000 -> 1 024), so that a few captures serve every count (the retry rounds'
    targets, :mod:`torchik.ik.captured`'s programs)."""
    return 1 << max(n - 1, 0).bit_length()


def capturable(solver: IKSolver, q: Tensor) -> bool:
    """Whether chunks of ``solver`` on ``q``'s device are captured in CUDA graphs: CUDA, and a
    solver whose state keys do not change while it runs (``solver.capturable``)."""
    return q.is_cuda and bool(getattr(solver, "capturable", False))


def _key(solver, problem, q: Tensor, max_iters: int, track: bool) -> tuple:
    """What a captured chunk depends on beyond the data in its buffers: the robot's backend
    and the solver's :meth:`~torchik.ik.base.IKSolver.kernel_switches` too (a chunk captured
    without whole-body IK's ``FUSED_LOOP`` replayed after it was turned on); inference mode too
    (buffers made in it take no in-place copy outside it: a runner made in it failed there)."""
    targets = tuple((t.link, t.rotmat is None, t.weight) for t in problem.targets)
    extra = tuple(
        (f.name, getattr(problem, f.name))
        for f in dataclasses.fields(problem)
        if isinstance(getattr(problem, f.name), float | int | bool | str)
    )
    return (
        type(solver), solver.settings, type(problem), id(problem.robot.tree), targets, extra,
        problem.limits.per_row, tuple(q.shape), q.dtype, q.device, max_iters, track,
        torch.is_inference_mode_enabled(), problem.robot.backend,
        solver.kernel_switches(problem, q),
    )  # fmt: skip


def clone_buffers(obj: Any) -> Any:
    """A deep copy of the tensors of a problem (dataclasses and tuples of them), the robot
    shared: the buffers of a captured graph."""
    if isinstance(obj, Tensor):
        return obj.clone()
    if isinstance(obj, tuple):
        return tuple(clone_buffers(x) for x in obj)
    if isinstance(obj, dict):
        return {k: clone_buffers(v) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: clone_buffers(getattr(obj, f.name)) for f in _data_fields(obj)}
        return dataclasses.replace(obj, **changes)
    return obj


def copy_buffers(dst: Any, src: Any) -> None:
    """Copy the tensors of ``src`` into those of ``dst`` (same structure and shapes)."""
    if isinstance(dst, Tensor):
        dst.copy_(src)
    elif isinstance(dst, tuple):
        for a, b in zip(dst, src, strict=True):
            copy_buffers(a, b)
    elif isinstance(dst, dict):
        for key in dst:
            copy_buffers(dst[key], src[key])
    elif dataclasses.is_dataclass(dst) and not isinstance(dst, type):
        for f in _data_fields(dst):
            copy_buffers(getattr(dst, f.name), getattr(src, f.name))


def _data_fields(obj: Any) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(obj) if f.init and f.name != "robot"]

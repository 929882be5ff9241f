"""A ``solve_ik`` call as one program of fixed shapes, captured whole in one CUDA graph.

On a GPU the rounds of :mod:`torchik.ik.rounds` are bound by the host: on an H200 a
1 000-pose solve ran 0.76 ms of kernels in 12-14 ms, the rest being the rounds' set-up, their
seeding and evaluation, and the host reads between them. Here the whole call is one program
with no host read, so that it can be captured once per shape and replayed:

- every target runs ``S = K + retry_seeds`` slots from the start (fewer retry slots where the
  rows would pass :data:`MAX_ROWS`): on a GPU ten rows per target cost about what two do (one
  thread per row, far fewer rows than the device holds at once: on an H200, 1 000 Panda poses
  with 2 + 8 or 2 + 2 slots in 2.2 or 2.0 ms), and a target's slots stop as soon as one of
  them converges;
- seeds come from a pool per slot (:func:`torchik.ik.seeding.nearest_per_slot`), the first
  ones and every restart's drawn at once;
- the iterations run in chunks (:func:`torchik.ik.fixed.advance`); between chunks every row
  is offered its next seed and the stalled ones take it (:func:`torchik.ik.fixed.restart`,
  masked);
- at the end, FK evaluates every row and each target keeps its best ``K`` slots, best first
  (:meth:`IKResult.top`).

Every chunk runs, whether or not the rows finished: a finished row costs the loop kernel
almost nothing, and deciding to stop would need a host read. The answers differ from the
rounds' in how they are drawn (the retry slots run beside the first ones from the start,
instead of replacing them in later rounds), not in what counts as solved: the same
evaluation, the same tolerances.

Given seeds without restarts take the same program without the seeding and the choice of
slots: refined each on its own (:func:`~torchik.ik.refine_samples`, e.g. a learned model's
samples), or a warm start (a previous solution per target, path following) under
``early_stop``. Its answers are those of :meth:`Run.given` on the fixed loop, bit for bit.

On CUDA the first call of a shape runs eagerly (it warms the libraries up, and is the answer),
the second captures the graph, and every later one copies its targets into the graph's buffers
and replays it. Elsewhere (the CPU, ``capture=False``) the program runs eagerly.
"""

from __future__ import annotations

import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from torchik.ik.base import CUDA_SYNC_EVERY, JointLimits
from torchik.ik.fixed import (
    Carry,
    advance,
    bucket,
    capturable,
    chunks,
    clone_buffers,
    copy_buffers,
    finish_groups,
    on_device,
    on_side_stream,
    restart,
)
from torchik.ik.result import IKResult
from torchik.ik.rounds import Run, evaluate, take_targets
from torchik.ik.seeding import Seeder, nearest_per_slot, pooled
from torchik.robot.robot import Robot

__all__ = [
    "BUCKETS",
    "MAX_PROGRAMS",
    "MAX_ROWS",
    "MIN_RETRY_SLOTS",
    "OneGraph",
    "chunk_sizes",
    "program",
    "replayed",
    "retry_slots",
    "run_chunks",
    "serves",
    "solve",
]

MAX_ROWS = 1 << 16
"""The most rows (targets times slots) the program takes: its seeding forms a
``(rows x pool)`` distance matrix per draw. Where ``K + retry_seeds`` slots per target would
pass it, the targets get fewer retry slots (:func:`retry_slots`); larger calls run the rounds,
which on an H200 were no longer bound by the host at 100 000 poses (28-33 ms)."""

MIN_RETRY_SLOTS = 2
"""The fewest retry slots per target the program runs where ``retry_seeds`` of them would pass
:data:`MAX_ROWS` (:func:`retry_slots`). On an H200 (2026-11-28), 10 000 Panda poses with
2 + 2 slots in one graph: 2.30 ms, all solved; with 2 + 8 slots the call ran the rounds in
28.5 ms."""

MAX_PROGRAMS = 8
"""Captured programs kept (least recently used first out): a graph holds its memory."""


def serves(run: Run, seeds: Tensor | None = None) -> bool:
    """Whether :func:`solve` takes this call: ``one_graph`` on, a solver whose chunks are
    captured on this device (:func:`torchik.ik.fixed.capturable`: CUDA) and that takes the
    fixed loop, no box per target, and either random seeds with restarts and ``early_stop``
    in rounds (at most :data:`MAX_ROWS` rows, the default generator or a CUDA one the graph
    can advance), or given ``seeds`` without restarts: each refined on its own
    (:func:`~torchik.ik.refine_samples`, no ``early_stop``), or a warm start under
    ``early_stop`` (at most ``initial_seeds`` per target: the rounds' one round of
    ``max_iters``)."""
    solver, s, position = run.solver, run.solver.settings, run.position
    if not (s.one_graph and run.bounds is None):
        return False
    if not (capturable(solver, position) and solver._fixed(position)):
        return False
    if seeds is not None:  # each slot on its own, or a warm start (one round, all slots)
        return not run.restarts and (not run.staged or run.k <= s.initial_seeds)
    if not (run.restarts and run.staged):
        return False
    if retry_slots(position.shape[0], run.k, s.retry_seeds) is None:
        return False
    g = run.generator  # a CUDA generator, where a graph can advance one
    registers = hasattr(torch.cuda.CUDAGraph, "register_generator_state")
    return g is None or (g.device.type == "cuda" and g.device == position.device and registers)


def retry_slots(n_targets: int, k: int, retry_seeds: int) -> int | None:
    """The retry slots per target of a program with random seeds: ``retry_seeds``, fewer where
    ``n_targets * (k + retry_seeds)`` rows would pass :data:`MAX_ROWS` (down to
    :data:`MIN_RETRY_SLOTS`, or ``retry_seeds`` if that is fewer); ``None`` where even those do
    not fit (the rounds run such a call)."""
    fit = min(retry_seeds, MAX_ROWS // max(n_targets, 1) - k)
    return fit if fit >= min(MIN_RETRY_SLOTS, retry_seeds) else None


def program(
    run: Run, position: Tensor, rotmat: Tensor | None, seeds: Tensor | None = None
) -> IKResult:
    """The whole call on the targets ``position (T, 3)`` and ``rotmat (T, 3, 3)`` (or
    ``None``), with the settings of ``run``: no host read, every shape fixed by ``T``. Given
    ``seeds (T * K, dof)``, they are refined without restarts, for ``max_iters`` (with the
    solver's ``early_stop``: a warm start): the answers of :meth:`Run.given` on the fixed
    loop.

    Returns:
        An :class:`IKResult` with ``q (T, K, dof)``: each target's slots best first, or with
        ``seeds`` slot for slot.
    """
    solver, s, k = run.solver, run.solver.settings, run.k
    n_targets = position.shape[0]
    if seeds is not None:
        problem = run.make(position, rotmat, k)
        c = run_chunks(solver, problem, problem.project(seeds), None)
        return evaluate(problem, c.best_q, c.iterations, (n_targets, k))
    retry = retry_slots(n_targets, k, s.retry_seeds)
    if retry is None:
        raise ValueError(f"{n_targets} targets x {k} slots pass MAX_ROWS = {MAX_ROWS}")
    slots = k + retry
    problem = run.make(position, rotmat, slots)
    draws = len(chunk_sizes(s))
    drawn = _seeds(run, position, rotmat, slots, draws)  # the first ones, each restart's
    c = run_chunks(solver, problem, problem.project(drawn[0]), drawn)
    return evaluate(problem, c.best_q, c.iterations, (n_targets, slots)).top(k)


def run_chunks(solver: Any, problem: Any, q: Tensor, restarts: Tensor | None) -> Carry:
    """Every chunk of the fixed loop from ``q``, as :func:`torchik.ik.fixed.run_fixed` runs
    them but without its host reads: all of them, with ``restarts (chunks, N, dof)`` offered
    to the stalled rows between chunks (``None``: no restarts)."""
    s, ids = solver.settings, torch.arange(q.shape[0], device=q.device)
    c = Carry.start(q, solver.initial_state(q), s.max_iters)
    if solver.takes_groups(problem, q):
        return _in_kernel(solver, problem, c, restarts)
    sizes = chunk_sizes(s)
    for i, n in enumerate(sizes):
        advance(solver, problem, c, n, s.max_iters, track=restarts is not None)
        if restarts is not None and i + 1 < len(sizes):  # the next chunk's seeds
            restart(solver, c, _offer(restarts[i + 1]), ids, masked=True)
    return c


def chunk_sizes(s: Any) -> list[int]:
    """The program's chunk lengths (:func:`torchik.ik.fixed.chunks` of ``sync_every``, or
    :data:`~torchik.ik.base.CUDA_SYNC_EVERY`); a restart's seeds are drawn for each."""
    return chunks(s.max_iters, s.sync_every or CUDA_SYNC_EVERY)


def _in_kernel(solver: Any, problem: Any, c: Carry, restarts: Tensor | None) -> Carry:
    """:func:`run_chunks` with the early stop over each target's slots and the restarts in
    the loop kernel (:meth:`IKSolver.takes_groups`; ``groups`` of
    :func:`torchik.kinematics.fused.lm_loop`): per chunk one launch and the addition to
    ``c.it``; the last chunk's early stop settled by :func:`finish_groups`. The targets marked
    finished alternate between two buffers: a launch reads the previous one's marks and writes
    its own into the other."""
    s, track = solver.settings, restarts is not None
    marks = [c.iterations.new_zeros(c.finished_groups.shape, dtype=torch.int32) for _ in "ab"]
    sizes = chunk_sizes(s)
    for i, n in enumerate(sizes):
        groups = dict(group=problem.group, read=marks[i % 2], write=marks[1 - i % 2])
        if restarts is not None:  # a row stalled by the last launch takes restarts[i]
            groups.update(fresh=restarts[i], attempt=c.attempt)
        taken = solver.fused_loop(problem, c, n, s.max_iters, track, groups=groups)
        assert taken, "takes_groups said the loop kernel takes groups"
        if i + 1 < len(sizes):
            c.it.add_(n)
        else:
            finish_groups(solver, problem, c, n, s.max_iters)
    return c


def _offer(seeds: Tensor) -> Seeder:
    """A seeder that offers ``seeds`` (every row's) whatever rows are asked for."""
    return lambda rows, attempt: seeds


def _seeds(run: Run, position: Tensor, rotmat: Tensor | None, slots: int, draws: int) -> Tensor:
    """``(draws, T * slots, dof)`` seeds of every row (see ``seed_pool``), drawn at once:
    uniform where the rounds' would be (no pool, or more than
    :data:`~torchik.ik.seeding.MAX_POOLS` slots asked for)."""
    robot, g, n = run.robot, run.generator, position.shape[0] * slots
    if not pooled(run.k, run.seed_pool):
        return robot.random_configuration(draws * n, g).view(draws, n, robot.dof)
    w = run.solver.settings.rotation_weight
    return nearest_per_slot(robot, run.link, position, rotmat, slots, run.seed_pool, w, g, draws)


def solve(run: Run, seeds: Tensor | None = None) -> IKResult:
    """``run``'s call by :func:`program` (given ``seeds`` or random ones): replayed from a
    captured graph where :func:`torchik.ik.fixed.capturable` (CUDA), eagerly elsewhere. Where
    a capture fails, this shape runs the rounds instead (:meth:`Run.random`,
    :meth:`Run.given`), with a warning. The graph is made for
    :func:`~torchik.ik.fixed.bucket` targets (:data:`BUCKETS`): the targets are padded with
    copies of the last one, their answers cut off."""
    if not capturable(run.solver, run.position):
        return program(run, run.position, run.rotmat, seeds)
    n = run.position.shape[0]
    size = bucket(n) if BUCKETS and _same_slots(run, n, bucket(n), seeds) else n
    with on_device(run.position.device):  # captured and replayed on the targets' device
        if size == n:
            return _solve_captured(run, seeds)
        return take_targets(_solve_captured(*_padded(run, seeds, size)), slice(0, n))


BUCKETS = True
"""Whether a captured program is made for :func:`torchik.ik.fixed.bucket` targets (the next
power of two), not for the call's own count: the first call of a shape runs eagerly and the
second captures it, so a workload whose target count changes at every call (the detections of
a frame, say) would never replay a graph. Padded targets cost the device little (one thread
per row, far fewer rows than it holds)."""


def _same_slots(run: Run, n: int, size: int, seeds: Tensor | None) -> bool:
    """Whether ``size`` padded targets run the slots ``n`` would: given seeds always, random
    ones where :func:`retry_slots` gives both counts the same."""
    if seeds is not None or size == n:
        return True
    retry = run.solver.settings.retry_seeds
    return retry_slots(size, run.k, retry) == retry_slots(n, run.k, retry)


def _padded(run: Run, seeds: Tensor | None, size: int) -> tuple[Run, Tensor | None]:
    """``run`` and its ``seeds (T * K, dof)`` padded to ``size`` targets with copies of the
    last target (and its seeds)."""
    extra = size - run.position.shape[0]

    def pad(x: Tensor, rows: int = 1) -> Tensor:
        return torch.cat([x, x[-rows:].repeat(extra, *(1,) * (x.dim() - 1))])

    rotmat = None if run.rotmat is None else pad(run.rotmat)
    padded = replace(run, position=pad(run.position), rotmat=rotmat)
    return padded, None if seeds is None else pad(seeds, run.k)


def _solve_captured(run: Run, seeds: Tensor | None) -> IKResult:
    def run_program(inputs: tuple) -> IKResult:
        position, rotmat, given = inputs
        return program(replace(run, position=position, rotmat=rotmat), position, rotmat, given)

    def fallback() -> IKResult:
        return run.random() if seeds is None else run.given(seeds)

    inputs = (run.position, run.rotmat, seeds)
    return replayed(OneGraph(_key(run, seeds), inputs, run_program, fallback, run.robot,
                             run.generator, "solve_ik runs in rounds"))  # fmt: skip


@dataclass
class OneGraph:
    """A call that runs as one program of fixed shapes (``solve_ik``'s, or a whole-body
    solve's: :mod:`torchik.ik.wholebody.captured`), what :func:`replayed` needs of it.

    Attributes:
        key: what the program depends on beyond the values of ``inputs`` and the robot, its
            limits and the generator (which a program checks: :meth:`_Program.valid`).
        inputs: the tensors the program reads (a tuple, dict or dataclass of them, ``None``
            allowed): copied into the graph's buffers before each replay.
        program: the call on inputs like ``inputs``, with no host read.
        fallback: the call another way, where a capture fails.
        robot: the robot.
        generator: the random generator the program draws from, or ``None``.
        instead: what runs where a capture fails, for the warning (``"solve_ik runs in
            rounds"``).
    """

    key: tuple
    inputs: Any
    program: Callable[[Any], Any]
    fallback: Callable[[], Any]
    robot: Robot
    generator: torch.Generator | None
    instead: str


def replayed(call: OneGraph) -> Any:
    """``call``'s answer from its program: the first call of a key runs it eagerly (on a side
    stream: the libraries' lazy set-up done off the capture), the second captures it in a CUDA
    graph, later ones copy their inputs into the graph's buffers and replay it; where a capture
    fails, ``call.fallback()`` with a warning (once per key). Programs are kept per key, least
    recently used first out (:data:`MAX_PROGRAMS`)."""
    entry = _Program._cache.get(call.key)
    if entry is None or not entry.valid(call):
        entry = _Program(call)
        _Program._cache[call.key] = entry
        while len(_Program._cache) > MAX_PROGRAMS:
            _Program._cache.popitem(last=False)
        _Program._cache.move_to_end(call.key)
        return entry.warm_up(call)
    _Program._cache.move_to_end(call.key)
    return entry.replay(call)


def _key(run: Run, seeds: Tensor | None) -> tuple:
    """What a captured program depends on beyond its targets' and seeds' values (and the
    robot, its limits and the generator, which :meth:`_Program.valid` checks). Inference mode
    too: its buffers, made in it, take no in-place copy outside it."""
    p, g = run.position, run.generator
    return (
        type(run.solver), run.solver.settings, id(run.robot), run.link, run.rotmat is None,
        run.tol_position, run.tol_rotation, run.k, run.seed_pool, tuple(p.shape), p.dtype,
        p.device, None if g is None else id(g), seeds is None, torch.is_inference_mode_enabled(),
        run.robot.backend,
    )  # fmt: skip


class _Program:
    """One key's program: its buffers (the inputs it reads, the result it writes), its graph."""

    _cache: OrderedDict[tuple, _Program] = OrderedDict()

    def __init__(self, call: OneGraph):
        self.robot = weakref.ref(call.robot)
        self.limits = JointLimits.of(call.robot)
        self.generator = None if call.generator is None else weakref.ref(call.generator)
        self.graph: Any = None
        self.failed = False
        self.inputs = clone_buffers(call.inputs)
        self.result: Any = None

    def valid(self, call: OneGraph) -> bool:
        """The same robot (alive), limits and generator as when this program was made."""
        robot: Robot = call.robot
        g = call.generator
        same_generator = g is None or (self.generator is not None and self.generator() is g)
        return self.robot() is robot and JointLimits.of(robot) is self.limits and same_generator

    def warm_up(self, call: OneGraph) -> Any:
        """The first call: the program eagerly on its buffers on a side stream (what a capture
        needs first: the libraries' lazy set-up, and the values a problem reads from the
        device once, made off the capture), its answer copied on the current stream (whose
        allocations it then owns)."""
        return clone_buffers(on_side_stream(lambda: call.program(self.inputs)))

    def replay(self, call: OneGraph) -> Any:
        """Later calls: the inputs copied in, the graph replayed (captured on first use), a
        copy of its result; ``call.fallback()`` where the capture failed."""
        if self.failed or (self.graph is None and not self._capture(call)):
            return call.fallback()
        copy_buffers(self.inputs, call.inputs)
        self.graph.replay()
        # out of the graph's memory, which the next replay overwrites
        return clone_buffers(self.result)

    def _capture(self, call: OneGraph) -> bool:
        graph = torch.cuda.CUDAGraph()
        if call.generator is not None:
            graph.register_generator_state(call.generator)
        try:
            with torch.cuda.graph(graph):
                self.result = call.program(self.inputs)
        except RuntimeError as err:  # an operation that cannot be captured
            torch.cuda.synchronize()
            warnings.warn(f"{call.instead}: CUDA graph capture failed ({err})", RuntimeWarning,
                          stacklevel=5)  # fmt: skip
            self.failed, self.result = True, None
            return False
        self.graph = graph
        return True

"""A whole-body call as one program of fixed shapes, captured whole in one CUDA graph: what
:mod:`torchik.ik.captured` does for ``solve_ik``.

On a GPU the chunks of :func:`torchik.ik.fixed.run_fixed` end in a host read (has every row
finished, has one stalled?) and draw a restart's seeds only when one has: on an H200, 1 000 G1
targets (both hands, 2 slots) took 72 ms that way, where the CPU's compiled loop took 34 ms
(``benchmarks/results/gpu_route.md``). Here the call is one program with no host read, so that
it can be captured once per shape and replayed (:func:`torchik.ik.captured.replayed`):

- every draw's seeds at once (:func:`~torchik.ik.wholebody.seeds.drawn_seeds`): the first
  ones, then one offer per chunk;
- every chunk (:func:`torchik.ik.captured.run_chunks`): Triton's loop kernel, one launch per
  chunk, the stalled rows taking the next draw between chunks (masked);
- the check by forward kinematics (:func:`~torchik.ik.wholebody.evaluate_targets`).

It serves where Triton's loop kernel steps the rows (:data:`~torchik.ik.wholebody.solve.FUSED_LOOP`
and a problem it takes: no posture, every joint active, no boxes, a fixed base): every chunk
runs whether or not the rows finished, which costs the loop kernel almost nothing but an
iteration of PyTorch operations its full price (every one of ``max_iters`` iterations, however
early the rows converge), so without the kernel the chunks keep their host reads. The answers
differ from the chunks' in how seeds are drawn (each draw's own pools, drawn up front), not in
what counts as solved: the same evaluation, the same tolerances.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch

from torchik.ik.captured import MAX_ROWS, OneGraph, chunk_sizes, replayed, run_chunks
from torchik.ik.fixed import bucket, capturable, on_device
from torchik.ik.rounds import take_targets
from torchik.ik.wholebody.problem import WholeBodyProblem
from torchik.ik.wholebody.result import WholeBodyResult, evaluate_targets
from torchik.ik.wholebody.seeds import drawn_seeds

__all__ = ["program", "serves", "solve"]


def serves(
    solver, problem: WholeBodyProblem, seed_pool: int, generator: torch.Generator | None
) -> bool:
    """Whether :func:`solve` takes a call of random seeds with restarts: ``one_graph`` on, a
    solver whose chunks are captured on this device (:func:`torchik.ik.fixed.capturable`:
    CUDA) on the fixed loop, Triton's loop kernel stepping the rows (see the module
    docstring), at most :data:`torchik.ik.captured.MAX_ROWS` rows, the joint limits shared by
    the rows (no box, every joint active), no free body, and the default generator or
    a CUDA one on the rows' device (which a graph can advance)."""
    q = problem.rest
    if not (solver.settings.one_graph and capturable(solver, q) and solver._fixed(q, problem)):
        return False
    if len(problem) > MAX_ROWS or problem.limits.per_row or problem.robot.floating_bases:
        return False  # boxes (held joints) and free bodies: their seeds are drawn otherwise
    if not solver._loop_kernel_serves(problem, q):
        return False
    g = generator
    registers = hasattr(torch.cuda.CUDAGraph, "register_generator_state")
    return g is None or (g.device.type == "cuda" and g.device == q.device and registers)


def program(
    solver, problem: WholeBodyProblem, k: int, seed_pool: int, generator: torch.Generator | None
) -> WholeBodyResult:
    """The whole call on the rows of ``problem`` (``k`` slots per target), random seeds from
    pools of ``seed_pool`` (0: uniform ones) with restarts: no host read, every shape fixed by
    the rows.

    Returns:
        A :class:`~torchik.ik.wholebody.WholeBodyResult` with ``q (T, k, nq)``.
    """
    draws = len(chunk_sizes(solver.settings))
    seeds = drawn_seeds(problem, k, seed_pool, generator, draws)
    c = run_chunks(solver, problem, problem.project(seeds[0]), seeds)
    return evaluate_targets(problem, c.best_q, c.iterations, (len(problem) // k, k))


BUCKETS = True
"""Whether a program is made for :func:`torchik.ik.fixed.bucket` targets (the next power of
two), not the call's own count (see :data:`torchik.ik.captured.BUCKETS`)."""


def solve(
    solver,
    problem: WholeBodyProblem,
    k: int,
    seed_pool: int,
    generator: torch.Generator | None,
    fallback: Callable[[], WholeBodyResult],
) -> WholeBodyResult:
    """The call by :func:`program`: replayed from a captured graph where
    :func:`torchik.ik.fixed.capturable` (CUDA), eagerly elsewhere; ``fallback()`` (the chunks
    with host reads) where a capture fails, with a warning. The targets are padded to
    :func:`~torchik.ik.fixed.bucket` of their count with copies of the last one (:data:`BUCKETS`),
    their answers cut off."""
    if not capturable(solver, problem.rest):
        return program(solver, problem, k, seed_pool, generator)
    n = len(problem) // k
    size = bucket(n) if BUCKETS else n
    rows = problem if size == n else _padded(problem, k, size)

    def run(inputs: WholeBodyProblem) -> WholeBodyResult:
        return program(solver, inputs, k, seed_pool, generator)

    call = OneGraph(_key(solver, rows, k, seed_pool, generator), rows, run, fallback,
                    problem.robot, generator, "whole-body IK runs in chunks")  # fmt: skip
    with on_device(problem.rest.device):
        result = replayed(call)
    return result if size == n else _first(result, n)


def _key(solver, problem: WholeBodyProblem, k: int, seed_pool: int, generator) -> tuple:
    """What a whole-body program depends on beyond the values of its rows (and the robot, its
    limits and the generator, which a program checks); inference mode too (see
    :func:`torchik.ik.captured.replayed`)."""
    q = problem.rest
    targets = tuple((t.link, t.rotmat is None, t.weight) for t in problem.targets)
    return (
        "wholebody", type(solver), solver.settings, id(problem.robot), targets,
        problem.tol_position, problem.tol_rotation, k, seed_pool, tuple(q.shape), q.dtype,
        q.device, None if generator is None else id(generator),
        torch.is_inference_mode_enabled(), problem.robot.backend,
        solver.kernel_switches(problem, q),
    )  # fmt: skip


def _padded(problem: WholeBodyProblem, k: int, size: int) -> WholeBodyProblem:
    """``problem`` with ``size`` targets: the last target's ``k`` rows repeated, each copy a
    target of its own (its own ``group``, so no copy stops the last target's slots early)."""
    n, device = len(problem), problem.rest.device
    extra = torch.arange(n - k, n, device=device).repeat(size - n // k)
    padded = problem.rows(torch.cat((torch.arange(n, device=device), extra)))
    return replace(padded, group=torch.arange(size * k, device=device) // k)


def _first(result: WholeBodyResult, n: int) -> WholeBodyResult:
    """The answers of the first ``n`` targets of a ``(T, K, ...)`` result, per-link errors too."""
    cut = take_targets(result, slice(0, n))
    assert isinstance(cut, WholeBodyResult)
    position = {link: v[:n] for link, v in result.position_errors.items()}
    rotation = {link: v[:n] for link, v in result.rotation_errors.items()}
    return replace(cut, position_errors=position, rotation_errors=rotation)

"""The fixed-shape IK loop (issue 34, part 1): every row steps, finished rows frozen by masks,
no host read inside a chunk; on CUDA the chunks are captured in CUDA graphs.

On the CPU the loop runs eagerly (the fallback of the capture code) and must give the host
loop's answers: the same successes and iteration counts, ``q`` equal up to the rounding of
batched products over a different batch (the host loop drops finished rows, this one keeps
them frozen), float64.
"""

from __future__ import annotations

import os

import pytest
import torch

from tests.ik.recorder import Recorder
from torchik import load_robot, solve_ik
from torchik.ik import (
    LBFGSB,
    DampedLeastSquares,
    GradientDescent,
    LevenbergMarquardt,
    SolverSettings,
)
from torchik.ik.fixed import Carry, _Runner, capturable, clone_buffers, copy_buffers, iterate
from torchik.ik.rounds import make_problem

TOL = 1e-7
"""Host loop against fixed loop, float64: batched operations over another batch (the host
loop's shrinking set of rows, the fixed loop's all) round differently and LM carries it to the
answer: ~1e-11 on an Intel Xeon, 8.9e-9 on an AMD EPYC (the same iterations and successes)."""
FUSED = pytest.mark.skipif(
    not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1",
    reason="the fused kernels run on CUDA or in Triton's interpreter",
)


@pytest.fixture(scope="module")
def panda():
    return load_robot("panda", dtype=torch.float64)


@pytest.fixture(scope="module")
def panda_reference():
    """The Panda on the reference FK (PyTorch's operations, as on a GPU) whatever the order of
    the tests: ``"auto"`` takes the CPU's compiled FK once another test has loaded it, and the
    host and fixed loops then differ by another rounding (:data:`TOL`)."""
    return load_robot("panda", dtype=torch.float64, backend="reference")


def _targets(robot, n, seed, link="panda_hand"):
    q = robot.random_configuration(n, generator=torch.Generator().manual_seed(seed))
    return robot.forward_kinematics(q, link)


def _both(solve, **options):
    """The host loop and the fixed loop's per-iteration form (``fused_loop=False``: the compiled
    loop on the CPU applies the early stop over slots per chunk, tested on its own)."""
    out = {}
    for loop in ("host", "fixed"):
        out[loop] = solve(LevenbergMarquardt(loop=loop, patience=1000, fused_loop=False,
                                             **options))  # fmt: skip
    return out["host"], out["fixed"]


@pytest.mark.parametrize("early_stop", [True, False])
def test_fixed_loop_equals_the_host_loop(panda_reference, early_stop):
    panda = panda_reference
    targets = _targets(panda, 96, seed=3)

    def solve(solver):
        g = torch.Generator().manual_seed(0)
        return solve_ik(panda, targets, method=solver, generator=g, restarts=False,
                        early_stop=early_stop, num_seeds=3)  # fmt: skip

    host, fixed = _both(solve)
    assert torch.equal(host.success, fixed.success) and bool(host.success.any())
    assert torch.equal(host.iterations, fixed.iterations)
    torch.testing.assert_close(fixed.q, host.q, atol=TOL, rtol=0)


def test_fixed_loop_equals_the_host_loop_for_several_links():
    """The per-iteration form (``fused_loop=False``; the compiled loop's early stop over slots
    is per chunk: ``tests/kinematics/test_native.py`` and ``tests/ik/test_wholebody.py``)."""
    robot = load_robot("g1", dtype=torch.float64)
    hands = ["left_rubber_hand", "right_rubber_hand"]
    poses = _targets(robot, 12, seed=5, link=hands)
    targets = dict(zip(hands, poses.unbind(1), strict=True))
    seeds = robot.random_configuration(12 * 2, generator=torch.Generator().manual_seed(6))
    results = []
    for loop in ("host", "fixed"):
        from torchik.ik.wholebody import solve as wholebody

        solver = wholebody.WholeBodyLM(loop=loop, max_iters=60, fused_loop=False)
        problem, k, batch, q0 = wholebody._problem(
            robot, targets, None, None, None, 0.0, False, seeds.view(12, 2, -1), 2, 1e-3,
            0.0175, None, None,
        )  # fmt: skip
        results.append(solver.solve(problem, q0, None))
    (q_host, it_host), (q_fixed, it_fixed) = results
    assert torch.equal(it_host, it_fixed)
    torch.testing.assert_close(q_fixed, q_host, atol=TOL, rtol=0)


def test_fixed_loop_with_restarts_solves_like_the_host_loop(panda_reference):
    panda = panda_reference
    targets = _targets(panda, 64, seed=9)
    for loop in ("host", "fixed"):
        solver = LevenbergMarquardt(loop=loop)
        res = solve_ik(panda, targets, method=solver, generator=torch.Generator().manual_seed(1))
        assert bool(res.success.any(-1).all()), loop


def test_which_solvers_take_and_capture_the_fixed_loop(panda):
    q = panda.neutral()[None]
    assert LevenbergMarquardt().capturable and DampedLeastSquares().capturable
    assert not LevenbergMarquardt(adaptive=True).capturable  # its first step adds state
    assert not LevenbergMarquardt(capture=False).capturable
    assert not GradientDescent().capturable  # autograd: eager only
    assert not capturable(LevenbergMarquardt(), q)  # not on the CPU: the eager fallback
    assert not LBFGSB(loop="fixed")._fixed(q)  # a SciPy loop over rows stays on the host
    assert LevenbergMarquardt(loop="fixed")._fixed(q)
    assert not LevenbergMarquardt()._fixed(q)  # auto: the host loop on the CPU
    with pytest.raises(ValueError, match=r"loop must be one of \['auto', 'fixed', 'host'\]"):
        SolverSettings(loop="graph")


def test_the_cpu_fallback_runs_eagerly_and_caches_nothing(panda):
    _Runner._cache.clear()
    targets = _targets(panda, 8, seed=4)
    solve_ik(panda, targets, method=LevenbergMarquardt(loop="fixed"))
    assert not _Runner._cache


def test_an_iteration_reads_nothing_back_from_the_device(panda):
    targets = _targets(panda, 16, seed=8)
    problem = make_problem(panda, "panda_hand", targets[:, :3, 3], targets[:, :3, :3], 2,
                           1e-3, 0.0175)  # fmt: skip
    solver = LevenbergMarquardt(loop="fixed")
    q = problem.project(panda.random_configuration(32, generator=torch.Generator().manual_seed(1)))
    carry = Carry.start(q, solver.initial_state(q), 60)
    iterate(solver, problem, carry, 60, True)  # warm-up: masks and weights read once
    with Recorder() as seen:
        iterate(solver, problem, carry, 60, True)
    assert not seen.reads(), seen.reads()


def test_problem_buffers_clone_and_copy(panda):
    targets = _targets(panda, 4, seed=2)
    a = make_problem(panda, "panda_hand", targets[:, :3, 3], targets[:, :3, :3], 2, 1e-3, 0.01)
    b = clone_buffers(a)
    assert b.targets[0].position is not a.targets[0].position and b.robot is a.robot
    other = _targets(panda, 4, seed=3)
    c = make_problem(panda, "panda_hand", other[:, :3, 3], other[:, :3, :3], 2, 1e-3, 0.01)
    storage = b.targets[0].position.data_ptr()
    copy_buffers(b, c)
    assert b.targets[0].position.data_ptr() == storage  # written in place, as a graph reads it
    assert torch.equal(b.targets[0].position, c.targets[0].position)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (CI has none)")
def test_captured_chunks_equal_the_eager_loop_and_are_reused():
    robot = load_robot("panda", dtype=torch.float64).to("cuda")
    _Runner._cache.clear()
    targets = _targets(robot, 200, seed=1)
    results = []
    for loop in ("fixed", "fixed", "host"):
        g = torch.Generator(device="cuda").manual_seed(0)
        # the usual step on both loops (the fused kernels' Cholesky step rounds differently
        # from the host loop's solve; they have their own tests)
        solver = LevenbergMarquardt(loop=loop, patience=1000, fused_step=False, fused_loop=False)
        results.append(solve_ik(robot, targets, method=solver, generator=g, restarts=False))
    first, again, host = results
    assert len(_Runner._cache) >= 1  # captured, and the second solve replayed the same graph
    assert torch.equal(first.success, again.success) and torch.equal(first.q, again.q)
    torch.testing.assert_close(first.q, host.q, atol=1e-8, rtol=0)
    torch.cuda.set_sync_debug_mode("error")
    try:
        runner = next(iter(_Runner._cache.values()))
        for graph in runner.graphs.values():
            graph.replay()  # a replay never syncs
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (CI has none)")
def test_the_fused_lm_loop_is_captured_and_equals_the_fused_step_on_cuda():
    """On CUDA (Triton compiled, not interpreted): a chunk of ``fused_loop`` iterations is one
    kernel in a captured graph whose replays never sync, with the answers of one kernel per
    iteration (one slot per target, one round: the early stop is then per row)."""
    pytest.importorskip("triton", reason="the fused kernels need Triton")
    robot = load_robot("panda", dtype=torch.float64).to("cuda")
    targets = _targets(robot, 300, seed=4)
    out = {}
    for loop in (False, True):
        _Runner._cache.clear()
        g = torch.Generator(device="cuda").manual_seed(0)
        solver = LevenbergMarquardt(loop="fixed", fused_loop=loop, round_iters=0)
        out[loop] = solve_ik(robot, targets, method=solver, num_seeds=1, generator=g)
    assert torch.equal(out[True].success, out[False].success)
    assert bool(out[True].success.float().mean() > 0.95)
    torch.testing.assert_close(out[True].q, out[False].q, atol=1e-8, rtol=0)
    torch.cuda.set_sync_debug_mode("error")
    try:
        for runner in _Runner._cache.values():
            for graph in runner.graphs.values():
                graph.replay()  # a replay never syncs
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_the_fixed_loop_retries_in_rounds_at_bucket_sizes(panda, monkeypatch):
    """Rounds as on the host loop (the hard targets get ``retry_seeds`` fresh slots each), the
    retry rounds at power-of-two counts of targets where chunks are captured (CUDA: captured
    chunks are reused; forced here), and every target solved. Elsewhere exact counts. (The
    CPU's rounds run compiled whole, :mod:`torchik.ik.compiled`: turned off here.)"""
    from torchik.ik import base, compiled, rounds

    monkeypatch.setattr(rounds, "capturable", lambda solver, q: True)
    monkeypatch.setattr(compiled, "serves", lambda run: False)
    rows = []
    solve = base.IKSolver.solve
    monkeypatch.setattr(base.IKSolver, "solve",
                        lambda self, problem, *a, **k: rows.append(len(problem))
                        or solve(self, problem, *a, **k))  # fmt: skip
    targets = _targets(panda, 200, seed=12)
    method = LevenbergMarquardt(loop="fixed")
    result = solve_ik(panda, targets, method=method, generator=torch.Generator().manual_seed(3))
    k = result.q.shape[1]
    assert bool(result.success.any(-1).all()) and result.q.shape == (200, k, 7)
    first, *retries = rows
    r = method.settings.retry_seeds
    assert first == 200 * k and retries, "no retry round: make the targets harder"
    assert all(n % r == 0 and (n // r) & (n // r - 1) == 0 for n in retries), rows
    rows.clear()
    monkeypatch.undo()
    monkeypatch.setattr(compiled, "serves", lambda run: False)
    monkeypatch.setattr(base.IKSolver, "solve",
                        lambda self, problem, *a, **k: rows.append(len(problem))
                        or solve(self, problem, *a, **k))  # fmt: skip
    solve_ik(panda, targets, method=method, generator=torch.Generator().manual_seed(3))
    assert len(rows) > 1 and any(n // r & (n // r - 1) for n in rows[1:]), rows  # exact


@FUSED
def test_the_fused_lm_step_gives_the_loop_its_answers(panda):
    """``fused_step=True``: one kernel per iteration (residual, step, projection) where FK takes
    the fused kernels, the same answers as the usual operations on those kernels (float64);
    elsewhere (the reference backend) the usual operations."""
    pytest.importorskip("triton", reason="the fused kernels need Triton")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    robot = load_robot("panda", dtype=torch.float64, backend="fused").to(device)
    targets = _targets(robot, 12, seed=5).to(device)
    out = {}
    for fused in (False, True):
        method = LevenbergMarquardt(loop="fixed", fused_step=fused, fused_loop=False,
                                    max_iters=30)  # fmt: skip
        out[fused] = solve_ik(robot, targets, method=method, num_seeds=1,
                              generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert torch.equal(out[True].success, out[False].success)
    assert bool(out[True].success.float().mean() > 0.5)
    torch.testing.assert_close(out[True].q, out[False].q, atol=TOL, rtol=0)
    problem = make_problem(robot, "panda_hand", targets[:, :3, 3], targets[:, :3, :3], 1,
                           1e-3, 0.01)  # fmt: skip
    solver = LevenbergMarquardt(fused_step=True)
    q = robot.random_configuration(12).to(device)
    assert solver.fused_iteration(problem, q) is not None
    robot.backend = "reference"
    assert solver.fused_iteration(problem, q) is None
    assert LevenbergMarquardt(fused_step=False).fused_iteration(problem, q) is None
    robot.backend = "fused"
    assert LevenbergMarquardt().fused_iteration(problem, q) is not None  # on by default


def _loop_kernel_answers(robot, position_only: bool, attempt_iters: int) -> None:
    """``fused_loop=True`` against ``False`` on ``robot`` (float64, on its device): with one
    slot per target and one round (the retry rounds give a target several slots) the early
    stop over slots is per row, so the answers, iterations and restarts are those of one
    iteration at a time; given seeds likewise; with rounds and two slots every target is
    solved."""
    device = robot.lower.device
    targets = _targets(robot, 10, seed=6).to(device)
    targets = targets[:, :3, 3] if position_only else targets
    out = {}
    for loop in (False, True):
        method = LevenbergMarquardt(loop="fixed", fused_loop=loop, max_iters=40, sync_every=4,
                                    round_iters=0, attempt_iters=attempt_iters)  # fmt: skip
        out[loop] = solve_ik(robot, targets, method=method, num_seeds=1,
                             position_only=position_only,
                             generator=torch.Generator().manual_seed(1))  # fmt: skip
    assert bool(out[False].success.float().mean() >= 0.8)  # restarts after 6: one left
    assert torch.equal(out[True].success, out[False].success)
    assert torch.equal(out[True].iterations, out[False].iterations)
    torch.testing.assert_close(out[True].q, out[False].q, atol=TOL, rtol=0)
    seeds = robot.random_configuration(3, generator=torch.Generator().manual_seed(2))
    given = {}  # given seeds: no restarts, no stall counters in the kernel; slots on their own
    for loop in (False, True):
        method = LevenbergMarquardt(loop="fixed", fused_loop=loop, max_iters=30, round_iters=0)
        given[loop] = solve_ik(robot, targets, method=method, seeds=seeds.to(device),
                               position_only=position_only, early_stop=False)  # fmt: skip
    ok = given[False].success
    assert torch.equal(given[True].success, ok) and bool(ok.any())
    # converged slots froze at the same iterate; the best iterate of a slot that never
    # converged can be another one of nearly the same cost (its cost summed in another order)
    torch.testing.assert_close(given[True].q[ok], given[False].q[ok], atol=TOL, rtol=0)
    two = solve_ik(robot, targets, method=LevenbergMarquardt(loop="fixed", fused_loop=True),
                   num_seeds=2, position_only=position_only)  # fmt: skip
    assert bool(two.success.any(-1).all())


LOOP_CASES = [(False, 0), (True, 0), (False, 6)]


@FUSED
@pytest.mark.parametrize(("position_only", "attempt_iters"), LOOP_CASES)
def test_the_fused_lm_loop_gives_the_per_iteration_answers(panda, position_only, attempt_iters):
    """Triton's loop kernel (on CUDA, or in Triton's interpreter): see
    :func:`_loop_kernel_answers` (``fused_step``, on by default, makes the per-iteration loop
    one kernel per iteration there)."""
    pytest.importorskip("triton", reason="the fused kernels need Triton")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    robot = load_robot("panda", dtype=torch.float64, backend="fused").to(device)
    _loop_kernel_answers(robot, position_only, attempt_iters)
    targets = _targets(robot, 10, seed=6).to(device)
    position = targets[:, :3, 3]
    problem = make_problem(robot, "panda_hand", position, None, 1, 1e-3, 0.01)
    carry = Carry.start(robot.random_configuration(10).to(device), {}, 40)
    robot.backend = "reference"
    assert not LevenbergMarquardt(fused_loop=True).fused_loop(problem, carry, 4, 40, False)


@pytest.mark.parametrize(("position_only", "attempt_iters"), LOOP_CASES)
def test_the_compiled_cpu_loop_gives_the_per_iteration_answers(position_only, attempt_iters):
    """The CPU's loop compiled by Numba (:mod:`torchik.kinematics.native`): see
    :func:`_loop_kernel_answers`."""
    pytest.importorskip("numba", reason="the CPU's compiled loop needs Numba (a dependency)")
    _loop_kernel_answers(load_robot("panda", dtype=torch.float64), position_only, attempt_iters)


def test_the_cpu_takes_the_compiled_loop_where_it_serves(panda, monkeypatch):
    """By default (``loop="auto"``, ``fused_loop=True``) a single-link problem on a fixed base,
    with shared limits or a box per target; not with the reference backend, without
    ``fused_loop``, adaptive damping, learnable origins, a subclass's own step, ``loop="host"``,
    or without Numba (then the host loop)."""
    pytest.importorskip("numba", reason="the CPU's compiled loop needs Numba (a dependency)")
    from torchik.kinematics import native

    calls, real, whole = [], native.lm_loop, native.ik_round
    monkeypatch.setattr(native, "lm_loop", lambda *a, **k: calls.append(len(a[0])) or real(*a, **k))
    monkeypatch.setattr(native, "ik_round", lambda *a, **k: calls.append(0) or whole(*a, **k))
    targets = _targets(panda, 16, seed=2)
    assert bool(solve_ik(panda, targets).success.any(-1).all()) and calls  # a compiled round
    calls.clear()
    method = LevenbergMarquardt(sync_every=4)  # restarts between a round's chunks
    assert bool(solve_ik(panda, targets, method=method).success.any(-1).all())
    assert calls and 0 not in calls  # the rounds, on the compiled loop
    position, rotmat = targets[:, :3, 3], targets[:, :3, :3]
    problem = make_problem(panda, "panda_hand", position, rotmat, 1, 1e-3, 0.01)
    boxed = make_problem(panda, "panda_hand", position, rotmat, 1, 1e-3, 0.01,
                         bounds=(panda.lower.expand(16, 7), panda.upper.expand(16, 7)))  # fmt: skip
    q = panda.random_configuration(16)
    assert LevenbergMarquardt().compiled_loop(problem, q)
    assert LevenbergMarquardt()._fixed(q, problem) and not LevenbergMarquardt()._fixed(q)
    assert not LevenbergMarquardt(loop="host")._fixed(q, problem)
    for method in (LevenbergMarquardt(fused_loop=False), LevenbergMarquardt(adaptive=True)):
        assert not method.compiled_loop(problem, q)
    assert LevenbergMarquardt().compiled_loop(boxed, q)  # a box per target: the CPU's only
    assert not LevenbergMarquardt()._fused_serves(boxed, q)
    assert not DampedLeastSquares().compiled_loop(problem, q)

    class OwnStep(LevenbergMarquardt):  # the kernels step plain LM: not a changed step
        def step(self, problem, q, lin, state):
            return super().step(problem, q, lin, state)

    assert not OwnStep().compiled_loop(problem, q)
    panda.backend = "reference"
    try:
        assert not LevenbergMarquardt().compiled_loop(problem, q)
    finally:
        panda.backend = "auto"
    learnable = load_robot("panda", dtype=torch.float64).learnable_origins()
    tied = make_problem(learnable, "panda_hand", position, rotmat, 1, 1e-3, 0.01)
    assert not LevenbergMarquardt().compiled_loop(tied, q)  # origins that change in place
    monkeypatch.setattr(native, "runs_on", lambda q, tree=None: False)  # as without Numba
    assert not LevenbergMarquardt()._fixed(q, problem)
    calls.clear()
    assert bool(solve_ik(panda, targets).success.any(-1).all()) and not calls


def test_a_runner_made_in_inference_mode_is_not_reused_outside_it(panda, monkeypatch):
    """Captured runners are cached per shape; their buffers, made in inference mode, take no
    in-place copy outside it (``solve_ik`` after one in ``torch.inference_mode()`` raised on
    CUDA). Capture stood in for on the CPU: a "graph" that runs the chunk eagerly."""
    from torchik.ik import fixed

    class Graph:
        def __init__(self, run):
            self.replay = run

    def capture(self, n):
        self._eager(n)
        self.graphs[n] = Graph(lambda: self._eager(n))

    monkeypatch.setattr(fixed, "capturable", lambda solver, q: True)
    monkeypatch.setattr(fixed._Runner, "_capture", capture)
    _Runner._cache.clear()
    targets = _targets(panda, 8, seed=21)
    method = LevenbergMarquardt(loop="fixed", fused_loop=False)
    with torch.inference_mode():
        solve_ik(panda, targets, method=method, generator=torch.Generator().manual_seed(1))
    result = solve_ik(panda, targets, method=method, generator=torch.Generator().manual_seed(1))
    assert bool(result.success.any(-1).all())
    _Runner._cache.clear()


def test_a_runner_is_not_reused_after_a_kernel_switch_or_backend_changes(panda, monkeypatch):
    """A captured chunk replays the kernels it captured: the key of its runner names the
    robot's backend and the solver's ``kernel_switches`` (a chunk captured before whole-body
    IK's ``FUSED_LOOP`` was turned on replayed without it on an H200)."""
    from torchik.ik import fixed

    targets = _targets(panda, 4, seed=2)
    problem = make_problem(panda, "panda_hand", targets[:, :3, 3], targets[:, :3, :3], 2, 1e-3,
                           0.01)  # fmt: skip
    solver, q = LevenbergMarquardt(loop="fixed"), panda.random_configuration(8)
    key = fixed._key(solver, problem, q, 60, True)
    assert fixed._key(solver, problem, q, 60, True) == key
    monkeypatch.setattr(LevenbergMarquardt, "kernel_switches", lambda self, p, q: (True, True))
    assert fixed._key(solver, problem, q, 60, True) != key
    monkeypatch.undo()
    robot = load_robot("panda", dtype=torch.float64, backend="reference")
    other = make_problem(robot, "panda_hand", targets[:, :3, 3], targets[:, :3, :3], 2, 1e-3,
                         0.01)  # fmt: skip
    assert fixed._key(solver, other, q, 60, True)[-2:] == ("reference", (False, False, False))


def test_captures_happen_on_the_rows_device():
    """A robot on ``cuda:1`` while ``cuda:0`` is current would launch its kernels outside the
    capture: the loop makes the rows' device the current one (nothing on the CPU)."""
    import contextlib

    from torchik.ik.fixed import on_device

    assert isinstance(on_device(torch.device("cpu")), contextlib.nullcontext)
    chosen = on_device(torch.device("cuda", 1))
    assert isinstance(chosen, torch.cuda.device) and chosen.idx == 1


def test_chunks_cover_every_evaluation_once():
    """``max_iters`` steps are ``max_iters + 1`` evaluations, in chunks of ``chunk``, the last
    one shorter where they do not divide."""
    from torchik.ik.fixed import chunks

    assert chunks(60, 11) == [11] * 5 + [6]
    assert chunks(21, 11) == [11, 11] and chunks(10, 11) == [11] and chunks(0, 11) == [1]
    assert all(sum(chunks(m, c)) == m + 1 for m in range(40) for c in range(1, 13))

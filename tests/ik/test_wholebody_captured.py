"""A whole-body call as one program of fixed shapes (issue 34: "the whole-body solver takes the
same path"): :mod:`torchik.ik.wholebody.captured`. On the CPU the program runs eagerly (with
PyTorch's iteration, or Triton's loop kernel in its interpreter); CUDA's capture and replay are
stood in for (the ``cuda`` case runs them, in ``make gpu-check``)."""

from __future__ import annotations

import os

import pytest
import torch

from tests.ik.fake_cuda import RESULT_FIELDS, FakeGraph, fake_cuda
from tests.ik.recorder import Recorder
from tests.ik.test_captured import restarts_in_kernel_alike
from tests.ik.test_wholebody import HANDS, TWO_ARMS, _targets
from torchik import Robot
from torchik.ik import captured as ik_captured
from torchik.ik.wholebody import captured, solve_wholebody
from torchik.ik.wholebody import solve as wholebody
from torchik.ik.wholebody.seeds import drawn_seeds
from torchik.ik.wholebody.solve import WholeBodyLM, _problem

TRITON = pytest.mark.skipif(
    not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1",
    reason="Triton's loop kernel runs on CUDA or in Triton's interpreter",
)


@pytest.fixture
def robot() -> Robot:
    return Robot.from_urdf(TWO_ARMS, dtype=torch.float64)


def _rows(robot: Robot, n: int, k: int = 2, seed: int = 0):
    """The rows of ``n`` targets (left hand pose, right hand position), ``k`` slots each."""
    targets, _ = _targets(robot, n, seed=seed)
    problem, *_ = _problem(robot, targets, None, None, None, 0.0, False, None, k, 1e-3,
                           0.0174, None, None)  # fmt: skip
    return problem, targets


def _checked(robot: Robot, result, targets: dict) -> None:
    """Every slot's errors are what FK says of its ``q``, every ``q`` within the limits."""
    q = result.q.reshape(-1, robot.dof)
    assert bool(((q >= robot.lower) & (q <= robot.upper)).all())
    k = result.q.shape[1]
    poses = robot.forward_kinematics(q, HANDS).view(-1, k, 2, 4, 4)
    left = (poses[:, :, 0, :3, 3] - targets["left_hand"][:, None, :3, 3]).norm(dim=-1)
    right = (poses[:, :, 1, :3, 3] - targets["right_hand"][:, None]).norm(dim=-1)
    torch.testing.assert_close(result.position_errors["left_hand"], left, rtol=0, atol=1e-12)
    torch.testing.assert_close(result.position_errors["right_hand"], right, rtol=0, atol=1e-12)
    torch.testing.assert_close(result.position_error, torch.maximum(left, right), rtol=0,
                               atol=1e-12)  # fmt: skip


@pytest.mark.parametrize("pool", [64, 0])
def test_the_program_solves_and_reports_what_fk_says(robot, pool):
    """Seeds from pools (and uniform ones, ``seed_pool=0``), restarts between chunks, PyTorch's
    iteration: 40 targets of two hands, float64, each solved by a slot (uniform seeds: 36 at
    least; the chunks with host reads solved 193 of 200 such targets, the program 192)."""
    problem, targets = _rows(robot, 40, k=4)
    solver = WholeBodyLM(loop="fixed", fused_loop=False, max_iters=wholebody.MAX_ITERS)
    torch.manual_seed(0)
    result = captured.program(solver, problem, 4, pool, None)
    assert result.q.shape == (40, 4, robot.dof)
    assert int(result.success.any(-1).sum()) >= (40 if pool else 36)
    _checked(robot, result, targets)
    assert bool((result.iterations <= solver.settings.max_iters).all())


def test_drawn_seeds_are_each_rows_nearest_pool_member(robot):
    """Every draw's seed of a row is the member of that draw's pool ``row % k`` nearest to the
    row's targets (the first draw of ``wholebody_seeder``'s rule), the pools drawn in order."""
    from torchik.ik.wholebody.seeds import _pool_features, _target_features

    problem, _ = _rows(robot, 5, k=2)
    g = torch.Generator().manual_seed(3)
    seeds = drawn_seeds(problem, 2, 16, g, draws=3)
    assert seeds.shape == (3, 10, robot.dof)
    pools = robot.random_configuration(3 * 2 * 16, torch.Generator().manual_seed(3))
    aims, features = _target_features(problem), _pool_features(problem, pools)
    for d in range(3):
        for row in range(10):
            start = d * 32 + (row % 2) * 16
            scores = features[start : start + 16] @ aims[row]
            assert torch.equal(seeds[d, row], pools[start + int(scores.argmin())])


def test_the_program_reads_nothing_back_from_the_device(robot):
    """Seeding, every chunk, the restarts, the evaluation: no operation that reads the device
    (what a CUDA graph cannot hold), after a first run (the limits' masks, read once)."""
    problem, _ = _rows(robot, 6)
    solver = WholeBodyLM(loop="fixed", fused_loop=False)
    captured.program(solver, problem, 2, 32, None)
    with Recorder() as seen:
        captured.program(solver, problem, 2, 32, None)
    assert not seen.reads() and len(seen.ops) > 1000, seen.reads()


def test_the_program_makes_no_tensor_from_host_data(robot, monkeypatch):
    """After a first run, a second makes no tensor from host values (on a GPU, a copy to the
    device: a capture refuses it)."""
    problem, _ = _rows(robot, 6)
    solver = WholeBodyLM(loop="fixed", fused_loop=False)
    captured.program(solver, problem, 2, 32, None)
    made: list[str] = []
    for owner, name in ((torch, "tensor"), (torch, "as_tensor"), (torch.Tensor, "new_tensor")):
        make = getattr(owner, name)
        monkeypatch.setattr(owner, name, lambda *a, _n=name, _f=make, **k: made.append(_n)
                            or _f(*a, **k))  # fmt: skip
    result = captured.program(solver, problem, 2, 32, None)
    assert not made and result.q.shape == (6, 2, robot.dof), made


@TRITON
def test_on_triton_loop_kernel_the_program_solves_and_restarts_in_the_kernel_alike(
    monkeypatch,
):
    """With ``FUSED_LOOP`` the program's chunks are Triton's loop kernel with both links, one
    launch a chunk; with ``fused_restarts`` the restarts and the early stop over each target's
    slots happen in that kernel, leaving every tensor of the carry as the operations between
    chunks do (float64, bit for bit); the targets are solved."""
    pytest.importorskip("triton", reason="the fused kernels need Triton")

    device = "cuda" if torch.cuda.is_available() else "cpu"
    robot = Robot.from_urdf(TWO_ARMS, dtype=torch.float64, backend="fused").to(device)
    problem, targets = _rows(robot, 6, k=2, seed=4)
    monkeypatch.setattr(wholebody, "FUSED_LOOP", True)
    results = {}

    def solve(on: bool) -> None:
        solver = WholeBodyLM(loop="fixed", max_iters=40, sync_every=5, fused_restarts=on,
                             attempt_iters=8)  # fmt: skip
        assert solver._loop_kernel_serves(problem, problem.rest)
        assert solver.takes_groups(problem, problem.rest) is on
        torch.manual_seed(0)
        results[on] = captured.program(solver, problem, 2, 16, None)

    carry = restarts_in_kernel_alike(monkeypatch, captured, solve, chunks=-(-41 // 5))
    assert bool((carry.attempt > 0).any())  # restarts happened
    assert bool(results[True].success.any(-1).all())
    _checked(robot, results[True], {k: v.to(device) for k, v in targets.items()})


def _fake_cuda(monkeypatch) -> list[int]:
    """CUDA's calls stood in for on the CPU (:func:`tests.ik.fake_cuda.fake_cuda`), whole-body
    IK's program served (as where Triton's loop kernel steps the rows, PyTorch's iteration
    here) and its rows per call recorded."""
    calls = fake_cuda(monkeypatch, captured, (*RESULT_FIELDS, "position_errors", "rotation_errors"))
    monkeypatch.setattr(WholeBodyLM, "_loop_kernel_serves", lambda self, problem, q: True)
    monkeypatch.setattr(WholeBodyLM, "fused_loop", lambda self, *a, **k: False)
    monkeypatch.setattr(WholeBodyLM, "compiled_loop", lambda self, problem, q: False)
    return calls


def test_calls_are_warmed_up_captured_once_then_replayed_per_bucket(robot, monkeypatch):
    """``solve_wholebody`` on the fixed loop, the program served: the first call of a bucket
    runs eagerly, the second captures, later ones copy their targets in and replay; 3 targets
    run padded to 4 (each copy of the last its own target), 5 and 7 share the program of 8;
    every answer is its own targets' (what FK says of each slot), kept after later replays."""
    calls = _fake_cuda(monkeypatch)
    answers = []
    for i, n in enumerate((3, 3, 3, 3, 5, 7, 5)):
        targets, _ = _targets(robot, n, seed=20 + i)
        result = solve_wholebody(robot, targets, loop="fixed", seed_pool=32)
        assert result.q.shape == (n, 2, robot.dof)
        assert set(result.position_errors) == set(HANDS)
        assert result.position_errors["left_hand"].shape == (n, 2)
        answers.append((targets, result))
    assert calls == [8, 8, 16, 16]  # rows: 3 -> 4 targets x 2 slots, then 5, 7 -> 8 targets
    assert [g.replays for g in FakeGraph.made] == [3, 2]  # calls 2-4; calls 6-7
    assert len(ik_captured._Program._cache) == 2
    for targets, result in answers:
        _checked(robot, result, targets)
        assert float(result.success.any(-1).float().mean()) >= 0.6  # 2 slots, few iterations


def test_the_program_serves_random_seeds_with_restarts_only(robot, monkeypatch):
    """Given seeds, ``restarts=False``, ``one_graph=False``, a box, the host loop, or the
    loop kernel not serving: the chunks with host reads, as before."""
    calls = _fake_cuda(monkeypatch)
    targets, q = _targets(robot, 4, seed=30)
    solve_wholebody(robot, targets, loop="fixed")
    assert calls == [8]
    solve_wholebody(robot, targets, loop="fixed", seeds=q[:, None])
    solve_wholebody(robot, targets, loop="fixed", restarts=False)
    solve_wholebody(robot, targets, loop="host")
    solve_wholebody(robot, targets, loop="fixed", lower=robot.lower - 0.1 + 0.2)
    solve_wholebody(robot, targets, loop="fixed", active=["waist", "left_j0", "right_j0"])
    monkeypatch.setattr(WholeBodyLM, "_loop_kernel_serves", lambda self, problem, q: False)
    solve_wholebody(robot, targets, loop="fixed")
    assert calls == [8]
    problem, _ = _rows(robot, 4)
    monkeypatch.setattr(WholeBodyLM, "_loop_kernel_serves", lambda self, problem, q: True)
    assert captured.serves(WholeBodyLM(loop="fixed"), problem, 32, None)
    assert not captured.serves(WholeBodyLM(loop="fixed", one_graph=False), problem, 32, None)
    cpu = torch.Generator().manual_seed(0)  # a graph advances a CUDA generator only
    assert not captured.serves(WholeBodyLM(loop="fixed"), problem, 32, cpu)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (CI has none)")
def test_on_cuda_the_program_is_captured_and_replayed_without_a_sync(monkeypatch):
    """Two hands with ``FUSED_LOOP`` (the small tree: Triton compiles the G1's loop kernel for
    over a minute, ``make gpu-check``'s whole-body rows time it): eager, captured, replayed,
    no host sync in a replay; each answer is its own targets' (float32, FK of the slots)."""
    monkeypatch.setattr(wholebody, "FUSED_LOOP", True)
    robot = Robot.from_urdf(TWO_ARMS, dtype=torch.float32).to("cuda")
    ik_captured._Program._cache.clear()
    for seed in range(3):
        targets, _ = _targets(robot, 200, seed=40 + seed)
        result = solve_wholebody(robot, targets, loop="fixed", num_seeds=4)
        assert float(result.success.any(-1).float().mean()) >= 0.97
        best = robot.forward_kinematics(result.q[:, 0], HANDS)
        error = (best[:, 1, :3, 3] - targets["right_hand"]).norm(dim=-1)
        torch.testing.assert_close(error, result.position_errors["right_hand"][:, 0], rtol=0,
                                   atol=1e-5)  # fmt: skip
    (entry,) = ik_captured._Program._cache.values()
    assert entry.graph is not None and not entry.failed
    torch.cuda.set_sync_debug_mode("error")
    try:
        entry.graph.replay()
    finally:
        torch.cuda.set_sync_debug_mode("default")

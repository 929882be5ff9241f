"""A ``solve_ik`` call as one program of fixed shapes (issue 34, part 1: IK without launch
overhead): :mod:`torchik.ik.captured`. On the CPU the program runs eagerly; on CUDA it is
captured once per shape and replayed (the ``cuda`` cases, run by ``make gpu-check``)."""

from __future__ import annotations

import math
import os

import pytest
import torch

from tests.ik.fake_cuda import FakeGraph, fake_cuda
from tests.ik.recorder import Recorder
from torchik import load_robot, solve_ik
from torchik.geometry.rotations import geodesic_distance
from torchik.ik import LevenbergMarquardt, captured, fixed, refine_samples, seeding
from torchik.ik.rounds import Run
from torchik.ik.seeding import nearest_in_pools, nearest_per_slot

LINK = "panda_hand"
TOL_ROT = math.radians(1.0)


@pytest.fixture(scope="module")
def panda():
    return load_robot("panda", dtype=torch.float64)


def _targets(robot, n, seed):
    q = robot.random_configuration(n, generator=torch.Generator().manual_seed(seed))
    return robot.forward_kinematics(q, LINK)


def _run(robot, targets, solver=None, position_only=False, k=2, seed_pool=256, **fields):
    rotmat = None if position_only else targets[:, :3, :3]
    solver = solver or LevenbergMarquardt(loop="fixed", one_graph=True)
    options = dict(restarts=True, seed_pool=seed_pool, generator=None) | fields
    return Run(solver, robot, LINK, 1e-3, TOL_ROT, targets[:, :3, 3], rotmat, k, **options)


@pytest.mark.parametrize(
    ("position_only", "seed_pool", "k"),
    [(False, 256, 2), (True, 256, 2), (False, 0, 2), (False, 256, 9)],
)
def test_the_program_solves_every_target_and_reports_what_fk_says(
    panda, position_only, seed_pool, k
):
    """With pools of nearest seeds, without (``seed_pool=0``), and with more slots than
    ``MAX_POOLS`` (uniform seeds, as the rounds)."""
    targets = _targets(panda, 200, seed=1)
    torch.manual_seed(0)
    result = captured.program(_run(panda, targets, position_only=position_only,
                                   seed_pool=seed_pool, k=k), targets[:, :3, 3],
                              None if position_only else targets[:, :3, :3])  # fmt: skip
    assert result.q.shape == (200, k, 7) and bool(result.success[:, 0].all())
    assert not bool((result.success[:, 1] & ~result.success[:, 0]).any())  # best first
    q = result.q.reshape(-1, 7)
    assert bool(((q >= panda.lower) & (q <= panda.upper)).all())
    pose = panda.forward_kinematics(q, LINK).view(200, k, 4, 4)
    error = (pose[..., :3, 3] - targets[:, None, :3, 3]).norm(dim=-1)
    torch.testing.assert_close(error, result.position_error, rtol=0, atol=1e-12)
    if not position_only:
        angle = geodesic_distance(pose[..., :3, :3], targets[:, None, :3, :3])
        torch.testing.assert_close(angle, result.rotation_error, rtol=0, atol=1e-9)
    assert bool((result.iterations <= LevenbergMarquardt().settings.max_iters).all())


def test_the_program_solves_as_often_as_the_rounds(panda):
    """1 000 poses in float64: every one solved, as the rounds solve them."""
    targets = _targets(panda, 1000, seed=2)
    torch.manual_seed(1)
    result = captured.program(_run(panda, targets), targets[:, :3, 3], targets[:, :3, :3])
    rounds = solve_ik(panda, targets, method=LevenbergMarquardt(loop="fixed"),
                      generator=torch.Generator().manual_seed(1))  # fmt: skip
    assert float(result.success.any(-1).float().mean()) >= float(
        rounds.success.any(-1).float().mean()
    )
    assert float(result.success.any(-1).float().mean()) >= 0.999


@pytest.mark.parametrize(
    ("position_only", "early_stop", "k"),
    [(False, False, 3), (True, False, 3), (False, True, 2), (True, True, 1)],
)
def test_given_seeds_refined_in_the_program_give_the_rounds_answers(
    panda, position_only, early_stop, k, monkeypatch
):
    """``refine_samples``'s call (given seeds, no restarts, no early stop) and a warm start
    (no restarts, ``early_stop``, at most ``initial_seeds`` slots): the program gives what the
    fixed loop gives through ``Run.given``, bit for bit (the same chunks; the rounds only stop
    early once every row finished). The CPU's compiled round (:mod:`torchik.ik.compiled`,
    whose errors round differently) is turned off: both are the accelerators' code."""
    from torchik.ik import compiled

    monkeypatch.setattr(compiled, "serves_given", lambda run: False)
    targets = _targets(panda, 40, seed=5)
    g = torch.Generator().manual_seed(2)
    seeds = panda.random_configuration(40 * k, g).view(40, k, 7)
    solver = LevenbergMarquardt(loop="fixed", one_graph=True, early_stop=early_stop)
    run = _run(panda, targets, solver, position_only=position_only, k=k, restarts=False)
    flat = seeds.reshape(-1, 7)
    got = captured.program(run, run.position, run.rotmat, flat)
    want = run.given(flat)
    assert got.q.shape == (40, k, 7) and bool(want.success.float().mean() > 0.25)
    for name in ("q", "success", "position_error", "rotation_error", "iterations"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name


def test_the_program_reads_nothing_back_from_the_device(panda):
    """Seeding, every chunk, the restarts, the evaluation and the choice of the best slots:
    no operation that reads the device (what a CUDA graph cannot hold). The per-iteration
    loop here; the CPU's compiled loop kernel reads its iteration counter (the CPU's own;
    Triton's reads it on the device)."""
    targets = _targets(panda, 12, seed=3)
    solver = LevenbergMarquardt(loop="fixed", one_graph=True, fused_loop=False)
    run = _run(panda, targets, solver)
    captured.program(run, run.position, run.rotmat)  # warm-up: the limits' masks read once
    with Recorder() as seen:
        captured.program(run, run.position, run.rotmat)
    assert not seen.reads() and len(seen.ops) > 1000, seen.reads()


def test_the_program_runs_on_the_meta_device(panda, monkeypatch):
    """On tensors without data (the ``meta`` device) the program runs through: nothing in it
    reads a value back, and (after a first run that fills the robot's caches, as the eager
    call before a capture does) nothing makes a tensor from host data for the device: a CUDA
    graph's capture fails on both. The limits' masks, read once per robot before any solve,
    are given."""
    from torchik.ik.base import JointLimits

    masks = property(lambda lim: (lim.full_turn, lim.continuous, lim.full_turn | lim.continuous))
    monkeypatch.setattr(JointLimits, "_masks", masks)
    targets = _targets(panda, 5, seed=7).to("meta")
    robot = load_robot("panda", dtype=torch.float64).to("meta")  # .to moves in place
    made = []

    def watched(name, make):  # a tensor on the device made from the host's
        def call(*args, **kwargs):
            out = make(*args, **kwargs)
            host = name != "to" or args[0].device.type == "cpu"
            made.extend([name] if host and out.device.type == "meta" else [])
            return out

        return call

    for solver in (
        LevenbergMarquardt(one_graph=True, fused_loop=False, fused_step=False),
        LevenbergMarquardt(one_graph=True, fused_loop=False, fused_step=False, sync_every=4),
    ):
        for position_only in (False, True):
            run = _run(robot, targets, solver, position_only=position_only)
            captured.program(run, run.position, run.rotmat)
            with monkeypatch.context() as patch:
                for name in ("tensor", "as_tensor"):
                    patch.setattr(torch, name, watched(name, getattr(torch, name)))
                for name in ("new_tensor", "to"):
                    patch.setattr(torch.Tensor, name, watched(name, getattr(torch.Tensor, name)))
                result = captured.program(run, run.position, run.rotmat)
            assert result.q.shape == (5, 2, 7) and result.q.device.type == "meta"
            assert not made, made


@pytest.mark.skipif(
    not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1",
    reason="the fused kernels run on CUDA or in Triton's interpreter",
)
def test_the_program_on_the_fused_kernels_makes_nothing_from_host_data(monkeypatch):
    """With Triton's loop kernel and fused FK (on CUDA, or in Triton's interpreter): after a
    first run, a second makes no tensor from host data (a capture's copy), and solves."""
    pytest.importorskip("triton", reason="the fused kernels need Triton")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    robot = load_robot("panda", dtype=torch.float64, backend="fused").to(device)
    targets = _targets(robot, 3, seed=8).to(device)
    run = _run(robot, targets, seed_pool=64)
    problem = run.make(run.position, run.rotmat, 2)
    assert run.solver._loop_kernel_serves(problem, run.position)
    captured.program(run, run.position, run.rotmat)
    made = []
    with monkeypatch.context() as patch:
        for owner, name in ((torch, "tensor"), (torch, "as_tensor"), (torch.Tensor, "new_tensor")):
            make = getattr(owner, name)
            patch.setattr(
                owner, name, lambda *a, _n=name, _f=make, **k: made.append(_n) or _f(*a, **k)
            )
        result = captured.program(run, run.position, run.rotmat)
    assert not made and bool(result.success[:, 0].all()), made


@pytest.mark.skipif(
    not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1",
    reason="the fused kernels run on CUDA or in Triton's interpreter",
)
@pytest.mark.parametrize("given", [False, True])
def test_restarts_in_the_loop_kernel_give_the_programs_answers_bit_for_bit(given, monkeypatch):
    """``fused_restarts``: the early stop over each target's slots and the restarts in the
    loop kernel (``groups`` of ``fused.lm_loop``) leave every tensor of the carry as the
    operations between chunks do, float64: random seeds with restarts (some happen), and a
    warm start (given seeds, early stop, no restarts). Each chunk is one launch then."""
    pytest.importorskip("triton", reason="the fused kernels need Triton")

    device = "cuda" if torch.cuda.is_available() else "cpu"
    robot = load_robot("panda", dtype=torch.float64, backend="fused").to(device)
    targets = _targets(robot, 12, seed=13).to(device)
    targets[:3, :3, 3] += 2.0  # out of reach: their slots stall and restart
    seeds = robot.random_configuration(24, torch.Generator().manual_seed(3)).to(device)

    def solve(on: bool) -> None:
        solver = LevenbergMarquardt(loop="fixed", one_graph=True, max_iters=30, sync_every=4,
                                    fused_restarts=on, attempt_iters=6)  # fmt: skip
        run = _run(robot, targets, solver, seed_pool=0, restarts=not given)
        assert solver.takes_groups(run.make(run.position, run.rotmat, 2), seeds) is on
        torch.manual_seed(0)
        captured.program(run, run.position, run.rotmat, seeds if given else None)

    new = restarts_in_kernel_alike(monkeypatch, captured, solve, chunks=-(-31 // 4))
    assert given or bool((new.attempt > 0).any())  # restarts happened
    assert bool(new.finished.any()) and not bool(new.finished.all())  # early stops, and not all


def restarts_in_kernel_alike(monkeypatch, module, solve, chunks: int):
    """``solve(False)`` then ``solve(True)`` (``fused_restarts`` off, on), each a program of
    ``module`` that runs ``chunks`` chunks on Triton's loop kernel: the first launches take no
    ``groups``, the second's all do, and every tensor of the two carries is equal. Returns the
    carry with the restarts in the kernel."""
    from torchik.kinematics import fused

    launches, carries = [], {}
    real_loop, real_chunks = fused.lm_loop, module.run_chunks
    monkeypatch.setattr(fused, "lm_loop", lambda *a, **k: launches.append(k.get("groups"))
                        or real_loop(*a, **k))  # fmt: skip
    for on in (False, True):
        monkeypatch.setattr(module, "run_chunks", lambda *a, _on=on: carries.setdefault(
            _on, real_chunks(*a)))  # fmt: skip
        solve(on)
    assert launches[:chunks] == [None] * chunks and all(g is not None for g in launches[chunks:])
    assert len(launches) == 2 * chunks
    for a, b in zip(carries[False].tensors(), carries[True].tensors(), strict=True):
        assert torch.equal(a, b)
    return carries[True]


def test_seeds_per_slot_are_each_slots_nearest_pool_member(panda, monkeypatch):
    """Draw ``d``, target ``t``, slot ``s`` picks from pool ``d * S + s`` of one draw of
    ``D * S`` pools: what :func:`nearest_in_pools` picks there."""
    targets = _targets(panda, 9, seed=4)
    position, rotmat = targets[:, :3, 3], targets[:, :3, :3]
    seeds = nearest_per_slot(panda, LINK, position, rotmat, 3, 64, 0.3,
                             torch.Generator().manual_seed(5), draws=2)  # fmt: skip
    pool = panda.random_configuration(2 * 3 * 64, torch.Generator().manual_seed(5))
    pool = pool.view(2, 3, 64, 7)
    rows = torch.arange(27)
    for d in range(2):
        expected = nearest_in_pools(panda, LINK, position[rows // 3], rotmat[rows // 3],
                                    pool[d], rows % 3, 0.3)  # fmt: skip
        assert torch.equal(seeds[d], expected)
    assert seeds.shape == (2, 27, 7) and not torch.equal(seeds[0], seeds[1])
    monkeypatch.setattr(seeding, "ONE_PRODUCT", 0)  # one product per draw: the same seeds
    again = nearest_per_slot(panda, LINK, position, rotmat, 3, 64, 0.3,
                             torch.Generator().manual_seed(5), draws=2)  # fmt: skip
    assert torch.equal(again, seeds)
    assert nearest_per_slot(panda, LINK, position, None, 2, 8, 0.3).shape == (1, 18, 7)


def test_pools_serve_up_to_max_pools_slots(panda):
    """``pooled``: a pool, and at most ``MAX_POOLS`` slots per target; ``nearest_seeder``
    gives uniform seeds otherwise (each row's own draw, not a pool's nearest member)."""
    assert seeding.pooled(seeding.MAX_POOLS, 256) and seeding.pooled(1, 1)
    assert not seeding.pooled(seeding.MAX_POOLS + 1, 256) and not seeding.pooled(2, 0)
    targets = _targets(panda, 2, seed=5)
    rows, attempt = torch.arange(4), torch.zeros(4, dtype=torch.long)
    for size in (0, 64):
        seeder = seeding.nearest_seeder(panda, LINK, targets[:, :3, 3], targets[:, :3, :3], 2,
                                        size, 0.3, torch.Generator().manual_seed(1))  # fmt: skip
        uniform = seeding.uniform_seeder(panda, torch.Generator().manual_seed(1))
        assert torch.equal(seeder(rows, attempt), uniform(rows, attempt)) is (size == 0)


def test_which_calls_the_program_takes(panda, monkeypatch):
    """Where chunks are captured (CUDA; forced here): random seeds with restarts and rounds,
    ``one_graph`` on, no boxes, at most ``MAX_ROWS`` rows, no generator the graph cannot
    advance; ``solve_ik`` then takes it."""
    targets = _targets(panda, 4, seed=6)
    assert not captured.serves(_run(panda, targets))  # the CPU: chunks are not captured
    monkeypatch.setattr(captured, "capturable", lambda solver, q: True)
    assert captured.serves(_run(panda, targets))
    box = (panda.lower.expand(4, 7), panda.upper.expand(4, 7))
    refused = [
        _run(panda, targets, LevenbergMarquardt(loop="fixed", one_graph=False)),
        _run(panda, targets, LevenbergMarquardt(loop="fixed", one_graph=True, round_iters=0)),
        _run(panda, targets, LevenbergMarquardt(loop="host", one_graph=True)),
        _run(panda, targets, restarts=False),
        _run(panda, targets, bounds=box),
        _run(panda, targets, generator=torch.Generator().manual_seed(0)),
    ]
    assert not any(captured.serves(run) for run in refused)
    monkeypatch.setattr(captured, "MAX_ROWS", 4 * 10 - 1)  # 4 targets x (2 + 7 retry slots)
    assert captured.serves(_run(panda, targets))
    monkeypatch.setattr(captured, "MAX_ROWS", 4 * 4 - 1)  # not even 2 + MIN_RETRY_SLOTS
    assert not captured.serves(_run(panda, targets))
    seeds = panda.random_configuration(8)
    refining = LevenbergMarquardt(loop="fixed", one_graph=True, early_stop=False)
    assert captured.serves(_run(panda, targets, refining, restarts=False), seeds)
    assert not captured.serves(_run(panda, targets, refining), seeds)  # restarts
    assert captured.serves(_run(panda, targets, restarts=False), seeds)  # a warm start
    assert not captured.serves(_run(panda, targets, restarts=False, k=3), seeds)  # rounds
    monkeypatch.undo()
    taken = []
    monkeypatch.setattr(captured, "capturable", lambda solver, q: True)
    monkeypatch.setattr(captured, "solve", lambda run, seeds: taken.append(run) or
                        captured.program(run, run.position, run.rotmat))  # fmt: skip
    method = LevenbergMarquardt(loop="fixed", one_graph=True)
    result = solve_ik(panda, targets, method=method, num_seeds=3)
    assert len(taken) == 1 and result.q.shape == (4, 3, 7) and bool(result.success[:, 0].all())
    solve_ik(panda, targets, method=method, seeds=panda.neutral().expand(1, 7), restarts=True)
    assert len(taken) == 1  # given seeds with restarts and early stop: the rounds
    monkeypatch.setattr(captured, "solve", lambda run, seeds: taken.append(seeds) or
                        captured.program(run, run.position, run.rotmat, seeds))  # fmt: skip
    refined = refine_samples(panda, targets, panda.random_configuration(12).view(4, 3, 7),
                             method=method)  # fmt: skip
    assert len(taken) == 2 and taken[1].shape == (12, 7) and refined.q.shape == (4, 3, 7)


def test_retry_slots_shrink_to_fit_max_rows(panda, monkeypatch):
    """``retry_seeds`` slots per target, fewer where the rows would pass ``MAX_ROWS`` (down to
    ``MIN_RETRY_SLOTS``), none fitting: ``None``; the program runs that many."""
    assert captured.retry_slots(1000, 2, 8) == 8
    assert captured.retry_slots(10_000, 2, 8) == 4  # 60 000 rows of 65 536
    assert captured.retry_slots(16_384, 2, 8) == 2
    assert captured.retry_slots(16_385, 2, 8) is None
    assert captured.retry_slots(30_000, 1, 1) == 1  # fewer asked for than the minimum
    assert captured.retry_slots(0, 2, 8) == 8
    monkeypatch.setattr(captured, "MAX_ROWS", 4 * 5)
    slots, seeds = [], captured._seeds
    monkeypatch.setattr(captured, "_seeds", lambda run, p, r, n, d: slots.append(n) or
                        seeds(run, p, r, n, d))  # fmt: skip
    targets = _targets(panda, 4, seed=8)
    torch.manual_seed(0)
    result = captured.program(_run(panda, targets, k=2), targets[:, :3, 3], targets[:, :3, :3])
    assert slots == [5] and result.q.shape == (4, 2, 7)  # 2 + 3 retry slots
    monkeypatch.setattr(captured, "MAX_ROWS", 4 * 4 - 1)
    with pytest.raises(ValueError, match="MAX_ROWS"):
        captured.program(_run(panda, targets, k=2), targets[:, :3, 3], targets[:, :3, :3])


def test_one_graph_is_the_default():
    """Timed on an H200 (1 / 1 000 Panda poses 1.36 / 1.56 ms against 3.90 / 13.5 ms in rounds):
    on by default; it changes nothing on the CPU."""
    assert LevenbergMarquardt().settings.one_graph


def test_the_setting_is_checked():
    with pytest.raises(TypeError, match="one_graph"):
        LevenbergMarquardt(one_graph=1)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (CI has none)")
@pytest.mark.parametrize(("dtype", "restarts"), [(torch.float32, False), (torch.float64, False),
                                                (torch.float32, True)])  # fmt: skip
def test_the_program_is_captured_once_and_replayed_without_a_sync(dtype, restarts):
    """First call eager, second captures, later ones replay the same graph, with no host sync;
    each call's answer is its own targets' (FK of the returned slots); also with the restarts
    in the loop kernel (``fused_restarts``: its atomics inside a graph)."""
    robot = load_robot("panda", dtype=dtype).to("cuda")
    captured._Program._cache.clear()
    method = LevenbergMarquardt(one_graph=True, fused_restarts=restarts)
    for seed in range(4):
        targets = _targets(robot, 300, seed=10 + seed).to("cuda")
        result = solve_ik(robot, targets, method=method)
        assert float(result.success.any(-1).float().mean()) >= 0.99
        best = robot.forward_kinematics(result.q[:, 0], LINK)
        error = (best[:, :3, 3] - targets[:, :3, 3]).norm(dim=-1)
        torch.testing.assert_close(error, result.position_error[:, 0], rtol=0, atol=1e-5)
    (entry,) = captured._Program._cache.values()
    assert entry.graph is not None and not entry.failed
    torch.cuda.set_sync_debug_mode("error")
    try:
        entry.graph.replay()  # a replay never syncs
    finally:
        torch.cuda.set_sync_debug_mode("default")
    targets = _targets(robot, 50, seed=20).to("cuda")
    seeds = robot.random_configuration(50 * 4).view(50, 4, 7)
    refining = LevenbergMarquardt(one_graph=True, fused_loop=True, fused_restarts=restarts)
    in_rounds = LevenbergMarquardt(fused_loop=True, one_graph=False)
    rounds = refine_samples(robot, targets, seeds, method=in_rounds)
    for _ in range(3):  # eager, captured, replayed: the rounds' answers each time
        got = refine_samples(robot, targets, seeds, method=refining)
        assert torch.equal(got.success, rounds.success)
        torch.testing.assert_close(got.q, rounds.q, rtol=0, atol=1e-5)


def _fake_cuda(monkeypatch, fail: bool = False):
    """CUDA's calls stood in for on the CPU (:func:`tests.ik.fake_cuda.fake_cuda`), the
    program of ``solve_ik`` recorded."""
    fake_cuda(monkeypatch, captured, fail=fail)


def test_a_program_is_warmed_up_captured_once_then_replayed(panda, monkeypatch):
    """The control flow of :class:`captured._Program` (CUDA's calls stood in for on the CPU):
    the first call of a shape runs eagerly, the second captures, later calls copy their own
    targets in and replay; every answer is its own targets' and a copy (the next replay does
    not change it); another shape or robot is another program."""
    _fake_cuda(monkeypatch)
    method = LevenbergMarquardt(loop="fixed", one_graph=True, fused_loop=False)
    results = []
    for seed in range(4):
        targets = _targets(panda, 6, seed=30 + seed)
        results.append((targets, solve_ik(panda, targets, method=method)))
    assert len(captured._Program._cache) == 1 and len(FakeGraph.made) == 1
    assert FakeGraph.made[0].replays == 3  # call 2 captured, then replayed; calls 3 and 4
    for targets, result in results:  # each answer is its own targets', kept after later calls
        assert bool(result.success[:, 0].all())
        pose = panda.forward_kinematics(result.q[:, 0], LINK)
        error = (pose[:, :3, 3] - targets[:, :3, 3]).norm(dim=-1)
        torch.testing.assert_close(error, result.position_error[:, 0], rtol=0, atol=1e-12)
    solve_ik(panda, _targets(panda, 9, seed=40), method=method)  # another bucket (16, not 8)
    assert len(captured._Program._cache) == 2
    other = load_robot("panda", dtype=torch.float64)
    solve_ik(other, _targets(other, 6, seed=41), method=method)  # another robot, same shape
    assert len(captured._Program._cache) == 3 and len(FakeGraph.made) == 1  # warmed up only
    seeds = panda.random_configuration(12).view(6, 2, 7)
    targets = _targets(panda, 6, seed=42)
    want = refine_samples(
        panda, targets, seeds, method=LevenbergMarquardt(loop="fixed", fused_loop=False)
    )
    for _ in range(3):  # given seeds: eager, captured, replayed, each the rounds' answers
        got = refine_samples(panda, targets, seeds, method=method)
        assert torch.equal(got.q, want.q) and torch.equal(got.success, want.success)


def test_a_program_made_in_inference_mode_is_not_reused_outside_it(panda, monkeypatch):
    """Buffers made in inference mode take no in-place copy outside it: each mode has its
    own program."""
    _fake_cuda(monkeypatch)
    method = LevenbergMarquardt(loop="fixed", one_graph=True, fused_loop=False)
    targets = _targets(panda, 4, seed=60)
    with torch.inference_mode():
        for _ in range(3):
            solve_ik(panda, targets, method=method)
    for _ in range(3):
        assert bool(solve_ik(panda, targets, method=method).success[:, 0].all())
    assert len(captured._Program._cache) == 2 and len(FakeGraph.made) == 2


def test_a_failed_capture_warns_once_and_runs_the_rounds(panda, monkeypatch):
    _fake_cuda(monkeypatch, fail=True)
    method = LevenbergMarquardt(loop="fixed", one_graph=True, fused_loop=False)
    targets = _targets(panda, 6, seed=50)
    solve_ik(panda, targets, method=method)  # eager: no capture yet
    with pytest.warns(RuntimeWarning, match="CUDA graph capture failed"):
        second = solve_ik(panda, targets, method=method)
    (entry,) = captured._Program._cache.values()
    assert entry.failed and entry.graph is None and bool(second.success.any(-1).all())
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning: the rounds straight away
        third = solve_ik(panda, targets, method=method)
    assert bool(third.success.any(-1).all()) and third.q.shape == (6, 2, 7)


def test_target_counts_share_the_program_of_their_bucket(panda, monkeypatch):
    """Counts 5 to 8 share one program made for 8 targets (captured on the second call, then
    replayed); each answer is its own targets', and with pooled seeds the padding changes no
    draw: the first (eager) call's answers are an unpadded program's bit for bit (the stand-in
    graph draws again when it replays)."""
    assert [fixed.bucket(n) for n in (0, 1, 2, 3, 5, 8, 1000, 1025)] == [
        1, 1, 2, 4, 8, 8, 1024, 2048]  # fmt: skip
    _fake_cuda(monkeypatch)
    method = LevenbergMarquardt(loop="fixed", one_graph=True, fused_loop=False)
    for i, n in enumerate((5, 6, 7, 8, 5)):
        targets = _targets(panda, n, seed=70 + i)
        torch.manual_seed(i)
        got = solve_ik(panda, targets, method=method)
        assert got.q.shape == (n, 2, 7) and bool(got.success[:, 0].all())
        pose = panda.forward_kinematics(got.q[:, 0], LINK)
        error = (pose[:, :3, 3] - targets[:, :3, 3]).norm(dim=-1)
        torch.testing.assert_close(error, got.position_error[:, 0], rtol=0, atol=1e-12)
        if i == 0:
            torch.manual_seed(i)
            want = captured.program(_run(panda, targets, solver=method), targets[:, :3, 3],
                                    targets[:, :3, :3])  # fmt: skip
            assert torch.equal(got.q, want.q) and torch.equal(got.iterations, want.iterations)
    assert len(captured._Program._cache) == 1 and FakeGraph.made[0].replays == 4
    seeds = panda.random_configuration(6).view(3, 2, 7)  # given seeds: padded and cut too
    targets = _targets(panda, 3, seed=80)
    want = refine_samples(
        panda, targets, seeds, method=LevenbergMarquardt(loop="fixed", fused_loop=False)
    )
    for _ in range(3):
        got = refine_samples(panda, targets, seeds, method=method)
        assert torch.equal(got.q, want.q) and torch.equal(got.success, want.success)
    monkeypatch.setattr(captured, "BUCKETS", False)
    solve_ik(panda, _targets(panda, 5, seed=90), method=method)
    assert any(key[9] == (5, 3) for key in captured._Program._cache)  # its own count

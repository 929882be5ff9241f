"""native.lm_loop, the CPU's compiled IK loop: one iteration is torchik's Levenberg-Marquardt
step and projection, its state is the fixed-shape loop's, and it checks its arguments.

The reference: :class:`torchik.ik.LevenbergMarquardt`'s ``linearize`` and ``step`` and
``IKProblem.project`` on the reference kinematics, float64, on the rows and robots of
:mod:`tests.kinematics.lm_cases` (joints on their limits; prismatic, continuous and mimic joints,
branches). Whole solves against the per-iteration loop: ``tests/ik/test_fixed.py``.
"""

from __future__ import annotations

import pytest
import torch

from tests.drawn_warnings import mimic_limits_allowed
from tests.kinematics.lm_cases import (
    CASES,
    SETTINGS,
    boxes,
    case_robot,
    lm_problem,
    lm_rows,
    solver_step,
)
from torchik import Robot, load_robot
from torchik.ik.lm import LevenbergMarquardt

pytest.importorskip("numba", reason="the CPU's compiled loop needs Numba (a dependency)")


def _state(q, track: bool) -> dict:
    n = q.shape[0]
    state = dict(best_q=q.clone(), best_cost=torch.full((n,), torch.inf, dtype=q.dtype),
                 iterations=torch.full((n,), 10), finished=torch.zeros(n, dtype=torch.bool),
                 it=torch.zeros((), dtype=torch.long))  # fmt: skip
    if track:
        state.update(seed_cost=torch.full((n,), torch.inf, dtype=q.dtype),
                     stall=torch.zeros(n, dtype=torch.long), age=torch.zeros(n, dtype=torch.long),
                     stalled=torch.zeros(n, dtype=torch.bool))  # fmt: skip
    return state


def _limits(robot, q):
    """The robot's limits within a box per row of ``q``."""
    from torchik.ik import JointLimits

    return JointLimits.of(robot).within(*boxes(robot, q))


def _loop(robot, link, q, position, rotmat, state, n_iters=1, tol=1e-9, limits=None, **options):
    from torchik.kinematics import native

    problem = lm_problem(robot, link, position, rotmat)
    lim, w = limits or problem.limits, problem.weights(SETTINGS.rotation_weight)
    native.lm_loop(q, robot.tree, robot.link_index(link), position, rotmat, w, SETTINGS.damping,
                   lim.lower, lim.upper, state, n_iters=n_iters, max_iters=10,
                   tol_position=tol, tol_rotation=tol, damping_floor=SETTINGS.damping_floor,
                   continuous=lim.continuous, full_turn=lim.full_turn, **options)  # fmt: skip


@pytest.mark.parametrize("box", [False, True])
@pytest.mark.parametrize(("name", "link", "pose"), CASES)
def test_one_iteration_is_the_solver_step_and_projection(name, link, pose, box):
    """With the joint limits, or within a box per row (continuous joints' boxes anywhere on
    the real line, every joint clamped, periodic ones first moved by whole turns)."""
    robot, link, (q, position, rotmat), lin, expected, limits = solver_step(name, link, pose, box)
    x, state = q.clone(), _state(q, track=True)
    _loop(robot, link, x, position, rotmat, state, limits=limits)
    torch.testing.assert_close(x, expected, atol=1e-10, rtol=0)
    torch.testing.assert_close(state["best_cost"], lin.cost, atol=1e-12, rtol=1e-12)
    assert torch.equal(state["best_q"], q) and not bool(state["finished"].any())
    assert torch.equal(state["stall"], torch.zeros_like(state["stall"]))  # it made progress
    assert torch.equal(state["age"], torch.ones_like(state["age"]))


def test_converged_rows_stop_and_record_their_iteration():
    """Tolerances every row meets after a few iterations: each row finishes, keeps the
    converged ``q`` as its best, records the iteration it converged at, and is not stalled;
    ``stall`` runs on by the iterations left (its cost no longer falls)."""
    robot, link = case_robot("panda"), "panda_hand"
    g = torch.Generator().manual_seed(2)
    q = robot.random_configuration(20, g)
    moved = torch.minimum(torch.maximum(q + 1e-2 * torch.randn(q.shape, generator=g,
                                                               dtype=q.dtype), robot.lower),
                          robot.upper)  # fmt: skip
    target = robot.forward_kinematics(moved, link)  # reachable, 1e-2 rad away
    position, rotmat = target[:, :3, 3].contiguous(), target[:, :3, :3].contiguous()
    state = _state(q, track=True)
    _loop(robot, link, q, position, rotmat, state, n_iters=8, tol=1e-6, patience=2)
    assert bool(state["finished"].all()) and not bool(state["stalled"].any())
    assert torch.equal(state["best_q"], q)
    at = state["iterations"]
    assert bool((at > 0).all() & (at < 8).all())
    assert bool((state["stall"] >= 8 - at - 1).all()) and bool((state["age"] == 8).all())
    pose = robot.forward_kinematics(q, link)
    assert bool(((pose[:, :3, 3] - position).norm(dim=-1) < 1e-6).all())


def test_stalled_rows_are_flagged_without_track_nothing_is_counted():
    robot, link = case_robot("ur5"), "ee_link"
    q, position, rotmat = lm_rows(robot, link, 20)
    state = _state(q, track=True)
    _loop(robot, link, q.clone(), position, rotmat, state, n_iters=5, attempt_iters=3)
    assert bool((state["stalled"] == ~state["finished"]).all())  # age 5 >= attempt_iters 3
    plain = _state(q, track=False)
    _loop(robot, link, q.clone(), position, rotmat, plain, n_iters=5)
    assert set(plain) == {"best_q", "best_cost", "iterations", "finished", "it"}
    torch.testing.assert_close(plain["best_q"], state["best_q"], atol=0, rtol=0)


def _pools(robot, link, position, rotmat, n_pools, k, size, seed=0):
    """``restarts`` of ``lm_loop``: ``n_pools`` pools of ``k`` sub-pools of ``size``."""
    from torchik.ik.seeding import link_features, target_features

    g = torch.Generator().manual_seed(seed)
    configs = robot.random_configuration(n_pools * k * size, g)
    features = link_features(robot.forward_kinematics(configs, link), rotmat is not None)
    aims = target_features(position, rotmat, SETTINGS.rotation_weight)
    attempt = torch.zeros(position.shape[0], dtype=torch.long)
    return (configs.view(n_pools, k * size, -1), features.view(n_pools, k * size, -1), aims,
            attempt, k)  # fmt: skip


def test_stalled_rows_restart_within_the_call_from_the_pools_in_rank_order():
    """With ``restarts``, a row that stalls starts again at once: attempt ``a`` takes the
    member of rank ``(a - 1) // R`` of sub-pool ``(row + a) mod k`` of pool ``(a - 1) mod R``
    (a row of unreachable targets stalls after every iteration with ``attempt_iters=1``)."""
    robot, link = case_robot("ur5"), "ee_link"
    q, position, rotmat = lm_rows(robot, link, 4)
    position = position + 5.0  # out of reach: every attempt stalls
    restarts = _pools(robot, link, position, rotmat, n_pools=2, k=2, size=16)
    configs, features, aims, attempt, k = restarts
    scores = (aims.double() @ features.double().flatten(0, 1).T).view(4, 2, k, 16)
    for n_iters in (1, 2, 3):
        state, x = _state(q, track=True), q.clone()
        attempt.zero_()
        _loop(robot, link, x, position, rotmat, state, n_iters=n_iters, attempt_iters=1,
              restarts=restarts)  # fmt: skip
        assert attempt.tolist() == [n_iters] * 4 and not state["stalled"].any()
        a, rank = n_iters, (n_iters - 1) // 2  # the last restart's, which q still holds
        for row in range(4):
            sub, pool = (row + a) % k, (a - 1) % 2
            member = scores[row, pool, sub].argsort()[rank]
            expected = configs[pool, sub * 16 + member]
            torch.testing.assert_close(x[row], expected, atol=0, rtol=0)
    # without them the rows wait, stalled, for the caller
    state, x = _state(q, track=True), q.clone()
    _loop(robot, link, x, position, rotmat, state, n_iters=2, attempt_iters=1)
    assert state["stalled"].all()
    # once the ranks run out (one member per sub-pool, one pool: one restart) likewise
    one = _pools(robot, link, position, rotmat, n_pools=1, k=1, size=1)
    state = _state(q, track=True)
    _loop(robot, link, q.clone(), position, rotmat, state, n_iters=3, attempt_iters=1,
          restarts=one)  # fmt: skip
    assert one[3].tolist() == [1] * 4 and state["stalled"].all()
    three = _pools(robot, link, position, rotmat, n_pools=1, k=3, size=4)  # 4 rows: not 3 slots
    with pytest.raises(ValueError, match="multiple of"):
        _loop(robot, link, q.clone(), position, rotmat, _state(q, track=True), restarts=three,
              grouped_chunk=2)  # fmt: skip


def test_parts_keep_a_targets_slots_together(monkeypatch):
    from torchik.kinematics import native

    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    parts = native._parts(1000, 100, unit=3)
    assert len(parts) == 4 and parts[0].start == 0 and parts[-1].stop == 1000
    assert all(
        a.stop == b.start and a.stop % 3 == 0 for a, b in zip(parts[:-1], parts[1:], strict=True)
    )
    pieces = native._split(1000, 4 * native.PIECES_PER_THREAD, unit=3)  # what threads take
    assert len(pieces) == 4 * native.PIECES_PER_THREAD and pieces[-1].stop == 1000
    assert all(a.stop == b.start and a.stop % 3 == 0 and b.stop > b.start
               for a, b in zip(pieces[:-1], pieces[1:], strict=True))  # fmt: skip
    assert native._split(7, 5, unit=3) == [slice(0, 3), slice(3, 6), slice(6, 7)]  # none empty


def test_threads_take_pieces_until_none_is_left(monkeypatch):
    """:func:`native._run_rows` runs every row once, in pieces the threads take in turn, and
    a piece that fails fails the call."""
    from torchik.kinematics import native

    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)
    seen: list[slice] = []
    native._run_rows(seen.append, 100, per_thread=10, unit=2, pieces=4)
    rows = sorted(i for part in seen for i in range(part.start, part.stop))
    assert rows == list(range(100)) and len(seen) == 12

    def fail(part: slice) -> None:
        raise RuntimeError("piece failed")

    with pytest.raises(RuntimeError, match="piece failed"):
        native._run_rows(fail, 100, per_thread=10, pieces=4)


def test_lm_loop_checks_its_arguments_and_runs_nothing_on_an_empty_batch():
    from torchik.kinematics import native

    robot, link = case_robot("panda"), "panda_hand"
    q, position, rotmat = lm_rows(robot, link, 4)
    with pytest.raises(ValueError, match="runs on CPU tensors, not on meta"):
        _loop(robot, link, q.to("meta"), position, rotmat, _state(q, True))
    with pytest.raises(TypeError, match="float32 or float64, got torch.float16"):
        _loop(robot, link, q.half(), position, rotmat, _state(q, True))
    with pytest.raises(ValueError, match="lm_loop: state must hold"):
        _loop(robot, link, q, position, rotmat, {**_state(q, False), "stall": q[:, 0]})
    with pytest.raises(ValueError, match=r"lm_loop: lower must have shape \(7,\) or \(4, 7\)"):
        _loop(robot, link, q, position, rotmat, _state(q, True), limits=_limits(robot, q[:2]))
    with pytest.raises(TypeError, match="target_position has dtype"):
        _loop(robot, link, q, position.float(), rotmat, _state(q, True))
    before, state = q.clone(), _state(q, True)
    _loop(robot, link, q, position, rotmat, state, n_iters=0)
    _loop(robot, link, q[:0], position[:0], rotmat[:0], {k: v[:0] if v.dim() else v
                                                          for k, v in state.items()})  # fmt: skip
    assert torch.equal(q, before) and bool(torch.isinf(state["best_cost"]).all())
    assert native.runs_on(q) and not native.runs_on(q.half()) and not native.runs_on(q.to("meta"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_float32_and_float64_solves_meet_the_targets(dtype):
    """``solve_ik`` on the CPU takes the compiled loop by default; its answers are checked by
    FK here: every target solved, answers within the limits."""
    from torchik import load_robot, solve_ik

    robot = load_robot("panda", dtype=dtype)
    g = torch.Generator().manual_seed(5)
    targets = robot.forward_kinematics(robot.random_configuration(100, g), "panda_hand")
    result = solve_ik(robot, targets, generator=g)
    assert bool(result.success.any(-1).all())
    best = result.q[torch.arange(100), result.success.float().argmax(-1)]
    reached = robot.forward_kinematics(best, "panda_hand")
    assert bool(((reached[:, :3, 3] - targets[:, :3, 3]).norm(dim=-1) < 1e-3).all())
    assert bool(((best >= robot.lower) & (best <= robot.upper)).all())


def test_rows_split_over_threads_give_the_same_answers():
    """With more threads (``torch.get_num_threads()``, what ``solve_ik(num_threads=...)``
    sets) the rows run in parts, in parallel: each row's answer is the one thread's."""
    from torchik.kinematics import native

    robot, link = case_robot("panda"), "panda_hand"
    q, position, rotmat = lm_rows(robot, link, 4 * native.ROWS_PER_THREAD)
    out = {}
    before = torch.get_num_threads()
    for threads in (1, 3):
        torch.set_num_threads(threads)
        try:
            x, state = q.clone(), _state(q, track=True)
            assert len(native._parts(len(q))) == threads
            _loop(robot, link, x, position, rotmat, state, n_iters=3)
        finally:
            torch.set_num_threads(before)
        out[threads] = (x, state)
    assert torch.equal(out[1][0], out[3][0])
    for key, value in out[1][1].items():
        assert torch.equal(value, out[3][1][key]), key


def test_without_a_place_for_numbas_cache_the_kernel_compiles_and_solves():
    """Numba refuses ``cache=True`` where it finds no writable folder (a read-only install
    without a home): the kernels are then compiled uncached in every process. Forced here
    with a locator Numba cannot find, in a fresh process."""
    import os
    import subprocess
    import sys

    code = ("import torch, torchik\n"
            "from torchik.kinematics import _lm_numba\n"
            "r = torchik.load_robot('panda', dtype=torch.float64)\n"
            "t = r.forward_kinematics(r.random_configuration(4), 'panda_hand')\n"
            "ok = bool(torchik.solve_ik(r, t).success.any(-1).all())\n"
            "print(_lm_numba.CACHE, ok)\n")  # fmt: skip
    env = {**os.environ, "NUMBA_CACHE_LOCATOR_CLASSES": "NoSuchLocator"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, check=True)  # fmt: skip
    assert out.stdout.split() == ["False", "True"], out.stderr


def _random_tree(draw) -> str:
    """A random tree of up to 8 moving and fixed joints (revolute, continuous, prismatic,
    mimic), moderate origins, axes and limits: a URDF text."""
    from hypothesis import strategies as st

    value = st.floats(-2, 2, allow_nan=False, allow_infinity=False)
    vector = lambda: " ".join(repr(draw(value)) for _ in range(3))  # noqa: E731
    count, joints, actuated = draw(st.integers(2, 9)), [], []
    for i in range(1, count):
        kind = draw(st.sampled_from(("revolute", "continuous", "prismatic", "fixed")))
        axis = vector()
        text = (f'<joint name="j{i}" type="{kind}"><parent link="l{draw(st.integers(0, i - 1))}"/>'
                f'<child link="l{i}"/><origin xyz="{vector()}" rpy="{vector()}"/>'
                f'<axis xyz="{axis if axis.strip("0. -") else "0 0 1"}"/>')  # fmt: skip
        if kind in ("revolute", "prismatic"):
            low = draw(st.floats(-3, 2.5))
            text += f'<limit lower="{low!r}" upper="{low + draw(st.floats(0.1, 6.5))!r}"/>'
        if kind != "fixed" and actuated and draw(st.booleans()):
            text += (f'<mimic joint="{draw(st.sampled_from(actuated))}" '
                     f'multiplier="{draw(value)!r}" offset="{draw(value)!r}"/>')  # fmt: skip
        elif kind != "fixed":
            actuated.append(f"j{i}")
        joints.append(text + "</joint>")
    links = "".join(f'<link name="l{i}"/>' for i in range(count))
    return f'<robot name="fuzz">{links}{"".join(joints)}</robot>'


def random_robot(data) -> Robot:
    """A robot of :func:`_random_tree` drawn from hypothesis' ``data``, float64; its mimic
    joints' own random limits, which their drivers' ranges often leave, are allowed to warn."""
    from hypothesis import strategies as st

    with mimic_limits_allowed():
        return Robot.from_urdf(data.draw(st.composite(_random_tree)()), dtype=torch.float64)


def test_one_iteration_is_the_solver_step_on_random_trees():
    """Random trees (every joint kind, mimic joints, joints on their limits, any link, pose or
    position targets, the joint limits or a box per row): one compiled iteration is the
    solver's step and projection, float64 (to 1e-7: a random tree's damped system can be
    ill-conditioned, where Cholesky and LU differ by more than on the bundled arms)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
    @given(st.data())
    def check(data):
        robot = random_robot(data)
        link = data.draw(st.sampled_from(robot.link_names))
        q, position, rotmat = lm_rows(robot, link, 24)
        rotmat = rotmat if data.draw(st.booleans()) else None
        box = boxes(robot, q) if data.draw(st.booleans()) else None
        problem = lm_problem(robot, link, position, rotmat, box)
        solver = LevenbergMarquardt(SETTINGS)
        lin = solver.linearize(problem, q)
        expected = problem.project(solver.step(problem, q, lin, {}))
        x = q.clone()
        _loop(robot, link, x, position, rotmat, _state(q, track=False), limits=problem.limits)
        moved = ~problem.converged(lin)  # a row already on its target does not step
        torch.testing.assert_close(x[moved], expected[moved], atol=1e-7, rtol=1e-7)
        assert torch.equal(x[~moved], q[~moved])

    check()


def test_warm_up_loads_the_kernel_for_a_trees_dtype(monkeypatch):
    """The IK loop's kernel, the compiled round's (what ``solve_ik`` runs on the CPU), FK's
    and whole-body IK's check, each for the tree's dtype."""
    from torchik.kinematics import _lm_numba, native

    kernels = ("lm_loop", "ik_round", "pool_features", "link_poses", "link_jacobian",
               "link_errors")  # fmt: skip
    for dtype in (torch.float32, torch.float64):
        assert native.warm_up(load_robot("ur5", dtype=dtype).tree)
        name = str(dtype).removeprefix("torch.")
        for kernel in kernels:
            signatures = getattr(_lm_numba, kernel).signatures
            assert any(name in str(sig[0]) for sig in signatures), (kernel, dtype)
    monkeypatch.setattr(native, "available", lambda: False)  # as without Numba
    assert not native.warm_up(load_robot("ur5", dtype=torch.float64).tree)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_forked_child_runs_rows_in_parallel_too():
    """After the parent used its threads, a forked child (a data-loader worker) makes its own
    (the inherited pool has no threads there: its work would wait forever)."""
    import os
    import time

    from torchik.kinematics import native

    robot, link = case_robot("panda"), "panda_hand"
    q, position, rotmat = lm_rows(robot, link, 2 * native.ROWS_PER_THREAD)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        _loop(robot, link, q.clone(), position, rotmat, _state(q, True))  # the parent's pool
        pid = os.fork()
        if pid == 0:  # the child: exit 0 if the parts ran, whatever happens
            code = 1
            try:
                _loop(robot, link, q.clone(), position, rotmat, _state(q, True))
                code = 0
            finally:
                os._exit(code)
        for _ in range(600):  # up to 60 s, then the child is taken as hung
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child's solve hung")
    finally:
        torch.set_num_threads(before)
    assert os.waitstatus_to_exitcode(status) == 0


def _wholebody_rows(robot, links, n, poses, seed=0):
    """``q`` with some joints on a limit and, per link, a pose target (``poses[i]``) or a
    position target, far (another configuration's) or near (``q``'s, moved a little)."""
    g = torch.Generator().manual_seed(seed)
    q = robot.random_configuration(n, generator=g)
    on_limit = torch.rand(q.shape, generator=g) < 0.15
    if robot.floating:  # the joints only; the base anywhere in a 2 m cube
        on_limit[:, :7] = False
        q[:, :3] = 2 * torch.rand(n, 3, generator=g, dtype=q.dtype) - 1
    q = torch.where(on_limit, torch.where(torch.rand(q.shape, generator=g) < 0.5, robot.lower,
                                          robot.upper), q)  # fmt: skip
    far = robot.forward_kinematics(robot.random_configuration(n, generator=g), links)
    near = robot.forward_kinematics(q + 1e-3 * torch.randn(q.shape, generator=g, dtype=q.dtype),
                                    links)  # fmt: skip
    pose = torch.where((torch.arange(n) % 2 == 0)[:, None, None, None], far, near)
    targets = {link: pose[:, i] if poses[i] else pose[:, i, :3, 3] for i, link in enumerate(links)}
    return q, targets


WHOLE_BODY = [("two_arms", (True, False)), ("g1", (True, True)), ("g1_mixed", (False, True)),
              ("g1_floating", (True, False, True, True))]  # fmt: skip
FEET = ["left_ankle_roll_link", "right_ankle_roll_link"]
HANDS = ["left_rubber_hand", "right_rubber_hand"]


def _floating_g1():
    from torchik import Robot
    from torchik.description import bundled_urdf

    return Robot.from_urdf(bundled_urdf("g1"), dtype=torch.float64, floating_base=True)


@pytest.mark.parametrize("posture", [0.0, 0.5])
@pytest.mark.parametrize("held", [False, True])
@pytest.mark.parametrize(("name", "poses"), WHOLE_BODY)
def test_one_iteration_of_several_links_is_the_whole_body_step(name, poses, held, posture):
    """Several links at once (poses and positions, unequal weights), held joints (a box per
    row at their rest value, zero Jacobian columns) and the posture step in the null space:
    one compiled iteration is :class:`~torchik.ik.wholebody.WholeBodyLM`'s linearization, step
    and projection, float64; its state is the fixed-shape loop's."""
    from tests.ik.test_wholebody import TWO_ARMS
    from torchik import Robot
    from torchik.ik.fixed import Carry
    from torchik.ik.wholebody.solve import WholeBodyLM, _problem

    if name == "two_arms":
        robot, links = Robot.from_urdf(TWO_ARMS, dtype=torch.float64), ["left_hand", "right_hand"]
    elif name == "g1_floating":
        robot, links = _floating_g1(), FEET + HANDS
    else:
        robot, links = load_robot("g1", dtype=torch.float64), HANDS
    q, targets = _wholebody_rows(robot, links, 40, poses)
    names = list(robot.joint_names)  # a floating base moves as a whole: its 7 coordinates
    active = [n for i, n in enumerate(names) if i % 3 != 1 or "/" in n] if held else None
    rest = robot.random_configuration(40, torch.Generator().manual_seed(9))
    weights = {links[1]: 2.5}
    problem, _, _, _ = _problem(robot, targets, weights, active, rest, posture, False, None, 1,
                                1e-9, 1e-9, None, None)  # fmt: skip
    solver = WholeBodyLM()
    assert solver.compiled_loop(problem, q) and problem.limits.per_row == held
    q = problem.project(q)  # held joints at their rest values
    lin = solver.linearize(problem, q)
    expected = problem.project(solver.step(problem, q, lin, {}))
    carry = Carry.start(q, {}, 10)
    assert solver.fused_loop(problem, carry, 1, 10, True)
    torch.testing.assert_close(carry.q, expected, atol=1e-10, rtol=0)
    torch.testing.assert_close(carry.best_cost, lin.cost, atol=1e-12, rtol=1e-12)
    assert not torch.equal(carry.q, q) and torch.equal(carry.best_q, q)
    if held:
        assert torch.equal(carry.q[:, ~problem.active], q[:, ~problem.active])


def test_several_links_converge_only_when_every_link_is_within_tolerance():
    """Targets of configurations near ``q``: rows finish once both hands are within both
    tolerances (checked by FK here), and record that iteration."""
    from torchik.ik.fixed import Carry
    from torchik.ik.wholebody.solve import WholeBodyLM, _problem

    robot = load_robot("g1", dtype=torch.float64)
    links = ["left_rubber_hand", "right_rubber_hand"]
    g = torch.Generator().manual_seed(3)
    q = robot.random_configuration(30, g)
    noise = 2e-2 * torch.randn(q.shape, generator=g, dtype=q.dtype)
    moved = (q + noise).clamp(robot.lower, robot.upper)
    pose = robot.forward_kinematics(moved, links)
    targets = {links[0]: pose[:, 0], links[1]: pose[:, 1]}
    problem, _, _, _ = _problem(robot, targets, None, None, None, 0.0, False, None, 1, 1e-6,
                                1e-6, None, None)  # fmt: skip
    solver, carry = WholeBodyLM(), Carry.start(q, {}, 12)
    assert solver.fused_loop(problem, carry, 12, 12, True)
    assert bool(carry.finished.all()) and bool((carry.iterations < 12).all())
    reached = robot.forward_kinematics(carry.best_q, links)
    assert float((reached[..., :3, 3] - pose[..., :3, 3]).norm(dim=-1).max()) < 1e-6


def test_several_links_arguments_are_checked():
    """One link's arguments for several links, weights of another length, a posture without
    rest rows, a columns mask of another shape: one clear line each."""
    robot = load_robot("g1", dtype=torch.float64)
    links = ["left_rubber_hand", "right_rubber_hand"]
    q, targets = _wholebody_rows(robot, links, 4, (True, False))
    index = tuple(robot.link_index(link) for link in links)
    pose, position = targets[links[0]], targets[links[1]]
    aim = (index, [pose[:, :3, 3].contiguous(), position], [pose[:, :3, :3].contiguous(), None])
    w, bound = q.new_ones(9), torch.ones(robot.dof, dtype=q.dtype)

    def call(*target, weights=w, **options):
        from torchik.kinematics import native

        native.lm_loop(q.clone(), robot.tree, *target, weights, 0.1, -bound, bound,
                       _state(q, False), n_iters=1, max_iters=1, tol_position=0.0,
                       tol_rotation=0.0, **options)  # fmt: skip

    call(*aim)  # well formed
    with pytest.raises(ValueError, match="2 links need as many target positions"):
        call(index, aim[1][:1], aim[2])
    with pytest.raises(ValueError, match=r"weights must be a \(9,\)"):
        call(*aim, weights=q.new_ones(12))
    with pytest.raises(ValueError, match="a posture needs rest"):
        call(*aim, posture=0.5)
    with pytest.raises(ValueError, match="columns must be a"):
        call(*aim, columns=torch.ones(3, dtype=torch.bool))
    with pytest.raises(TypeError, match="one link takes one target_position"):
        call(index[0], aim[1], aim[2])
    with pytest.raises(ValueError, match=r"base_origin must be a \(4, 4\)"):
        call(*aim, base_origin=q.new_zeros(3, 4))
    with pytest.raises(ValueError, match=r"with a floating base q must have shape \(B, 36\)"):
        call(*aim, base_origin=torch.eye(4, dtype=q.dtype))  # q: the fixed G1's 29


def test_settle_steps_every_row_and_keeps_its_last_converged_iterate():
    """``settle``: the posture's settling after a solve. Every row steps ``n_iters`` times
    whatever it converged; ``best_q`` is its last iterate within tolerance (rows never within
    keep theirs); the rest of the state is left alone. Checked against the same iterations
    one at a time."""
    from torchik.kinematics import native

    robot = load_robot("g1", dtype=torch.float64)
    g = torch.Generator().manual_seed(4)
    q = robot.random_configuration(12, g)
    pose = robot.forward_kinematics(q, HANDS)
    pose[6:, :, :3, 3] += 0.5  # half the rows far from their targets
    aim = ([robot.link_index(h) for h in HANDS], [pose[:, 0, :3, 3], pose[:, 1, :3, 3]],
           [pose[:, 0, :3, :3], pose[:, 1, :3, :3]])  # fmt: skip
    w, rest = q.new_ones(12), robot.random_configuration(12, g)

    def run(x, state, n, settle, tol=(1e-3, 1e-2)):
        native.lm_loop(x, robot.tree, *aim, w, 0.1, robot.lower, robot.upper, state, n_iters=n,
                       max_iters=n, tol_position=tol[0], tol_rotation=tol[1], rest=rest,
                       posture=0.5, settle=settle)  # fmt: skip

    def within(x):  # both hands within 1 mm and 0.01 rad, by FK
        got = robot.forward_kinematics(x, HANDS)
        pos = (got[..., :3, 3] - pose[..., :3, 3]).norm(dim=-1)
        rel = got[..., :3, :3].transpose(-1, -2) @ pose[..., :3, :3]
        cos = ((rel.diagonal(dim1=-2, dim2=-1).sum(-1) - 1) / 2).clamp(-1, 1)
        return ((pos < 1e-3) & (torch.arccos(cos) < 1e-2)).all(-1)

    x, state = q.clone(), _state(q, track=False)
    run(x, state, 5, True)
    kept, y = q.clone(), q.clone()
    for _ in range(5):  # one step at a time, every row stepping (no tolerance met)
        kept = torch.where(within(y)[:, None], y, kept)
        run(y, _state(y, track=False), 1, False, tol=(0.0, 0.0))
    torch.testing.assert_close(x, y, atol=1e-12, rtol=0)
    torch.testing.assert_close(state["best_q"], kept, atol=1e-12, rtol=0)
    assert not torch.equal(state["best_q"][:6], q[:6])  # near rows converge and move on
    assert torch.equal(state["best_q"][6:], q[6:])  # far rows never converge in 5 steps
    assert bool(torch.isinf(state["best_cost"]).all()) and not bool(state["finished"].any())

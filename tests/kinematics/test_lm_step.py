"""fused.lm_step (issue 34, §1) equals torchik's Levenberg-Marquardt step and projection.

The reference: :class:`torchik.ik.LevenbergMarquardt`'s ``linearize`` and ``step`` (residual,
free limit columns, damped step) and ``IKProblem.project``, on the reference kinematics in
float64 on the CPU. The kernel runs compiled on CUDA with a GPU, in Triton's interpreter on the
CPU otherwise. Rows: targets far away (FK of other configurations) and near (FK of ``q`` moved a
little, where λ is small), with joints put exactly on their limits so that the active set of
free_limit_columns is exercised. Float64 to 1e-10.
"""

from __future__ import annotations

import inspect
import os

import pytest
import torch

from tests.kinematics.lm_cases import (
    CASES,
    SETTINGS,
    case_robot,
    lm_problem,
    lm_rows,
    solver_step,
)
from tests.kinematics.test_capture import _host_traffic
from torchik import load_robot
from torchik.ik.lm import LevenbergMarquardt, damped_step, free_limit_columns

pytest.importorskip("triton", reason="the fused kernels need Triton (the dev extra installs it)")
DEVICES = (["cuda"] if torch.cuda.is_available() else []) + (
    ["cpu"] if os.environ.get("TRITON_INTERPRET") == "1" else []
)
if not DEVICES:
    pytest.skip("no GPU and TRITON_INTERPRET is not 1 (tests/conftest.py sets it without a GPU)",
                allow_module_level=True)  # fmt: skip


def _fused(robot, link, q, position, rotmat, device, damping=SETTINGS.damping):
    from torchik.kinematics import fused

    problem = lm_problem(robot, link, position, rotmat)
    lim, w = problem.limits, problem.weights(SETTINGS.rotation_weight)
    on = lambda t: None if t is None else t.to(device)  # noqa: E731
    tree = robot.to(device).tree
    out = fused.lm_step(
        on(q), tree, robot.link_index(link), on(position), on(rotmat), on(w), on(damping)
        if isinstance(damping, torch.Tensor) else damping, on(lim.lower), on(lim.upper),
        damping_floor=SETTINGS.damping_floor, continuous=on(lim.continuous),
        full_turn=on(lim.full_turn),
    )  # fmt: skip
    robot.to("cpu")
    return out.cpu()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("name", "link", "pose"), CASES)
def test_lm_step_equals_the_solver_step_and_projection(name, link, pose, device):
    robot, link, (q, position, rotmat), _, expected, _ = solver_step(name, link, pose)
    torch.testing.assert_close(_fused(robot, link, q, position, rotmat, device), expected,
                               atol=1e-10, rtol=0)  # fmt: skip


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pose", [True, False])
def test_lm_step_writes_the_residual_at_q(pose, device):
    from torchik.kinematics import fused

    robot, link = case_robot("panda"), "panda_hand"
    q, position, rotmat = lm_rows(robot, link, 40)
    rotmat = rotmat if pose else None
    problem = lm_problem(robot, link, position, rotmat)
    lin = LevenbergMarquardt(SETTINGS).linearize(problem, q)
    lim, w = problem.limits, problem.weights(SETTINGS.rotation_weight)
    on = lambda t: None if t is None else t.to(device)  # noqa: E731
    residual = torch.full((40, w.shape[0]), torch.nan, dtype=q.dtype, device=device)
    out = fused.lm_step(on(q), robot.to(device).tree, robot.link_index(link), on(position),
                        on(rotmat), on(w), 0.1, on(lim.lower), on(lim.upper),
                        continuous=on(lim.continuous), full_turn=on(lim.full_turn),
                        residual=residual)  # fmt: skip
    robot.to("cpu")
    torch.testing.assert_close(residual.cpu(), lin.error, atol=1e-12, rtol=0)
    assert out.shape == q.shape
    with pytest.raises(ValueError, match="residual must have shape"):
        fused.lm_step(on(q), robot.to(device).tree, robot.link_index(link), on(position),
                      on(rotmat), on(w), 0.1, on(lim.lower), on(lim.upper),
                      residual=residual[:, :2])  # fmt: skip
    robot.to("cpu")


@pytest.mark.parametrize("device", DEVICES)
def test_lm_step_with_a_damping_per_row(device):
    robot, link = case_robot("panda"), "panda_hand"
    q, position, rotmat = lm_rows(robot, link, 40)
    # λ = μ (cost + 1e-6) >= 1e-8 here; at smaller λ beside a singular Jacobian, LU (the
    # solver's) and Cholesky (the kernel's) both err by about cond(A) 1e-16, above 1e-10
    mu = torch.logspace(-2, 2, 40, dtype=torch.float64)
    problem, solver = lm_problem(robot, link, position, rotmat), LevenbergMarquardt(SETTINGS)
    lin, w = solver.linearize(problem, q), problem.weights(SETTINGS.rotation_weight)
    jac = free_limit_columns(problem, q, lin.jacobian, lin.error, w)
    step = damped_step(jac, lin.error, mu * (lin.cost + SETTINGS.damping_floor), w)
    expected = problem.project(q + step)
    out = _fused(robot, link, q, position, rotmat, device, damping=mu)
    torch.testing.assert_close(out, expected, atol=1e-10, rtol=0)


def test_lm_step_checks_its_arguments_and_an_empty_batch():
    from torchik.kinematics import fused

    robot = case_robot("panda")
    q, position, rotmat = lm_rows(robot, "panda_hand", 4)
    w, link = torch.ones(6, dtype=torch.float64), robot.link_index("panda_hand")
    limits = (robot.lower, robot.upper)
    with pytest.raises(ValueError, match="weights must have shape"):
        fused.lm_step(q, robot.tree, link, position, rotmat, w[:3], 0.1, *limits)
    with pytest.raises(ValueError, match="target_position must have shape"):
        fused.lm_step(q, robot.tree, link, position[:2], rotmat, w, 0.1, *limits)
    with pytest.raises(TypeError, match="continuous has dtype"):
        fused.lm_step(q, robot.tree, link, position, rotmat, w, 0.1, *limits,
                      continuous=robot.lower)  # fmt: skip
    with pytest.raises(TypeError, match="q has dtype|has dtype"):
        fused.lm_step(q.float(), robot.tree, link, position, rotmat, w, 0.1, *limits)
    empty = fused.lm_step(q[:0], robot.tree, link, position[:0], rotmat[:0], w, 0.1, *limits)
    assert empty.shape == (0, robot.dof)


def test_lm_loop_checks_its_state_and_runs_nothing_on_an_empty_batch():
    """``fused.lm_loop``'s state: every key it needs, shapes, dtypes, contiguous (written in
    place); errors name ``lm_loop``. (Its iterations are checked against the per-iteration loop
    in tests/ik/test_fixed.py.)"""
    from torchik.kinematics import fused

    robot = case_robot("panda")
    q, position, rotmat = lm_rows(robot, "panda_hand", 4)
    w, link = torch.ones(6, dtype=torch.float64), robot.link_index("panda_hand")
    state = dict(
        best_q=q.clone(),
        best_cost=torch.full((4,), torch.inf, dtype=q.dtype),
        iterations=torch.zeros(4, dtype=torch.long),
        finished=torch.zeros(4, dtype=torch.bool),
        it=torch.zeros((), dtype=torch.long),
    )
    args = (robot.tree, link, position, rotmat, w, 0.1, robot.lower, robot.upper)
    run = dict(n_iters=2, max_iters=10, tol_position=1e-3, tol_rotation=0.01)  # fmt: skip
    with pytest.raises(ValueError, match="lm_loop: state must hold"):
        fused.lm_loop(q, *args, {k: v for k, v in state.items() if k != "it"}, **run)
    with pytest.raises(ValueError, match="lm_loop: iterations must be torch.int64"):
        fused.lm_loop(q, *args, {**state, "iterations": state["iterations"].int()}, **run)
    with pytest.raises(ValueError, match="lm_loop: best_q must be contiguous"):
        fused.lm_loop(q, *args, {**state, "best_q": q.t().contiguous().t()}, **run)
    with pytest.raises(ValueError, match="lm_loop: weights must have shape"):
        fused.lm_loop(q, *args[:4], w[:3], *args[5:], state, **run)
    marks = torch.zeros(2, dtype=torch.int32)
    groups = dict(group=torch.arange(4) // 2, read=marks, write=marks.clone())
    with pytest.raises(ValueError, match="lm_loop: groups must hold"):  # fresh needs attempt
        fused.lm_loop(q, *args, state, **run, groups={**groups, "fresh": q.clone()})
    with pytest.raises(ValueError, match="lm_loop: groups must hold"):  # and stall counters
        fused.lm_loop(
            q,
            *args,
            state,
            **run,
            groups={**groups, "fresh": q.clone(), "attempt": torch.zeros(4).long()},
        )
    with pytest.raises(ValueError, match=r"lm_loop: groups\['read'\] must be contiguous"):
        fused.lm_loop(q, *args, state, **run, groups={**groups, "read": marks.long()})
    with pytest.raises(ValueError, match=r"lm_loop: groups\['group'\] must be contiguous"):
        fused.lm_loop(q, *args, state, **run, groups={**groups, "group": groups["group"][:3]})
    with pytest.raises(ValueError, match="one entry per target"):
        fused.lm_loop(q, *args, state, **run, groups={**groups, "write": marks[:1].clone()})
    before = q.clone()
    empty = {k: v[:0] if v.dim() else v for k, v in state.items()}
    fused.lm_loop(q[:0], robot.tree, link, position[:0], rotmat[:0], w, 0.1, robot.lower,
                  robot.upper, empty, **run)  # fmt: skip
    fused.lm_loop(q, *args, state, **{**run, "n_iters": 0})
    assert torch.equal(q, before) and int(state["it"]) == 0


@pytest.mark.skipif("cpu" not in DEVICES, reason="records the host-side ops in the interpreter")
def test_a_second_lm_step_neither_syncs_nor_copies_from_the_host(monkeypatch):
    from torchik.kinematics import fused

    robot = case_robot("ur5")
    q, position, rotmat = lm_rows(robot, "ee_link", 8)
    lim = lm_problem(robot, "ee_link", position, rotmat).limits
    w, link = torch.ones(6, dtype=torch.float64), robot.link_index("ee_link")

    def call():
        return fused.lm_step(q, robot.tree, link, position, rotmat, w, 0.1, lim.lower, lim.upper,
                             continuous=lim.continuous, full_turn=lim.full_turn)  # fmt: skip

    call()
    assert _host_traffic(call, q.device, monkeypatch) == []


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="captures a CUDA graph: needs CUDA")
def test_twenty_lm_steps_are_captured_and_replay_as_they_run():
    from torchik.kinematics import fused

    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("the interpreter's launches cannot be captured")
    robot = case_robot("panda")
    q0, position, rotmat = (t.cuda() for t in lm_rows(robot, "panda_hand", 256))
    robot.to("cuda")
    lim = lm_problem(robot, "panda_hand", position, rotmat).limits
    w = torch.tensor([1.0, 1.0, 1.0, 0.3, 0.3, 0.3], dtype=torch.float64, device="cuda")
    args = (robot.tree, robot.link_index("panda_hand"), position, rotmat, w, 0.1, lim.lower,
            lim.upper)  # fmt: skip

    def solve(q):
        for _ in range(20):
            q = fused.lm_step(q, *args, continuous=lim.continuous, full_turn=lim.full_turn)
        return q

    static, stream = q0.clone(), torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        solve(static)  # warm-up: kernel and constant table
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = solve(static)
    graph.replay()
    torch.testing.assert_close(out, solve(q0), atol=1e-12, rtol=0)


def _several_links(name: str):
    """A robot and two of its links: the two-arm tree's hands (a pose and a position) or the
    G1's (two poses). Its reference backend makes the expected answers on the CPU (a GPU
    machine has no Triton interpreter); the kernel under test takes its tree."""
    from tests.ik.test_wholebody import TWO_ARMS
    from torchik import Robot, load_robot

    if name == "two_arms":
        robot = Robot.from_urdf(TWO_ARMS, dtype=torch.float64, backend="reference")
        return robot, ["left_hand", "right_hand"], (True, False)
    robot = load_robot("g1", dtype=torch.float64, backend="reference")
    return robot, ["left_rubber_hand", "right_rubber_hand"], (True, True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["two_arms", "g1"])
def test_lm_loop_of_several_links_is_the_whole_body_step(name, device):
    """Several links in one kernel (residuals and Jacobians stacked, products of another
    link's zero columns left out): one iteration is whole-body IK's linearization, step and
    projection without posture or held joints, float64; a row converges only when every link
    is within tolerance."""
    from tests.kinematics.test_native import _state, _wholebody_rows
    from torchik.ik.wholebody.solve import WholeBodyLM, _problem
    from torchik.kinematics import fused

    robot, links, poses = _several_links(name)
    q, targets = _wholebody_rows(robot, links, 24, poses)
    problem, _, _, _ = _problem(robot, targets, {links[1]: 2.5}, None, None, 0.0, False, None, 1,
                                1e-9, 1e-9, None, None)  # fmt: skip
    solver = WholeBodyLM()
    lin = solver.linearize(problem, q)
    expected = problem.project(solver.step(problem, q, lin, {}))
    on = lambda t: None if t is None else t.to(device)  # noqa: E731
    lim, ts = problem.limits, problem.targets
    x, state = on(q.clone()), {k: on(v) for k, v in _state(q, track=True).items()}
    fused.lm_loop(x, robot.to(device).tree, [robot.link_index(t.link) for t in ts],
                  [on(t.position) for t in ts], [on(t.rotmat) for t in ts],
                  on(problem.weights(0.3)), 0.1, on(lim.lower), on(lim.upper), state, n_iters=1,
                  max_iters=10, tol_position=1e-9, tol_rotation=1e-9, damping_floor=1e-6,
                  continuous=on(lim.continuous), full_turn=on(lim.full_turn))  # fmt: skip
    robot.to("cpu")
    torch.testing.assert_close(x.cpu(), expected, atol=1e-10, rtol=0)
    torch.testing.assert_close(state["best_cost"].cpu(), lin.cost, atol=1e-12, rtol=1e-12)
    assert not bool(state["finished"].any())


@pytest.mark.parametrize("device", DEVICES)
def test_float32_ik_kernels_have_every_constant_written_in_and_step_alike(device, monkeypatch):
    """fused.BAKED: a float32 LM step loads no constant of the Panda's tree (each written
    into its code), a float64 step and float32 FK load theirs; the float32 steps equal those
    of a kernel that loads them (BAKED empty): bit for bit in Triton's interpreter, within
    float32 rounding on a GPU (its compiler may contract products with constants otherwise)."""
    from torchik.kinematics import fused

    rows = lm_rows(case_robot("panda"), "panda_hand")

    def step(dtype: torch.dtype) -> tuple[torch.Tensor, dict]:
        robot = load_robot("panda", dtype=dtype).to(device)
        q, position, rotmat = (t.to(device, dtype) for t in rows)
        w = torch.tensor([1.0] * 3 + [0.3] * 3, device=device, dtype=dtype)
        tree, link = robot.tree, robot.link_index("panda_hand")
        out = fused.lm_step(q, tree, link, position, rotmat, w, 0.1, robot.lower, robot.upper)
        fused.forward_kinematics(q, tree, (link,))
        sources = {key[1]: inspect.getsource(value[0].fn) for key, value in tree._cache.items()
                   if key[0] == "fused" and key[1] in ("lm", "fk")}  # fmt: skip
        return out, sources

    baked, sources = step(torch.float32)
    assert sources["lm"].count("tl.load(c_ptr") == 0 < sources["fk"].count("tl.load(c_ptr")
    assert step(torch.float64)[1]["lm"].count("tl.load(c_ptr") > 0
    monkeypatch.setattr(fused, "BAKED", ())
    loaded, sources = step(torch.float32)
    assert sources["lm"].count("tl.load(c_ptr") > 0
    tol = 0.0 if device == "cpu" else 1e-5
    torch.testing.assert_close(loaded, baked, atol=tol, rtol=0)


def _still_case(name: str):
    """A robot and target links that leave joints still: the two-arm tree's left hand (the
    right arm still) or the G1's hands (its legs still), as :func:`_several_links` makes them."""
    robot, links, poses = _several_links(name)
    return (robot, links[:1], poses[:1]) if name == "two_arms" else (robot, links, poses)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("name", "groups"), [("two_arms", False), ("two_arms", True),
                                              ("g1", False)])  # fmt: skip
def test_the_loop_kernel_leaves_still_joints_out_with_the_same_answers(name, groups, device,
                                                                       monkeypatch):  # fmt: skip
    """fused.STILL: the loop kernel carries only the joints that move a target link (the
    others are clamped and stored once, after the loop); every output equals that of a kernel
    carrying every joint, over several iterations, with those joints seeded outside their
    limits, rows converged at the first iteration (their start kept), later or never, rows
    finished before the launch, and (``groups``) restarts from fresh seeds."""
    from tests.kinematics.test_native import _state, _wholebody_rows
    from torchik.ik.wholebody.solve import _problem
    from torchik.kinematics import fused

    if name == "g1" and device == "cuda":
        pytest.skip("two float64 G1 kernels take minutes to compile: the interpreter's case")
    robot, links, poses = _still_case(name)
    n = 24
    q, targets = _wholebody_rows(robot, links, n, poses, seed=3)
    exact = robot.forward_kinematics(q, links)  # rows 1 mod 4: met at the first iteration
    for i, link in enumerate(links):
        targets[link][1::4] = exact[1::4, i] if poses[i] else exact[1::4, i, :3, 3]
    problem, _, _, _ = _problem(robot, targets, None, None, None, 0.0, False, None, 1, 1e-9,
                                1e-9, None, None)  # fmt: skip
    still = fused._still(fused._Code(robot.tree, tuple(map(robot.link_index, links)), ()),
                         (False, False))  # fmt: skip
    assert still and len(still) < robot.dof
    g = torch.Generator().manual_seed(4)
    span = robot.upper - robot.lower
    outside = robot.upper + 0.3 * span * torch.rand(q.shape, generator=g, dtype=q.dtype)
    q[::3, still] = outside[::3, still]  # still joints beyond their limits
    on = lambda t: None if t is None else t.to(device)  # noqa: E731

    def run(carried: bool) -> dict:
        monkeypatch.setattr(fused, "STILL", carried)
        x, state = on(q.clone()), {k: on(v) for k, v in _state(q, track=groups).items()}
        state["finished"][5::7] = True
        options = {}
        if groups:
            fresh = robot.random_configuration(n, generator=torch.Generator().manual_seed(5))
            fresh[:, still] = outside[:, still]
            state["stalled"][::2] = True
            options["groups"] = {
                "group": on(torch.arange(n)), "read": on(torch.zeros(n, dtype=torch.int32)),
                "write": on(torch.zeros(n, dtype=torch.int32)), "fresh": on(fresh),
                "attempt": on(torch.zeros(n, dtype=torch.long)),
            }  # fmt: skip
        ts, lim = problem.targets, problem.limits
        index = [robot.link_index(t.link) for t in ts]
        fused.lm_loop(x, robot.to(device).tree, index, [on(t.position) for t in ts],
                      [on(t.rotmat) for t in ts],
                      on(problem.weights(0.3)), 0.1, on(lim.lower), on(lim.upper), state,
                      n_iters=4, max_iters=10, tol_position=1e-9, tol_rotation=1e-9,
                      **options)  # fmt: skip
        robot.to("cpu")
        return {"q": x.cpu(), **{k: v.cpu() for k, v in state.items()},
                **{k: v.cpu() for k, v in options.get("groups", {}).items()}}  # fmt: skip

    left_out, carried = run(True), run(False)
    tol = 0.0 if device == "cpu" else 1e-12
    for key, value in carried.items():
        torch.testing.assert_close(left_out[key], value, atol=tol, rtol=0, msg=key)
    best = left_out["best_q"][:, still]
    assert bool((left_out["q"][:, still] > robot.upper[still]).any())  # a start kept
    assert bool((best != q[:, still]).any()) and bool((best == q[:, still]).any())

"""FK, its backward and the Jacobian can be captured in a CUDA graph (issue 34): after a warm-up
call they neither wait on the device nor copy host data to it, on both paths.

Without a GPU, a proxy: every aten op of a second call is recorded (``TorchDispatchMode``), and
so is every Python-level tensor call (``TorchFunctionMode``, which sees ``tolist``: it reads CPU
memory without an aten op). A host sync is ``_local_scalar_dense`` / ``item`` / ``nonzero`` /
``is_nonzero`` (or ``tolist``, ``__bool__``, ...); host data made into a tensor is
``lift_fresh`` (``torch.tensor(list)``, indexing with a list, ``x[...] = 0.0``) or a copy from
another device. The fused path runs in Triton's interpreter here; the interpreter's own work
inside a launch (it copies arguments to NumPy) is not recorded, since a launch on a GPU is no
aten op at all. With a GPU, the real thing: a 20-iteration damped least-squares loop captured
by ``torch.cuda.graph`` under ``torch.cuda.set_sync_debug_mode("error")`` replays as it runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from tests.paths import DATA
from torchik import Robot, load_robot

SYNCS = {"aten._local_scalar_dense", "aten.item", "aten.nonzero", "aten.is_nonzero"}
FROM_HOST = {"aten.lift_fresh", "aten.lift_fresh_copy"}
HOST_READS = {"tolist", "item", "numpy", "cpu", "__bool__", "__int__", "__float__", "__index__"}
MAKERS = {"tensor", "as_tensor", "new_tensor", "from_numpy"}


class _Recorder(TorchDispatchMode):
    """Records the aten ops that sync with the device or bring host data onto it."""

    def __init__(self, device: torch.device):
        super().__init__()
        self.device, self.found, self.paused = device, [], False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func.overloadpacket)
        if not self.paused and (name in SYNCS or name in FROM_HOST or self._copies(name, args)):
            self.found.append(name)
        return func(*args, **kwargs)

    def _copies(self, name: str, args) -> bool:
        """A copy between devices (``_to_copy`` to ours, ``copy_`` from elsewhere)."""
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if name not in ("aten._to_copy", "aten.copy_") or not tensors:
            return False
        return any(t.device != self.device for t in tensors)


class _PythonRecorder(TorchFunctionMode):
    """Records Python-level tensor calls that read device memory on the host or make tensors
    from Python data (``tolist`` of a CPU tensor makes no aten op)."""

    def __init__(self):
        super().__init__()
        self.found, self.paused = [], False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if not self.paused and (name in HOST_READS or name in MAKERS):
            self.found.append(name)
        return func(*args, **(kwargs or {}))


def _host_traffic(call: Callable[[], object], device: torch.device, monkeypatch) -> list[str]:
    """What ``call`` does that a CUDA graph cannot capture (a kernel launch not looked into)."""
    from torchik.kinematics import fused

    ops, python = _Recorder(device), _PythonRecorder()
    launch = fused._run

    def unrecorded(*args, **kwargs):
        ops.paused = python.paused = True
        try:
            return launch(*args, **kwargs)
        finally:
            ops.paused = python.paused = False

    monkeypatch.setattr(fused, "_run", unrecorded)
    with python, ops:
        call()
    return ops.found + python.found


def _robot(name: str, backend: str) -> Robot:
    if name.startswith("panda"):
        floating = name == "panda floating"
        return load_robot("panda", dtype=torch.float64, floating_base=floating, backend=backend)
    path = DATA / "urdf" / f"{name}.urdf"
    return Robot.from_urdf(path, dtype=torch.float64, backend=backend)


def _calls(robot: Robot, q: torch.Tensor, link: str) -> dict[str, Callable[[], object]]:
    def backward():
        qg = q.clone().requires_grad_()
        (robot.forward_kinematics(qg) * 0.5).sum().backward()

    return {
        "FK of one link": lambda: robot.forward_kinematics(q, link),
        "FK of every link": lambda: robot.forward_kinematics(q),
        "FK backward": backward,
        "Jacobian": lambda: robot.jacobian(q, link, return_pose=True),
    }


def _backends() -> list[str]:
    from torchik.kinematics import fused

    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    return ["reference"] + (["fused"] if fused.available() and interpreted else [])


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("name", ["panda", "panda floating", "mimic", "prismatic_continuous"])
@pytest.mark.parametrize("batch", [3, 40])  # the reference path's small-batch branch and the rest
def test_second_calls_neither_sync_nor_copy_from_the_host(name, backend, batch, monkeypatch):
    robot = _robot(name, backend)
    q = robot.random_configuration(batch, generator=torch.Generator().manual_seed(batch))
    for what, call in _calls(robot, q, robot.link_names[-1]).items():
        call()  # warm-up: plans, constant tables and kernels are built once
        assert _host_traffic(call, q.device, monkeypatch) == [], what


def test_the_recorder_sees_syncs_and_host_data(monkeypatch):
    x = torch.randn(4, 3)
    assert _host_traffic(lambda: x[[0, 1]], x.device, monkeypatch) == ["aten.lift_fresh"]
    assert "aten._local_scalar_dense" in _host_traffic(lambda: bool(x.sum() > 0), x.device,
                                                       monkeypatch)  # fmt: skip
    assert _host_traffic(lambda: x.tolist(), x.device, monkeypatch) == ["tolist"]
    meta = torch.device("meta")
    assert _host_traffic(lambda: x.to(meta), meta, monkeypatch) == ["aten._to_copy"]


def _solve3(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a⁻¹ b`` for symmetric ``a (B, 3, 3)`` by cross products (Cramer): elementwise ops
    only, so no solver of torch's can be what syncs."""
    c0, c1, c2 = a.unbind(-1)
    rows = torch.stack((c1.cross(c2, dim=-1), c2.cross(c0, dim=-1), c0.cross(c1, dim=-1)), -2)
    return (rows @ b[..., None])[..., 0] / (c0 * rows[:, 0]).sum(-1, keepdim=True)


def _damped_least_squares(robot: Robot, q: torch.Tensor, target: torch.Tensor, link: str):
    """20 fixed iterations of ``q += Jᵀ (J Jᵀ + λI)⁻¹ e`` on the position of ``link``, then
    20 gradient steps on ``|p - target|²`` through FK's backward."""
    eye = torch.eye(3, dtype=q.dtype, device=q.device)
    for _ in range(20):
        error = target - robot.forward_kinematics(q, link)[:, :3, 3]
        jac = robot.jacobian(q, link)[:, :3]
        y = _solve3(jac @ jac.transpose(-1, -2) + 1e-2 * eye, error)
        q = q + (jac.transpose(-1, -2) @ y[..., None])[..., 0]
    for _ in range(20):
        qg = q.detach().requires_grad_()
        loss = (robot.forward_kinematics(qg, link)[:, :3, 3] - target).square().sum()
        q = q - 0.1 * torch.autograd.grad(loss, qg)[0]
    return q


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="captures a CUDA graph: needs CUDA")
@pytest.mark.parametrize("backend", ["reference", "fused"])
def test_a_damped_least_squares_loop_is_captured_and_replays_as_it_runs(backend):
    from torchik.kinematics import fused

    if backend == "fused" and not (fused.available() and os.environ.get("TRITON_INTERPRET") != "1"):
        pytest.skip("the fused kernels need Triton, compiled (not TRITON_INTERPRET=1)")
    robot = load_robot("panda", dtype=torch.float64, backend=backend).to("cuda")
    g = torch.Generator().manual_seed(5)
    q0, q1 = (robot.random_configuration(64, generator=g).cuda() for _ in range(2))
    target = robot.link_positions(robot.random_configuration(64, generator=g).cuda(), "panda_hand")
    static_q, static_target = q0.clone(), target.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up: plans, tables and kernels built before capture
        _damped_least_squares(robot, static_q, static_target, "panda_hand")
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        torch.cuda.set_sync_debug_mode("error")  # a host sync raises instead of warning
        try:
            out = _damped_least_squares(robot, static_q, static_target, "panda_hand")
        finally:
            torch.cuda.set_sync_debug_mode("default")
    for q in (q0, q1):  # new inputs in the same buffers: nothing was baked into the graph
        static_q.copy_(q)
        graph.replay()
        eager = _damped_least_squares(robot, q, target, "panda_hand")
        torch.testing.assert_close(out, eager, atol=1e-12, rtol=0)

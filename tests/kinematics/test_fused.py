"""The fused Triton kernels (issue 19, part 1; issue 34) equal torchik.kinematics.

On a GPU they run compiled on CUDA tensors. Without one, ``TRITON_INTERPRET=1`` (set by
tests/conftest.py) runs the generated kernels on CPU tensors with the same code paths (loads,
stores, masks, math). The device is a parameter: ``cuda`` where a GPU is present, ``cpu`` only
in the interpreter (a compiled launch cannot read CPU tensors). Fixture robots cover a tree,
mimic joints, prismatic and continuous joints and tilted axes. Tolerances: float64 to 1e-12
against the float64 reference (absolute; poses, Jacobians and gradients are of order 1 m, 1,
1); float32 to 1e-6 times the scale of what is compared (the largest link distance from the
root for poses and Jacobians, the largest gradient entry for gradients) against the float64
reference of the same float32 ``q``.
"""

from __future__ import annotations

import os

import pytest
import torch

from tests.paths import DATA
from torchik import Robot, load_robot
from torchik.kinematics import reference as kinematics

pytest.importorskip("triton", reason="the fused kernels need Triton (the dev extra installs it)")


def _devices() -> list[str]:
    """``cuda`` with a GPU; ``cpu`` only in Triton's interpreter."""
    devices = ["cuda"] if torch.cuda.is_available() else []
    return devices + (["cpu"] if os.environ.get("TRITON_INTERPRET") == "1" else [])


DEVICES = _devices()
if not DEVICES:
    pytest.skip("no GPU and TRITON_INTERPRET is not 1 (tests/conftest.py sets it without a GPU)",
                allow_module_level=True)  # fmt: skip

DATA = DATA / "urdf"
ROBOTS = ["two_branches", "mimic", "prismatic_continuous", "tilted_axes", "panda"]


def _robot(name: str, dtype=torch.float64, device: str = "cpu") -> Robot:
    if name == "panda":
        return load_robot("panda", dtype=dtype).to(device)
    return Robot.from_urdf(DATA / f"{name}.urdf", dtype=dtype).to(device)


def _close(actual: torch.Tensor, expected: torch.Tensor, atol: float) -> None:
    torch.testing.assert_close(actual.cpu().double(), expected.cpu(), atol=atol, rtol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ROBOTS)
def test_fused_fk_jacobian_and_backward_equal_the_reference(name, device):
    from torchik.kinematics import fused

    ref_robot, robot = _robot(name), _robot(name, device=device)
    q_ref = ref_robot.random_configuration(150, generator=torch.Generator().manual_seed(0))
    q = q_ref.to(device)  # 150 rows: two blocks, the second one masked
    links = tuple(range(len(robot.link_names)))
    ref = kinematics.forward_kinematics(q_ref, ref_robot.tree, links)
    _close(fused.forward_kinematics(q, robot.tree, links), ref, 1e-12)
    some = links[::2]
    _close(fused.forward_kinematics(q, robot.tree, some), ref[:, list(some)], 1e-12)
    for link in (links[-1], links[len(links) // 2]):
        jac, pose = fused.jacobian(q, robot.tree, link)
        jac_ref, pose_ref = kinematics.jacobian(q_ref, ref_robot.tree, link)
        _close(jac, jac_ref, 1e-12)
        _close(pose, pose_ref, 1e-12)
    for chosen in (links, some, links[-1:]):
        weights = torch.randn(150, len(chosen), 4, 4, dtype=torch.float64,
                              generator=torch.Generator().manual_seed(len(chosen)))  # fmt: skip
        q1, q2 = q_ref.clone().requires_grad_(), q.clone().requires_grad_()
        (kinematics.forward_kinematics(q1, ref_robot.tree, chosen) * weights).sum().backward()
        (fused.forward_kinematics(q2, robot.tree, chosen) * weights.to(device)).sum().backward()
        _close(q2.grad, q1.grad, 1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_fused_backward_reads_strided_upstream_gradients(device):
    """The backward kernel reads G by its strides: the expanded ones of ``.sum()`` (strides 0,
    never written out) and a transposed G give the reference's gradients."""
    from torchik.kinematics import fused

    ref_robot, robot = _robot("two_branches"), _robot("two_branches", device=device)
    q_ref = ref_robot.random_configuration(140, generator=torch.Generator().manual_seed(7))
    links = tuple(range(len(robot.link_names)))[1::2]
    g = torch.randn(150, len(links), 4, 4, dtype=torch.float64,
                    generator=torch.Generator().manual_seed(8))[:140]  # fmt: skip
    for upstream in (None, g.transpose(-1, -2)):
        q1, q2 = q_ref.clone().requires_grad_(), q_ref.to(device, copy=True).requires_grad_()
        ref = kinematics.forward_kinematics(q1, ref_robot.tree, links)
        out = fused.forward_kinematics(q2, robot.tree, links)
        if upstream is None:
            ref.sum().backward()
            out.sum().backward()
        else:
            assert not upstream.is_contiguous()
            ref.backward(upstream)
            out.backward(upstream.to(device))
        _close(q2.grad, q1.grad, 1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("stores", ["tiles", "scalar", "whole"])
def test_the_store_variants_write_the_same_values(device, stores, monkeypatch):
    """``fused.STORES`` (the probe's variants beside the default, ``"rows"``: the packed tile
    through its axes of two, one store per value, the Jacobian in one tile) changes how outputs
    are written, not what: FK, Jacobian and gradient equal the reference."""
    from torchik.kinematics import fused

    monkeypatch.setattr(fused, "STORES", stores)
    ref_robot, robot = _robot("mimic"), _robot("mimic", device=device)
    q_ref = ref_robot.random_configuration(140, generator=torch.Generator().manual_seed(9))
    q = q_ref.to(device, copy=True).requires_grad_()
    links = tuple(range(len(robot.link_names)))
    out = fused.forward_kinematics(q, robot.tree, links)
    _close(out, kinematics.forward_kinematics(q_ref, ref_robot.tree, links), 1e-12)
    jac, pose = fused.jacobian(q.detach(), robot.tree, links[-1])
    jac_ref, pose_ref = kinematics.jacobian(q_ref, ref_robot.tree, links[-1])
    _close(jac, jac_ref, 1e-12)
    _close(pose, pose_ref, 1e-12)
    out.sum().backward()
    q1 = q_ref.clone().requires_grad_()
    kinematics.forward_kinematics(q1, ref_robot.tree, links).sum().backward()
    _close(q.grad, q1.grad, 1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_fused_gradcheck(device):
    from torchik.kinematics import fused

    robot = _robot("mimic", device=device)
    q = robot.random_configuration(3, generator=torch.Generator().manual_seed(2)).to(device)
    link = (len(robot.link_names) - 1,)
    q = q.requires_grad_()
    assert torch.autograd.gradcheck(lambda x: fused.forward_kinematics(x, robot.tree, link), (q,))


@pytest.mark.parametrize("device", DEVICES)
def test_fused_float32_within_1e_6_of_the_scale(device):
    from torchik.kinematics import fused

    robot32, robot64 = _robot("panda", torch.float32, device), _robot("panda")
    q32 = robot32.random_configuration(300, generator=torch.Generator().manual_seed(3))
    q64, links = q32.cpu().double(), tuple(range(len(robot32.link_names)))
    out = fused.forward_kinematics(q32.to(device), robot32.tree, links)
    assert out.dtype == torch.float32
    ref = kinematics.forward_kinematics(q64, robot64.tree, links)
    scale = max(1.0, ref[..., :3, 3].abs().max().item())  # metres: the pose scale
    _close(out, ref, 1e-6 * scale)
    jac, pose = fused.jacobian(q32.to(device), robot32.tree, links[-1])
    jac_ref, pose_ref = kinematics.jacobian(q64, robot64.tree, links[-1])
    _close(jac, jac_ref, 1e-6 * scale)
    _close(pose, pose_ref, 1e-6 * scale)
    g = torch.Generator().manual_seed(4)
    weights = torch.randn(ref.shape, dtype=torch.float64, generator=g)
    q1, q2 = q64.clone().requires_grad_(), q32.to(device).requires_grad_()
    (kinematics.forward_kinematics(q1, robot64.tree, links) * weights).sum().backward()
    weights32 = weights.float().to(device)
    (fused.forward_kinematics(q2, robot32.tree, links) * weights32).sum().backward()
    _close(q2.grad, q1.grad, 1e-6 * q1.grad.abs().max().item())


@pytest.mark.parametrize("device", DEVICES)
def test_fused_empty_batch_and_the_backend_choice(device, monkeypatch):
    from torchik.kinematics import fused, native

    robot = _robot("panda", device=device)
    q = robot.random_configuration(5, generator=torch.Generator().manual_seed(4)).to(device)
    assert fused.forward_kinematics(q[:0], robot.tree, (1,)).shape == (0, 1, 4, 4)
    assert robot.backend == "auto"
    monkeypatch.setattr(native, "loaded", lambda: False)  # the native ones: test_native_fk.py
    assert robot._kernels(q, robot.tree) is (fused if device == "cuda" else kinematics)
    robot.backend = "fused"  # compiled on CUDA, in Triton's interpreter on the CPU
    assert robot._kernels(q, robot.tree) is fused
    fk = robot.forward_kinematics(q, "panda_hand")
    robot.backend = "reference"
    torch.testing.assert_close(fk, robot.forward_kinematics(q, "panda_hand"), atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="backend must be one of"):
        robot.backend = "triton"
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # absent on a GPU machine
    cpu = _robot("panda", device="cpu")
    cpu.backend = "fused"
    with pytest.raises(ValueError, match="runs on CUDA tensors"):
        cpu.forward_kinematics(cpu.neutral()[None], "panda_hand")


@pytest.mark.parametrize("device", DEVICES)
def test_constant_tables_are_kept_per_tree_and_follow_new_constants(device):
    from torchik.kinematics import fused

    robot, ref_robot = _robot("panda", device=device), _robot("panda")
    q_ref = robot.random_configuration(20, generator=torch.Generator().manual_seed(7)).cpu()
    q, links = q_ref.to(device), (robot.link_index("panda_hand"),)
    tree = robot.tree
    before = fused.forward_kinematics(q, tree, links)
    kept = fused._prepared("fk", tree, links, q)
    assert fused._prepared("fk", tree, links, q) is kept and robot.tree is tree
    state = robot.state_dict()
    state["origin_xyz"] = state["origin_xyz"] + 0.01  # zero offsets too: a new kernel pattern
    robot.load_state_dict(state)
    ref_robot.load_state_dict({k: v.cpu() for k, v in state.items()})
    assert robot.tree is not tree
    moved = fused.forward_kinematics(q, robot.tree, links)
    _close(moved, kinematics.forward_kinematics(q_ref, ref_robot.tree, links), 1e-12)
    assert (moved - before).abs().max() > 1e-3

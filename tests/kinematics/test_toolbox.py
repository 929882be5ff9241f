"""Issue 19, part 3: FK and Jacobians play well with torch.compile and torch.func.

``torch.compile(..., fullgraph=True)`` traces the plain out-of-place path (no graph breaks);
``vmap`` over single configurations equals the batched call; ``jacrev`` of the position and of
the rotation equals the analytic geometric Jacobian. Float64 throughout.
"""

import pytest
import torch

from torchik import load_robot


@pytest.fixture(scope="module")
def panda():
    return load_robot("panda", dtype=torch.float64)


def _q(robot, n, seed=0):
    return robot.random_configuration(n, generator=torch.Generator().manual_seed(seed))


def test_compiled_fk_fullgraph_equals_eager_with_gradients(panda):
    torch._dynamo.reset()
    q = _q(panda, 6)
    fk = torch.compile(panda.forward_kinematics, fullgraph=True)
    torch.testing.assert_close(fk(q, "panda_hand"), panda.forward_kinematics(q, "panda_hand"))
    q1, q2 = q.clone().requires_grad_(), q.clone().requires_grad_()
    fk(q1, "panda_hand")[:, :3, 3].sum().backward()
    panda.forward_kinematics(q2, "panda_hand")[:, :3, 3].sum().backward()
    torch.testing.assert_close(q1.grad, q2.grad, atol=1e-12, rtol=0)


def test_compiled_jacobian_fullgraph_equals_eager(panda):
    torch._dynamo.reset()
    q = _q(panda, 3, seed=1)
    jac = torch.compile(panda.jacobian, fullgraph=True)
    torch.testing.assert_close(jac(q, "panda_hand"), panda.jacobian(q, "panda_hand"))


def test_vmap_of_fk_equals_the_batched_call(panda):
    q = _q(panda, 5, seed=2)
    one = torch.func.vmap(lambda x: panda.forward_kinematics(x, "panda_hand"))(q)
    torch.testing.assert_close(one, panda.forward_kinematics(q, "panda_hand"), atol=1e-14, rtol=0)


def test_jacrev_equals_the_analytic_jacobian(panda):
    q = _q(panda, 4, seed=3)
    jac = panda.jacobian(q, "panda_hand")

    def pose(x):
        return panda.forward_kinematics(x, "panda_hand")

    d = torch.func.vmap(torch.func.jacrev(pose))(q)  # (B, 4, 4, dof)
    torch.testing.assert_close(jac[:, :3], d[:, :3, 3], atol=1e-12, rtol=0)
    rot = pose(q)[:, :3, :3]
    w = torch.einsum("bijd,bkj->bdik", d[:, :3, :3], rot)  # dR/dq_d R^T = [omega_d]x
    omega = torch.stack((w[..., 2, 1], w[..., 0, 2], w[..., 1, 0]), dim=-1)  # (B, dof, 3)
    torch.testing.assert_close(jac[:, 3:], omega.transpose(1, 2), atol=1e-12, rtol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (CI has none)")
def test_cuda_in_cuda_out():
    robot = load_robot("panda", dtype=torch.float32).cuda()
    q = robot.random_configuration(8).cuda()
    assert robot.forward_kinematics(q, "panda_hand").device == q.device
    assert robot.jacobian(q, "panda_hand").device == q.device


@pytest.mark.parametrize("floating_base", [False, True])
@pytest.mark.parametrize("batch", [4, 64])  # the small-batch path and the batched kernel
def test_autocast_leaves_fk_and_jacobians_in_the_robots_dtype(batch, floating_base):
    robot = load_robot("panda", dtype=torch.float32, floating_base=floating_base)
    exact = load_robot("panda", dtype=torch.float64, floating_base=floating_base)
    q = _q(exact, batch, seed=4)
    x = q.float().requires_grad_()  # in a loss: the differentiable path
    with torch.autocast("cpu", dtype=torch.bfloat16):  # bfloat16 products: 1e-2 off
        hand = robot.forward_kinematics(x, "panda_hand")
        every = robot.forward_kinematics(x)
        jac = robot.jacobian(x, "panda_hand")
    assert hand.dtype == every.dtype == jac.dtype == torch.float32
    expected = (exact.forward_kinematics(q, "panda_hand"), exact.forward_kinematics(q))
    torch.testing.assert_close(hand.detach().double(), expected[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(every.detach().double(), expected[1], atol=1e-5, rtol=0)
    jac_exact = exact.jacobian(q, "panda_hand")
    torch.testing.assert_close(jac.detach().double(), jac_exact, atol=1e-5, rtol=0)


def test_analytic_backward_inside_autocast_is_exact():
    robot = load_robot("panda", dtype=torch.float32)
    exact = load_robot("panda", dtype=torch.float64)
    q = _q(exact, 64, seed=5)
    x, x64 = q.float().requires_grad_(), q.clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        robot.forward_kinematics(x).square().sum().backward()  # the subtree sums: matmuls
    exact.forward_kinematics(x64).square().sum().backward()
    torch.testing.assert_close(x.grad.double(), x64.grad, atol=1e-4, rtol=1e-5)

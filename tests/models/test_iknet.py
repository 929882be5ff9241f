"""IKNet: sizes, the generated-weight layout, an exact normalised density that agrees with the
sampler, and a short CPU training that finds both elbow modes of the 2-joint snake."""

from __future__ import annotations

import math
from functools import cache

import pytest
import torch
from torch import Tensor

from torchik import load_robot
from torchik.learn import ProblemSpec, make_dataset
from torchik.models import IKNet, IKNetConfig
from torchik.models.mixture import mixture_log_prob
from torchik.train import TrainConfig, train

F64 = torch.float64


@cache
def _spec(robot: str, targets: str = "position") -> ProblemSpec:
    return ProblemSpec.from_robot(load_robot(robot), targets=targets)


def _tiny(spec: ProblemSpec, seed: int = 0, **overrides) -> IKNet:
    torch.manual_seed(seed)
    config = IKNetConfig(
        **{"hyper_width": 32, "hyper_depth": 1, "embedding": 8, "primary_width": 16, **overrides}
    )
    return IKNet(spec, config)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------------------- configuration
def test_presets_and_validation():
    assert IKNetConfig.paper().hyper_depth == 4 and IKNetConfig.paper().primary_layers == 3
    default = IKNetConfig()
    assert (default.hyper_width, default.embedding, default.primary_width) == (1024, 128, 256)
    assert default.components == 50 and default.norm == "none"
    assert IKNetConfig.paper().norm == "batch"
    assert IKNetConfig.small(components=2).components == 2
    for bad in ({"components": 0}, {"primary_layers": 0}, {"min_scale": 0.0}, {"norm": "group"}):
        with pytest.raises(ValueError):
            IKNetConfig(**bad)


def test_target_noise_perturbs_training_targets_only():
    assert IKNetConfig().target_noise == 0.0 == IKNetConfig.paper().target_noise
    with pytest.raises(ValueError, match="target_noise"):
        IKNetConfig(target_noise=-0.01)
    spec = _spec("panda")
    lower, upper = torch.tensor(spec.lower), torch.tensor(spec.upper)
    q = torch.rand(16, 7, generator=_gen(1)) * (upper - lower) + lower
    target = torch.randn(16, 3, generator=_gen(2)) * 0.3
    plain, noisy = _tiny(spec, 3), _tiny(spec, 3, target_noise=0.05)
    noisy.load_state_dict(plain.state_dict())
    with torch.no_grad():
        for model in (plain, noisy):
            model.eval()
        exact = plain.loss(q, target)
        torch.testing.assert_close(noisy.loss(q, target), exact)  # eval: the exact targets
        plain.train(), noisy.train()
        torch.manual_seed(4)
        first = noisy.loss(q, target)
        torch.manual_seed(4)
        assert noisy.loss(q, target) == first  # the noise comes from torch's global RNG
        assert first != plain.loss(q, target)
        torch.manual_seed(4)
        shifted = target + 0.05 * torch.randn_like(target)
        torch.testing.assert_close(first, plain.loss(q, shifted))


def test_domains_follow_the_limits():
    assert all(d.circular for d in IKNet(_spec("snake2", "planar"), IKNetConfig.small()).domains)
    ur5 = IKNet(_spec("ur5"), IKNetConfig.small()).domains
    assert [d.circular for d in ur5] == [True, True, False, True, True, True]  # elbow +-2.5
    assert not any(d.circular for d in IKNet(_spec("panda"), IKNetConfig.small()).domains)


@pytest.mark.parametrize("layers", [2, 3])
def test_generated_size_for_franka(layers):
    """One primary net per joint: (in_j + 1) x H, (H + 1) x H ..., (H + 1) x 3K per target."""
    config = IKNetConfig(primary_layers=layers)
    h, k = config.primary_width, config.components
    expected = sum((j + 1) * h + (layers - 2) * (h + 1) * h + (h + 1) * 3 * k for j in range(7))
    model = IKNet(_spec("panda"), config)
    assert model.generated_size == expected
    assert model.heads.weight.shape == (expected, config.embedding)
    if layers == 2:  # the "about 0.3 M generated weights per target"
        assert 0.25e6 < expected < 0.3e6


def test_circular_joints_read_cos_and_sin():
    model = IKNet(_spec("ur5"), IKNetConfig.small())
    # joints 0, 1 circular (2 features each), joint 2 limited (1), joints 3-5 circular
    assert model._feature_end == [0, 2, 4, 5, 7, 9]
    angle = torch.tensor([math.pi, -math.pi])
    features = model._features(angle, 0)
    torch.testing.assert_close(features[0], features[1])  # no seam at +-pi


def test_trig_features_read_cos_and_sin_of_limited_joints():
    assert IKNetConfig().joint_features == "linear" == IKNetConfig.paper().joint_features
    with pytest.raises(ValueError, match="joint_features"):
        IKNetConfig(joint_features="fourier")
    plain = IKNet(_spec("panda"), IKNetConfig.small())
    trig = IKNet(_spec("panda"), IKNetConfig.small(joint_features="trig"))
    assert trig._feature_end == [3 * end for end in plain._feature_end]  # 3 per limited joint
    h = trig.config.primary_width  # two more inputs per joint drawn before, first layer only
    assert trig.generated_size == plain.generated_size + sum(2 * j * h for j in range(7))
    angle = torch.tensor([0.3, -1.2])
    features = trig._features(angle, 1)
    torch.testing.assert_close(features[:, 0], plain._features(angle, 1)[:, 0])
    torch.testing.assert_close(features[:, 1:], torch.stack((angle.cos(), angle.sin()), -1))
    ur5 = IKNet(_spec("ur5"), IKNetConfig.small(joint_features="trig"))  # circular: cos, sin
    assert ur5._feature_end == [0, 2, 4, 7, 9, 11]
    target = torch.randn(4, 3, generator=_gen(5))
    with torch.no_grad():  # sampling and the density read the same features
        q = trig.eval().sample(target, 3, generator=_gen(6))
        assert trig.log_prob(q, target[:, None]).isfinite().all()


# ---------------------------------------------------------------------------- the density
def _grid_log_prob(model: IKNet, target: torch.Tensor, n: int) -> tuple[torch.Tensor, float]:
    """log p on an ``n x n`` midpoint grid over the two joints' ranges, and the cell area."""
    axes = [d.lower + d.span * (torch.arange(n, dtype=F64) + 0.5) / n for d in model.domains]
    grid = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1).reshape(-1, 2)
    cell = math.prod(d.span / n for d in model.domains)
    with torch.no_grad():
        return model.log_prob(grid, target.expand(len(grid), -1)), cell


@pytest.mark.parametrize(
    ("robot", "kwargs"),
    [("snake2", {}), ("planar", {"link_lengths": (0.5, 0.3), "lower": -2.0, "upper": 1.5})],
    ids=["circular", "limited"],
)
@pytest.mark.parametrize("features", ["linear", "trig"])
def test_log_prob_is_a_normalised_density(robot, kwargs, features):
    spec = ProblemSpec.from_robot(load_robot(robot, **kwargs), targets="planar")
    model = _tiny(spec, components=3, joint_features=features).double().eval()
    lp, cell = _grid_log_prob(model, torch.tensor([0.1, 0.05], dtype=F64), 400)
    assert lp.isfinite().all()
    assert (lp.exp().sum() * cell).item() == pytest.approx(1.0, abs=2e-3)


def test_log_prob_is_the_chain_of_mixture_conditionals():
    """log p(q | x) = sum_j log p(q_j | q_<j, x), each term a mixture written out here."""
    model = _tiny(_spec("ur5"), components=4).double().eval()
    q = load_robot("ur5", dtype=F64).random_configuration(5, generator=_gen(1))
    target = torch.randn(5, 3, generator=_gen(2), dtype=F64)
    with torch.no_grad():
        flat = model.generate(target)
        expected = torch.zeros(5, dtype=F64)
        for j, domain in enumerate(model.domains):
            previous = [model._features(q[:, i], i) for i in range(j)]
            x = torch.cat(previous, -1) if previous else q.new_zeros(5, 0)
            w, mu, sigma = (p[:, 0] for p in model._mixture(x[:, None], flat, j))
            assert torch.allclose(w.sum(-1), torch.ones(5, dtype=F64))
            expected += mixture_log_prob(q[:, j], w, mu, sigma, domain)
        torch.testing.assert_close(model.log_prob(q, target), expected)
        # a circular joint shifted by a full turn is the same configuration
        turned = q + torch.tensor([2 * math.pi, -2 * math.pi, 0, 0, 0, 0], dtype=F64)
        torch.testing.assert_close(model.log_prob(turned, target), expected)


def test_layers_wider_than_the_embedding_are_applied_without_generating_them():
    """log_prob and its gradients (one factored product per layer with ``fan_in + 1 > E``)
    equal those through the generated weights, float64; the factored product alone too, for
    several samples per target."""
    from torchik.models.iknet import _apply, _apply_factored

    model = _tiny(_spec("panda"), embedding=4, components=3).double()
    assert any(layer.fan_in + 1 > 4 for joint in model._layers for layer in joint)
    q = load_robot("panda", dtype=F64).random_configuration(6, generator=_gen(11))
    target = torch.randn(6, 3, generator=_gen(12), dtype=F64)
    flat = model.generate(target)
    features = torch.cat([model._features(q[:, j], j) for j in range(7)], -1)
    expected = sum(
        mixture_log_prob(q[:, j], *(p[:, 0] for p in model._mixture(x, flat, j)), model.domains[j])
        for j, x in enumerate(features[:, None, :end] for end in model._feature_end)
    )
    got = model.log_prob(q, target)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    grads = torch.autograd.grad(got.sum(), list(model.parameters()))
    for a, b in zip(
        grads, torch.autograd.grad(expected.sum(), list(model.parameters())), strict=True
    ):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-11)
    layer = model._layers[3][1]
    rows = slice(layer.offset, layer.offset + layer.size)
    x = torch.randn(6, 5, layer.fan_in, generator=_gen(13), dtype=F64)
    embedding = model.embed(target)
    weight, bias = model.heads.weight[rows], model.heads.bias[rows]
    torch.testing.assert_close(
        _apply_factored(x, embedding, weight, bias, layer),
        _apply(x, flat[:, rows], layer),
        rtol=0,
        atol=1e-12,
    )


def test_samples_follow_log_prob():
    """Moments of samples match the moments of the density integrated on a grid."""
    model = _tiny(_spec("snake2", "planar"), components=3, seed=3).double().eval()
    target = torch.tensor([0.12, -0.03], dtype=F64)
    lp, cell = _grid_log_prob(model, target, 300)
    axes = [d.lower + d.span * (torch.arange(300, dtype=F64) + 0.5) / 300 for d in model.domains]
    grid = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1).reshape(-1, 2)
    weights = lp.exp() * cell
    with torch.no_grad():
        q = model.sample(target, 40000, generator=_gen(4))
    for f in (torch.cos, torch.sin):
        expected = (f(grid) * weights[:, None]).sum(0) / weights.sum()
        torch.testing.assert_close(f(q).mean(0), expected, atol=0.015, rtol=0)


def test_sampling_expands_weights_without_copies_and_batches():
    model = _tiny(_spec("panda")).eval()
    targets = torch.randn(2, 3, 3, generator=_gen(5))
    with torch.no_grad():
        q = model.sample(targets, 7, generator=_gen(6))
        one = model.sample(targets[1, 2], 7, generator=_gen(6))
    assert q.shape == (2, 3, 7, 7) and one.shape == (7, 7)
    assert ((q >= model.lower) & (q <= model.upper)).all()


def test_temperature():
    model = _tiny(_spec("panda"), components=5).eval()
    target = torch.randn(4, 3, generator=_gen(9))
    with torch.no_grad():
        q = model.sample(target, 50, generator=_gen(10), temperature=0.0)
        flat = model.generate(target)
        weights, means, _ = model._mixture(flat.new_zeros(4, 1, 0), flat, 0)
    assert ((q >= model.lower) & (q <= model.upper)).all()
    # at temperature 0 the first joint takes only the means of components in the support
    distance = (q[..., 0, None] - means).abs().masked_fill(weights == 0, math.inf)
    assert distance.min(-1).values.max() < 1e-6
    with pytest.raises(ValueError, match="temperature"):
        model.sample(target, 2, temperature=-1.0)


def test_gradients_are_finite_with_sparse_weights():
    data = make_dataset(load_robot("panda"), 256, seed=1)
    model = _tiny(data.spec, components=8)
    model.set_normalization(data.q, data.target)
    with torch.no_grad():  # spread joint 0's mixing logits so that sparsemax drops some
        out = model._layers[0][-1]
        bias = model.heads.bias[out.offset : out.offset + out.size].view(out.fan_in + 1, -1)
        bias[-1, :8] = torch.linspace(-3.0, 3.0, 8)
        flat = model.generate(data.target)
        weights, _, _ = model._mixture(flat.new_zeros(256, 1, 0), flat, 0)
    assert (weights == 0).any() and (weights > 0).sum(-1).min() > 1
    model.loss(data.q, data.target).backward()
    assert all(p.grad.isfinite().all() for p in model.parameters())


# ---------------------------------------------------------------------------- training
def _elbow_modes(q: torch.Tensor, error: torch.Tensor, tol: float) -> tuple[Tensor, Tensor]:
    """Fractions ``(targets,)`` of accurate samples with the elbow up and down."""
    elbow = torch.remainder(q[..., 1] + math.pi, 2 * math.pi) - math.pi
    ok = error < tol
    return (ok & (elbow > 0)).float().mean(-1), (ok & (elbow < 0)).float().mean(-1)


@pytest.mark.slow
def test_snake2_finds_both_elbow_modes():
    """About 8 s on one core. K = 4 rather than the paper's 2 for the snakes: with K = 2 each
    component must serve the elbow-up mode on one side of target space and elbow-down on the
    other (its initial mean is a fixed angle), and where they swap both sit between the modes
    until training pushes the seam to the workspace's rim. In 400 steps K = 2 failed the 10 %
    bar for 5 of 8 seeds (3 of 8 with batch norm); K = 4 passed for 10 of 10 seeds (lowest
    mode share 19 %, median distance 0.8-1.3 mm)."""
    robot = load_robot("snake2")
    data = make_dataset(robot, 20000, targets="planar", seed=0)
    torch.manual_seed(0)
    model = IKNet(data.spec, IKNetConfig.small(components=4))
    config = TrainConfig(
        steps=400, batch_size=512, lr=3e-3, warmup_steps=20, grad_clip=0.3, progress=False
    )
    model = train(model, data, config=config).model
    # targets strictly inside the reachable annulus: two distinct solutions each
    angle = torch.linspace(-3.0, 3.0, 24)
    radius = torch.linspace(0.04, 0.18, 24)[torch.randperm(24, generator=_gen(7))]
    target = torch.stack((radius * torch.cos(angle), radius * torch.sin(angle)), dim=-1)
    with torch.no_grad():
        q = model.sample(target, 200, generator=_gen(8))
        reached = robot.link_positions(q, "ee")[..., :2]
    error = (reached - target[:, None]).norm(dim=-1)
    up, down = _elbow_modes(q, error, tol=0.02)  # 2 cm on an arm of reach 0.2 m
    assert up.min() >= 0.10 and down.min() >= 0.10, (up, down)
    assert error.median() < 0.004

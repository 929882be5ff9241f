"""The flow-matching family: its config, its joint spaces and solver, and a short CPU training
that reaches the 2-joint snake's targets with both elbow modes."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from tests.models.snake_ring import trained_ring_samples
from torchik import load_robot
from torchik.learn import ProblemSpec
from torchik.models import FEW_PASSES, FEW_PASSES_BF16, FlowMatching, FMConfig, FMSampler, fm
from torchik.models.fm import VelocityNet


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _model(robot: str = "panda", **config) -> FlowMatching:
    torch.manual_seed(0)
    spec = ProblemSpec.from_robot(load_robot(robot))
    return FlowMatching(spec, FMConfig(width=16, blocks=1, embedding=8, **config))


@pytest.mark.parametrize(
    "bad",
    [{"width": 0}, {"blocks": 0}, {"steps": 0}, {"embedding": 7}, {"space": "angles"},
     {"solver": "rk4"}, {"activation": "sigmoid"}, {"time_power": 0.0},
     {"time_power": float("inf")}, {"schedule": 0.0}, {"bf16_until": 1.5}],
)  # fmt: skip
def test_config_is_validated(bad):
    with pytest.raises(ValueError):
        FMConfig(**bad)


@pytest.mark.parametrize(
    "bad", [{"steps": 0}, {"solver": "heun"}, {"schedule": -1.0}, {"bf16_until": -0.1}]
)
def test_sampler_is_validated(bad):
    with pytest.raises(ValueError):
        FMSampler(**bad)


def test_sample_refuses_a_sampler_that_is_not_one_in_one_line():
    """``sampler="euler"`` (the docs name solvers by string) said AttributeError on
    ``bf16_until``; now a TypeError saying how to make one."""
    model, target = _model(), torch.zeros(1, 3)
    with pytest.raises(TypeError, match=r"^sampler must be an FMSampler .*solver='midpoint'"):
        model.sample(target, 2, sampler="euler")


def test_the_config_names_its_sampler_and_old_configs_keep_theirs():
    """A config saved before ``schedule`` and ``bf16_until`` existed loads with the uniform
    grid in full precision: the sampler it always had."""
    old = {"width": 16, "blocks": 1, "embedding": 8, "steps": 32, "solver": "midpoint"}
    assert FMConfig(**old).sampler == FMSampler(32, "midpoint", 1.0, 0.0)
    assert FMSampler(32, "midpoint").passes == 64 and FEW_PASSES.passes == 12
    assert FEW_PASSES_BF16.passes == 12 and FEW_PASSES_BF16.bf16_until > 0


@pytest.mark.parametrize("steps", [3, 8, 12])
def test_sampler_intervals_cover_zero_to_one(steps):
    uniform = FMSampler(steps).intervals()
    assert uniform == [(i * (1.0 / steps), 1.0 / steps) for i in range(steps)]
    dense = FMSampler(steps, schedule=2.0).intervals()
    starts, lengths = zip(*dense, strict=True)
    assert starts[0] == 0.0 and math.isclose(starts[-1] + lengths[-1], 1.0)
    assert all(b > a for a, b in zip(starts, starts[1:], strict=False))
    assert all(b < a for a, b in zip(lengths, lengths[1:], strict=False))  # denser near t = 1


def _old_sample(model: FlowMatching, target, n: int, gen) -> torch.Tensor:
    """The sampler before FMSampler (torchik 0.1.0), for comparison: per-sample conditioning,
    ``t = i h`` and, for the midpoint rule, ``t + h / 2`` as tensors."""
    context = model.normalize_target(target.unsqueeze(-2).expand(*target.shape[:-1], n, -1))
    x = torch.randn((*context.shape[:-1], model.size), generator=gen)
    steps = model.config.steps
    h = 1.0 / steps
    for i in range(steps):
        t = torch.full_like(x[..., :1], i * h)
        v = model.net(x, t, context)
        if model.config.solver == "midpoint":
            v = model.net(x + 0.5 * h * v, t + 0.5 * h, context)
        x = x + h * v
    return model.decode(x)


@pytest.mark.parametrize("solver", ["euler", "midpoint"])
def test_the_config_sampler_reproduces_the_old_samples_bit_for_bit(solver):
    model = _model(solver=solver, steps=3).eval()
    target = torch.randn(4, 3, generator=_gen(3))
    with torch.no_grad():
        old = _old_sample(model, target, 5, _gen(4))
        assert torch.equal(model.sample(target, 5, _gen(4)), old)
        shared = model.sample(target, 5, _gen(4), sampler=model.config.sampler)
    torch.testing.assert_close(shared, old)  # conditioning once per target: rounding apart


class _LinearField(torch.nn.Module):
    """``v(x, t) = (cos(3 t) + 2 t) x`` in the shape of a :class:`VelocityNet`: ``x(1) = x(0)
    exp(sin(3) / 3 + 1)``."""

    def conditioning(self, t, context):
        return torch.cos(3.0 * t) + 2.0 * t, []

    def trunk(self, x, c, terms):
        return c * x


@pytest.mark.parametrize(
    ("solver", "schedule", "low", "high"),
    [("euler", 1.0, 1.8, 2.2), ("euler", 2.0, 1.8, 2.2), ("midpoint", 1.0, 3.6, 4.4),
     ("midpoint", 2.0, 3.6, 4.4), ("dpm2m", 1.0, 3.6, 5.5), ("dpm2m", 2.0, 2.5, 4.4)],
)  # fmt: skip
def test_solvers_converge_at_their_order(solver, schedule, low, high):
    """Halving the step divides the error by ``2^order`` (float64, a field with a closed form):
    Euler 1, midpoint 2, dpm2m 2 on the uniform grid; on the grid of schedule 2 measured 2.9
    (32 -> 64 steps) where the last steps are long in ``log(t / (1 - t))``."""
    model = _model().double()
    model.net = _LinearField()  # type: ignore[assignment]
    x0 = torch.randn(5, 7, generator=_gen(5), dtype=torch.float64)
    exact = x0 * math.exp(math.sin(3.0) / 3.0 + 1.0)
    context = torch.zeros(5, 3, dtype=torch.float64)
    error = [
        (model.integrate(x0, context, sampler=FMSampler(n, solver, schedule)) - exact).abs().max()
        for n in (32, 64)
    ]
    assert low < error[0] / error[1] < high, error


def _constant_field(model):
    """``model``'s velocity set to 0.5 everywhere (its head zeroed, biased), and noise ``x``
    with a context to move."""
    with torch.no_grad():
        model.net.head[1].weight.zero_()
        model.net.head[1].bias.fill_(0.5)
    return torch.randn(6, 7, generator=_gen(1)), torch.zeros(6, 3)


def test_dpm2m_is_exact_for_a_constant_field():
    model = _model().eval()
    x, context = _constant_field(model)
    with torch.no_grad():
        for sampler in (FEW_PASSES, FMSampler(1, "dpm2m"), FMSampler(5, "dpm2m", 3.0)):
            torch.testing.assert_close(model.integrate(x, context, sampler=sampler), x + 0.5)


def test_bf16_passes_run_before_the_threshold_only():
    """Passes at ``t < bf16_until`` run the trunk in bfloat16 on a copy: the model keeps its
    float32 weights, the samples stay close, and closer than with every pass in bfloat16."""
    model = _model().eval()
    target = torch.randn(3, 3, generator=_gen(6))
    with torch.no_grad():
        full = model.sample(target, 8, _gen(7), sampler=FEW_PASSES)
        low = model.sample(target, 8, _gen(7), sampler=FEW_PASSES_BF16)
        every = model.sample(target, 8, _gen(7), sampler=FMSampler(12, "dpm2m", 2.0, 1.0))
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert low.dtype == torch.float32 and not torch.equal(low, full)
    assert (low - full).abs().max() < (every - full).abs().max() + 1e-6
    torch.testing.assert_close(low, full, atol=0.05, rtol=0)


@pytest.mark.parametrize(("robot", "space", "size"), [
    ("panda", "logit", 7), ("panda", "features", 7), ("snake2", "features", 4),
    ("snake2", "logit", 2),
])  # fmt: skip
def test_spaces_round_trip(robot, space, size):
    model = _model(robot, space=space).double()
    span = model.upper - model.lower
    q = model.lower + span * torch.rand(50, model.spec.dof, dtype=torch.float64)
    x = model.encode(q)
    assert model.size == size and x.shape == (50, size)
    torch.testing.assert_close(model.decode(x), q)


def test_logit_space_has_about_unit_scale():
    model = _model(space="logit")
    q = model.lower + (model.upper - model.lower) * torch.rand(20000, 7, generator=_gen(0))
    std = model.encode(q).std(0)
    assert ((std > 0.9) & (std < 1.1)).all(), std


def test_integrate_steps_and_solvers():
    """A constant field moves noise by exactly ``v``; more steps change a learned field's end."""
    model = _model().eval()
    x, context = _constant_field(model)
    with torch.no_grad():
        torch.testing.assert_close(model.integrate(x, context, steps=3), x + 0.5)
    euler = _model(solver="euler").eval()
    with torch.no_grad():
        a = euler.integrate(x, context, steps=1)
        torch.testing.assert_close(a, x + euler.net(x, torch.zeros(6, 1), context))
        assert not torch.equal(
            euler.sample(context[:2], 3, _gen(2), steps=2),
            euler.sample(context[:2], 3, _gen(2), steps=5),
        )
    with pytest.raises(ValueError, match="steps"):
        model.integrate(x, context, steps=0)


def test_time_power_shifts_training_times():
    model, q = _model(), torch.zeros(4096, 7)
    seen = []
    model.net.register_forward_hook(lambda net, inputs, out: seen.append(inputs[1]))
    for power in (1.0, 3.0):
        model.config = FMConfig(width=16, blocks=1, time_power=power)
        model.loss(q, torch.zeros(4096, 3))
    assert abs(seen[0].mean() - 0.5) < 0.02 and abs(seen[1].mean() - 0.75) < 0.02


def test_velocity_net_time_features_are_not_saved():
    net = VelocityNet(size=2, context=3, width=8, blocks=2, embedding=6)
    assert net.frequencies.shape == (3,) and "frequencies" not in net.state_dict()
    torch.testing.assert_close(net.frequencies[[0, -1]], torch.tensor([1.0, 100.0]))


@pytest.mark.slow
def test_snake2_finds_both_elbow_modes():
    """About 5 s on one core. Measured: median end-point error 2.7 mm (bound 6 mm; 6.5 mm
    with uniform training times, ``time_power=1``), each target's lowest share of accurate
    samples in one elbow mode 31 % (bound 10 %)."""

    def make(spec):
        return FlowMatching(spec, FMConfig(width=64, blocks=2))

    model, q, error = trained_ring_samples(make, steps=600)
    assert ((q >= model.lower) & (q <= model.upper)).all()
    assert error.median() < 0.006, error.median()
    elbow = torch.remainder(q[..., 1] + math.pi, 2 * math.pi) - math.pi
    ok = error < 0.02  # 2 cm on an arm of reach 0.2 m
    up, down = (ok & (elbow > 0)).float().mean(-1), (ok & (elbow < 0)).float().mean(-1)
    assert up.min() >= 0.10 and down.min() >= 0.10, (up, down)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="captures a CUDA graph: needs CUDA")
@pytest.mark.parametrize("sampler", [FEW_PASSES, FEW_PASSES_BF16])
def test_sampling_in_a_cuda_graph_equals_eager_and_follows_the_weights(sampler, monkeypatch):
    """The captured integration gives the eager samples, replays without a host sync, is
    reused for the same shape and captured anew when a weight changes in place."""
    from torchik.models import fm

    model = _model().cuda().eval()
    x = torch.randn(3, 16, model.size, generator=_gen(1)).cuda()
    context = torch.randn(3, 1, 3, generator=_gen(2)).cuda()
    fm._GRAPHS.clear()
    with torch.no_grad():
        monkeypatch.setattr(fm, "CUDA_GRAPHS", False)
        eager = model.integrate(x, context, sampler=sampler)
        monkeypatch.setattr(fm, "CUDA_GRAPHS", True)
        first = model.integrate(x, context, sampler=sampler)
        torch.cuda.set_sync_debug_mode("error")
        try:
            second = model.integrate(x, context, sampler=sampler)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert len(fm._GRAPHS) == 1 and next(iter(fm._GRAPHS.values())) is not None
        torch.testing.assert_close(first, eager, rtol=0.0, atol=1e-6)
        torch.testing.assert_close(second, eager, rtol=0.0, atol=1e-6)
        model.net.head[1].bias.add_(0.25)
        moved = model.integrate(x, context, sampler=sampler)
        assert len(fm._GRAPHS) == 2 and not torch.allclose(moved, eager)
    with torch.inference_mode():  # buffers of inference mode are its own
        torch.testing.assert_close(model.integrate(x, context, sampler=sampler), moved)
    with torch.no_grad():
        torch.testing.assert_close(model.integrate(x, context, sampler=sampler), moved)
    assert len(fm._GRAPHS) == 3
    fm._GRAPHS.clear()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="samples on CUDA: needs CUDA")
def test_the_default_sampler_on_cuda_is_the_bfloat16_one_from_ampere_on():
    """A model given both defaults samples on a CUDA device of compute capability 8 or more
    with the bfloat16 one (its passes captured as any other sampler's), else the float32
    one."""
    from torchik.models import fm

    model = _model().cuda().eval()
    model.default_sampler, model.default_sampler_bf16 = FEW_PASSES, FEW_PASSES_BF16
    expected = FEW_PASSES_BF16 if torch.cuda.get_device_capability()[0] >= 8 else FEW_PASSES
    target = torch.randn(2, 3, generator=_gen(3)).cuda()
    with torch.no_grad():
        default = model.sample(target, 8, torch.Generator("cuda").manual_seed(0))
        named = model.sample(target, 8, torch.Generator("cuda").manual_seed(0), sampler=expected)
    assert fm.bf16_is_fast(target.device) == (expected is FEW_PASSES_BF16)
    torch.testing.assert_close(default, named, rtol=0.0, atol=0.0)


def test_sampling_on_the_cpu_captures_nothing():
    from torchik.models import fm

    fm._GRAPHS.clear()
    model = _model().eval()
    with torch.no_grad():
        model.sample(torch.zeros(2, 3), 4, _gen(0), sampler=FEW_PASSES)
    assert not fm._GRAPHS


def test_the_mixed_trunk_is_the_trunk_up_to_bfloat16_products():
    import copy

    net = VelocityNet(size=7, context=3, width=64, blocks=2, embedding=8)
    low = copy.deepcopy(net).to(torch.bfloat16)
    x, context = torch.randn(32, 7, generator=_gen(0)), torch.randn(32, 3, generator=_gen(1))
    with torch.no_grad():
        c, terms = net.conditioning(torch.full((32, 1), 0.9), context)
        exact, mixed = net.trunk(x, c, terms), net.mixed_trunk(x, c, terms, low)
        pure = low.trunk(x.bfloat16(), c.bfloat16(), [t.bfloat16() for t in terms]).float()
    assert mixed.dtype == torch.float32 and 0 < (mixed - exact).abs().max() < 0.05
    assert (mixed - exact).abs().mean() < (pure - exact).abs().mean()  # the stream kept exact


def test_a_mixed_sampler_runs_its_late_passes_mixed():
    model = _model().eval()
    x, context = torch.randn(6, model.size, generator=_gen(1)), torch.zeros(6, 3)
    with torch.no_grad():
        full = model.integrate(x, context, sampler=FEW_PASSES)
        late = model.integrate(x, context, sampler=replace(FEW_PASSES_BF16, mixed=True))
        every = model.integrate(x, context, sampler=replace(FEW_PASSES, mixed=True))
    assert not torch.equal(late, full) and not torch.equal(every, full)
    torch.testing.assert_close(every, full, rtol=0.0, atol=0.05)
    with pytest.raises(TypeError, match="mixed must be True or False"):
        FMSampler(mixed=1)  # type: ignore[arg-type]


def test_the_bfloat16_copy_is_kept_until_a_weight_changes():
    model = _model().eval()
    x, context = torch.randn(6, model.size, generator=_gen(1)), torch.zeros(6, 3)
    with torch.no_grad():
        first = model.integrate(x, context, sampler=FEW_PASSES_BF16)
        low = model._bf16_net()
        assert model.integrate(x, context, sampler=FEW_PASSES_BF16).equal(first)
        assert model._bf16_net() is low and "_bf16_copy" not in model.state_dict()
        model.net.head[1].bias.add_(0.25)  # in place: the copy is made again
        assert model._bf16_net() is not low
        assert not model.integrate(x, context, sampler=FEW_PASSES_BF16).equal(first)
    outside = model._bf16_net()
    with torch.inference_mode():  # a copy of its own: one made in it holds inference tensors
        assert model._bf16_net() is not outside


_NO_ONEDNN = "PyTorch's oneDNN bfloat16 linear kernels are not available on this CPU"


@pytest.mark.skipif(not fm._onednn_available(), reason=_NO_ONEDNN)
@pytest.mark.parametrize("activation", ["silu", "relu", "tanh", "gelu"])
@pytest.mark.parametrize("mixed", [False, True])
def test_the_onednn_pass_is_the_modules_pass_up_to_bfloat16(activation, mixed):
    import copy

    net = VelocityNet(size=7, context=3, width=64, blocks=2, embedding=8, activation=activation)
    low = copy.deepcopy(net).to(torch.bfloat16)
    x, context = torch.randn(2, 40, 7, generator=_gen(0)), torch.randn(1, 1, 3, generator=_gen(1))
    with torch.no_grad():
        c, terms = net.conditioning(torch.full((1, 1, 1), 0.5), context)
        fused = fm._OneDNN(low, rows=16).trunk(net, x, c, terms, mixed=mixed)  # any row count
        if mixed:
            modules = net.mixed_trunk(x, c, terms, low)
        else:
            half = [u.bfloat16() for u in (x, c, *terms)]
            modules = low.trunk(half[0], half[1], half[2:]).float()
        exact = net.trunk(x, c, terms)
    assert fused.shape == x.shape and fused.dtype == torch.float32
    assert 0 < (fused - modules).abs().max() < 0.1
    # it rounds less often than the modules (the term, the activation and the residual sum
    # stay in float32 inside the kernels), so it lands at least as near the exact pass
    assert (fused - exact).abs().mean() <= 1.05 * (modules - exact).abs().mean()


@pytest.mark.skipif(not fm._onednn_available(), reason=_NO_ONEDNN)
def test_sampling_one_target_on_the_cpu_takes_onednn_and_only_there(monkeypatch):
    model = _model().eval()
    target = torch.tensor([0.3, 0.1, 0.5])
    sampler = replace(FEW_PASSES_BF16, mixed=True)
    with torch.no_grad():
        fused = model.sample(target, 50, _gen(0), sampler=sampler)
        assert "_onednn_copy" in model.__dict__
        model.__dict__.pop("_onednn_copy")
        model.sample(target.expand(2, 3), 5, _gen(0), sampler=sampler)  # two targets
        model.sample(target, 5, _gen(0), sampler=FEW_PASSES)  # no bfloat16 pass
        monkeypatch.setattr(fm, "ONEDNN", False)
        modules = model.sample(target, 50, _gen(0), sampler=sampler)
    monkeypatch.setattr(fm, "ONEDNN", True)
    model.sample(target, 5, _gen(0), sampler=sampler)  # a gradient may be recorded
    assert "_onednn_copy" not in model.__dict__
    assert not torch.equal(fused, modules)
    torch.testing.assert_close(fused, modules, rtol=0.0, atol=0.1)


@pytest.mark.skipif(not fm._onednn_available(), reason=_NO_ONEDNN)
def test_the_onednn_weights_are_packed_again_when_a_weight_changes():
    model = _model().eval()
    target = torch.tensor([0.3, 0.1, 0.5])
    with torch.no_grad():
        first = model.sample(target, 8, _gen(0), sampler=FEW_PASSES_BF16)
        packed = model._onednn_copy[1] if hasattr(model, "_onednn_copy") else None
        assert packed is not None and "_onednn_copy" not in model.state_dict()
        assert model.sample(target, 8, _gen(0), sampler=FEW_PASSES_BF16).equal(first)
        assert model.__dict__["_onednn_copy"][1] is packed
        model.net.blocks[0].outer.bias.add_(0.25)
        assert not model.sample(target, 8, _gen(0), sampler=FEW_PASSES_BF16).equal(first)
        assert model.__dict__["_onednn_copy"][1] is not packed


@pytest.mark.skipif(not fm._onednn_available(), reason=_NO_ONEDNN)
def test_the_onednn_passes_take_no_rows_and_float64(monkeypatch):
    model = _model().eval()
    context, sampler = torch.zeros(1, 3), replace(FEW_PASSES_BF16, mixed=True)
    with torch.no_grad():
        assert model.integrate(torch.zeros(0, model.size), context, sampler=sampler).shape == (
            0,
            model.size,
        )
        wide = model.double()
        x = torch.randn(5, model.size, dtype=torch.float64, generator=_gen(0))
        fused = wide.integrate(x, context.double(), sampler=sampler)
        assert fused.dtype == torch.float64 and "_onednn_copy" in wide.__dict__
        monkeypatch.setattr(fm, "ONEDNN", False)
        modules = wide.integrate(x, context.double(), sampler=sampler)
    torch.testing.assert_close(fused, modules, rtol=0.0, atol=0.1)


def test_onednn_is_off_where_its_kernels_fail_or_are_missing(monkeypatch):
    from types import SimpleNamespace

    def gone(*args):
        raise RuntimeError("no such kernel")

    changed = SimpleNamespace(_is_mkldnn_bf16_supported=lambda: True,
                              _reorder_linear_weight=gone)  # fmt: skip
    monkeypatch.setattr(torch.ops, "mkldnn", changed)
    assert fm._onednn_available.__wrapped__() is False  # the probe, not its cached answer
    monkeypatch.setattr(torch.ops, "mkldnn", SimpleNamespace())
    assert fm._onednn_available.__wrapped__() is False

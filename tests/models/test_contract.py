"""The contract every registered IKModel family keeps; new families are covered automatically."""

from __future__ import annotations

import dataclasses
import pickle
from functools import cache

import pytest
import torch

from torchik import load_robot, models
from torchik.learn import ProblemSpec, make_dataset
from torchik.models import FORMAT_VERSION, IKModel, clamp_to_limits, families, squash_to_limits

FAMILIES = sorted(families())
PROBLEMS = {  # name -> (robot factory, target kind)
    "panda-position": (lambda: load_robot("panda"), "position"),
    "panda-pose": (lambda: load_robot("panda"), "pose"),
    "continuous-planar": (
        lambda: load_robot("planar", link_lengths=[0.5, 0.3, 0.2], limits=False),
        "planar",
    ),
}


@cache
def _data(problem: str):
    factory, targets = PROBLEMS[problem]
    return make_dataset(factory(), 96, targets=targets, seed=0)


def _model(family: str, problem: str) -> IKModel:
    """A tiny seeded model with normalisation set, or a skip if it does not do this problem."""
    cls, data = families()[family], _data(problem)
    torch.manual_seed(0)
    try:
        model = cls(data.spec, cls.tiny_config())
    except NotImplementedError as err:
        pytest.skip(f"{family} does not support {problem}: {err}")
    model.set_normalization(data.q, data.target)
    return model


def _generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _pairs():
    return [(f, p) for f in FAMILIES for p in PROBLEMS]


def test_registry_has_the_baselines():
    assert "mlp" in FAMILIES
    for cls in families().values():
        assert isinstance(cls.tiny_config(), cls.Config)
        cls.Config()  # every hyper-parameter has a default
        assert dataclasses.is_dataclass(cls.Config)


@pytest.mark.parametrize(("family", "problem"), _pairs())
def test_sample_shapes_limits_and_generator(family, problem):
    model, data = _model(family, problem), _data(problem)
    model.eval()
    with torch.no_grad():
        q = model.sample(data.target[:4], 5, generator=_generator())
        assert q.shape == (4, 5, data.spec.dof) and q.dtype == torch.float32
        assert torch.isfinite(q).all()
        assert ((q >= model.lower) & (q <= model.upper)).all()
        again = model.sample(data.target[:4], 5, generator=_generator())
        assert torch.equal(q, again)
        batched = model.sample(data.target[:6].reshape(2, 3, -1), 2, generator=_generator())
        assert batched.shape == (2, 3, 2, data.spec.dof)


@pytest.mark.parametrize(("family", "problem"), _pairs())
def test_loss_is_a_scalar_whose_gradient_reaches_every_parameter(family, problem):
    model, data = _model(family, problem), _data(problem)
    model.train()
    loss = model.loss(data.q[:64], data.target[:64])
    assert loss.shape == () and torch.isfinite(loss)
    loss.backward()
    for name, param in model.named_parameters():
        assert param.grad is not None, f"no gradient reaches {name}"
        assert torch.isfinite(param.grad).all(), f"non-finite gradient in {name}"
        assert param.grad.abs().sum() > 0, f"zero gradient in {name}"


@pytest.mark.parametrize(("family", "problem"), _pairs())
def test_log_prob_shape_where_supported(family, problem):
    model, data = _model(family, problem), _data(problem)
    model.eval()
    q, target = data.q[:6], data.target[:6]
    try:
        with torch.no_grad():
            lp = model.log_prob(q, target)
    except NotImplementedError as err:
        assert family in str(err)
        return
    assert lp.shape == (6,) and torch.isfinite(lp).all()
    grid = model.log_prob(q.reshape(2, 3, -1), target.reshape(2, 3, -1))
    assert grid.shape == (2, 3)
    torch.testing.assert_close(grid.reshape(6), lp)
    # no rows: no densities (IKNet, the flow and the RNN raised reshape errors)
    assert model.log_prob(q[:0], target[0]).shape == (0,)
    assert model.log_prob(q[:2, None], target[:0]).shape == (2, 0)


@pytest.mark.parametrize(("family", "problem"), _pairs())
def test_save_load_round_trip(family, problem, tmp_path):
    model, data = _model(family, problem), _data(problem)
    torch.optim.SGD(model.parameters(), lr=0.1).zero_grad()
    model.loss(data.q[:32], data.target[:32]).backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()  # not the initial weights
    model.eval()
    model.save(tmp_path / "m.pt")
    loaded = models.load(tmp_path / "m.pt")
    assert type(loaded) is type(model) and not loaded.training
    assert loaded.config == model.config and loaded.spec == model.spec
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    with torch.no_grad():
        target = data.target[:3]
        a = model.sample(target, 4, generator=_generator(7))
        b = loaded.sample(target, 4, generator=_generator(7))
    assert torch.equal(a, b)


@pytest.mark.parametrize("family", FAMILIES)
def test_half_storage_loads_back_in_float32(family, tmp_path):
    """``save(half=True)`` (the bundled models): float16 parameters, buffers as they were;
    loading gives a float32 model whose parameters are the float16-rounded ones."""
    model = _model(family, "panda-position").eval()
    model.save(tmp_path / "full.pt")
    model.save(tmp_path / "half.pt", half=True)
    stored = torch.load(tmp_path / "half.pt", weights_only=True)["state_dict"]
    params = dict(model.named_parameters())
    for key, value in stored.items():
        want = torch.float16 if key in params else model.state_dict()[key].dtype
        assert value.dtype == want, key
    assert (tmp_path / "half.pt").stat().st_size < (tmp_path / "full.pt").stat().st_size
    loaded = models.load(tmp_path / "half.pt")
    for key, value in model.state_dict().items():
        expected = value.half().float() if key in params else value
        assert loaded.state_dict()[key].dtype == value.dtype
        assert torch.equal(loaded.state_dict()[key], expected), key


@pytest.mark.parametrize("family", FAMILIES)
def test_float64(family):
    model = _model(family, "panda-position").double().eval()
    with torch.no_grad():
        q = model.sample(_data("panda-position").target[:2].double(), 3, generator=_generator())
    assert q.dtype == torch.float64 and q.shape == (2, 3, 7)


class _Evil:
    def __reduce__(self):
        return (exec, ("raise SystemExit('pickled code ran')",))


@pytest.mark.parametrize("family", FAMILIES)
def test_bad_checkpoints_raise_value_error(family, tmp_path):
    model = _model(family, "panda-position")
    ckpt = model.checkpoint()
    bad = {
        "corrupt": b"\x80\x02garbage that is no pickle",
        "code": pickle.dumps(_Evil(), protocol=2),
    }
    for name, blob in bad.items():
        (tmp_path / name).write_bytes(blob)
    model.save(tmp_path / "good")
    (tmp_path / "truncated").write_bytes((tmp_path / "good").read_bytes()[:200])
    torch.save(torch.zeros(3), tmp_path / "foreign")
    torch.save({**ckpt, "family": "no-such-family"}, tmp_path / "family")
    torch.save({**ckpt, "format_version": FORMAT_VERSION + 1}, tmp_path / "newer")
    torch.save({**ckpt, "config": {**ckpt["config"], "bogus": 1}}, tmp_path / "config")
    torch.save({**ckpt, "state_dict": {}}, tmp_path / "weights")
    names = ["corrupt", "code", "truncated", "foreign", "family", "newer", "config", "weights"]
    for name in names:
        with pytest.raises(ValueError):
            models.load(tmp_path / name)


def test_load_pretrained_unknown_name_is_a_clear_error():
    with pytest.raises(ValueError, match="no pretrained model named 'panda-iknet' is bundled"):
        models.load_pretrained("panda-iknet")


def test_register_checks():
    with pytest.raises(ValueError, match="family"):

        @models.register
        class Nameless(IKModel):
            Config = models.MLPConfig

    with pytest.raises(ValueError, match="already registered"):

        @models.register
        class Impostor(IKModel):
            family = "mlp"
            Config = models.MLPConfig


def test_limit_helpers():
    spec = ProblemSpec("r", "h", "ee", 2, "planar", (-1.0, -3.2), (1.0, 3.2), (False, True))
    q = torch.tensor([[2.0, 4.0], [-0.5, -4.0]])
    out = clamp_to_limits(q, spec)
    torch.testing.assert_close(out, torch.tensor([[1.0, 4.0 - 6.283185307], [-0.5, 2.283185307]]))
    squashed = squash_to_limits(torch.tensor([[-50.0, 0.0], [50.0, 0.0]]), spec, "tanh")
    torch.testing.assert_close(squashed, torch.tensor([[-1.0, 0.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="dof"):
        ProblemSpec("r", "h", "ee", 3, "planar", (0.0,), (1.0,), (False,))


# ---------------------------------------------------------------------------- hardened loading
def _fields(config, kind: type) -> list[str]:
    return [
        f.name
        for f in dataclasses.fields(config)
        if type(getattr(config, f.name)) is kind  # bool is not counted as an int
    ]


@pytest.mark.parametrize("family", FAMILIES)
def test_configs_refuse_nonsense_with_the_field_named(family):
    cls = families()[family]
    config = cls.tiny_config()
    for name in _fields(config, int):
        for bad, error in (
            (-1, ValueError),
            (10**9, ValueError),
            (1.5, TypeError),
            ("3", TypeError),
        ):
            with pytest.raises(error, match=name):
                dataclasses.replace(config, **{name: bad})
    for name in _fields(config, float):
        for bad in (float("nan"), float("inf"), -1.0):
            with pytest.raises(ValueError, match=name):
                dataclasses.replace(config, **{name: bad})
    for name in _fields(config, bool):
        with pytest.raises(TypeError, match=name):
            dataclasses.replace(config, **{name: 1})


def test_spec_refuses_nonsense():
    spec = _data("panda-position").spec
    bad = {
        "dof": (10**7, ValueError), "targets": ("joints", ValueError), "robot": (None, TypeError),
        "lower": ((float("nan"),) * 7, ValueError), "upper": (("1",) * 7, TypeError),
        "continuous": ((0,) * 7, TypeError),
    }  # fmt: skip
    for name, (value, error) in bad.items():
        with pytest.raises(error, match=name):
            dataclasses.replace(spec, **{name: value})


@pytest.mark.parametrize("family,problem", _pairs())
def test_parameter_count_is_that_of_the_built_model(family, problem):
    model = _model(family, problem)
    count = type(model).parameter_count(model.spec, model.config)
    assert count == sum(p.numel() for p in model.parameters())


def _restamped(ckpt: dict) -> dict:
    from torchik.models.checkpoint import content_hash

    return {**ckpt, "sha256": content_hash(ckpt)}


@pytest.mark.parametrize("family", FAMILIES)
def test_too_many_parameters_are_refused_before_building(family, tmp_path):
    import time

    from torchik.checks import MAX_LAYERS, MAX_WIDTH

    model = _model(family, "panda-position")
    config, ckpt = model.config, model.checkpoint()
    for name in _fields(config, int):  # every size at the largest value its field accepts
        for size in (MAX_WIDTH, MAX_LAYERS):
            try:
                config = dataclasses.replace(config, **{name: size})
                break
            except ValueError:
                pass
    big = {**ckpt, "config": dataclasses.asdict(config)}
    torch.save(_restamped(big), tmp_path / "big")
    start = time.perf_counter()
    with pytest.raises(ValueError, match="parameters; at most 200,000,000 are loaded"):
        models.load(tmp_path / "big")
    # a loose bound (the machine may be shared): building the model would take minutes and GBs
    assert time.perf_counter() - start < 10.0


def test_the_content_hash_catches_changed_weights_limits_and_missing_hashes(tmp_path):
    model = _model("mlp", "panda-position")
    ckpt = model.checkpoint()
    weights = {**ckpt["state_dict"], "q_mean": ckpt["state_dict"]["q_mean"] + 1e-6}
    spec = {**ckpt["spec"], "lower": (-1.0,) * 7}
    no_hash = {k: v for k, v in ckpt.items() if k != "sha256"}
    files = {"weights": {**ckpt, "state_dict": weights}, "spec": {**ckpt, "spec": spec}}
    for name, bad in files.items():
        torch.save(bad, tmp_path / name)
        with pytest.raises(ValueError, match=f"{name}'.*does not match the checkpoint's hash"):
            models.load(tmp_path / name)
    torch.save(no_hash, tmp_path / "no_hash")
    with pytest.raises(ValueError, match="no content hash"):
        models.load(tmp_path / "no_hash")
    torch.save({**no_hash, "format_version": 1}, tmp_path / "v1")  # older files have none
    assert models.load(tmp_path / "v1").checkpoint()["sha256"] == ckpt["sha256"]


def test_nan_or_inf_weights_are_refused_with_the_tensor_named(tmp_path):
    ckpt = _model("mlp", "panda-position").checkpoint()
    for value in (float("nan"), float("inf")):
        weight = ckpt["state_dict"]["net.0.weight"].clone()
        weight[0, 0] = value
        torch.save(
            _restamped({**ckpt, "state_dict": {**ckpt["state_dict"], "net.0.weight": weight}}),
            tmp_path / "w",
        )
        with pytest.raises(ValueError, match="'net.0.weight' holds NaN or infinite values"):
            models.load(tmp_path / "w")


def test_expanded_tensors_are_refused_before_they_are_hashed(tmp_path):
    ckpt = _model("mlp", "panda-position").checkpoint()
    state = {**ckpt["state_dict"], "q_mean": torch.zeros(1).expand(10**9)}
    torch.save({**ckpt, "state_dict": state}, tmp_path / "expanded")
    with pytest.raises(ValueError, match="'q_mean' is larger than its storage"):
        models.load(tmp_path / "expanded")


def test_a_malicious_pickle_is_refused_without_advice_to_unpickle_it(tmp_path):
    (tmp_path / "code.pt").write_bytes(pickle.dumps(_Evil(), protocol=2))
    with pytest.raises(ValueError) as err:
        models.load(tmp_path / "code.pt")
    message = str(err.value)
    assert "code.pt" in message and "it would import __builtin__.exec" in message
    assert "weights_only" not in message and "\n" not in message


def test_read_checkpoint_checks_required_keys(tmp_path):
    from torchik.models.checkpoint import read_checkpoint, save_checkpoint

    ckpt = _model("mlp", "panda-position").checkpoint()
    save_checkpoint({**ckpt, "training": {"step": 3}}, tmp_path / "c.pt")
    assert read_checkpoint(tmp_path / "c.pt", require={"training": ("step",)})["training"] == {
        "step": 3
    }
    with pytest.raises(ValueError, match=r"c.pt'.*'training' lacks \['optimizer'\]"):
        read_checkpoint(tmp_path / "c.pt", require={"training": ("step", "optimizer")})
    with pytest.raises(ValueError, match=r"'best' lacks \['best'\]"):
        read_checkpoint(tmp_path / "c.pt", require={"best": ()})


def test_atomic_save_removes_the_temporary_files_of_killed_writers(tmp_path):
    import os

    from torchik.files import atomic_save

    dead, alive = tmp_path / "m.pt.tmp999999999", tmp_path / f"m.pt.tmp{os.getppid()}"
    other = tmp_path / "other.pt.tmp999999999"  # another file's: not ours to remove
    for path in (dead, alive, other):
        path.write_bytes(b"half written")
    atomic_save({"x": 1}, tmp_path / "m.pt")
    assert not dead.exists() and alive.exists() and other.exists()


def test_a_weight_of_another_dtype_is_refused_not_cast(tmp_path):
    ckpt = _model("mlp", "panda-position").checkpoint()
    weight = ckpt["state_dict"]["net.0.weight"].round().long()
    state = {**ckpt["state_dict"], "net.0.weight": weight}
    torch.save(_restamped({**ckpt, "state_dict": state}), tmp_path / "int.pt")
    with pytest.raises(
        ValueError, match="'net.0.weight' is torch.int64, the model's torch.float32"
    ):
        models.load(tmp_path / "int.pt")


def test_spec_differences_say_what_differs_from_a_robot():
    arm = load_robot("planar", link_lengths=[0.5, 0.3])
    spec = ProblemSpec.from_robot(arm, targets="planar")
    assert spec.differences(arm) == []
    assert (
        spec.differences(load_robot("planar", link_lengths=[0.5, 0.3], dtype=torch.float64)) == []
    )
    longer = load_robot("planar", link_lengths=[0.5, 0.4])
    assert spec.differences(longer) == [
        "the geometry (joint origins, axes or links; the robot hash)"
    ]
    free = load_robot("planar", link_lengths=[0.5, 0.3], limits=False)
    assert spec.differences(free) == ["the limits of joints [0, 1]"]
    panda = ProblemSpec.from_robot(load_robot("panda"))
    assert panda.differences(load_robot("ur5"), "ee_link") == [
        "name 'ur5', not 'panda'", "link 'ee_link', not 'panda_hand'", "dof 6, not 7",
    ]  # fmt: skip


@pytest.mark.parametrize("family", FAMILIES)
def test_sample_refuses_a_bad_number_of_samples(family):
    model = _model(family, "panda-position")
    target = _data("panda-position").target[:2]
    for n, error in ((0, ValueError), (-1, ValueError), (2**40, ValueError), (2.5, TypeError)):
        with pytest.raises(error, match="n must be"):
            model.sample(target, n)


@pytest.mark.parametrize(("family", "problem"), [(f, "panda-pose") for f in FAMILIES])
def test_data_of_another_dtype_is_converted_to_the_models(family, problem):
    """The policy (issue 35): targets and the configurations a model scores or learns from are
    data, converted to the model's dtype and device; FK's configurations must match the robot."""
    model, data = _model(family, problem), _data(problem)
    model.eval()
    target64, q64 = data.target[:3].double(), data.q[:3].double()
    with torch.no_grad():
        q = model.sample(target64, 2, generator=_generator())
        assert q.dtype == torch.float32 and q.shape == (3, 2, data.spec.dof)
        assert torch.equal(q, model.sample(data.target[:3], 2, generator=_generator()))
        try:
            assert model.log_prob(q64, target64).dtype == torch.float32
        except NotImplementedError:
            pass
    model.train()
    assert torch.isfinite(model.loss(q64, target64))


def test_fk_of_an_integer_q_suggests_converting_q_not_the_robot():
    robot = load_robot("panda")
    with pytest.raises(TypeError, match=r"convert q \(q\.to\(torch\.float32\)\)$"):
        robot.forward_kinematics(torch.zeros(7, dtype=torch.int64))
    with pytest.raises(
        TypeError, match=r"q\.to\(torch\.float32\)\) or robot\.to\(torch\.float64\)"
    ):
        robot.forward_kinematics(torch.zeros(7, dtype=torch.float64))

"""Tests of torchik.seq2seq (Transformer sequence IK) and IKNet.embed, the hook it uses."""

from __future__ import annotations

import io
import math

import pytest
import torch
from torch import nn

import torchik
from torchik.geometry import wrap_angle
from torchik.learn import ProblemSpec
from torchik.models import IKNet, IKNetConfig
from torchik.seq2seq import (
    ModelEmbedding,
    SequenceDataset,
    SequenceIK,
    SequenceIKConfig,
    SequenceTrainConfig,
    angle_to_direction,
    direction_to_angle,
    evaluate_sequence_model,
    make_sequence_dataset,
    revolute_limits,
    sinusoidal_encoding,
    train_sequence_model,
)

TINY = SequenceIKConfig(d_model=16, heads=2, layers=1, feedforward=32, max_length=32)
F64 = torch.float64


@pytest.fixture(scope="module")
def ur5():
    return torchik.load_robot("ur5", dtype=torch.float64)


@pytest.fixture(scope="module")
def data(ur5):
    return make_sequence_dataset(ur5, n_sequences=12, length=16, seed=3)


@pytest.fixture(scope="module")
def panda():
    return torchik.load_robot("panda", dtype=F64)


@pytest.fixture(scope="module")
def panda_data(panda):
    return make_sequence_dataset(panda, n_sequences=12, length=16, seed=1)


def _in_limits(q, lower, upper, atol=0.0):
    return bool(((q >= lower - atol) & (q <= upper + atol)).all())


def _iknet(robot) -> IKNet:
    torch.manual_seed(0)
    return IKNet(ProblemSpec.from_robot(robot), IKNet.tiny_config())


class CountingEmbedding(nn.Module):
    """A trainable embedding that counts its calls."""

    def __init__(self, width: int = 5):
        super().__init__()
        self.linear, self.calls = nn.Linear(3, width), 0

    def forward(self, positions):
        self.calls += 1
        return torch.tanh(self.linear(positions))


# ---------------------------------------------------------------------------- pieces
def test_sinusoidal_encoding_closed_form():
    table = sinusoidal_encoding(7, 5, dtype=torch.float64)
    assert table.shape == (7, 5)
    t, i = 3, 1  # columns 2 and 3 use the frequency 10000^(-2/5)
    freq = 10000.0 ** (-2 * i / 5)
    assert table[t, 2].item() == pytest.approx(math.sin(t * freq), abs=1e-15)
    assert table[t, 3].item() == pytest.approx(math.cos(t * freq), abs=1e-15)
    assert table[:, 4].tolist() == pytest.approx(
        torch.sin(torch.arange(7.0) * 10000**-0.8).tolist()
    )


def test_direction_round_trip_wraps():
    q = torch.tensor([-3.5, -math.pi, 0.0, 1.0, math.pi, 7.0], dtype=torch.float64)
    back = direction_to_angle(3.0 * angle_to_direction(q))  # any length reads the same angle
    assert wrap_angle(back - q).abs().max() < 1e-12
    assert back.abs().max() <= math.pi


def test_direction_reads_the_angle_inside_the_limits(panda, panda_data):
    """Panda's joint 6 (limits [-0.0175, 3.7525]) at 3.3 rad read as atan2's 3.3 - 2 pi, outside
    the limits: even a perfect model's joints left them (the data hold joint 6 up to 3.37)."""
    lower, upper = revolute_limits(panda)
    q = torch.tensor([3.3], dtype=F64)
    assert direction_to_angle(angle_to_direction(q), lower[5:6], upper[5:6]).item() == (
        pytest.approx(3.3, abs=1e-12)
    )
    assert panda_data.q[..., 5].max() > math.pi
    back = direction_to_angle(angle_to_direction(panda_data.q), lower, upper)
    assert torch.allclose(back, panda_data.q, atol=1e-5)  # the true directions read the data
    # a grid of angles on every joint: the angle + 2 pi k inside the limits where one is, else
    # (Panda's joints 1-5 and 7 have gaps) the limit nearest around the circle
    angles = torch.linspace(-10.0, 10.0, 4001, dtype=F64)[:, None].expand(-1, 7)
    d = 5.0 * angle_to_direction(angles)  # any length
    out = direction_to_angle(d, lower, upper)
    assert _in_limits(out, lower, upper)
    first = angles + 2 * math.pi * torch.ceil((lower - angles) / (2 * math.pi))
    has_turn = first <= upper
    assert wrap_angle(out - angles)[has_turn].abs().max() < 1e-12
    gap = wrap_angle(torch.stack((lower, upper)) - angles[..., None, :]).abs()  # (N, 2, D)
    nearest = torch.where(gap[:, 0] < gap[:, 1], lower, upper)
    assert torch.equal(out[~has_turn], nearest[~has_turn])
    # joints on the circle, (-pi, pi], and atan2's angle wherever the limits hold it: as before
    circle = torch.full((7,), math.pi, dtype=F64)
    assert torch.equal(direction_to_angle(d, -circle, circle), direction_to_angle(d))
    plain = direction_to_angle(d)
    assert not _in_limits(plain, lower, upper)  # atan2 left the limits; kept where it did not
    held = (plain >= lower) & (plain <= upper)
    assert torch.equal(out[held], plain[held])
    with pytest.raises(ValueError, match="both lower and upper"):
        direction_to_angle(d, lower)
    # the gradient is atan2's inside the limits
    point = torch.tensor([[0.3, 0.8], [-0.9, 0.2]], dtype=F64, requires_grad=True)
    limits = torch.tensor([-0.5, 0.0], dtype=F64), torch.tensor([2.0, 4.0], dtype=F64)
    assert torch.autograd.gradcheck(lambda x: direction_to_angle(x, *limits), (point,))


def test_prismatic_joints_are_refused_in_one_line(ur5):
    """rail_arm's prismatic 'rail' (metres, +-3) was taken for an angle and its error wrapped
    by 2 pi."""
    rail = torchik.load_robot("rail_arm", dtype=F64)
    data = SequenceDataset(torch.zeros(2, 4, 4), torch.zeros(2, 4, 3), "ee")
    model = SequenceIK(4, TINY)
    config = SequenceTrainConfig(epochs=1)
    for call in (lambda: make_sequence_dataset(rail, 2, 4), lambda: revolute_limits(rail),
                 lambda: train_sequence_model(model, data, data, rail, config),
                 lambda: evaluate_sequence_model(model, data, rail)):  # fmt: skip
        with pytest.raises(ValueError, match="revolute joints only.*'rail'") as caught:
            call()
        assert "\n" not in str(caught.value)
    lower, upper = revolute_limits(ur5)
    assert torch.equal(lower, ur5.lower) and lower is not ur5.lower


def test_config_checks():
    with pytest.raises(ValueError, match="heads"):
        SequenceIKConfig(d_model=10, heads=4)
    with pytest.raises(ValueError, match="positional"):
        SequenceIKConfig(positional="rotary")
    with pytest.raises(ValueError, match="embed_dim"):
        SequenceIK(6, TINY, embed=CountingEmbedding())
    # every field by its own rule, one line naming it (1.5 layers, NaN epochs, a negative lr
    # or weight decay and a None device were accepted)
    bad_sizes = (("layers", 1.5, TypeError), ("feedforward", math.nan, TypeError),
                 ("max_length", 2**63, ValueError), ("heads", True, TypeError),
                 ("dropout", 1.0, ValueError), ("d_model", 0, ValueError))  # fmt: skip
    for field, value, error in bad_sizes:
        with pytest.raises(error, match=f"^{field} must"):
            SequenceIKConfig(**{field: value})
    for field, value, error in (("epochs", math.nan, TypeError), ("lr", -5.0, ValueError),
                                ("weight_decay", -1.0, ValueError), ("seed", "3", TypeError),
                                ("warmup_steps", -1, ValueError), ("device", None, TypeError),
                                ("min_lr_ratio", 2.0, ValueError), ("grad_clip", 0.0, ValueError),
                                ("progress", 1, TypeError)):  # fmt: skip
        with pytest.raises(error, match=f"^{field}"):
            SequenceTrainConfig(**{field: value})
    assert SequenceTrainConfig(grad_clip=None).grad_clip is None


# ---------------------------------------------------------------------------- data
def test_dataset_positions_are_fk_of_q(ur5, data):
    assert data.q.shape == (12, 16, 6) and data.positions.shape == (12, 16, 3)
    assert data.q.dtype == data.positions.dtype == torch.float32
    fk = ur5.link_positions(data.q.double(), data.link)
    assert torch.allclose(fk, data.positions.double(), atol=1e-6)  # float32 storage
    steps = (data.q[:, 1:] - data.q[:, :-1]).abs().max()
    assert steps <= 1.0 * math.pi / (2 * 15) + 1e-6  # smooth: max_move pi / (2 (S - 1))
    assert len(data.subset(slice(0, 5))) == 5


def test_dataset_is_seeded(ur5):
    a = make_sequence_dataset(ur5, 2, length=4, seed=1)
    b = make_sequence_dataset(ur5.float(), 2, length=4, seed=1)  # float32 robot: FK in float64
    assert torch.equal(a.q, b.q) and torch.allclose(a.positions, b.positions, atol=1e-7)


# ---------------------------------------------------------------------------- the model
@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_shapes_and_gradients_reach_every_parameter(data, positional):
    torch.manual_seed(0)
    model = SequenceIK(6, SequenceIKConfig(**{**TINY.__dict__, "positional": positional}))
    model.double()
    positions, q = data.positions[:3].double(), data.q[:3].double()
    out = model(positions)
    assert out.shape == (3, 16, 6) and out.dtype == torch.float64
    assert out.abs().max() <= math.pi
    assert model(positions.reshape(1, 3, 16, 3)).shape == (1, 3, 16, 6)  # leading dims
    model.loss(positions, q).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_loss_is_chord_distance_of_directions(data):
    model = SequenceIK(6, TINY).double()
    positions, q = data.positions[:2].double(), data.q[:2].double()
    with torch.no_grad():
        direction = model.directions(model.features(positions))
    expected = (direction - angle_to_direction(q)).square().sum(-1).mean()
    assert torch.allclose(model.loss(positions, q), expected, rtol=1e-12)


def test_limits_are_buffers_and_old_state_dicts_load(panda, panda_data):
    """A state dict saved before the limits (no lower/upper) loads strictly into a model built
    with them; its angles move by whole turns into the limits, or to the nearest limit."""
    torch.manual_seed(0)
    old = SequenceIK(7, TINY)
    state = {k: v for k, v in old.state_dict().items() if k not in ("lower", "upper")}
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    lower, upper = revolute_limits(panda)
    new = SequenceIK(7, TINY, limits=(lower, upper))
    new.load_state_dict(torch.load(buffer, weights_only=True))
    assert torch.equal(new.lower, lower.float()) and torch.equal(new.upper, upper.float())
    with torch.no_grad():
        before, after = old(panda_data.positions), new(panda_data.positions)
        direction = old.directions(old.features(panda_data.positions))
    assert torch.equal(before, direction_to_angle(direction))  # no limits: atan2's, as before
    assert _in_limits(after, new.lower, new.upper)
    held = (before >= new.lower) & (before <= new.upper)
    assert torch.equal(after[held], before[held])
    assert torch.allclose(after, direction_to_angle(direction, lower, upper).float())
    # the limits travel in the state dict now
    fresh = SequenceIK(7, TINY)
    fresh.load_state_dict(new.state_dict())
    assert torch.equal(fresh.upper, new.upper)
    with pytest.raises(ValueError, match=r"lower must have shape \(7,\)"):
        fresh.set_limits(lower[:6], upper)
    with pytest.raises(ValueError, match="exceeds upper"):
        fresh.set_limits(upper, lower)


def test_too_long_sequences_are_refused():
    with pytest.raises(ValueError, match="max_length"):
        SequenceIK(6, TINY)(torch.zeros(1, 33, 3))


def test_embed_hook_is_used_and_frozen_by_default(data):
    torch.manual_seed(0)
    embed = CountingEmbedding()
    model = SequenceIK(6, TINY, embed=embed, embed_dim=5)
    assert model.input.in_features == 5
    model.loss(data.positions[:2], data.q[:2]).backward()
    assert embed.calls == 1
    assert all(p.grad is None for p in embed.parameters())  # frozen: no gradient
    trainable = {id(p) for p in model.trainable_parameters()}
    assert not trainable & {id(p) for p in embed.parameters()}
    # the features are the embedding's output, not the raw positions
    assert torch.equal(model.features(data.positions[:2]), embed(data.positions[:2]))


def test_trained_embedding_gets_gradients(data):
    embed = CountingEmbedding()
    model = SequenceIK(6, TINY, embed=embed, embed_dim=5, train_embed=True)
    model.loss(data.positions[:2], data.q[:2]).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in embed.parameters())
    assert len(model.trainable_parameters()) == len(list(model.parameters()))


def test_frozen_embedding_stays_in_eval_mode(ur5):
    iknet = IKNet(ProblemSpec.from_robot(ur5), IKNetConfig.small(norm="batch"))
    model = SequenceIK(6, TINY, embed=ModelEmbedding(iknet), embed_dim=32).train()
    assert model.training and model.encoder.training and not iknet.training
    unfrozen = SequenceIK(6, TINY, ModelEmbedding(iknet), 32, train_embed=True).train()
    assert iknet.training and unfrozen.embed.training


def test_same_seed_same_weights_for_raw_and_embedded():
    torch.manual_seed(4)
    raw = SequenceIK(6, TINY)
    embed = CountingEmbedding()
    torch.manual_seed(4)
    embedded = SequenceIK(6, TINY, embed=embed, embed_dim=5)
    for (name, a), b in zip(
        raw.encoder.named_parameters(), embedded.encoder.parameters(), strict=True
    ):
        assert torch.equal(a, b), name
    assert torch.equal(raw.head.weight, embedded.head.weight)


# ---------------------------------------------------------------------------- IKNet.embed
def test_iknet_embed_shapes_and_generate(ur5):
    model = _iknet(ur5).double().eval()
    target = torch.randn(2, 4, 3, dtype=torch.float64)
    emb = model.embed(target)
    assert emb.shape == (2, 4, model.config.embedding)
    flat = model.embed(target.reshape(8, 3))
    assert torch.allclose(emb.reshape(8, -1), flat, atol=1e-12)
    expected = model.heads(model.hyper(model.normalize_target(target.reshape(8, 3))))
    assert torch.allclose(model.generate(target.reshape(8, 3)), expected, atol=1e-12)
    with pytest.raises(ValueError, match="targets must have shape"):
        model.embed(torch.zeros(2, 4))


def test_iknet_embedding_in_a_sequence_model(ur5, data):
    iknet = _iknet(ur5)
    model = SequenceIK(6, TINY, embed=ModelEmbedding(iknet), embed_dim=8)
    feats = model.features(data.positions[:2])
    assert torch.allclose(feats, iknet.embed(data.positions[:2]))
    assert model(data.positions[:2]).shape == (2, 16, 6)


# ---------------------------------------------------------------------------- training
def test_tiny_model_loss_decreases(ur5, data):
    torch.manual_seed(0)
    model = SequenceIK(6, TINY)
    config = SequenceTrainConfig(epochs=6, batch_size=4, lr=3e-3, warmup_steps=1)
    result = train_sequence_model(model, data.subset(slice(0, 8)), data.subset(slice(8, 12)),
                                  ur5, config)  # fmt: skip
    assert [row["epoch"] for row in result.history] == list(range(7))
    assert math.isnan(result.history[0]["train_loss"])
    train_loss = result.curve("train_loss")
    assert train_loss[-1] < 0.8 * train_loss[1]
    assert result.curve("test_loss")[-1] < result.curve("test_loss")[0]
    assert not result.model.training
    final = evaluate_sequence_model(result.model, data.subset(slice(8, 12)), ur5)
    assert final["position_error"] == pytest.approx(result.history[-1]["test_position_error"])
    assert final["joint_error"] == pytest.approx(result.history[-1]["test_joint_error"], rel=1e-6)


def test_trained_model_decodes_within_limits(panda, panda_data):
    """A tiny model trained on a Panda: every decoded joint within the robot's limits (atan2's
    reading left them), and the joint error plain, not wrapped, on its ranges of less than a
    turn."""
    torch.manual_seed(0)
    model = SequenceIK(7, TINY)
    config = SequenceTrainConfig(epochs=4, batch_size=4, lr=3e-3, warmup_steps=1)
    train, test = panda_data.subset(slice(0, 8)), panda_data.subset(slice(8, 12))
    result = train_sequence_model(model, train, test, panda, config)
    assert torch.equal(model.lower, panda.lower.float())  # training set the robot's limits
    with torch.no_grad():
        pred = model(test.positions)
        direction = model.directions(model.features(test.positions))
    assert _in_limits(pred.double(), panda.lower, panda.upper, atol=1e-6)
    assert not _in_limits(direction_to_angle(direction).double(), panda.lower, panda.upper)
    final = evaluate_sequence_model(model, test, panda)
    assert final["joint_error"] == pytest.approx((pred - test.q).abs().mean().item(), rel=1e-5)
    assert final["joint_error"] != pytest.approx(wrap_angle(pred - test.q).abs().mean().item())
    assert final["joint_error"] == pytest.approx(result.history[-1]["test_joint_error"])


def test_frozen_embedding_training_is_seeded_and_leaves_embedding_alone(ur5, data):
    iknet = _iknet(ur5)
    before = {k: v.clone() for k, v in iknet.state_dict().items()}
    config = SequenceTrainConfig(epochs=2, batch_size=4, warmup_steps=1)
    curves = []
    for _ in range(2):
        torch.manual_seed(1)
        model = SequenceIK(6, TINY, embed=ModelEmbedding(iknet), embed_dim=8)
        result = train_sequence_model(model, data.subset(slice(0, 8)), data.subset(slice(8, 12)),
                                      ur5, config)  # fmt: skip
        curves.append(result.curve("test_position_error"))
    assert curves[0] == curves[1]
    assert all(torch.equal(before[k], v) for k, v in iknet.state_dict().items())


def test_fine_tuned_embedding_changes(ur5, data):
    iknet = _iknet(ur5)
    before = iknet.hyper[0].weight.clone()
    model = SequenceIK(6, TINY, embed=ModelEmbedding(iknet), embed_dim=8, train_embed=True)
    config = SequenceTrainConfig(epochs=1, batch_size=4, warmup_steps=1)
    train_sequence_model(model, data.subset(slice(0, 8)), data.subset(slice(8, 12)), ur5, config)
    assert not torch.equal(iknet.hyper[0].weight, before)

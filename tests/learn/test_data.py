"""Datasets: sampling, targets from FK, splits, save/load and the robot hash."""

from __future__ import annotations

import math
import pickle

import pytest
import torch

from torchik import load_robot
from torchik.description import RAIL_ARM_PRIOR_STD
from torchik.learn import (
    FKStream,
    IKDataset,
    decode_target,
    encode_target,
    load_dataset,
    make_dataset,
    robot_hash,
)
from torchik.learn.data import decode_pose


@pytest.fixture(scope="module")
def panda():
    return load_robot("panda", dtype=torch.float64)


@pytest.mark.parametrize(("targets", "dim"), [("position", 3), ("pose", 9)])
def test_targets_are_the_fk_of_the_joints(panda, targets, dim):
    data = make_dataset(panda, 300, targets=targets, seed=1)
    assert data.q.shape == (300, 7) and data.target.shape == (300, dim)
    assert data.q.dtype == data.target.dtype == torch.float32
    expected = encode_target(panda.forward_kinematics(data.q.double(), "panda_hand"), targets)
    # q was rounded to float32 after FK: allow the FK of that rounding plus target rounding
    torch.testing.assert_close(data.target.double(), expected, atol=2e-6, rtol=0)


def test_uniform_joints_fill_the_limits(panda):
    q = make_dataset(panda, 4000).q
    lower, upper = panda.lower.float(), panda.upper.float()
    assert ((q >= lower) & (q <= upper)).all()
    span = upper - lower
    assert ((q.min(0).values - lower) < 0.01 * span).all()
    assert ((upper - q.max(0).values) < 0.01 * span).all()


def test_normal_sampler_std_and_clamping():
    rail = load_robot("rail_arm")
    data = make_dataset(rail, 20000, sampler="normal", std=RAIL_ARM_PRIOR_STD, targets="planar")
    assert data.meta["n_clamped"] == 0 and data.meta["std"] == RAIL_ARM_PRIOR_STD
    torch.testing.assert_close(data.q.std(0), torch.tensor(RAIL_ARM_PRIOR_STD), atol=0.02, rtol=0)
    narrow = load_robot("planar", link_lengths=[1.0, 1.0], lower=-0.1, upper=0.1)
    clamped = make_dataset(narrow, 1000, sampler="normal", std=0.2)
    assert clamped.meta["n_clamped"] > 0 and clamped.q.abs().max() <= 0.1 + 1e-7


def test_planar_targets_match_the_closed_form():
    arm = load_robot("planar", link_lengths=[1.0, 0.5])
    data = make_dataset(arm, 100, sampler="normal", std=0.2, targets="planar")
    angle, lengths = data.q.double().cumsum(-1), torch.tensor([1.0, 0.5], dtype=torch.float64)
    expected = torch.stack((angle.cos() @ lengths, angle.sin() @ lengths), dim=-1)
    torch.testing.assert_close(data.target.double(), expected, atol=1e-6, rtol=0)


def test_seeds(panda):
    a, b, c = (make_dataset(panda, 50, seed=s) for s in (3, 3, 4))
    assert torch.equal(a.q, b.q) and torch.equal(a.target, b.target)
    assert not torch.equal(a.q, c.q)
    float32_robot = load_robot("panda", dtype=torch.float32)
    assert make_dataset(float32_robot, 50, seed=3).target.equal(a.target)  # FK runs in float64


def test_bad_arguments(panda):
    with pytest.raises(ValueError, match="sampler"):
        make_dataset(panda, 10, sampler="sobol")
    with pytest.raises(ValueError, match="targets"):
        make_dataset(panda, 10, targets="quaternion")
    with pytest.raises(ValueError, match="unknown link"):
        make_dataset(panda, 10, link="nope")
    data = make_dataset(panda, 4)
    kinds = [
        ((data.q.tolist(), data.target, data.spec), "q must be a torch.Tensor"),
        ((data.q, data.target.long(), data.spec), "target must be a floating"),
        ((data.q, data.target, None), "spec must be a ProblemSpec"),
        ((data.q, data.target, data.spec, None), "meta must be a dict"),
    ]
    for args, match in kinds:
        with pytest.raises(TypeError, match=match):
            IKDataset(*args)


def test_split_parts_never_overlap(panda):
    data = make_dataset(panda, 1001)
    parts = data.split((0.8, 0.1, 0.1), seed=5)
    assert [len(p) for p in parts] == [801, 100, 100]
    rows = torch.cat([p.q for p in parts])
    assert torch.unique(rows, dim=0).shape[0] == len(data)  # disjoint and covering
    again = data.split((0.8, 0.1, 0.1), seed=5)
    assert all(torch.equal(p.q, r.q) for p, r in zip(parts, again, strict=True))
    assert not torch.equal(parts[0].q, data.split(seed=6)[0].q)
    assert parts[2].meta["split"]["part"] == 2
    with pytest.raises(ValueError, match="fractions"):
        data.split((0.9, 0.2))


def test_save_load_round_trip(panda, tmp_path):
    data = make_dataset(panda, 64, targets="pose")
    data.save(tmp_path / "d.pt")
    back = load_dataset(tmp_path / "d.pt", robot=panda)
    assert torch.equal(back.q, data.q) and torch.equal(back.target, data.target)
    assert back.spec == data.spec and back.meta == data.meta


def test_load_refuses_another_robot_and_bad_files(panda, tmp_path):
    make_dataset(panda, 8).save(tmp_path / "d.pt")
    with pytest.raises(ValueError, match="made for robot 'panda'"):
        load_dataset(tmp_path / "d.pt", robot=load_robot("ur5"))
    (tmp_path / "junk.pt").write_bytes(b"not a torch file at all")
    torch.save(torch.zeros(3), tmp_path / "tensor.pt")
    (tmp_path / "code.pt").write_bytes(pickle.dumps(_Evil(), protocol=2))
    for name in ("junk.pt", "tensor.pt", "code.pt"):
        with pytest.raises(ValueError):
            load_dataset(tmp_path / name)
    blob = torch.load(tmp_path / "d.pt", weights_only=True)
    torch.save({**blob, "format_version": 99}, tmp_path / "new.pt")
    with pytest.raises(ValueError, match="format 99"):
        load_dataset(tmp_path / "new.pt")


class _Evil:
    def __reduce__(self):
        return (exec, ("raise SystemExit('pickled code ran')",))


def test_robot_hash():
    a = robot_hash(load_robot("panda"))
    assert a == robot_hash(load_robot("panda", dtype=torch.float64))
    assert len(a) == 64 and a != robot_hash(load_robot("ur5"))
    h1 = robot_hash(load_robot("planar", link_lengths=[1.0, 1.0]))
    assert h1 != robot_hash(load_robot("planar", link_lengths=[1.0, 1.0 + 1e-9]))


def test_encode_decode_pose(panda):
    pose = panda.forward_kinematics(panda.random_configuration(5), "panda_hand")
    target = encode_target(pose, "pose")
    torch.testing.assert_close(decode_pose(target), pose)
    position, rotmat = decode_target(encode_target(pose, "planar"), "planar")
    assert rotmat is None and torch.equal(position[..., 2], torch.zeros(5, dtype=pose.dtype))
    with pytest.raises(ValueError, match="kind"):
        encode_target(pose, "euler")
    # shapes and kinds torch would index wrongly: one line naming the argument
    cases = [
        (lambda: encode_target(pose[:, :3], "pose"), ValueError, r"pose must have shape"),
        (lambda: encode_target(pose.tolist(), "position"), TypeError, "pose must be a"),
        (lambda: decode_target(target[:, :8], "pose"), ValueError, r"\(\.\.\., 9\)"),
        (lambda: decode_target(target, 3), ValueError, "kind must be"),
        (lambda: robot_hash("panda"), TypeError, "robot must be a Robot, got str"),
    ]
    for call, error, match in cases:
        with pytest.raises(error, match=match):
            call()
    stream = FKStream(panda)
    streams = [
        (lambda: FKStream(panda, seed=math.inf), TypeError, "seed"),
        (lambda: FKStream(panda, seed=-1), ValueError, "seed"),
        (lambda: stream.draw(2, seed=1.5), TypeError, "seed"),
        (lambda: stream.next(0), ValueError, "batch_size"),
        (lambda: stream.draw(10**9, 0), ValueError, "n must be <="),
    ]
    for call, error, match in streams:
        with pytest.raises(error, match=match):
            call()


def test_dataset_checks_shapes(panda):
    spec = make_dataset(panda, 2).spec
    with pytest.raises(ValueError, match=r"\(N, 7\)"):
        IKDataset(torch.zeros(3, 6), torch.zeros(3, 3), spec)
    assert len(make_dataset(panda, 0)) == 0


def test_as_target_takes_poses_positions_and_encoded_targets():
    from torchik.learn import as_target, encode_target

    g = torch.Generator().manual_seed(0)
    robot = load_robot("panda", dtype=torch.float64)
    pose = robot.forward_kinematics(robot.random_configuration(5, g), "panda_hand")
    for kind in ("position", "pose", "planar"):
        encoded = encode_target(pose, kind)
        assert torch.equal(as_target(pose, kind), encoded)
        assert torch.equal(as_target(encoded, kind), encoded)
    assert torch.equal(as_target(pose[:, :3, 3], "planar"), pose[:, :2, 3])
    with pytest.raises(ValueError, match=r"pose targets must be \(\.\.\., 4, 4\) poses"):
        as_target(pose[:, :3, 3], "pose")  # a position has no rotation
    with pytest.raises(ValueError, match="kind must be"):
        as_target(pose, "joint")
    with pytest.raises(TypeError, match="target must be a torch.Tensor, got list"):
        as_target([0.0, 0.0, 0.0], "position")


def test_a_model_samples_from_poses_as_from_its_targets():
    from torchik.learn import encode_target
    from torchik.models import load_pretrained

    model = load_pretrained("panda")
    robot = load_robot("panda", dtype=torch.float64)
    pose = robot.forward_kinematics(robot.random_configuration(3, torch.Generator()), "panda_hand")
    a = model.sample(pose, 4, generator=torch.Generator().manual_seed(1))  # float64 poses
    b = model.sample(encode_target(pose, "pose").float(), 4, torch.Generator().manual_seed(1))
    assert a.shape == (3, 4, 7) and torch.equal(a, b)


@pytest.mark.parametrize("sampler", ["uniform", "normal"])
def test_std_is_checked_whatever_the_sampler(sampler):
    """The uniform sampler ignores std, but a negative, NaN or misshapen one passed silently."""
    snake = load_robot("snake2", dtype=torch.float64)
    bad = [
        (-1.0, ValueError, r"^std must be finite and > 0, got -1.0$"),
        (math.nan, ValueError, r"^std must be finite and > 0, got nan$"),
        ([0.1, 0.2, 0.3], ValueError, r"^std must be one number or 2 numbers, got \(3,\)$"),
        ("0.2", TypeError, r"^std must be a number or a list of numbers, got '0.2'$"),
        (None, TypeError, r"^std must be a number or a list of numbers, got None$"),
        (True, TypeError, r"^std must be a number or a list of numbers, got True$"),
    ]
    for std, kind, match in bad:
        with pytest.raises(kind, match=match):
            make_dataset(snake, 4, sampler=sampler, std=std)
        with pytest.raises(kind, match=match):
            FKStream(snake, sampler=sampler, std=std)
    assert len(make_dataset(snake, 4, sampler=sampler, std=[0.1, 0.3])) == 4


def test_a_stream_names_the_first_setting_a_saved_state_differs_in():
    snake = load_robot("snake2", dtype=torch.float64)
    normal = FKStream(snake, sampler="normal", std=0.2, seed=1)
    settings = {"seed": 1, "sampler": "normal", "std": 0.2, "fk_dtype": "torch.float64"}
    assert normal.settings() == settings
    assert FKStream(snake, sampler="normal", std=[0.1, 0.3]).settings()["std"] == [0.1, 0.3]
    state = normal.state_dict()
    assert normal.other(state) is None
    assert FKStream(snake, sampler="normal", std=[0.2, 0.2], seed=1).other(state) is None
    other = FKStream(snake, sampler="normal", std=0.5, seed=1)
    assert other.other(state) == "std 0.2, this one has 0.5"
    assert FKStream(snake, seed=1).other(state) == "sampler 'normal', this one has 'uniform'"
    assert FKStream(snake, sampler="normal", seed=2).other(state) == "seed 1, this one has 2"
    uniform = FKStream(snake, seed=1).state_dict()  # the uniform sampler has no std to differ in
    assert FKStream(snake, std=0.5, seed=1).settings()["std"] is None
    assert FKStream(snake, std=0.5, seed=1).other(uniform) is None
    crafted = {**state, "std": torch.ones(3)}  # a tensor's == is no bool: named, not compared
    assert other.other(crafted) == "std tensor([1., 1., 1.]), this one has 0.5"
    older = {key: state[key] for key in ("seed", "drawn", "generator")}  # format 4's
    assert other.other(older) is None
    with pytest.raises(ValueError, match=r"^the saved stream has std 0.2, this one has 0.5$"):
        other.load_state_dict(state)

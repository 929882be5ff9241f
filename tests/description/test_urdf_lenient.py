"""What real files contain and urdfdom/Pinocchio load (issue 17 section 1): each case is a small
fixture in ``tests/data/urdf_lenient``, loaded with a :class:`URDFWarning` where it is lenient."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest
import torch

from tests.paths import DATA
from torchik import Robot, URDFError, parse_urdf
from torchik.description import URDFWarning

DATA = DATA / "urdf_lenient"


def load(name: str, **kwargs) -> Robot:
    return Robot.from_urdf(DATA / f"{name}.urdf", dtype=torch.float64, **kwargs)


def test_limit_without_bounds_is_unlimited_with_a_warning() -> None:
    path = DATA / "limit_without_bounds.urdf"
    with pytest.warns(URDFWarning, match=r"limit_without_bounds.urdf: joint 'wheel_joint'"):
        model = parse_urdf(path)
    assert [(j.lower, j.upper) for j in model.joints] == [(None, None), (None, None)]
    with pytest.warns(URDFWarning, match="'slide_joint' \\(prismatic\\).*unlimited"):
        robot = load("limit_without_bounds")
    assert robot.joint_types == ("revolute", "prismatic")
    assert robot.lower.tolist() == [-math.pi, -math.inf]
    assert robot.upper.tolist() == [math.pi, math.inf]
    assert robot.continuous.tolist() == [True, False]  # the wheel wraps like a continuous joint
    q = robot.random_configuration(50, generator=torch.Generator().manual_seed(0))
    assert bool((q[:, 0].abs() <= math.pi).all()) and bool((q[:, 1] == 0).all())


def test_warning_can_be_silenced() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=URDFWarning)
        load("limit_without_bounds")


def test_one_bound_defaults_the_other_to_zero() -> None:
    with pytest.warns(URDFWarning, match="'knee': <limit> has no lower, which defaults to 0"):
        robot = load("limit_one_bound")
    assert (robot.lower.tolist(), robot.upper.tolist()) == ([0.0], [2.5])


def test_lower_above_upper_is_unlimited() -> None:
    with pytest.warns(URDFWarning, match="lower=1.5 upper=-1.5>, loaded as unlimited"):
        robot = load("lower_above_upper")
    assert robot.continuous.tolist() == [True]


@pytest.mark.parametrize("bounds", ['lower="-1e16" upper="1e16"', 'lower="-1e308" upper="1"'])
def test_huge_bounds_are_unlimited(bounds: str) -> None:
    text = (DATA / "limit_one_bound.urdf").read_text().replace('upper="2.5"', bounds)
    with pytest.warns(URDFWarning, match="'knee': <limit lower=.*, loaded as unlimited"):
        robot = Robot.from_urdf(text, dtype=torch.float64)
    assert robot.continuous.tolist() == [True]  # gazebo's 1e16: a rotor, unlimited


def test_whitespace_before_declaration_in_a_file() -> None:
    path = DATA / "whitespace_before_declaration.urdf"
    assert path.read_bytes().startswith(b"\n")
    assert parse_urdf(path) == parse_urdf(path.read_text())


@pytest.mark.filterwarnings("ignore::torchik.description.URDFWarning")
def test_with_limits_overrides_per_joint() -> None:
    robot = load("limit_without_bounds")
    bounded = robot.with_limits({"wheel_joint": (-1.0, 2.0), "slide_joint": (0.0, 0.5)})
    assert bounded.lower.tolist() == [-1.0, 0.0] and bounded.upper.tolist() == [2.0, 0.5]
    assert bounded.continuous.tolist() == [False, False]
    assert robot.lower.tolist() == [-math.pi, -math.inf]  # a copy: the original is unchanged
    q = bounded.random_configuration(200, generator=torch.Generator().manual_seed(1))
    assert bool(((q >= bounded.lower) & (q <= bounded.upper)).all())
    assert float(q[:, 1].max()) > 0.25  # the slide is sampled now
    bounded.to(torch.float32).to(torch.float64)  # the new limits survive a dtype round trip
    assert bounded.upper.tolist() == [2.0, 0.5]
    restored = Robot.from_urdf(DATA / "limit_one_bound.urdf", dtype=torch.float64)
    restored.load_state_dict(load("limit_one_bound").with_limits({"knee": (-1, 1)}).state_dict())
    assert restored.lower.tolist() == [-1.0]


@pytest.mark.parametrize(
    ("limits", "words"),
    [
        ({"nope": (0, 1)}, "'nope' is not a joint.*accepted: \\['wheel_joint', 'slide_joint'\\]"),
        ({"wheel_joint": (1, 0)}, "'wheel_joint' needs lower <= upper"),
        ({"wheel_joint": (math.nan, 0)}, "lower <= upper"),
    ],
)
def test_with_limits_errors(limits: dict, words: str) -> None:
    with pytest.warns(URDFWarning):
        robot = load("limit_without_bounds")
    with pytest.raises(ValueError, match=words):
        robot.with_limits(limits)


def test_spherical_names_the_file_the_joint_and_what_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "ball.urdf"
    path.write_text(
        '<robot name="r"><link name="a"/><link name="b"/><joint name="ball" type="spherical">'
        '<parent link="a"/><child link="b"/></joint></robot>'
    )
    with pytest.raises(URDFError, match="ball.urdf: joint 'ball'.*spherical.*accepted: revolute"):
        Robot.from_urdf(path)


def test_missing_limit_element_names_the_file_and_what_is_accepted() -> None:
    path = DATA.parent / "bad_urdf" / "revolute_without_limit.urdf"
    with pytest.raises(URDFError, match="revolute_without_limit.urdf: .*accepted: <limit"):
        parse_urdf(path)


def test_planar_joint_is_x_y_theta() -> None:
    robot = load("planar")
    assert robot.joint_names == ("drive/x", "drive/y", "drive/theta")
    assert robot.joint_types == ("prismatic", "prismatic", "continuous")
    assert robot.lower.tolist() == [-math.inf, -math.inf, -math.pi]
    q = torch.tensor([[2.0, -1.0, math.pi / 2]], dtype=torch.float64, requires_grad=True)
    pose = robot.forward_kinematics(q, "tool")[0]
    expected = torch.tensor(
        [[0.0, -1.0, 0.0, 2.0], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.1], [0, 0, 0, 1]],
        dtype=torch.float64,
    )  # body at (2, -1, 0.1) turned 90 degrees: the tool 1 m ahead is at (2, 0, 0.1)
    torch.testing.assert_close(pose, expected, atol=1e-12, rtol=0)
    jac = robot.jacobian(q.detach(), "tool")[0]
    auto = torch.autograd.functional.jacobian(
        lambda x: robot.link_positions(x, "tool")[0], q.detach()
    )[:, 0]
    torch.testing.assert_close(jac[:3], auto, atol=1e-12, rtol=0)


def test_planar_axis_x_moves_in_the_yz_plane() -> None:
    text = (DATA / "planar.urdf").read_text().replace('axis xyz="0 0 1"', 'axis xyz="1 0 0"')
    robot = Robot.from_urdf(text, dtype=torch.float64)
    q = torch.tensor([0.3, 0.4, 0.0], dtype=torch.float64)
    torch.testing.assert_close(
        robot.link_positions(q, "body"), torch.tensor([0.0, 0.3, 0.5], dtype=torch.float64)
    )


def test_planar_link_names_must_be_free() -> None:
    text = (DATA / "planar.urdf").read_text().replace('"tool"', '"drive/x"')
    with pytest.raises(URDFError, match="'drive'.*planar.*needs the links.*accepted: other"):
        Robot.from_urdf(text)

"""``--model`` in the commands: bundled names, models of another robot, and the options that
only mean something with a model."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cli import assert_one_line_error, run


@pytest.fixture(scope="module")
def snake2_model(tmp_path_factory):
    from torchik.models import load_pretrained

    path = tmp_path_factory.mktemp("models") / "snake2_model.pt"
    load_pretrained("snake2").save(path)
    return str(path)


def test_plot_arm_refuses_a_model_of_another_robot_before_sampling(capsys, tmp_path, snake2_model):
    """It said ``q_samples must have shape (..., 6), got (30, 2)`` after sampling."""
    pytest.importorskip("matplotlib")
    code, _, err = run(capsys, "plot", "arm", "ur5", "--position", "0.3", "0.2", "0.3",
                       "--model", snake2_model, "--out", str(tmp_path / "a.png"))  # fmt: skip
    assert_one_line_error(code, err)
    assert "the model is for robot 'snake2', link 'ee', not for this one" in err
    assert not (tmp_path / "a.png").exists()


def test_a_bundled_model_name_works_wherever_model_is_taken(capsys):
    """``solve --model panda_position`` said ``file not found: panda_position`` (``view``
    took the name)."""
    code, out, err = run(capsys, "solve", "panda", "--position", "0.4", "0.1", "0.5", "--model",
                         "panda_position", "-n", "3", "--format", "json")  # fmt: skip
    assert code in (0, 3) and len(json.loads(out)) == 3, err
    code, _, err = run(capsys, "solve", "panda", "--position", "0.4", "0.1", "0.5", "--model",
                       "no_such_model")  # fmt: skip
    assert_one_line_error(code, err)
    assert "'no_such_model' is no file nor bundled model" in err and "panda_position" in err


def test_positions_for_a_pose_model_name_the_bundled_position_model(capsys):
    code, _, err = run(capsys, "solve", "panda", "--position", "0.4", "0.1", "0.5", "--model",
                       "pretrained")  # fmt: skip
    assert_one_line_error(code, err)
    assert "trained on full poses: pass --pose, not --position, or --model panda_position" in err


@pytest.mark.parametrize("flag", [["--refine"], ["--sampler", "few"]])
def test_model_options_without_a_model_are_refused(capsys, flag):
    """They were ignored: 100 numerical solutions, as if not given."""
    code, out, err = run(capsys, "solve", "snake2", "--position", "0.1", "0.1", *flag)
    assert_one_line_error(code, err)
    assert code == 2 and f"{flag[0]} is for a model's samples: pass --model too" in err
    assert out == ""


@pytest.mark.parametrize("flag", ["--tol-position", "--tol-rotation"])
def test_a_zero_tolerance_is_refused_by_its_flag(capsys, flag):
    """0 passed the argument check and failed in the library with exit status 1."""
    code, _, err = run(capsys, "solve", "snake2", "--position", "0.1", "0.1", flag, "0")
    assert_one_line_error(code, err)
    assert code == 2 and flag in err and "must be > 0, got 0" in err


@pytest.mark.parametrize(
    "target",
    [
        ["--position", "1e300", "5", "5"],
        ["--position", "0.4", "-1e10", "0.5"],
        ["--pose", "0.4", "0.1", "0.5", "1e300", "1e300", "0", "0"],
    ],
)
def test_a_target_beyond_1e9_is_refused_in_one_line(capsys, target):
    """1e300 was solved (errors of inf); a quaternion of 1e300 said "target contains NaN or
    infinite values" though every number given was finite."""
    code, _, err = run(capsys, "solve", "panda", *target)
    assert_one_line_error(code, err)
    assert code == 2 and f"argument {target[0]}: must be within ±1e9" in err


@pytest.mark.parametrize("z", ["-5e-1", "-5E-1", "-.5e0", "-0.5"])
def test_a_negative_number_in_scientific_notation_is_a_number(capsys, z):
    """``--position 0.4 0.1 -5e-1`` said ``unrecognized arguments: -5e-1`` (-0.5 worked)."""
    code, out, err = run(capsys, "solve", "snake2", "--position", "0.1", z, "-n", "1",
                         "--format", "json")  # fmt: skip
    assert code == 3 and len(json.loads(out)) == 1, err  # parsed: (0.1, -0.5) is out of reach
    code, _, err = run(capsys, "solve", "snake2", "--position", "0.1", "-inf")
    assert code == 2 and "'-inf' is not a finite number" in err


@pytest.fixture(scope="module")
def left_tip_model(tmp_path_factory):
    """An untrained MLP of ``two_branches.urdf`` for ``left_tip``, not the robot's end link."""
    import torchik
    from tests.cli.test_cli import URDF
    from torchik.learn import ProblemSpec
    from torchik.models import MLP

    urdf = str(URDF / "two_branches.urdf")
    spec = ProblemSpec.from_robot(torchik.load_robot(urdf), link="left_tip")
    path = tmp_path_factory.mktemp("models") / "left_tip.pt"
    MLP(spec).save(path)
    return urdf, str(path)


def test_solve_with_a_model_places_the_models_link_by_default(capsys, left_tip_model):
    """Without --link, solve placed the robot's end link (right_tip) and refused the model
    trained for left_tip: ``link 'right_tip', not 'left_tip'``."""
    urdf, model = left_tip_model
    code, out, err = run(capsys, "solve", urdf, "--position", "0.0", "0.2", "0.5", "--model",
                         model, "-n", "2", "--refine", "--format", "json")  # fmt: skip
    assert code in (0, 3), err
    assert "right_tip" not in err and "the model's samples" in err
    assert len(json.loads(out)) == 2


def test_plot_arm_with_a_model_places_the_models_link_by_default(capsys, tmp_path, left_tip_model):
    pytest.importorskip("matplotlib")
    urdf, model = left_tip_model
    out = tmp_path / "a.png"
    code, _, err = run(capsys, "plot", "arm", urdf, "--position", "0.0", "0.2", "0.5",
                       "--model", model, "-n", "2", "--out", str(out))  # fmt: skip
    assert code == 0 and out.exists(), err


def test_a_models_link_the_robot_lacks_is_refused_in_one_line(capsys, left_tip_model):
    _, model = left_tip_model
    code, _, err = run(capsys, "solve", "panda", "--position", "0.4", "0.1", "0.5", "--model",
                       model)  # fmt: skip
    assert_one_line_error(code, err)
    assert "the model is for robot 'tree', link 'left_tip', not for this one" in err

"""``--model`` in the commands: bundled names, models of another robot, and the options that
only mean something with a model."""

from __future__ import annotations

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

"""experiments.urdf_load: generated URDFs, first-call CPU seconds, one load's cost."""

from __future__ import annotations

import pytest

from experiments.urdf_load import SHAPES, crafted_urdf, first_call_seconds, load_cost
from torchik import Robot, parse_urdf


@pytest.mark.parametrize("shape", SHAPES)
def test_crafted_urdf_shapes(shape):
    text = crafted_urdf(shape, 6)
    assert text.startswith(f'<robot name="{shape}">') and text.count("<link ") == 6
    if shape == "linkonly":
        assert "<joint" not in text
        return
    model = parse_urdf(text)
    assert len(model.joints) == 5
    parents = {j.parent for j in model.joints}
    assert parents == ({"l0"} if shape == "tree" else {f"l{i}" for i in range(5)})
    assert text.count("<mimic ") == (4 if shape == "mimic" else 0)


def test_crafted_chain_loads_with_one_dof_per_joint():
    robot = Robot.from_urdf(crafted_urdf("chain", 11))
    assert robot.dof == 10 and robot.link_names[-1] == "l10"


def test_crafted_urdf_refuses_unknown_shapes():
    with pytest.raises(ValueError, match="unknown shape 'ring'"):
        crafted_urdf("ring", 3)


def test_first_call_seconds_times_every_step():
    seconds = first_call_seconds(crafted_urdf("chain", 21), batch=4, repeats=2)
    assert list(seconds) == [
        "parse_urdf", "Robot.from_urdf", "first FK, every link", "first Jacobian of the tip",
        "first FK + backward, every link",
    ]  # fmt: skip
    assert all(s >= 0 for s in seconds.values())
    with pytest.raises(ValueError, match="repeats"):
        first_call_seconds(crafted_urdf("chain", 3), repeats=0)


def test_load_cost_reports_the_outcome():
    loaded = load_cost(crafted_urdf("tree", 5))
    assert loaded["outcome"] == "loaded" and loaded["peak_rss_mb"] > 0
    assert set(loaded) == {"s", "cpu_s", "peak_rss_mb", "outcome"}
    failed = load_cost(crafted_urdf("linkonly", 3))
    assert failed["outcome"].startswith("URDFError (")

"""torchik.ik.result: IKResult prints one short line, and so does every dataclass subclass
(a whole-body result printed ~430 lines of tensors)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch

from torchik.ik import IKResult
from torchik.ik.wholebody.result import WholeBodyResult


def _fields(targets: int = 2, k: int = 3, dof: int = 43) -> dict:
    g = torch.Generator().manual_seed(0)
    q = torch.rand(targets, k, dof, generator=g, dtype=torch.float64)
    position = torch.tensor([[2e-4, 5e-3, 1e-2], [3e-4, 1e-4, 2.0]], dtype=torch.float64)
    return {
        "q": q, "success": position < 1e-3, "position_error": position,
        "rotation_error": torch.full_like(position, math.radians(0.5)),
        "iterations": torch.ones_like(position, dtype=torch.long), "tol_position": 1e-3,
        "tol_rotation": math.radians(1.0), "continuous": torch.zeros(dof, dtype=torch.bool),
    }  # fmt: skip


def test_a_whole_body_result_prints_one_short_line():
    links = {"left_hand": torch.zeros(2, 3), "right_foot": torch.zeros(2, 3)}
    result = WholeBodyResult(**_fields(), position_errors=links, rotation_errors=links)
    text = repr(result)
    assert "\n" not in text and len(text) < 250 and "tensor" not in text
    assert text.startswith("WholeBodyResult(q (2, 3, 43): 2 target(s) x 3 slot(s) x 43 joints")
    assert "2 of 2 solved within 1 mm / 1 deg" in text
    assert "median best position error 0.1 mm, rotation 0.5 deg" in text
    assert str(result.best()).startswith("WholeBodyResult(q (2, 1, 43)")


def test_any_dataclass_subclass_keeps_the_summary_unless_it_writes_its_own():
    @dataclass
    class Mine(IKResult):
        note: str = ""

    assert repr(Mine(**_fields(), note="x")).startswith("Mine(q (2, 3, 43)")

    @dataclass
    class Own(IKResult):
        def __repr__(self) -> str:
            return "own"

    assert repr(Own(**_fields())) == "own"
    plain = IKResult(**{**_fields(), "tol_rotation": math.inf})
    assert "deg" not in repr(plain) and repr(plain).endswith("position error 0.1 mm)")


def test_in_scene_puts_a_bodys_answer_back_into_the_scenes_coordinates():
    """``in_scene``: the body's ``q`` at the kept coordinates, the held values elsewhere, the
    scene's continuous mask; the class (and the per-link errors) kept."""
    links = {"hand": torch.zeros(2, 3)}
    body = WholeBodyResult(**_fields(dof=4), position_errors=links, rotation_errors=links)
    scene = type("Scene", (), {"dof": 6, "continuous": torch.tensor([0, 0, 1, 0, 0, 0]).bool()})
    held = torch.arange(6, dtype=torch.float64) + 10.0
    kept = torch.tensor([0, 2, 3, 5])
    whole = body.in_scene(scene, kept, held)
    assert isinstance(whole, WholeBodyResult) and whole.q.shape == (2, 3, 6)
    assert torch.equal(whole.q[..., kept], body.q)
    assert torch.equal(whole.q[..., [1, 4]], held[[1, 4]].expand(2, 3, 2))
    assert torch.equal(whole.continuous, scene.continuous)
    assert whole.position_errors is body.position_errors
    assert torch.equal(whole.success, body.success)
    for kept_, match in ((torch.tensor([0, 2, 3]), r"\(4,\) indices"),
                         (torch.tensor([0, 2, 3, 6]), r"\(4,\) indices"),
                         (torch.tensor([0, 2, 2, 5]), "twice")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            body.in_scene(scene, kept_, held)
    with pytest.raises(TypeError, match="kept must be an int64 tensor, got a torch.float32"):
        body.in_scene(scene, kept.float(), held)
    with pytest.raises(ValueError, match=r"held must be \(\.\.\., 6\)"):
        body.in_scene(scene, kept, held[:5])


def test_top_nearest_and_distinct_refuse_bad_arguments_in_one_line():
    """What a user passes to a result's methods is checked: a number of slots, a
    configuration of the result's size and batch, a distance."""
    result = IKResult(**_fields(dof=4))
    assert result.top(10).q.shape == (2, 3, 4)  # at most K
    for k, error in ((0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="k must be"):
            result.top(k)
    q = torch.zeros(4, dtype=torch.float64)
    assert result.nearest(q).q.shape == result.nearest(q.expand(2, 4)).q.shape == (2, 1, 4)
    for bad, error, match in (([0.0] * 4, TypeError, "q must be a floating-point tensor"),
                              (q.long(), TypeError, "got a torch.int64 tensor"),
                              (q[:3], ValueError, r"\(\.\.\., 4\) for targets of batch"),
                              (q.expand(3, 4), ValueError, r"got \(3, 4\)"),
                              (q.to("meta"), ValueError, "meta device")):  # fmt: skip
        with pytest.raises(error, match=match):
            result.nearest(bad)
    for distance, error in ((-0.1, ValueError), (math.nan, ValueError), ("0.1", TypeError)):
        with pytest.raises(error, match="min_distance"):
            result.distinct(distance)

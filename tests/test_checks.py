"""torchik.checks: one line per refused setting, TypeError for the kind, ValueError for range."""

from __future__ import annotations

import math

import pytest

from torchik.checks import check_bool, check_choice, check_float, check_int


def test_check_int():
    assert check_int("n", 3, 1, 5) == 3
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        check_int("n", 0, 1)
    with pytest.raises(ValueError, match="n must be <= 5, got 6"):
        check_int("n", 6, 1, 5)
    for bad in (2.0, "3", True, None, [1]):
        with pytest.raises(TypeError, match="n must be an int"):
            check_int("n", bad)


def test_check_float():
    assert check_float("tol", 2) == 2.0 and isinstance(check_float("tol", 2), float)
    with pytest.raises(ValueError, match="tol must be finite, got nan"):
        check_float("tol", math.nan)
    with pytest.raises(ValueError, match="tol must be finite"):
        check_float("tol", -math.inf)
    with pytest.raises(ValueError, match="tol must be > 0, got 0.0"):
        check_float("tol", 0.0, positive=True)
    with pytest.raises(ValueError, match=r"tol must be in \[0.0, 1.0\], got 2.0"):
        check_float("tol", 2.0, 0.0, 1.0)
    for bad in ("1", None, False):
        with pytest.raises(TypeError, match="tol must be a number"):
            check_float("tol", bad)


def test_check_choice_and_bool():
    assert check_choice("kind", "a", ("a", "b")) == "a"
    with pytest.raises(ValueError, match=r"kind must be one of \['a', 'b'\], got 'c'"):
        check_choice("kind", "c", ("a", "b"))
    with pytest.raises(ValueError, match="kind must be one of"):
        check_choice("kind", ["a"], ("a", "b"))  # unhashable: still a ValueError
    assert check_bool("flag", False) is False
    with pytest.raises(TypeError, match="flag must be True or False, got int 1"):
        check_bool("flag", 1)

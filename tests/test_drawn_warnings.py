"""The filter of drawn warnings ignores the mimic-limits note only, inside its block only."""

from __future__ import annotations

import warnings

import pytest

from tests.drawn_warnings import mimic_limits_allowed
from torchik.description import URDFWarning, parse_urdf


def _grip(follow_limit: str, drive_limit: str = '<limit lower="0" upper="1"/>') -> str:
    return (
        '<robot name="grip"><link name="b"/><link name="f1"/><link name="f2"/>'
        f'<joint name="drive" type="revolute"><parent link="b"/><child link="f1"/>{drive_limit}'
        '</joint><joint name="follow" type="revolute"><parent link="f1"/><child link="f2"/>'
        f'{follow_limit}<mimic joint="drive"/></joint></robot>'
    )


def test_only_the_mimic_limits_note_is_ignored_and_only_inside():
    mimic = _grip('<limit lower="0" upper="0.2"/>')
    lenient = _grip('<limit lower="0" upper="0.2"/>', '<limit lower="1" upper="0"/>')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with mimic_limits_allowed():
            parse_urdf(mimic)
        with mimic_limits_allowed(), pytest.raises(URDFWarning, match="'drive'"):
            parse_urdf(lenient)  # a lenient note first: the warning says more than the mimic
        with pytest.raises(URDFWarning, match="'follow' mimics 'drive'"):
            parse_urdf(mimic)

"""A bounded sample of URDF fuzzing (``make fuzz`` runs thousands): every mutated description
loads cleanly with finite FK, or raises URDFError, quickly."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from hypothesis import HealthCheck, given, settings

from tests.fuzz.urdf_strategies import ACCEPTABLE, HANG_S, check_source, mutated_urdfs, urdf_trees

EXAMPLES = int(os.environ.get("TORCHIK_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,  # timed by check_source against HANG_S instead: CI machines are shared
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)


@FUZZ
@given(urdf_trees())
def test_valid_trees_load_with_finite_fk(robot: ET.Element) -> None:
    outcome, detail, _ = check_source(ET.tostring(robot, encoding="unicode"))
    assert outcome == "loaded", detail


@FUZZ
@given(mutated_urdfs())
def test_mutations_load_or_raise_urdf_error(source: str | bytes) -> None:
    outcome, detail, seconds = check_source(source)
    assert outcome in ACCEPTABLE, f"{outcome}: {detail}"
    assert seconds < HANG_S

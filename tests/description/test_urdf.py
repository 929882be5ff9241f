"""Tests for torchik.description.urdf: good descriptions load exactly, every malformed one fails
clearly."""

from __future__ import annotations

import json
import math
import os
import time
import tracemalloc
from dataclasses import asdict
from pathlib import Path

import pytest

from tests.paths import DATA
from torchik.description import Joint, Mimic, Origin, URDFError, URDFModel, URDFWarning, parse_urdf

DATA = DATA
GOOD = DATA / "urdf"
BAD_FILES = sorted((DATA / "bad_urdf").glob("*.urdf"))
REFERENCE = json.loads((DATA / "fk_reference.json").read_text())["robots"]

# Words each malformed file's message must contain; a new file without an entry here is still
# checked for raising URDFError quickly.
BAD_MESSAGES = {
    "bad_number": ("'j'", "xyz", "3 numbers"),
    "cycle": ("cycle", "'b'", "'c'"),
    "duplicate_link": ("duplicate link", "'b'"),
    "empty": ("empty",),
    "entity_expansion": ("DOCTYPE",),
    "external_entity": ("DOCTYPE", "entities"),
    "mimic_unknown_joint": ("'j'", "'nope'"),
    "missing_parent_link": ("'j'", "'ghost'"),
    "nan_origin": ("'j'", "xyz", "'nan'", "finite"),
    "no_robot_root": ("<robot>", "<model>"),
    "not_xml": ("XML",),
    "revolute_without_limit": ("'j'", "limit"),
    "two_parents": ("two parent", "'c'", "'j1'", "'j2'"),
    "two_roots": ("root", "'a'", "'c'"),
    "unknown_joint_type": ("'j'", "'helical'"),
    "zero_axis": ("'j'", "axis"),
}


def robot(*joints: str, links: str = "a b c") -> str:
    """URDF text with the given links and joint elements."""
    link_tags = "".join(f'<link name="{name}"/>' for name in links.split())
    return f'<robot name="r">{link_tags}{"".join(joints)}</robot>'


def joint(name: str, kind: str, parent: str, child: str, body: str = "") -> str:
    """A ``<joint>`` element; revolute and prismatic ones get limits unless ``body`` has some."""
    if kind in ("revolute", "prismatic") and "<limit" not in body:
        body += '<limit lower="-1" upper="1" effort="1" velocity="1"/>'
    refs = f'<parent link="{parent}"/><child link="{child}"/>'
    return f'<joint name="{name}" type="{kind}">{refs}{body}</joint>'


def assert_topological(model: URDFModel) -> None:
    """Every joint hangs off the root or a link placed by an earlier joint."""
    assert model.links[0] == model.root
    assert len(model.links) == len(model.joints) + 1
    placed = {model.root}
    for index, item in enumerate(model.joints):
        assert item.parent in placed
        assert model.links[index + 1] == item.child
        placed.add(item.child)


@pytest.fixture
def shared_urdf(shared_fixtures_dir: Path | None) -> Path:
    """The folder of third-party URDFs in ``../shared``; skips the test where it is absent."""
    if shared_fixtures_dir is None:
        pytest.skip("../shared is absent beside the repository: no third-party URDFs")
    return shared_fixtures_dir / "urdf"


def reference_urdf(name: str, shared_fixtures_dir: Path | None) -> Path:
    """Path of the URDF that fk_reference.json describes as ``name``."""
    local = DATA / REFERENCE[name]["urdf"]
    if local.is_file():
        return local
    if shared_fixtures_dir is None:
        pytest.skip(f"{local.name} lives in ../shared, which is absent")
    return shared_fixtures_dir / REFERENCE[name]["urdf"]


# --------------------------------------------------------------------------- malformed files


def test_every_expected_message_has_a_file() -> None:
    assert {path.stem for path in BAD_FILES} >= set(BAD_MESSAGES)


@pytest.mark.parametrize("path", BAD_FILES, ids=lambda path: path.stem)
def test_bad_file_raises_quickly_and_clearly(path: Path) -> None:
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(URDFError) as info:
            parse_urdf(path)
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < 1.0
    assert peak < 5_000_000
    message = str(info.value)
    assert message.startswith(str(path))
    for word in BAD_MESSAGES.get(path.stem, ()):
        assert word in message


@pytest.mark.parametrize("path", BAD_FILES, ids=lambda path: path.stem)
def test_bad_text_raises(path: Path) -> None:
    with pytest.raises(URDFError):
        parse_urdf(path.read_text())


def test_long_malformed_number_fails_fast() -> None:
    body = f'<origin xyz="0 0 {"1" * 100_000}x"/>'
    start = time.perf_counter()
    with pytest.raises(URDFError, match="'j'.*xyz.*not a finite number"):
        parse_urdf(robot(joint("j", "fixed", "a", "b", body), links="a b"))
    assert time.perf_counter() - start < 5.0  # loose: a guard against hangs, not a benchmark


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.urdf"
    with pytest.raises(URDFError, match="nowhere.urdf"):
        parse_urdf(missing)
    with pytest.raises(URDFError, match="nowhere.urdf"):
        parse_urdf(str(missing))


def test_only_regular_files_within_the_size_limit_are_read(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.urdf"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    big = tmp_path / "big.urdf"
    big.write_text(robot(links="a") + " " * 2000)
    start = time.perf_counter()
    for path, words in ((fifo, "not a regular file"), ("/dev/zero", "not a regular file")):
        with pytest.raises(URDFError, match=words):
            parse_urdf(path)
    with pytest.raises(URDFError, match="big.urdf: 2.* bytes, over the limit of 1000"):
        parse_urdf(big, max_bytes=1000)
    with pytest.raises(URDFError, match="characters, over 10"):
        parse_urdf(robot(links="a"), max_bytes=10)
    assert time.perf_counter() - start < 5.0  # loose: reading the FIFO would block forever
    assert parse_urdf(big, max_bytes=None).links == ("a",)


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("bad\0name.urdf", "bad\\\\x00name.urdf.*null"),
        ("bad\udc80.urdf", "bad\\\\udc80.urdf"),
        (b'<?xml version="1.0" encoding="no-such"?><robot name="r"/>', "decode.*no-such"),
        ("<robot name='r'><link name='a'/></robot>".encode("utf-32"), "XML"),
        ('<robot name="\udc80"/>', "decode"),
    ],
)
def test_unreadable_sources_raise_urdf_error(tmp_path: Path, source, words: str) -> None:
    if isinstance(source, bytes):
        (tmp_path / "encoded.urdf").write_bytes(source)
        source = tmp_path / "encoded.urdf"
    with pytest.raises(URDFError, match=words):
        parse_urdf(source)


def test_an_mjcf_file_is_named_mjcf(tmp_path: Path) -> None:
    path = tmp_path / "arm.xml"
    path.write_text('<mujoco model="arm"><worldbody/></mujoco>')
    with pytest.raises(URDFError, match=r"arm\.xml: .*<mujoco>: this is MJCF .*Robot\.from_mjcf"):
        parse_urdf(path)
    with pytest.raises(URDFError, match=r"expected <robot>"):
        parse_urdf("<sdf version='1.6'/>")


def test_extreme_axes_are_normalised_exactly() -> None:
    for value in ("1e200", "1e-200", "5e-324", "1.7e308"):
        body = f'<axis xyz="{value} {value} {value}"/>'
        (item,) = parse_urdf(robot(joint("j", "continuous", "a", "b", body), links="a b")).joints
        assert item.axis == pytest.approx((3**-0.5,) * 3, abs=1e-15)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('<origin xyz="0 1e10 0"/>', "'j': <origin xyz> has '1e10', beyond"),
        ('<origin rpy="-2e9 0 0"/>', "'j': <origin rpy>"),
        ('<mimic joint="k" multiplier="1e10"/>', "'j': <mimic multiplier>"),
    ],
)
def test_numbers_beyond_the_supported_magnitude(body: str, words: str) -> None:
    with pytest.raises(URDFError, match=words):
        parse_urdf(robot(joint("j", "revolute", "a", "b", body), links="a b"))


def test_mimic_chain_whose_multipliers_overflow() -> None:
    count = 40  # 1e3 ** 40 overflows a float; 1e3 ** 4 is already beyond 1e9
    joints = [joint("j0", "revolute", "l0", "l1")] + [
        joint(
            f"j{i}", "revolute", f"l{i}", f"l{i + 1}", f'<mimic joint="j{i - 1}" multiplier="1e3"/>'
        )
        for i in range(1, count)
    ]
    links = " ".join(f"l{i}" for i in range(count + 1))
    with pytest.raises(URDFError, match="'j4' mimics 'j0'.*multiplier 1e\\+12 is beyond"):
        parse_urdf(robot(*joints, links=links))


@pytest.mark.parametrize("kind", ["chain", "tree", "mimic", "linkonly"])
def test_large_descriptions_load_in_linear_time(kind: str) -> None:
    count = 4000  # the quadratic code took 25 s for a chain this long, this takes about 0.2 s
    links = " ".join(f"l{i}" for i in range(count))
    joints = [
        joint(
            f"j{i}",
            "revolute",
            "l0" if kind == "tree" else f"l{i - 1}",
            f"l{i}",
            f'<mimic joint="j{i - 1}"/>' if kind == "mimic" and i > 1 else "",
        )
        for i in range(1, 1 if kind == "linkonly" else count)
    ]
    start = time.perf_counter()
    try:
        model = parse_urdf(robot(*joints, links=links))
    except URDFError as err:
        assert kind == "linkonly" and len(str(err)) < 200
    else:
        assert len(model.joints) == count - 1
    # loose (CI shares 2 cores): quadratic loading took minutes; benchmarks/urdf_load.py times it
    assert time.perf_counter() - start < 10.0


def test_unsupported_joint_type() -> None:
    text = robot(joint("ball", "spherical", "a", "b"), links="a b")
    expected = "joint 'ball' has type 'spherical', which torchik does not support; accepted: rev"
    with pytest.raises(URDFError, match=expected):
        parse_urdf(text)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            '<?xml version="1.0"?><!DOCTYPE robot><robot name="r"><link name="a"/></robot>',
            "DOCTYPE",
        ),
        ('<robot name="r"><link name="&undefined;"/></robot>', "XML"),
        ('<robot name="r"></robot>', "no links"),
        ('<robot><link name="a"/></robot>', "'name'"),
        ('<robot name="r"><link/></robot>', "<link>"),
        (
            robot(joint("j", "fixed", "a", "b"), joint("j", "fixed", "b", "c")),
            "duplicate joint name 'j'",
        ),
        (robot(joint("j", "fixed", "a", "a")), "'j'.*same parent and child"),
        (robot(joint("j", "fixed", "a", "nope")), "'j'.*child link 'nope'"),
        (robot('<joint name="j" type="fixed"><child link="b"/></joint>'), "'j'.*<parent"),
        (robot('<joint name="j"><parent link="a"/><child link="b"/></joint>'), "'j'.*'type'"),
        (robot(joint("j", "fixed", "a", "b"), joint("f", "floating", "b", "c")), "'f'.*root"),
        (robot(joint("f", "floating", "a", "b"), joint("j", "fixed", "a", "c")), "'f'.*only"),
        (robot(joint("p", "planar", "a", "b", '<mimic joint="q"/>')), "'p'.*<mimic>"),
        (
            robot(joint("p", "revolute", "a", "b"), joint("q", "floating", "b", "c")),
            "'q'.*floating.*accepted",
        ),
        (robot(joint("j", "prismatic", "a", "b", '<origin rpy="0 inf 0"/>')), "'j'.*rpy.*inf"),
        (robot(joint("j", "revolute", "a", "b", '<axis xyz="1_0 0 0"/>')), "'j'.*axis.*1_0"),
        (robot(joint("j", "revolute", "a", "b", '<axis xyz="1 0 0 0"/>')), "'j'.*3 numbers"),
        (robot(joint("j", "revolute", "a", "b", '<axis xyz="0 -0 0e5"/>')), "'j'.*zero-length"),
        (robot(joint("j", "revolute", "a", "b", '<limit lower="-1" upper="-1e999"/>')), "upper"),
        (robot(joint("j", "fixed", "a", "b"), joint("k", "fixed", "b", "a")), "cycle"),
    ],
)
def test_malformed_text(text: str, words: str) -> None:
    with pytest.raises(URDFError, match=words):
        parse_urdf(text)


# --------------------------------------------------------------------------- good fixtures


@pytest.mark.parametrize("path", sorted(GOOD.glob("*.urdf")), ids=lambda path: path.stem)
def test_text_and_path_agree(path: Path) -> None:
    model = parse_urdf(path)
    assert parse_urdf(str(path)) == model
    assert parse_urdf(path.read_text()) == model
    assert parse_urdf("\n  " + path.read_text()) == model
    assert_topological(model)


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_matches_fk_reference(name: str, shared_fixtures_dir: Path | None) -> None:
    model = parse_urdf(reference_urdf(name, shared_fixtures_dir))
    expected = REFERENCE[name]
    actuated = [item.name for item in model.joints if item.type != "fixed" and not item.mimic]
    mimics = {item.name: asdict(item.mimic) for item in model.joints if item.mimic is not None}
    assert actuated == expected["joints"]
    assert mimics == expected["mimic"]
    assert set(model.links) == set(expected["samples"][0]["links"])
    assert_topological(model)


def test_digit_arm() -> None:
    model = parse_urdf(GOOD / "digit_arm.urdf")
    assert (model.name, model.root) == ("digit_arm", "base_link")
    assert [item.type for item in model.joints] == ["revolute"] * 4 + ["fixed"]
    first, hand = model.joints[0], model.joints[-1]
    assert first.origin == Origin((-0.001, 0.12, 0.4), (-1.57079632679, -1.3962633, 1.57079632679))
    assert (first.lower, first.upper, first.axis) == (-1.309, 1.309, (0.0, 0.0, 1.0))
    assert model.joints[1].axis == (0.0, 0.0, -1.0)
    assert (hand.name, hand.lower, hand.upper, hand.mimic) == ("hand_left", None, None, None)


def test_prismatic_and_continuous() -> None:
    slide, spin, bend, flange = parse_urdf(GOOD / "prismatic_continuous.urdf").joints
    assert (slide.type, slide.lower, slide.upper) == ("prismatic", 0.0, 0.8)
    assert (spin.type, spin.lower, spin.upper, spin.axis) == ("continuous", None, None, (1, 0, 0))
    assert (bend.lower, bend.upper) == (-1.5, 1.5)
    assert (flange.type, flange.axis, flange.origin.rpy) == ("fixed", (1, 0, 0), (0, 0, 1.5707963))


def test_axes_are_normalised() -> None:
    j1, j2, j3, _ = parse_urdf(GOOD / "tilted_axes.urdf").joints
    assert j1.axis == pytest.approx((math.sqrt(0.5), math.sqrt(0.5), 0.0))
    norm = math.sqrt(0.2**2 + 0.5**2 + 0.9**2)
    assert j2.axis == pytest.approx((0.2 / norm, -0.5 / norm, 0.9 / norm))
    assert j3.axis == (0.0, 0.0, -1.0)


def test_mimic_fixture() -> None:
    model = parse_urdf(GOOD / "mimic.urdf")
    assert [item.name for item in model.joints] == ["shoulder", "finger_a", "finger_b"]
    assert model.joints[2].mimic == Mimic("finger_a", -0.5, 0.1)
    assert model.joints[1].mimic is None


def test_two_branches_depth_first_in_file_order() -> None:
    model = parse_urdf(GOOD / "two_branches.urdf")
    names = ["trunk_yaw", "left_pitch", "left_tool", "right_pitch", "right_roll", "right_tool"]
    assert [item.name for item in model.joints] == names
    assert model.links == ("base", "trunk", "left1", "left_tip", "right1", "right2", "right_tip")


def test_order_does_not_depend_on_file_order() -> None:
    text = robot(joint("j2", "fixed", "b", "c"), joint("j1", "continuous", "a", "b"), links="c b a")
    model = parse_urdf(text)
    assert model.links == ("a", "b", "c")
    assert [item.name for item in model.joints] == ["j1", "j2"]


# --------------------------------------------------------------------------- root=


def test_root_picks_a_subtree() -> None:
    model = parse_urdf(GOOD / "two_branches.urdf", root="right1")
    assert model.root == "right1"
    assert model.links == ("right1", "right2", "right_tip")
    assert [item.name for item in model.joints] == ["right_roll", "right_tool"]


def test_root_chooses_among_several_roots() -> None:
    model = parse_urdf(DATA / "bad_urdf" / "two_roots.urdf", root="c")
    assert (model.root, model.links, [item.name for item in model.joints]) == (
        "c",
        ("c", "d"),
        ["j2"],
    )


def test_root_leaf_and_unknown() -> None:
    assert parse_urdf(GOOD / "mimic.urdf", root="finger_b").joints == ()
    with pytest.raises(URDFError, match="root link 'nope'"):
        parse_urdf(GOOD / "mimic.urdf", root="nope")


def test_root_cutting_off_a_mimicked_joint() -> None:
    with pytest.raises(URDFError, match="'finger_b' mimics 'finger_a'.*outside"):
        parse_urdf(
            robot(
                joint("finger_a", "revolute", "a", "b"),
                joint("finger_b", "revolute", "b", "c", '<mimic joint="finger_a"/>'),
            ),
            root="b",
        )


# --------------------------------------------------------------------------- mimic rules


def test_mimic_defaults_and_chain_resolution() -> None:
    text = robot(
        joint("ja", "revolute", "a", "b"),
        joint("jb", "continuous", "b", "c", '<mimic joint="ja" multiplier="2" offset="1"/>'),
        joint("jc", "prismatic", "c", "d", '<mimic joint="jb" multiplier="3" offset="-0.5"/>'),
        joint("jd", "revolute", "d", "e", '<mimic joint="ja"/>'),
        links="a b c d e",
    )
    with pytest.warns(URDFWarning, match="'jc' mimics 'ja': its own limits"):
        ja, jb, jc, jd = parse_urdf(text).joints
    assert ja.mimic is None
    assert jb.mimic == Mimic("ja", 2.0, 1.0)
    # q_c = 3 * q_b - 0.5 = 3 * (2 * q_a + 1) - 0.5
    assert jc.mimic == Mimic("ja", 6.0, 2.5)
    assert jd.mimic == Mimic("ja", 1.0, 0.0)


@pytest.mark.parametrize(
    ("joints", "words"),
    [
        ((joint("ja", "revolute", "a", "b", '<mimic joint="ja"/>'),), "cycle.*'ja' -> 'ja'"),
        (
            (
                joint("ja", "revolute", "a", "b", '<mimic joint="jb"/>'),
                joint("jb", "revolute", "b", "c", '<mimic joint="ja"/>'),
            ),
            "cycle",
        ),
        (
            (
                joint("ja", "fixed", "a", "b"),
                joint("jb", "revolute", "b", "c", '<mimic joint="ja"/>'),
            ),
            "'jb' mimics 'ja', which is a fixed joint",
        ),
        ((joint("ja", "revolute", "a", "b", "<mimic/>"),), "'ja'.*<mimic>.*'joint'"),
        (
            (
                joint("ja", "revolute", "a", "b"),
                joint("jb", "revolute", "b", "c", '<mimic joint="ja" multiplier="x"/>'),
            ),
            "'jb'.*multiplier",
        ),
    ],
)
def test_bad_mimic(joints: tuple[str, ...], words: str) -> None:
    with pytest.raises(URDFError, match=words):
        parse_urdf(robot(*joints), root="a")


# --------------------------------------------------------------------------- tolerated content


def test_unknown_tags_and_attributes_are_ignored() -> None:
    body = (
        '<axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/>'
        '<safety_controller k_velocity="10"/><dynamics damping="0.3"/><calibration rising="0"/>'
    )
    text = (
        '<?xml version="1.0"?><!-- a comment --><robot name="r" xmlns:xacro="http://x">'
        '<material name="grey"/><link name="a"><visual><geometry><mesh filename="m.dae"/>'
        '</geometry></visual><inertial><mass value="1"/></inertial></link><link name="b"/>'
        '<joint name="j" type="revolute" extra="1"><parent link="a"/><child link="b"/>'
        f"{body}</joint>"
        '<transmission name="t"><joint name="j"><hardwareInterface>x</hardwareInterface></joint>'
        '</transmission><gazebo reference="b"><joint name="ghost"/></gazebo><whatever/></robot>'
    )
    (only,) = parse_urdf(text).joints
    assert only == Joint("j", "revolute", "a", "b", axis=(0.0, 0.0, 1.0), lower=-1.0, upper=1.0)


def test_continuous_limit_tag_without_bounds() -> None:
    text = robot(
        joint("j", "continuous", "a", "b", '<limit effort="5" velocity="2"/>'), links="a b"
    )
    (only,) = parse_urdf(text).joints
    assert (only.lower, only.upper) == (None, None)


def test_fixed_joint_ignores_axis_limit_and_mimic() -> None:
    body = '<axis xyz="0 0 0"/><limit lower="2" upper="1"/><mimic joint="nope"/>'
    (only,) = parse_urdf(robot(joint("j", "fixed", "a", "b", body), links="a b")).joints
    assert only == Joint("j", "fixed", "a", "b")


def test_single_link_and_equal_limits() -> None:
    assert parse_urdf('<robot name="r"><link name="a"/></robot>') == URDFModel("r", "a", ("a",), ())
    text = robot(
        joint("j", "revolute", "a", "b", '<limit lower="0.5" upper="+.5e0"/>'), links="a b"
    )
    assert (parse_urdf(text).joints[0].lower, parse_urdf(text).joints[0].upper) == (0.5, 0.5)


def test_long_chain_is_not_recursive() -> None:
    count = 5000
    links = " ".join(f"l{index}" for index in range(count + 1))
    joints = [
        joint(f"j{index}", "continuous", f"l{index}", f"l{index + 1}") for index in range(count)
    ]
    model = parse_urdf(robot(*reversed(joints), links=links))
    assert model.links[-1] == f"l{count}"
    assert_topological(model)


# --------------------------------------------------------------------------- third-party robots


def test_panda(shared_urdf: Path) -> None:
    model = parse_urdf(shared_urdf / "panda.urdf")
    joints = {item.name: item for item in model.joints}
    assert (model.name, model.root, len(model.joints)) == ("panda", "panda_link0", 12)
    finger1, finger2 = joints["panda_finger_joint1"], joints["panda_finger_joint2"]
    assert (finger1.type, finger1.lower, finger1.upper, finger1.mimic) == (
        "prismatic",
        0,
        0.04,
        None,
    )
    assert finger2.mimic == Mimic("panda_finger_joint1", 1.0, 0.0)
    assert finger2.axis == (0.0, -1.0, 0.0)
    assert (joints["panda_joint4"].lower, joints["panda_joint4"].upper) == (-3.0718, -0.0698)


def test_ur5(shared_urdf: Path) -> None:
    model = parse_urdf(shared_urdf / "ur5_robot.urdf")
    assert (model.name, model.root, len(model.links), len(model.joints)) == ("ur5", "world", 11, 10)
    revolute = [item.name for item in model.joints if item.type == "revolute"]
    assert revolute == REFERENCE["ur5_robot"]["joints"]
    assert model.joints[0].name == "world_joint"
    sub = parse_urdf(shared_urdf / "ur5_robot.urdf", root="base_link")
    assert sub.joints == model.joints[1:]


def test_messages_stay_short_whatever_the_names() -> None:
    name = "x" * 100_000
    for text in (robot(links=f"{name} {name}"), robot(joint(name, "fixed", "a", "ghost"))):
        with pytest.raises(URDFError) as info:
            parse_urdf(text)
        assert len(str(info.value)) < 300 and "\n" not in str(info.value)


def test_a_mimic_joints_own_limits_beyond_its_drivers_range_are_noted():
    """A mimic joint's value is its driver's map, bounded by the driver's limits only: a
    ``<limit>`` of its own that the driver's range leaves is named in a URDFWarning; one that
    holds the range is not."""
    import warnings

    def urdf(follow_limit: str, multiplier: str = "1") -> str:
        return (
            '<robot name="grip"><link name="b"/><link name="f1"/><link name="f2"/>'
            '<joint name="drive" type="revolute"><parent link="b"/><child link="f1"/>'
            '<limit lower="0" upper="1"/></joint>'
            '<joint name="follow" type="revolute"><parent link="f1"/><child link="f2"/>'
            f'{follow_limit}<mimic joint="drive" multiplier="{multiplier}"/></joint></robot>'
        )

    with pytest.warns(URDFWarning, match=r"'follow' mimics 'drive': its own limits \[0, 0.2\] "
                      r"are not enforced, the driver's limits give it \[0, 1\]"):  # fmt: skip
        parse_urdf(urdf('<limit lower="0" upper="0.2"/>'))
    with pytest.warns(URDFWarning, match=r"give it \[-1, -0\]|give it \[-1, 0\]"):
        parse_urdf(urdf('<limit lower="0" upper="1"/>', multiplier="-1"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parse_urdf(urdf('<limit lower="-1" upper="0"/>', multiplier="-1"))
        parse_urdf(urdf('<limit lower="0" upper="1.5"/>'))


_GRIP = (
    '<robot name="grip"><link name="b"/><link name="f1"/><link name="f2"/>'
    '<joint name="drive" type="revolute"><parent link="b"/><child link="f1"/>'
    '<limit lower="0" upper="1"/></joint>'
    '<joint name="follow" type="revolute"><parent link="f1"/><child link="f2"/>'
    '<limit lower="0" upper="0.2"/><mimic joint="drive"/></joint></robot>'
)  # follow's own limits [0, 0.2] are left by drive's range [0, 1]: a URDFWarning


@pytest.mark.parametrize("entry", ["parse_urdf", "Robot.from_urdf", "link=", "load_robot"])
def test_a_urdf_warning_points_at_the_users_line(entry, tmp_path) -> None:
    """Each public way in warns at the caller's line (this file), not at torchik's own call."""
    import warnings

    import torchik

    path = tmp_path / "grip.urdf"
    path.write_text(_GRIP)
    call = {
        "parse_urdf": lambda: parse_urdf(_GRIP),
        "Robot.from_urdf": lambda: torchik.Robot.from_urdf(_GRIP),
        "link=": lambda: torchik.Robot.from_urdf(path, link="f2"),
        "load_robot": lambda: torchik.load_robot(path),
    }[entry]
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        call()
    assert [w.category for w in said] == [URDFWarning], [str(w.message) for w in said]
    assert said[0].filename == __file__

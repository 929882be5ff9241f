"""experiments.mjcf_load and benchmarks/mjcf_load.py: the MJCF corpus check against MuJoCo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.mjcf_load import (
    STATUSES,
    check_file,
    corpus_from,
    installed_corpus,
    mjcf_tables,
    run_corpus,
)

mujoco = pytest.importorskip("mujoco", reason="the optional mjcf extra (mujoco) is not installed")

ROOT = Path(__file__).resolve().parents[2]
ARM = """<mujoco><worldbody><body name="arm" pos="0 0 0.5">
  <joint name="shoulder" axis="0 0 1" range="-1.5 1.5"/><geom size="0.04"/>
  <body name="forearm" pos="0.4 0 0"><joint name="elbow" axis="0 1 0" range="-2 2"/>
  <geom size="0.03"/><site name="tip" pos="0.3 0 0"/></body></body>{extra}</worldbody></mujoco>"""
FREE_OBJECT = """<body name="obj" pos="1 0 0.1" quat="0.924 0 0 0.383"><freejoint name="obj_free"/>
  <geom size="0.05"/></body>"""
FREE_ROOT = """<mujoco><worldbody><site name="marker" pos="0 1 0"/><body name="torso" pos="0 0 1">
  <freejoint name="root"/><geom size="0.2"/><body name="leg" pos="0.2 0 -0.2">
  <joint name="hip" axis="0 1 0" range="-1 1"/><geom size="0.05"/></body></body></worldbody>
  </mujoco>"""
BALL = """<mujoco><worldbody><body name="b"><joint name="ball" type="ball"/><geom size="0.1"/>
  </body></worldbody></mujoco>"""


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    scenes = {
        "arms/arm.xml": ARM.format(extra=""),
        "arms/arm_copy.xml": ARM.format(extra=""),  # the same content: counted once
        "arms/arm_and_object.xml": ARM.format(extra=FREE_OBJECT),
        "robots/free_root.xml": FREE_ROOT,
        "robots/ball.xml": BALL,
        "robots/broken.xml": "<mujoco><worldbody><body><joint type='no'/></body></worldbody>",
        "robots/not_mjcf.xml": "<robot name='r'/>",
    }
    for name, text in scenes.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_corpus_from_a_folder_and_a_json_list(corpus):
    entries = corpus_from(corpus)
    assert [(e["package"], e["relpath"]) for e in entries] == [
        ("arms", "arms/arm.xml"),
        ("arms", "arms/arm_and_object.xml"),
        ("robots", "robots/ball.xml"),
        ("robots", "robots/broken.xml"),
        ("robots", "robots/free_root.xml"),
    ]
    listed = corpus / "corpus.json"
    listed.write_text(json.dumps([{"package": "p", "path": entries[0]["path"]}]))
    path = entries[0]["path"]
    assert corpus_from(listed) == [{"package": "p", "path": path, "relpath": path}]
    with pytest.raises(FileNotFoundError, match="no corpus at"):
        corpus_from(corpus / "missing")
    assert isinstance(installed_corpus(), list)


def test_check_file_classifies_each_free_joint_option(corpus):
    exact = check_file(str(corpus / "arms/arm.xml"))
    assert exact["floating"]["status"] == exact["fixed"]["status"] == "exact"
    assert exact["floating"]["sites"] == 1 and exact["floating"]["position"] < 1e-12
    beside = check_file(str(corpus / "arms/arm_and_object.xml"))  # a free body beside the arm
    assert beside["floating"]["status"] == beside["fixed"]["status"] == "exact"
    assert beside["floating"]["jacobian"] < 1e-12
    assert beside["floating"]["scene_bodies"] == 2 and beside["floating"]["body_error"] < 1e-12
    assert beside["floating"]["scene_ik"] == [3, 3]  # the arm's (the object has no joint)
    assert "scene_bodies" not in exact["floating"] and "scene_bodies" not in beside["fixed"]
    ball = check_file(str(corpus / "robots/ball.xml"))
    assert ball["floating"]["status"] == "refused" and "ball joint" in ball["floating"]["message"]
    free_root = check_file(str(corpus / "robots/free_root.xml"))  # the Jacobian's base columns
    assert free_root["floating"]["status"] == "exact" and free_root["floating"]["jacobian"] < 1e-12
    assert check_file(str(corpus / "robots/broken.xml"))["status"] == "mujoco_error"


def test_run_corpus_and_tables(corpus):
    lines: list[str] = []
    results = run_corpus(corpus_from(corpus), timeout=120, log=lines.append)
    assert len(lines) == 5 and "exact / exact" in lines[1] and "refused / refused" in lines[2]
    tables = mjcf_tables(results)
    total = tables[0].row("total")
    assert (total["files"], total["skipped"], total["exact"], total["refused"]) == (5, 1, 3, 1)
    assert sum(total[s] for s in STATUSES) == total["checked"]
    assert (total["scenes"], total["scene_bodies"]) == (1, 2)  # the arm beside an object
    assert total["scene_ik"] == "3 / 3"
    assert tables[1].row("total")["exact"] == 3  # free_joint="fixed"
    assert tables[2].notes == ["none"]  # nothing wrong, crashed or timed out
    assert "ball joint" in tables[3].rows[0]["message"] and str(corpus) not in tables[3].markdown()
    timed_out = run_corpus(corpus_from(corpus)[:1], timeout=1e-3)
    assert timed_out[0]["floating"]["status"] == "timeout"


def _script(*args: str, pythonpath: str = "") -> subprocess.CompletedProcess:
    paths = [pythonpath, str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), "BENCH_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "benchmarks/mjcf_load.py", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_the_script_writes_the_tables_or_skips_in_one_line(corpus, tmp_path):
    done = _script("--corpus", str(corpus), "--out", str(tmp_path / "out" / "mjcf"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| total | 5 | 1 | 4 | 3 | 3 | 0 | 1 | 0 | 0 | " in done.stdout
    assert (tmp_path / "out" / "mjcf.json").is_file()
    missing = _script("--corpus", str(tmp_path / "nowhere"))
    assert (
        missing.returncode == 0
        and missing.stdout == f"skipped: no corpus at {tmp_path / 'nowhere'}\n"
    )
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "mujoco.py").write_text("raise ImportError('no mujoco here')\n")
    without = _script(pythonpath=str(fake))
    assert without.returncode == 0 and without.stdout.startswith("skipped: the mujoco package")

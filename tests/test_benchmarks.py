"""Every benchmark script still starts: ``python benchmarks/<name>.py --help`` prints its usage
(and the loop behind ``make fuzz`` runs on a few examples).

Why this exists: the scripts in ``benchmarks/`` run for minutes to hours and are not run in CI,
so an import or argument-parser error in one (a helper renamed in ``benchmarks/common.py`` or in
the library, say) would go unseen until someone reruns it. ``--help`` imports the script with
its helpers and builds its parser, and trains nothing: about two seconds per script (the torch
import), one subprocess each, so ``pytest -n`` spreads them. Modules without a ``main`` and an
argument parser (``common.py``, shared anchors) are helpers, not scripts, and are left out.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(
    path
    for path in (ROOT / "benchmarks").glob("*.py")
    if "def main(" in (text := path.read_text()) and "argparse" in text
)


def test_the_scripts_are_found():
    names = {path.stem for path in SCRIPTS}
    assert {"run", "fuzz_urdf", "urdf_chain_load", "urdf_load"} <= names
    assert "common" not in names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_benchmark_script_prints_its_usage(script: Path) -> None:
    pythonpath = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "BENCH_THREADS": "1"}
    env.pop("TORCHIK_PROG", None)  # run.py would print `torchik bench` as its name
    done = subprocess.run(
        [sys.executable, str(script.relative_to(ROOT)), "--help"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage: "), done.stdout[:500]


@pytest.mark.filterwarnings("ignore::torchik.description.URDFWarning")  # mutated limits warn
def test_fuzz_urdf_tallies_a_few_examples() -> None:
    """The loop behind ``make fuzz`` (``benchmarks/fuzz_urdf.py``) on a handful of examples."""
    from tests.fuzz.urdf_campaign import fuzz
    from tests.fuzz.urdf_strategies import ACCEPTABLE

    tally = fuzz(12, seed=15)
    assert 0 < tally.counts.total() <= 12
    assert set(tally.counts) <= set(ACCEPTABLE), tally.details
    assert sum(tally.kinds.values()) == tally.counts["URDFError"]
    assert 0 <= tally.slowest < 5


def test_iknet_benchmark_runs_a_tiny_protocol(tmp_path: Path) -> None:
    """``benchmarks/iknet.py`` past its parser (it built its settings from arguments it does
    not have, and failed at once): one tiny family on the Digit arm writes its table."""
    pythonpath = os.pathsep.join(filter(None, [str(ROOT / "src"), str(ROOT)]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "BENCH_THREADS": "1"}
    args = ["--robots", "digit_arm", "--steps", "digit_arm=5", "--train-size", "digit_arm=200",
            "--samples", "5", "--train-threads", "1", "--no-iknet", "--families", "mdn",
            "--work", str(tmp_path / "work"), "--out", str(tmp_path)]  # fmt: skip
    done = subprocess.run([sys.executable, "benchmarks/iknet.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| digit_arm" in (tmp_path / "iknet.md").read_text()


def test_wholebody_benchmark_says_a_missing_anchor_is_missing(tmp_path: Path) -> None:
    """``benchmarks/wholebody.py`` on a few targets: its stamp is complete (load at both ends,
    the duration) and an anchor that does not import is ``missing: …``, not ``failed: …``
    (the README's rule for every script); an installed one runs."""
    import json
    from importlib.util import find_spec

    pythonpath = os.pathsep.join(filter(None, [str(ROOT / "src"), str(ROOT)]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "BENCH_THREADS": "1"}
    args = ["--targets", "4", "--anchor-targets", "1", "--anchor-iters", "2", "--starts", "1",
            "--out", str(tmp_path)]  # fmt: skip
    done = subprocess.run([sys.executable, "benchmarks/wholebody.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "wholebody.json").read_text())
    assert {"load_average_at_end", "duration_s", "command"} <= set(result["stamp"])
    rows = {row["method"]: row["status"] for row in result["tables"][0]["rows"]}
    for anchor in ("placo", "mink"):
        expected = "ok" if find_spec(anchor) is not None else "missing: "
        assert rows[anchor].startswith(expected), rows[anchor]
    assert "| notes | status |" in (tmp_path / "wholebody.md").read_text()


def test_seq2seq_stamp_covers_the_run(tmp_path: Path) -> None:
    """``benchmarks/seq2seq.py``'s stamp is taken before it trains (its date, load at start and
    duration_s covered only the writing of the file: 1.2 s of a 40 s run) and honours
    ``--wait-idle`` (``run.py all --wait-idle`` forwards it to every script)."""
    import json
    import re

    pythonpath = os.pathsep.join(filter(None, [str(ROOT / "src"), str(ROOT)]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "BENCH_THREADS": "1"}
    args = ["--iknet-steps", "40", "--iknet-train-size", "2000", "--train-sequences", "4",
            "--test-sequences", "2", "--length", "10", "--epochs", "1", "--seeds", "0",
            "--variants", "raw", "--wait-idle", "0.1", "--out", str(tmp_path)]  # fmt: skip
    done = subprocess.run([sys.executable, "benchmarks/seq2seq.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "seq2seq.json").read_text())
    trained = re.search(r"(\d+) s on 1 CPU thread", " ".join(result["intro"]))
    assert trained, result["intro"]
    assert result["stamp"]["duration_s"] >= int(trained.group(1)), result["stamp"]
    assert "waited_for_quiet_s" in result["stamp"]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_a_script_that_takes_wait_idle_waits(script: Path) -> None:
    """``--wait-idle`` comes with ``common.add_common_args`` and ``run.py`` forwards it to every
    script: a script that takes it waits (``wait_for_quiet``) and stamps the wait. Six scripts
    took it and ignored it."""
    text = script.read_text()
    if "add_common_args(parser)" in text:
        assert "wait_for_quiet(args.wait_idle)" in text, f"{script.name} ignores --wait-idle"


def test_gpu_benchmark_has_its_anchor_row(tmp_path: Path) -> None:
    """The GPU protocol asks pytorch_kinematics in the same run: ``benchmarks/gpu.py`` writes
    its rows, or one ``missing: …`` row where it does not import (it had neither)."""
    import json
    from importlib.util import find_spec

    pythonpath = os.pathsep.join(filter(None, [str(ROOT / "src"), str(ROOT)]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "BENCH_THREADS": "1"}
    args = ["--quick", "--only", "pytorch_kinematics", "--seconds", "0.01", "--out", str(tmp_path)]
    done = subprocess.run([sys.executable, "benchmarks/gpu.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads((tmp_path / "gpu.json").read_text())["tables"][0]["rows"]
    statuses = {row["status"] for row in rows if row["path"] == "pytorch_kinematics"}
    expected = {"ok"} if find_spec("pytorch_kinematics") else {"missing: "}
    assert {status[: len(next(iter(expected)))] for status in statuses} == expected, statuses


RESULTS = sorted((ROOT / "benchmarks" / "results").glob("*.json"))


@pytest.mark.parametrize("result", RESULTS, ids=lambda path: path.stem)
def test_committed_result_is_stamped_and_every_row_has_a_status(result: Path) -> None:
    """The protocols' promise for a committed result (``shared/BENCHMARKS.md``): the machine,
    the date and the exact command in its stamp, the versions of torch, and a status on every
    row of its tables (a missing anchor is a row saying so, never left out)."""
    import json

    data = json.loads(result.read_text())
    stamp = data["stamp"]
    assert {"date", "command", "torch"} <= set(stamp), sorted(stamp)
    assert stamp.get("cpu") or stamp.get("gpu"), "no machine in the stamp"
    for table in data.get("tables", []):
        rows = table.get("rows", []) if isinstance(table, dict) else []
        assert all("status" in row for row in rows), table.get("title")

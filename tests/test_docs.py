"""Every code block of the documentation site (docs/**/*.md) runs as written.

Each ```python block runs on its own, in a fresh namespace and a temporary working directory, as
a reader would paste it. Each ```sh block runs line by line (``torchik ...`` as ``python -m
torchik ...``, in one temporary directory per block). A block meant not to run is preceded by a
``<!-- no-run -->`` line; there are few, and the test checks that they stay few.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
BLOCK = re.compile(r"^(<!-- no-run -->\n)?```(\w+)[^\n]*\n(.*?)^```", re.S | re.M)
NO_RUN_AT_MOST = 3
OPTIONAL = {"mujoco": "mjcf", "optuna": "tune", "viser": "view", "zuko": "flows", "ray": "ray"}
"""Optional packages a block may need, and their extra: where one is not installed (a GPU
machine's image, say) and the block fails naming it, the block is skipped, saying so."""


def _skip_if_optional_missing(message: str) -> None:
    """Skip the test, naming the package, if ``message`` names a missing optional package."""
    for package, extra in OPTIONAL.items():
        if package in message and importlib.util.find_spec(package) is None:
            pytest.skip(f"needs {package}, not installed here (pip install 'torchik[{extra}]')")


def _blocks() -> list[tuple[str, str, str, bool]]:
    """(id, language, code, runs) of every fenced block with a language, in page order."""
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        counts: dict[str, int] = {}
        for match in BLOCK.finditer(page.read_text()):
            no_run, lang, code = match.group(1) is not None, match.group(2), match.group(3)
            counts[lang] = counts.get(lang, 0) + 1
            name = f"{page.relative_to(DOCS)}:{lang}{counts[lang]}"
            found.append((name, lang, code, not no_run))
    return found


BLOCKS = _blocks()
RUN = [b for b in BLOCKS if b[3]]


def test_docs_have_blocks_and_few_are_exempt():
    assert sum(lang == "python" for _, lang, _, runs in RUN) >= 15
    assert len(BLOCKS) - len(RUN) <= NO_RUN_AT_MOST
    assert {lang for _, lang, _, _ in RUN} <= {"python", "sh"}, "a block this test cannot run"


@pytest.mark.parametrize(("lang", "code"), [b[1:3] for b in RUN], ids=[b[0] for b in RUN])
def test_docs_block_runs(lang, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if lang == "python":
        try:
            exec(compile(code, "docs block", "exec"), {"__name__": "__docs__"})
        except ImportError as error:
            _skip_if_optional_missing(str(error))
            raise
        return
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    for line in code.splitlines():
        words = shlex.split(line, comments=True)
        assert words[:1] == ["torchik"], f"only torchik commands run here: {line!r}"
        command = [sys.executable, "-m", "torchik", *words[1:]]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
        if done.returncode != 0:
            _skip_if_optional_missing(done.stderr)
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"


def test_every_benchmark_result_has_a_reproduction_page():
    """A new ``benchmarks/results/NAME.md`` needs ``docs/reproductions/NAME.md`` (which includes
    it) and a line in mkdocs.yml's nav; the build checks that included files exist."""
    nav = (REPO / "mkdocs.yml").read_text()
    for result in sorted((REPO / "benchmarks" / "results").glob("*.md")):
        page = DOCS / "reproductions" / result.name
        assert page.exists(), f"no docs page for {result.name}"
        assert f'--8<-- "benchmarks/results/{result.name}"' in page.read_text()
        assert f"reproductions/{result.name}" in nav, f"{result.name} is not in the nav"

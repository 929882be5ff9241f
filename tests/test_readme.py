"""The README's Python snippets run as written (with a bundled URDF for the user's file)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_readme_starts_with_the_two_commands():
    lines = (REPO / "README.md").read_text().splitlines()
    assert lines[:4] == ["```", "make demo", "make test", "```"]


def test_readme_python_snippets_run():
    """Each snippet on its own, as a reader would paste it: its imports are its own."""
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 4
    user_file = str(REPO / "tests" / "data" / "urdf" / "two_branches.urdf")
    for i, block in enumerate(blocks):
        code = block.replace('"my_robot.urdf"', repr(user_file))
        exec(compile(code, f"README.md, snippet {i + 1}", "exec"), {})


def test_readme_lists_every_bundled_robot():
    from torchik import list_robots

    text = (REPO / "README.md").read_text()
    (paragraph,) = [p for p in text.split("\n\n") if p.startswith("Bundled robots:")]
    missing = [name for name in list_robots() if f"`{name}`" not in paragraph]
    assert not missing, f"the README's robot list lacks {missing}"

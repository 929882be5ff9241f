"""MkDocs hook: the figures of benchmarks/results/ are served next to the reproduction pages.

The reproduction pages include the committed tables (``benchmarks/results/*.md``) with
``pymdownx.snippets``; their PNG figures are added to the site here, under ``reproductions/``,
so that nothing is copied into ``docs/``.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


def on_files(files, config):
    for png in sorted(RESULTS.glob("*.png")):
        files.append(File.generated(config, f"reproductions/{png.name}", abs_src_path=str(png)))
    return files

"""Names every docstring example may use without importing them (``pytest --doctest-modules``),
and the modules left out of doctest collection where an optional package they import at the top
is not installed (a GPU machine's image, say): the header of the run names them."""

import importlib.util

import pytest
import torch

NEEDS = {  # module (doctest-collected) -> the optional package it imports at the top
    "src/torchik/tune/journal.py": "optuna",
    "tests/fuzz/journals.py": "optuna",
}
MISSING = {path: pkg for path, pkg in NEEDS.items() if importlib.util.find_spec(pkg) is None}
collect_ignore = list(MISSING)


def pytest_report_header(config):
    if MISSING:
        return "not collected, optional package missing: " + ", ".join(
            f"{path} (needs {pkg})" for path, pkg in MISSING.items()
        )
    return None


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace):
    import torchik

    doctest_namespace.update(torch=torch, torchik=torchik)

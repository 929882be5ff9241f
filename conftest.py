"""Names every docstring example may use without importing them (``pytest --doctest-modules``)."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace):
    import torchik

    doctest_namespace.update(torch=torch, torchik=torchik)

"""The package's layout: subpackages by concept, one home per name, no import circles.

Every module under ``src/torchik`` is parsed with :mod:`ast` (nothing is imported) and each
``import`` / ``from ... import`` becomes an arrow to the torchik module it names, wherever it
stands: at module level, inside a function (a lazy import), in a ``try``, or under
``if TYPE_CHECKING:`` (a type-only import is an arrow too). The parents that Python imports on
the way to a module (``import torchik.models.base`` runs ``torchik/__init__.py`` and
``torchik/models/__init__.py`` first) are left out: every module would otherwise sit in a circle
with ``torchik/__init__.py``. ``from torchik import __version__`` names ``torchik`` itself, so it
is an arrow to ``torchik/__init__.py``.

``from package import name`` is an arrow to ``package.name`` where that is a module, else to
``package``. A package's ``_SUBMODULES`` (the names its PEP 562 ``__getattr__`` imports with
:func:`importlib.import_module`) are arrows from the package too.

The rules checked: no circle between modules, nor between subpackages; a subpackage's
``__init__`` only imports and names its public API (``__all__``); a module's ``__all__`` names
only what the module defines (no re-export shims); no private name is imported from another
subpackage; the top of ``torchik/`` holds only the package's entry points and two leaf
helpers; functions stay short.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((SRC / "torchik").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(node: ast.AST):
    """Every import statement under ``node``: function bodies and ``TYPE_CHECKING`` included."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        yield from _imports(child)


def _named(node: ast.Import | ast.ImportFrom, package: str, modules: dict) -> list[str]:
    """The dotted names that an import statement loads (not yet mapped to modules)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # relative: ``from . import x`` in package ``a.b`` is ``a.b.x``
        parts = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*parts, base] if base else parts)
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]


def import_graph() -> dict[str, dict[str, int]]:
    """``{module: {imported torchik module: line of the first such import}}``."""
    modules = _modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        arrows = graph.setdefault(name, {})
        tree = ast.parse(path.read_text(), str(path))
        for node in _imports(tree):
            for target in _named(node, package, modules):
                while target and target not in modules:  # ``import a.b.func`` -> ``a.b``
                    target = target.rpartition(".")[0]
                if target and target != name:
                    arrows.setdefault(target, node.lineno)
        for lazy, line in _lazy_submodules(tree):
            if f"{name}.{lazy}" in modules:
                arrows.setdefault(f"{name}.{lazy}", line)
    return graph


def _lazy_submodules(tree: ast.Module) -> list[tuple[str, int]]:
    """The names of a module-level ``_SUBMODULES = (...)``, each with its line."""
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "_SUBMODULES" for t in targets):
            return [(name, node.lineno) for name in ast.literal_eval(node.value)]
    return []


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                found.append(sorted([v, *component]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_imports_inside_functions_and_type_checking_count():
    code = """
import os
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    import typed
else:
    import kept_else
def f():
    from torchik import lazy
    class C:
        def g(self):
            import deep
"""
    found = [n.names[0].name for n in _imports(ast.parse(code))]
    assert found == ["os", "TYPE_CHECKING", "typed", "kept_else", "lazy", "deep"]


def test_the_graph_is_read():
    graph = import_graph()
    assert "torchik.models.base" in graph["torchik.models.mlp"]  # module level
    assert "torchik.robot.robot" in graph["torchik.learn.data"]  # lazy, inside a function
    assert "torchik.models.base" in graph["torchik.models.pretrained.catalog"]  # type-only


def test_the_lazy_submodules_are_arrows():
    assert {"torchik.models", "torchik.train"} <= set(import_graph()["torchik"])


def test_cycles_finds_a_circle():
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycles():
    graph = import_graph()
    found = cycles(graph)
    ties = [
        f"{a} -> {b} (line {graph[a][b]})" for c in found for a in c for b in graph[a] if b in c
    ]
    if found:
        pytest.fail(f"import circles {found}:\n" + "\n".join(ties))


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_torchik_does_not_import_the_learned_parts():
    code = "import sys, torchik; print(sorted(m for m in sys.modules if m.startswith('torchik')))"
    loaded = _run(code)
    for name in ("models", "train", "tune", "seq2seq", "viewer", "plot", "cli"):
        assert f"'torchik.{name}" not in loaded


def test_import_torchik_reaches_the_learned_parts():
    code = (
        "import torchik; torchik.models.load; torchik.train.train; "
        "print('models' in dir(torchik), 'train' in dir(torchik))"
    )
    assert _run(code).split() == ["True", "True"]


def test_unknown_attributes_are_attribute_errors():
    import torchik

    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        torchik.no_such_thing  # noqa: B018
    assert not hasattr(torchik, "no_such_thing")


# ---------------------------------------------------------------------------- the layout
def _package(module: str) -> str:
    """The subpackage a module belongs to (``torchik.ik.wholebody.solve`` -> ``torchik.ik``);
    a top-level module is its own."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_no_circles_between_subpackages():
    graph: dict[str, dict[str, int]] = {}
    for module, arrows in import_graph().items():
        if module == "torchik":  # the root names the public API of every subpackage
            continue
        own = graph.setdefault(_package(module), {})
        for target, line in arrows.items():
            if target != "torchik" and _package(target) != _package(module):
                own.setdefault(_package(target), line)
    for package in list(graph):
        for target in graph[package]:
            graph.setdefault(target, {})
    assert not cycles(graph), f"circles between subpackages: {cycles(graph)}"


TOP_LEVEL = {"__init__", "__main__", "_version", "checks", "files", "demo"}
"""The modules allowed at the top of ``torchik/``: the entry points and two leaf helpers (argument
checks, safe files) that every subpackage uses; everything else lives in a subpackage."""


def test_the_top_holds_only_entry_points_and_leaf_helpers():
    top = {path.stem for path in (SRC / "torchik").glob("*.py")}
    assert top <= TOP_LEVEL, f"modules at the top of torchik/: {sorted(top - TOP_LEVEL)}"
    for leaf in ("checks", "files"):
        assert not import_graph()[f"torchik.{leaf}"], f"torchik.{leaf} must import no torchik"


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return list(ast.literal_eval(node.value))
    return None


def test_every_package_init_only_imports_and_names_its_api():
    for name, path in _modules().items():
        if path.name != "__init__.py":
            continue
        tree = _tree(path)
        assert _all(tree) is not None, f"{name} has no __all__"
        if name in ("torchik",):  # the root also imports its lazy subpackages (PEP 562)
            continue
        defined = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
        assert not defined, f"{name}/__init__.py defines {[n.name for n in defined]}"


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            names.add(node.name)
        for target in getattr(node, "targets", [getattr(node, "target", None)]):
            if isinstance(target, ast.Name):
                names.add(target.id)
    return names


def test_a_module_names_only_what_it_defines():
    """No re-export shims: a name has one home, the module that defines it."""
    shims = []
    for name, path in _modules().items():
        tree = _tree(path)
        if path.name == "__init__.py" or _all(tree) is None:
            continue
        shims += [f"{name}.{n}" for n in set(_all(tree) or ()) - _defined(tree)]
    assert not shims, f"names listed in __all__ but defined elsewhere: {sorted(shims)}"


def test_no_private_name_is_imported_from_another_subpackage():
    found = []
    for name, path in _modules().items():
        for node in _imports(_tree(path)):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if not (module or "").startswith("torchik"):
                continue
            if _package(node.module) == _package(name):
                continue
            found += [f"{name} imports {node.module}.{a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]  # fmt: skip
    assert not found, "\n".join(found)


# ---------------------------------------------------------------------------- sizes
MAX_FUNCTION_LINES = 60


def code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from ``def`` to the function's last line (signature and nested functions included,
    decorators not) less the lines of its docstring: the measure of a function's length."""
    lines = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        if isinstance(first.value.value, str):
            lines -= first.end_lineno - first.lineno + 1
    return lines


def test_code_lines_leaves_out_the_docstring():
    tree = ast.parse('def f(x):\n    """Doc.\n\n    More.\n    """\n    y = x\n    return y\n')
    assert code_lines(tree.body[0]) == 3
    assert code_lines(ast.parse("@d\ndef g():\n    return 1\n").body[0]) == 2


def test_functions_are_at_most_60_lines_of_code():
    too_long = []
    for path in _modules().values():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if (n := code_lines(node)) > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}: {n}")
    assert not too_long, f"functions over {MAX_FUNCTION_LINES} lines of code: {too_long}"


MAX_SCRIPT_LINES = 320
"""A benchmark script parses flags, adds the anchors (other libraries) and writes results; the
protocol itself is in experiments/ (the largest script, ik.py, drives four anchor libraries)."""


def test_benchmark_scripts_stay_thin():
    scripts = sorted((SRC.parent / "benchmarks").glob("*.py"))
    long = {p.name: n for p in scripts if (n := len(p.read_text().splitlines())) > MAX_SCRIPT_LINES}
    assert scripts and not long, (
        f"benchmark scripts over {MAX_SCRIPT_LINES} lines: {long}; a protocol belongs in "
        "experiments/, a script only parses flags, adds anchors and writes results"
    )

"""The package's layering: no module of python/secmem imports, even inside a function, a
module that imports it back (issue 28). An import inside a function hides a circle from
Python, not from a reader; this test reads every import statement, wherever it is."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from _graph import cycles

ROOT = Path(__file__).resolve().parent.parent / "python"
PACKAGE = "secmem"


def _modules() -> dict:
    """Module name -> source path, for every .py file of the package."""
    out = {}
    for path in (ROOT / PACKAGE).rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_package(mods: dict, name: str) -> bool:
    return name in mods and mods[name].name == "__init__.py"


def _known(mods: dict, name: str) -> bool:
    # _core is the compiled extension: a module (a leaf) with no source here.
    return name in mods or name == f"{PACKAGE}._core"


def imports(mods: dict, name: str) -> set:
    """The package's modules that `name` imports anywhere in its source (top level, in
    functions, under `if`). `from X import y` counts as importing X.y when that is a module,
    else X itself. A module's implicit import of its parent packages is not counted."""
    tree = ast.parse(mods[name].read_text(), str(mods[name]))
    here = name if _is_package(mods, name) else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == PACKAGE or a.name.startswith(PACKAGE + "."):
                    out.add(a.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not (target == PACKAGE or target.startswith(PACKAGE + ".")):
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.add(sub if _known(mods, sub) else target)
    return {m for m in out if m in mods and m != name}


def test_no_import_circle_in_the_package():
    mods = _modules()
    graph = {m: imports(mods, m) for m in mods}
    found = cycles(graph)
    detail = "; ".join(" <-> ".join(c) + " (" + ", ".join(f"{a}->{b}" for a in c for b in sorted(graph[a]) if b in c) + ")" for c in found)
    assert not found, f"import circles: {detail}"


@pytest.mark.parametrize(
    "graph, circular",
    [
        ({"a": {"b"}, "b": {"a"}}, True),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, True),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, False),
    ],
)
def test_the_cycle_finder_finds_cycles(graph, circular):
    assert bool(cycles(graph)) == circular


def test_function_level_imports_are_seen(tmp_path, monkeypatch):
    pkg = tmp_path / PACKAGE
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "b.py").write_text("from .a import f\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    mods = _modules()
    assert imports(mods, f"{PACKAGE}.a") == {f"{PACKAGE}.b"}
    assert cycles({m: imports(mods, m) for m in mods}) == [[f"{PACKAGE}.a", f"{PACKAGE}.b"]]

"""Layering of the Rust crates: no module of a crate imports (directly or through others) a
module that imports it back, and no crate depends on itself through its dev-dependencies.

A module is a file (`foo.rs`, `foo/mod.rs`); an edge is a path into another module of the
same crate (`crate::foo::…`, `super::…`, or `child::…` from a parent). A parent's `mod child;`
declaration is not an edge: the registry of schemes lives above them (`registry.rs`), so a
module that declares its children never names them. Test-only modules and in-file test
modules are left out: tests may iterate the registry from anywhere.
"""
from __future__ import annotations

import re
from pathlib import Path

from _graph import cycles

ROOT = Path(__file__).resolve().parent.parent
CRATES = sorted(p.parent for p in (ROOT / "crates").glob("*/Cargo.toml"))


def _modules(src: Path) -> dict:
    out = {}
    for f in src.rglob("*.rs"):
        parts = list(f.relative_to(src).with_suffix("").parts)
        if parts and parts[0] in ("bin",):
            continue
        if parts[-1] == "mod":
            parts = parts[:-1]
        if parts in (["lib"], ["main"]):
            parts = []
        out[tuple(parts)] = f
    return out


def _code(f: Path) -> str:
    text = re.sub(r"//[^\n]*", "", f.read_text())
    cut = re.search(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text)
    return text[: cut.start()] if cut else text


def _test_modules(mods: dict) -> set:
    found = set()
    for mod, f in mods.items():
        for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", f.read_text()):
            found.add(tuple(mod) + (m.group(1),))
    return found


def _edges(mod: tuple, text: str, mods: dict) -> set:
    found = set()
    for m in re.finditer(r"\b(crate|super(?:::super)*)::([A-Za-z_][A-Za-z0-9_:]*|\{[^;]*?\})", text):
        head, rest = m.group(1), m.group(2)
        base = [] if head == "crate" else list(mod[: len(mod) - head.count("super")])
        items = [i.strip() for i in rest.strip("{}").split(",")] if rest.startswith("{") else [rest]
        for item in filter(None, items):
            path = base + [s for s in item.split("{")[0].split("::") if re.match(r"[A-Za-z_]", s)]
            for k in range(len(path), 0, -1):
                if tuple(path[:k]) in mods:
                    found.add(tuple(path[:k]))
                    break
    for m in re.finditer(r"(?<![:A-Za-z0-9_])([a-z_][a-z0-9_]*)::", text):
        child = tuple(mod) + (m.group(1),)
        if child in mods:
            found.add(child)
    found.discard(mod)
    return found


def module_cycles(crate: Path) -> list:
    mods = _modules(crate / "src")
    tests = _test_modules(mods)
    graph = {m: _edges(m, _code(f), mods) - tests for m, f in mods.items() if m not in tests}
    return [["::".join(m) or "lib" for m in c] for c in cycles(graph)]


def test_no_crate_has_an_import_circle():
    found = {c.name: module_cycles(c) for c in CRATES}
    assert all(not v for v in found.values()), {k: v for k, v in found.items() if v}


def test_the_checker_finds_a_circle(tmp_path):
    src = tmp_path / "c" / "src"
    (src / "a").mkdir(parents=True)
    (src / "lib.rs").write_text("pub mod a;\npub mod b;\n")
    (src / "a" / "mod.rs").write_text("pub mod x;\npub const N: usize = x::M;\n")
    (src / "a" / "x.rs").write_text("use super::N;\npub const M: usize = 1;\n")
    (src / "b.rs").write_text("use crate::a::N;\n")
    assert module_cycles(tmp_path / "c") == [["a", "a::x"]]
    (src / "a" / "mod.rs").write_text("pub mod x;\npub const N: usize = 2;\n")
    assert module_cycles(tmp_path / "c") == []


def _deps(toml: Path, section: str) -> set:
    text, out, on = toml.read_text(), set(), False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("["):
            on = s == f"[{section}]"
        elif on and s.startswith("secmem-"):
            out.add(re.split(r"[=.\s]", s, maxsplit=1)[0])
    return out


def test_no_dev_dependency_cycle_between_crates():
    name = {c: f"secmem-{c.name}" for c in CRATES}
    normal = {name[c]: _deps(c / "Cargo.toml", "dependencies") for c in CRATES}
    dev = {name[c]: _deps(c / "Cargo.toml", "dev-dependencies") for c in CRATES}

    def reaches(a: str, b: str, seen=None) -> bool:
        seen = seen or set()
        if a == b:
            return True
        seen.add(a)
        return any(reaches(d, b, seen) for d in normal.get(a, ()) if d not in seen)

    bad = [(c, d) for c, ds in dev.items() for d in ds if reaches(d, c)]
    assert not bad, f"dev-dependencies that depend back on their crate: {bad}"

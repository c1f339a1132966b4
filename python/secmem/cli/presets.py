"""``secmem presets``: the machine presets, or every parameter of one."""

from __future__ import annotations

import argparse
from typing import Any

from .. import _core


def add_parser(sub: Any) -> None:
    pr = sub.add_parser("presets", help="list machine presets, or show one's parameters")
    pr.add_argument("name", nargs="?")
    pr.set_defaults(func=cmd)


def declared() -> dict[str, _core.Param]:
    """key -> its declaration, from the components' own declarations."""
    return {p.key: p for c in _core.components() for p in c.params}


def cmd(a: argparse.Namespace) -> int:
    if a.name:
        docs = declared()
        values = _core.params(a.name)
        width = min(max(len(f"{k} = {v}") for k, v in values), 40)
        for k, v in values:
            d = docs.get(k)
            note = f"  [{d.unit}] {d.meaning}" if d is not None and d.meaning else ""
            print(f"{k} = {v}".ljust(width) + note)
        return 0
    for name in _core.presets():
        desc = dict(_core.params(name)).get("description", "")
        print(f"  {name:<12} {desc}")
    return 0

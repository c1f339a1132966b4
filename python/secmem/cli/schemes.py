"""``secmem schemes``: every scheme (and with --all every part of the machine) with its
parameters, from the declarations in the code."""

from __future__ import annotations

import argparse
from typing import Any

from .. import _core

SECTIONS = [
    ("integrity", "integrity schemes (--integrity NAME)"),
    ("encryption", "encryption schemes (--encryption NAME)"),
    ("codeauth", "code authentication of instruction fetches (--codeauth NAME; seed 001, its unit's parameters under auth.*)"),
]
MACHINE = ("machine", "the machine (presets give these; --set KEY=VALUE overrides any)")


def add_parser(sub: Any) -> None:
    sc = sub.add_parser("schemes", help="every scheme and its parameters (units, defaults, meanings)")
    sc.add_argument("name", nargs="?", help="one scheme or machine component")
    sc.add_argument("--all", action="store_true", help="the machine's parameters too")
    sc.set_defaults(func=cmd)


def cmd(a: argparse.Namespace) -> int:
    comps = _core.components()
    if a.name:
        comps = [c for c in comps if c.name == a.name]
        if not comps:
            names = ", ".join(c.name for c in _core.components())
            raise ValueError(f"unknown scheme or component '{a.name}' (choose from {names})")
    sections = SECTIONS + ([MACHINE] if a.all or a.name else [])
    for kind, title in sections:
        group = [c for c in comps if c.kind == kind]
        if not group:
            continue
        print(title)
        rows = [p for c in group for p in c.params]
        kw = max((len(p.key) for p in rows), default=0)
        uw = min(max((len(p.unit) for p in rows), default=0), 28)
        for c in group:
            print(f"\n  {c.name}: {c.summary}" + (f"  [{c.source}]" if c.source != "—" else ""))
            for p in c.params:
                shown = "(preset)" if p.default is None else (p.default if p.default != "" else '""')
                print(f"    {p.key:<{kw}}  {shown:<10} {p.unit:<{uw}}  {p.meaning}")
            if a.name and c.guarantees:
                _declarations(c)
        print()
    return 0


def _declarations(c: _core.Component) -> None:
    """What one scheme promises (at its default parameters) and what it covers: what
    `secmem attack`, the property tests and the fuzzer hold it to."""
    print("    guarantees (defaults; alone, without a second scheme):")
    w = max(len(k) for k, _ in c.guarantees)
    for what, promise in c.guarantees:
        print(f"      {what:<{w}}  {promise}")
    print(f"    lays out: {', '.join(c.lays_out) or 'nothing'}; protects: {', '.join(c.protects) or 'nothing'}")

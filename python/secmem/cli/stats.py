"""``secmem stats [PREFIX]``: every statistic a run can report, with its unit, meaning and
owner, from the components' own declarations (``stats`` beside ``params``, crates/core/src/decl.rs).
``--markdown`` prints docs/statistics.md, which a test keeps equal to it."""

from __future__ import annotations

import argparse
from typing import Any, NamedTuple

from .. import _core, table

# Sections of the document, in this order.
_KINDS = [("machine", "The run and the machine"), ("integrity", "Integrity schemes"), ("encryption", "Encryption schemes"),
          ("codeauth", "Code authentication")]


class Declared(NamedTuple):
    key: str
    unit: str
    meaning: str
    owner: str
    kind: str


def declared() -> list[Declared]:
    """Every declared statistic, in registry order (components as `secmem schemes` lists them)."""
    return [Declared(k, u, m, c.name, c.kind) for c in _core.components() for k, u, m in c.stats]


def add_parser(sub: Any) -> None:
    s = sub.add_parser(
        "stats",
        help="the statistics a run reports: key, unit, meaning, owner",
        description="List the declared statistics whose key (or owner) starts with PREFIX, e.g. `secmem stats chash.` "
        "or `secmem stats l2`. A key with * or # stands for keys named at run time (* any text, # a number). "
        "A statistic under a parameter's own key reports that parameter's value (see `secmem presets NAME`).",
    )
    s.add_argument("prefix", nargs="?", default="", metavar="PREFIX", help="a key prefix or a component's name")
    s.add_argument("--markdown", action="store_true", help="print docs/statistics.md (generated from the declarations)")
    s.set_defaults(func=cmd)


def cmd(a: argparse.Namespace) -> int:
    if a.markdown:
        print(markdown(), end="")
        return 0
    rows = [d for d in declared() if d.key.startswith(a.prefix) or d.owner == a.prefix]
    if not rows:
        found = _core.stat_declaration(a.prefix) if a.prefix else None
        if found is None:
            raise _core.ConfigError(f"no statistic starts with '{a.prefix}' (`secmem stats` lists them all)")
        owner, key, unit, meaning = found
        rows = [Declared(a.prefix, unit, meaning + ("" if key == a.prefix else f" (declared as {key})"), owner, "")]
    print(table.render([r._asdict() for r in rows], [("key", "key", None), ("unit", "unit", None), ("owner", "owner", None),
                                                      ("meaning", "meaning", None)]))
    return 0


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """docs/statistics.md: every declared statistic, by owner."""
    out = [
        "# Statistics",
        "",
        "Every statistic a run can report (`secmem run --json`, `secmem.run(...).stats`, the results store's columns), "
        "generated from the declarations by `secmem stats --markdown > docs/statistics.md`; a test keeps this file "
        "equal to it, and another runs every registered scheme pair and fails on any key no component declares.",
        "",
        "Each component declares its statistics beside its parameters (`stats: &[stat(key, unit, meaning), ...]` in its "
        "`Component`, crates/core/src/decl.rs). A key with `*` or `#` stands for keys named at run time (`*`: any text, "
        "`#`: a number; a last `.*`: any rest). A statistic reported under a parameter's own key (`chash.arity`, "
        "`mecu.lines_per_block`, ...) is that parameter's value in the run, declared by the parameter (`secmem schemes NAME`, "
        "`secmem presets NAME`). `secmem stats PREFIX` prints the same from the command line.",
        "",
    ]
    by_owner: dict[tuple[str, str], list[Declared]] = {}
    for d in declared():
        by_owner.setdefault((d.kind, d.owner), []).append(d)
    for kind, title in _KINDS:
        owners = [(o, ds) for (k, o), ds in by_owner.items() if k == kind]
        if not owners:
            continue
        out += [f"## {title}", ""]
        for owner, ds in owners:
            out += [f"### {owner}", "", "| key | unit | meaning |", "|---|---|---|"]
            out += [f"| `{_cell(d.key)}` | {_cell(d.unit)} | {_cell(d.meaning)} |" for d in ds]
            out.append("")
    return "\n".join(out)

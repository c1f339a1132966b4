"""``secmem workloads``: the built-in and suite workloads; ``install`` sets up suite ones."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import _core, suite


def add_parser(sub: Any) -> None:
    w = sub.add_parser("workloads", help="list the built-in and suite workloads; install suite workloads")
    w.set_defaults(func=cmd)
    wsub = w.add_subparsers(dest="wcmd", metavar="ACTION")
    wi = wsub.add_parser("install", help="apt-get install a suite workload's packages and generate its inputs")
    wi.add_argument("names", nargs="*", metavar="NAME")
    wi.add_argument("--all", action="store_true", help="every suite workload (with --size: every one that has that size)")
    wi.add_argument("--size", metavar="SIZE", help="input size: small (the default inputs) or spec (SPEC-sized: NAME.spec, "
                    "docs/workloads.md); each size has its own data directory")
    wi.set_defaults(func=cmd)


def _sizes() -> list[str]:
    """Every input size some suite workload has, the default first."""
    return list(dict.fromkeys(s for n in suite.names() for s in suite.sizes(n)))


def install(a: argparse.Namespace) -> int:
    if a.all and a.size is not None and a.size not in _sizes():
        # With --all an unknown size selects no workload: say what is wrong, the size.
        raise suite.SuiteError(f"unknown input size {a.size!r} (sizes: {', '.join(_sizes())})")
    if a.all:  # with --size: every workload that has that size
        todo = [n for n in suite.names() if a.size is None or a.size in suite.sizes(n)]
    else:
        todo = list(dict.fromkeys(a.names))
    if not todo:
        print("secmem: error: name workloads to install, or --all (see `secmem workloads`)", file=sys.stderr)
        return 2
    # unknown names and sizes fail before anything is installed
    todo = [suite.get(n).name if a.size is None else suite.sized_name(n, a.size) for n in todo]
    failed = 0
    for name in todo:
        try:
            did = suite.install(name, progress=lambda s: print(s, flush=True))
        except suite.SuiteError as e:
            print(f"secmem: error: {e}", file=sys.stderr)
            failed += 1
            continue
        print(f"{name}: {'installed' if did else 'already installed'} ({suite.data_dir(name)})", flush=True)
    return 1 if failed else 0


def cmd(a: argparse.Namespace) -> int:
    if getattr(a, "wcmd", None) == "install":
        return install(a)
    print("built-in workloads (no files needed; deterministic by --seed):")
    for name, desc in _core.workloads():
        print(f"  {name:<10} {desc}")
    print()
    print("suite workloads (real programs, generated inputs; `secmem workloads install NAME`):")
    for name in suite.variants():
        w = suite.get(name)
        st = suite.status(name)
        ir = w.instructions
        size = "" if not ir else f"~{ir / 1e9:.1f}G instr" if ir >= 100_000_000 else f"~{ir / 1e6:.0f}M instr"
        print(f"  {name:<12} {st:<14} {size:<13} {w.stands_for}: {w.description}")
    return 0

"""``secmem export``: instructions of any input as a native or ChampSim trace file."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..api import export
from .common import DEFAULT_WORKLOAD, counts, program, seed


def add_parser(sub: Any) -> None:
    e = sub.add_parser(
        "export",
        help="write the instructions of a workload, trace file or program as a native or ChampSim trace",
        description="Write instructions as a trace file: a built-in or suite workload, a --trace file, or a program "
        "traced live (-- PROGRAM ARGS). --format champsim writes ChampSim's records (raw, or .xz/.gz by the name) "
        "so that ChampSim runs exactly these instructions.",
    )
    e.add_argument("workload", nargs="?", help=f"built-in or suite workload (default {DEFAULT_WORKLOAD} unless --trace or a program is given)")
    e.add_argument("-o", "--output", required=True)
    e.add_argument("--format", "-f", choices=["native", "champsim"], default="native", help="trace format to write (default %(default)s)")
    e.add_argument("--trace", help="read this trace file (native, ChampSim or lackey)")
    e.add_argument("--trace-format", choices=["auto", "native", "champsim", "lackey"], default="auto", help="format of --trace")
    e.add_argument("--skip", type=counts("--skip"), default="0", help="leave out the first N instructions (their memory is kept as external records)")
    e.add_argument("--records", type=counts("--records"), help="instructions to write (default: a --trace file whole, 1M of anything else)")
    e.add_argument("--seed", type=seed, default=1)
    e.add_argument(
        "--uncompressed",
        action="store_true",
        help="native traces: store the records uncompressed (4-9x the bytes; read for 7-9%% less CPU, for a trace read many times)",
    )
    # `-- PROGRAM ARGS` is split off before parsing (main): a REMAINDER after the optional
    # workload would swallow `-o FILE` in `export hot -o FILE`.
    e.set_defaults(func=cmd, program=None)


def cmd(a: argparse.Namespace) -> int:
    prog = program(a.program)
    n = a.records
    e = export(
        a.output,
        a.workload,
        format=a.format,
        records=n,
        trace=a.trace,
        trace_format=a.trace_format,
        program=prog,
        skip=a.skip,
        seed=a.seed,
        uncompressed=a.uncompressed,
    )
    name = a.workload or a.trace or (" ".join(prog) if prog else DEFAULT_WORKLOAD)
    print(f"wrote {e['instructions']:,} instructions of {name} to {a.output} ({a.format}{', uncompressed' if a.uncompressed else ''})")
    if a.format == "champsim":
        if e["external_records"]:
            print(f"  {e['external_records']:,} external records (memory written by the environment) left out: ChampSim traces have none")
        kinds = ", ".join(f"{k.removeprefix('BRANCH_').lower().replace('_', ' ')} {v:,}" for k, v in e["branch_types"].items() if v)
        print(f"  branches by ChampSim type: {kinds or 'none'}")
        if e["lossy_instructions"]:
            print(
                f"  {e['lossy_instructions']:,} instructions had more than a record holds: "
                f"{e['lost_registers']:,} registers (4 sources, 2 destinations) and {e['lost_accesses']:,} accesses (4 loads, 2 stores) left out"
            )
    if n is not None and e["instructions"] < n:
        print(f"secmem: note: the input ended after {e['instructions']:,} of the {n:,} instructions asked for", file=sys.stderr)
    return 0

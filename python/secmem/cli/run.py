"""``secmem run``: one simulation (the default command)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import provenance
from ..api import run
from .common import SIGNAL_EXIT, add_common, codeauth_sets, output, program, warn_once, write_json
from .summary import mix_summary, summary


def add_parser(sub: Any) -> None:
    r = sub.add_parser("run", help="one simulation (the default command)")
    add_common(r, interval=True)
    r.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]: trace a real program live and simulate it")
    r.set_defaults(func=cmd)


def cmd(a: argparse.Namespace) -> int:
    prog = program(a.program)
    out = output(a.json)
    r = run(
        a.workload,
        trace=a.trace,
        trace_format=a.trace_format,
        skip=a.skip,
        program=prog,
        integrity=a.integrity,
        encryption=a.encryption,
        preset=a.preset,
        sets=codeauth_sets(a),
        instructions=a.instructions,
        warmup=a.warmup,
        seed=a.seed,
        progress=True,
        sample=a.sample,
        cores=a.cores,
        interval=a.interval,
    )
    # A failure is said first; statistics follow only if something was measured. The exit
    # status: a signal's (130, 143); 2 if nothing was measured (the input is unusable: a
    # damaged trace fails on its first record as a bad magic fails at its opening); 1 if the
    # statistics measured until the failure are shown.
    measured = bool(r.stats.get("instructions", 0))
    if r.error:
        print(f"secmem: error: {r.error}", file=sys.stderr, flush=True)
    mix = "cores" in r.stats
    if a.json != "-" and (measured or not r.error):
        print((mix_summary if mix else summary)(r.stats, a.preset, a.set), flush=True)
    if not r.error:
        warn_once(r.warnings)  # a run that failed has its error to say, not advice on its warm-up
    if mix:
        # A mix: the identity of each different input, in the order given.
        names = (a.workload or "").split(",") if a.workload and "," in a.workload else [a.workload]
        ids = [provenance.workload_identity(workload=w, trace=a.trace, program=prog, seed=a.seed) for w in names]
        doc = {"stats": r.stats, "config": r.config, "error": r.error, "provenance": provenance.block(wall_seconds=r.stats.get("sim.wall_seconds")), "workload": ids}
    else:
        ident = dict(workload=a.workload, trace=a.trace, program=prog, seed=a.seed)
        doc = provenance.document(r, r.stats.get("sim.wall_seconds"), **ident)
    doc["interrupted"] = r.interrupted
    write_json(a.json, doc, out)
    if r.interrupted:
        return SIGNAL_EXIT.get(r.interrupted, 130)
    return 0 if not r.error else 1 if measured else 2

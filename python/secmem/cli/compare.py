"""``secmem compare``: workloads under several scheme pairs, normalized to the baseline."""

from __future__ import annotations

import argparse
from typing import Any

from .. import _core, provenance
from .common import DEFAULT_SCHEMES, DEFAULT_WORKLOAD, add_common, codeauth_sets, output, program, scheme_list, warn_once, write_json


def add_parser(sub: Any) -> None:
    c = sub.add_parser("compare", help="one workload under several schemes, normalized to the baseline")
    add_common(c, schemes=False)
    c.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]: a real program, traced live for each scheme")
    c.add_argument("--schemes", type=scheme_list("--schemes"), default=DEFAULT_SCHEMES, help="INTEG+ENC pairs, comma separated (default %(default)s)")
    c.set_defaults(func=cmd)


def cmd(a: argparse.Namespace) -> int:
    from .. import comparison  # pandas: loaded by the commands that make a table, not by `secmem run`

    schemes = list(a.schemes)
    if ("none", "none") not in schemes:
        schemes.insert(0, ("none", "none"))
    workloads = [w.strip() for w in a.workload.split(",")] if a.workload else [None]
    if a.workload is not None and not all(workloads):
        # an empty name would run the default workload after minutes of the others
        raise _core.ConfigError(f"--workload '{a.workload}': an empty workload name (give names separated by commas)")
    prog = program(a.program)
    kwargs: dict[str, Any] = dict(
        trace=a.trace,
        trace_format=a.trace_format,
        skip=a.skip,
        program=prog,
        preset=a.preset,
        sets=codeauth_sets(a),
        instructions=a.instructions,
        warmup=a.warmup,
        seed=a.seed,
        sample=a.sample,
    )
    if a.cores is not None:
        # --cores N: N workloads listed are one mix; otherwise each runs on every core (rate mode).
        kwargs.update(cores=a.cores, alone=False)
        if a.cores > 1 and len(workloads) == a.cores:
            workloads = [",".join(w or DEFAULT_WORKLOAD for w in workloads)]
    if len(workloads) > 1 and (a.trace or prog):
        raise _core.ConfigError("compare several workloads (-w a,b,c) or one trace or program, not both")
    out = output(a.json)
    df = comparison.compare(workloads if len(workloads) > 1 else workloads[0], schemes=schemes, progress=a.json != "-", **kwargs)
    warn_once(df.attrs.get("warnings", []), len(df))
    if a.json:
        names = [n for w in workloads for n in (w.split(",") if w else [w])]
        ids = [provenance.workload_identity(workload=w, trace=a.trace, program=prog, seed=a.seed) for w in names]
        doc = {"provenance": df.attrs["provenance"], "workloads": ids, "rows": comparison.records(df)}
        if len(workloads) > 1:
            doc["geomean"] = comparison.records(df.geomean())
        write_json(a.json, doc, out)
        if a.json == "-":
            return 0
    name = a.trace or ", ".join(w or DEFAULT_WORKLOAD for w in workloads) if not prog else " ".join(prog)
    # What was measured: a trace file runs to its end unless -n says otherwise.
    counts = sorted({int(v) for v in df["instructions"].dropna()})
    what = f"{counts[0]:,}" if len(counts) == 1 else f"{counts[0]:,} to {counts[-1]:,}" if counts else "no"
    print(f"secmem compare — {name} on {a.preset}, {what} instructions\n")
    print(comparison.render(df))
    return 0

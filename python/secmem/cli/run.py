"""``secmem run``: one simulation (the default command)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import provenance
from .._core import TRACE_READINGS, set_trace_reading
from ..api import DEFAULT_WARMUP, run
from .._args import BadArgument, counts, positive_int
from .common import SIGNAL_EXIT, add_common, codeauth_sets, output, program, warn_once, write_json
from .summary import mix_summary, summary


def add_parser(sub: Any) -> None:
    r = sub.add_parser("run", help="one simulation (the default command)")
    add_common(r, interval=True)
    r.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]: trace a real program live and simulate it")
    r.add_argument("--read", choices=TRACE_READINGS, help="a native --trace file decoded ahead on a thread of its own (the default: the fastest "
                   "run where a core would idle) or inline on the simulating thread (13-28%% less CPU, more wall time: where every core is busy); "
                   "the statistics are the same")
    par = r.add_argument_group("a sampled run in parallel parts (docs/sampling.md)")
    par.add_argument("--parallel", type=positive_int("--parallel"), metavar="K",
                     help="with --sample: cut the run into K parts of consecutive periods, each warmed on its own, run as Dask tasks")
    par.add_argument("--part-warmup", type=counts("--part-warmup"), metavar="N",
                     help="instructions warmed functionally before each later part (default: --warmup, at least one period)")
    par.add_argument("--check-warmup", action="store_true",
                     help="also run the whole sampled run in one piece (one more task) and report the parts' warm-up error")
    par.add_argument("--checkpointed", type=counts("--checkpointed"), metavar="B",
                     help="with --sample: cut every window out in one pass (checkpoints, kept in the results store) and run each "
                          "from cold after B instructions of functional warming; with --parallel K, as K Dask tasks")
    par.add_argument("--prewarm", type=counts("--prewarm"), metavar="LINES",
                     help="with --checkpointed: lines the L2 saw last before a window, replayed (after its last branches) before its warming (default 16384)")
    par.add_argument("--store", metavar="DIR", help="with --checkpointed: the results store holding the checkpoints (default $SECMEM_RESULTS or ./secmem-results)")
    par.add_argument("--threads", type=positive_int("--threads"), metavar="N",
                     help="with --checkpointed: threads running the windows in this process (default: every core; with --parallel "
                          "or --scheduler, per Dask task, default 1); the statistics are the same whatever N")
    g = par.add_mutually_exclusive_group()
    g.add_argument("--workers", type=positive_int("--workers"), help="local Dask worker processes (default: every core)")
    g.add_argument("--scheduler", metavar="ADDRESS", help="an existing Dask cluster, e.g. tcp://head:8786 (docs/sweeps.md)")
    r.set_defaults(func=cmd)


def _parallel(a: argparse.Namespace) -> int:
    """`run --sample --parallel K`: the parts on Dask, then one combined summary."""
    from ..windows import run_parallel

    if a.sample is None:
        raise BadArgument("--parallel splits a sampled run: give --sample too")
    if program(a.program) or a.cores:
        raise BadArgument("--parallel runs a built-in workload or a trace file on one core")
    if a.instructions is None:
        raise BadArgument("--parallel needs -n (the parts are cut from it)")
    out = output(a.json)
    r = run_parallel(
        a.workload, trace=a.trace, integrity=a.integrity, encryption=a.encryption, preset=a.preset, sets=codeauth_sets(a),
        instructions=a.instructions, warmup=DEFAULT_WARMUP if a.warmup is None else a.warmup, seed=a.seed, sample=a.sample,
        k=a.parallel, part_warmup=a.part_warmup, scheduler=a.scheduler, workers=a.workers, reference=a.check_warmup,
    )
    if r["error"]:
        print(f"secmem: error: {r['error']}", file=sys.stderr, flush=True)
    s = r["stats"]
    if s and a.json != "-":
        print(f"secmem {a.workload or a.trace or 'mix'}: {s['parallel.parts']} parts in parallel, sampled "
              f"{s['sampling.period']}:{s['sampling.window']}:{s['sampling.warming']}, {s['parallel.part_warmup']:,} instructions warmed before each later part")
        print(f"  IPC {s['ipc']:.4f} ± {s['ci95.ipc']:.4f} (95%, {s['sampling.windows']:,} windows)   parts: "
              + ", ".join(f"{x:.4f}" for x in s["parallel.part_ipc"]))
        print(f"  wall {s['parallel.wall_seconds']:.1f} s (parts: " + ", ".join(f"{x:.1f}" for x in s["parallel.part_seconds"]) + " s)")
        if "parallel.reference_ipc" in s:
            print(f"  whole run in one piece: IPC {s['parallel.reference_ipc']:.4f} ± {s['parallel.reference_ci95_ipc']:.4f}, "
                  f"{s['parallel.reference_seconds']:.1f} s; warm-up error of the parts {100 * s['parallel.warmup_error']:+.2f}%")
    if a.json is not None:
        write_json(a.json, {"stats": s, "parts": [p["stats"] for p in r["parts"]], "error": r["error"]}, out)
    return 0 if not r["error"] else 1


def _checkpointed(a: argparse.Namespace) -> int:
    """`run --sample --checkpointed B [--parallel K]`: windows from their checkpoints."""
    from ..windows import run_checkpointed

    if a.sample is None:
        raise BadArgument("--checkpointed runs a sampled run's windows: give --sample too")
    if program(a.program) or a.cores or a.skip:
        raise BadArgument("--checkpointed cuts windows from a built-in workload or a trace file, on one core, from its start (no --skip)")
    if a.instructions is None:
        raise BadArgument("--checkpointed needs -n (the windows are cut from it)")
    if a.part_warmup is not None:
        raise BadArgument("--part-warmup warms --parallel's parts: checkpointed windows warm over --checkpointed B")
    out = output(a.json)
    r = run_checkpointed(
        a.workload, trace=a.trace, integrity=a.integrity, encryption=a.encryption, preset=a.preset, sets=codeauth_sets(a),
        instructions=a.instructions, warmup=DEFAULT_WARMUP if a.warmup is None else a.warmup, seed=a.seed, sample=a.sample,
        warm=a.checkpointed, prewarm=a.prewarm, store=a.store, k=a.parallel or 1, scheduler=a.scheduler, workers=a.workers,
        reference=a.check_warmup, progress=sys.stderr.isatty(), threads=a.threads,
    )
    if r["error"]:
        print(f"secmem: error: {r['error']}", file=sys.stderr, flush=True)
    s, c = r["stats"], r["checkpoints"]
    if s and a.json != "-":
        print(f"secmem {a.workload or a.trace or 'mix'}: {s['sampling.windows']:,} windows from checkpoints, sampled "
              f"{s['sampling.period']}:{s['sampling.window']}:{s['sampling.warming']}, each warmed over {s['sampling.checkpointed']:,} "
              f"instructions after {s['checkpointed.prewarm_lines']:,} prewarm lines")
        print(f"  IPC {s['ipc']:.4f} ± {s['ci95.ipc']:.4f} (95%)   L2 miss rate "
              + (f"{s['l2.miss_rate']:.4f} ± {s.get('ci95.l2.miss_rate', 0.0):.4f}" if "l2.miss_rate" in s else "-"))
        print(f"  checkpoints: " + ("reused from the store" if c["reused"] else f"one pass, {c['seconds']:.1f} s CPU")
              + f", {c['image_bytes'] / 1e6:.1f} MB of memory image; windows: {s['checkpointed.wall_seconds']:.1f} s wall in "
              f"{s['checkpointed.groups']} group{'s' if s['checkpointed.groups'] > 1 else ''}"
              + (f" on {s['checkpointed.threads']} threads" if s["checkpointed.threads"] > 1 else ""))
        if "checkpointed.reference_ipc" in s:
            print(f"  with full warming (--sample): IPC {s['checkpointed.reference_ipc']:.4f} ± {s['checkpointed.reference_ci95_ipc']:.4f}, "
                  f"{s['checkpointed.reference_seconds']:.1f} s; warm-up error of the checkpointed windows {100 * s['checkpointed.warmup_error']:+.2f}%")
    if a.json is not None:
        write_json(a.json, {"stats": s, "parts": [p["stats"] for p in r["parts"]], "checkpoints": c, "error": r["error"]}, out)
    return 0 if not r["error"] else 1


def cmd(a: argparse.Namespace) -> int:
    if a.read is not None:
        set_trace_reading(a.read)
    if a.checkpointed is not None:
        return _checkpointed(a)
    if a.prewarm is not None or a.store is not None or a.threads is not None:
        raise BadArgument("--prewarm, --store and --threads go with --checkpointed")
    if a.parallel is not None:
        return _parallel(a)
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
    if a.json is not None:
        # Only for --json: a built-in workload's identity hashes the start of its trace (its
        # memory image), which costs more than a short run.
        write_json(a.json, _document(a, r, prog, mix), out)
    if r.interrupted:
        return SIGNAL_EXIT.get(r.interrupted, 130)
    return 0 if not r.error else 1 if measured else 2


def _document(a: argparse.Namespace, r: Any, prog: Any, mix: bool) -> dict[str, Any]:
    """What --json writes: the statistics with the run's provenance and input identity."""
    doc: dict[str, Any]
    if mix:
        # A mix: the identity of each different input, in the order given.
        names = (a.workload or "").split(",") if a.workload and "," in a.workload else [a.workload]
        ids = [provenance.workload_identity(workload=w, trace=a.trace, program=prog, seed=a.seed) for w in names]
        doc = {"stats": r.stats, "config": r.config, "error": r.error, "provenance": provenance.block(wall_seconds=r.stats.get("sim.wall_seconds")), "workload": ids}
    else:
        ident = dict(workload=a.workload, trace=a.trace, program=prog, seed=a.seed)
        doc = provenance.document(r, r.stats.get("sim.wall_seconds"), **ident)
    doc["interrupted"] = r.interrupted
    return doc

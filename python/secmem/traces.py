"""Reading trace files: secmem's native format, ChampSim and Valgrind lackey traces.

    >>> import secmem
    >>> with secmem.open_trace("prog.smt") as t:
    ...     for r in t:
    ...         for a in r.accesses:
    ...             print(hex(r.pc), a.kind, hex(a.addr), a.size, a.value.hex())

Each record has ``.pc``, ``.length`` (bytes; 0 when unknown), ``.op`` (the execution class:
``alu``, ``mul``, ``div``, ``fp``, ``fpdiv``, ``mem``, ``branch`` or ``barrier``),
``.accesses`` (a list of ``Access`` with ``.kind`` "load"/"store", ``.addr``, ``.size`` and
``.value``, the full value as ``bytes``), ``.regs_read`` and ``.regs_written`` (lists of
register numbers), ``.taken`` (True/False for branches, None otherwise), ``.external``
(memory written by the environment rather than an instruction) and ``.thread``.

ChampSim and lackey traces carry no data values: their accesses' values are zeros (and
ChampSim's sizes a nominal 8 bytes). See docs/trace-formats.md.

Errors — an unknown format name, a file whose format cannot be told, a missing, truncated
or corrupt file — raise :class:`TraceError`, a ``ValueError`` whose one-line message names
the file and, for damage, the byte offset (also in ``.path``, ``.offset`` and ``.what``).
Records decoded before the damage are yielded first.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Any, Optional, TextIO, Union

from . import _core

from ._core import TraceError, TraceReader

Record = _core.Record
Access = _core.Access
#: The format names ``open_trace`` accepts (besides None/"auto": detect).
FORMATS = tuple(_core.trace_formats())

PathLike = Union[str, "os.PathLike[str]"]


def open_trace(path: PathLike, format: Optional[str] = None) -> TraceReader:
    """Open a trace file for reading; iterate the result for records.

    ``format`` is one of :data:`FORMATS` (``native``, ``champsim``, ``lackey``) or None to
    detect it (native by its magic bytes; ChampSim by a ``.champsim``/``.champsimtrace``
    name or by content; lackey by a ``.lackey`` name or by content; xz, gzip and zstd
    compression by magic bytes). The reader is also a context manager, has ``close()``,
    ``.path``, ``.format`` and ``.count`` (records read so far).

    A native trace begins with the memory there before its first instruction: records with
    ``.external`` True (stores only) — the program's image and, in a trace exported with
    ``--skip N``, what the N skipped instructions wrote. ``.count`` counts every record; count
    instructions with ``sum(not r.external for r in t)`` (docs/trace-formats.md).

    Damage is detected where the format can show it: compressed files (xz, gzip, zstd) and
    native traces carry checksums, but raw ChampSim and lackey files and raw native traces
    do not, and a flipped bit that still parses is read silently (inherent to those formats;
    docs/trace-formats.md).
    """
    return TraceReader(os.fspath(path), format)


def detect_format(path: PathLike) -> str:
    """The format ``open_trace(path)`` would read the file as (raises TraceError)."""
    return _core.detect_trace_format(os.fspath(path))


# --------------------------------------------------------------------------- benchmark

#: The files ``secmem bench --trace-input`` reads, in groups that hold the same records: a
#: foreign format raw and compressed, and a native file written from the raw file's records
#: (ChampSim and lackey drop values, sizes or registers, so each gets its own native twin).
#: The raw file and its compressed copies differ only by decompression.
BENCH_INPUT_GROUPS = [
    ("champsim", ["w.champsim", "w.champsim.gz", "w.champsim.xz"]),
    ("lackey", ["w.lackey", "w.lackey.gz", "w.lackey.xz"]),
]


def bench_input(workload: str = "mix", instructions: int = 2_000_000, preset: str = "suh2003", repeat: int = 3,
                out: TextIO = sys.stdout) -> list[dict[str, Any]]:
    """Simulation speed reading the same instructions from trace files of each format.

    The workload's first ``instructions`` are written in each foreign format (raw, gzip, xz)
    and, from the raw file's records, as a native trace; each file is simulated (no
    protection, so reading weighs the most) ``repeat`` times, interleaved, the fastest run
    counting. Returns one dict per file with its cost against its native twin (and prints a
    table to ``out``).
    """
    if repeat < 1:
        raise _core.ConfigError(f"--repeat: {repeat} (at least one run)")
    if instructions < 2:
        raise _core.ConfigError(f"--instructions: {instructions} (at least 2 for trace input)")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="secmem-bench-input-") as work:
        for fmt, names in BENCH_INPUT_GROUPS:
            for name in names:
                _core.write_bench_trace(os.path.join(work, name), fmt, instructions, workload=workload)
            twin = f"{fmt}-twin.smt"
            _core.write_bench_trace(os.path.join(work, twin), "native", instructions,
                                    trace=os.path.join(work, names[0]), trace_format=fmt)
            for f, name in [("native", twin)] + [(fmt, n) for n in names]:
                size = os.path.getsize(os.path.join(work, name))
                rows.append({"workload": workload, "group": fmt, "trace_format": f, "file": name,
                             "bytes_per_instr": size / instructions, "seconds": float("inf")})
        for _ in range(repeat):
            for r in rows:
                # The last instruction's branch outcome waits for the next: simulate all but it.
                t = time.perf_counter()
                o = _core.run(_core.RunSpec(preset=preset, integrity="none", encryption="none", trace=os.path.join(work, r["file"]),
                                            instructions=instructions - 1, warmup=0, trace_format=r["trace_format"]))
                wall = time.perf_counter() - t
                if o.error:
                    raise RuntimeError(f"{r['file']}: {o.error}")
                r["seconds"] = min(r["seconds"], wall)
    seconds = {r["group"]: r["seconds"] for r in rows if r["trace_format"] == "native"}
    print(f"\n  {'trace file':<18} {'format':<9} {'B/instr':>8} {'M instr/s':>10} {'vs native':>10}", file=out)
    for r in rows:
        r["instructions_per_second"] = (instructions - 1) / r["seconds"]
        r["cost_vs_native"] = r["seconds"] / seconds[r["group"]] - 1
        print(f"  {r['file']:<18} {r['trace_format']:<9} {r['bytes_per_instr']:>8.3f} "
              f"{r['instructions_per_second'] / 1e6:>10.2f} {100 * r['cost_vs_native']:>+9.0f}%", file=out, flush=True)
    return rows


__all__ = ["Access", "FORMATS", "Record", "TraceError", "TraceReader", "bench_input", "detect_format", "open_trace"]

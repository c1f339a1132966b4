"""``secmem trace`` and the tracer benchmark: CLI pieces wired into ``secmem.cli``.

- ``add_trace_parser(sub)`` adds ``secmem trace -o PATH [--skip N] [--count M] -- PROGRAM [ARGS…]``
  (handler ``cmd_trace``).
- ``add_bench_tracer_parser(sub)`` adds ``secmem bench-tracer`` (handler ``cmd_bench_tracer``):
  tracer slowdown versus native, the time per instruction of each stage (the tool alone,
  decoding, encoding) and in all, bytes per instruction raw and compressed, and simulator speed
  when fed live through the pipe.

Failures raise ``_core.TracerError`` (a ``RuntimeError``) or ``ValueError`` with one line;
``secmem.cli.main`` prints them as ``secmem: error: …``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Optional, Sequence, TextIO

from . import _core
from ._args import counts, sizes
from ._files import Output

# The schemes the benchmark simulates through the pipe: unprotected and counter-mode
# encryption with a cached hash tree.
BENCH_SCHEMES = [("none", "none"), ("chash", "otp")]


def _program(argv: Optional[Sequence[str]]) -> list[str]:
    """The program part of ``trace … -- PROGRAM ARGS`` (argparse keeps the ``--``)."""
    argv = list(argv or [])
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise ValueError("no program to trace: secmem trace -o OUT.smt -- PROGRAM [ARGS...]")
    return argv


def add_trace_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "trace",
        help="record a value-carrying trace of a real program (Valgrind)",
        description="Run PROGRAM under secmem's Valgrind tool and write a native trace (.smt) of "
        "every instruction with the values it loaded and stored.",
    )
    p.add_argument("-o", "--output", required=True, metavar="PATH", help="trace file to write (.smt)")
    p.add_argument("--skip", type=counts("--skip"), default="0", help="record nothing for the first N instructions (e.g. 1G)")
    p.add_argument("--count", type=counts("--count"), default=None, help="stop the program after recording M instructions")
    p.add_argument("--env-clear", action="store_true", help="run the program with an empty environment (plus --env)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="set an environment variable (repeatable)")
    p.add_argument("--stdin", metavar="PATH", help="the program's standard input (default /dev/null)")
    p.add_argument("--quiet-program", action="store_true", help="send the program's stdout to /dev/null")
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]")
    p.set_defaults(func=cmd_trace)
    return p


def _env(pairs: Sequence[str]) -> list[tuple[str, str]]:
    out = []
    for kv in pairs:
        if "=" not in kv:
            raise ValueError(f"--env: '{kv}' is not KEY=VALUE")
        k, v = kv.split("=", 1)
        out.append((k, v))
    return out


def trace(argv: Sequence[str], output: str, skip: int = 0, count: Optional[int] = None,
          env: Optional[list[tuple[str, str]]] = None, clear_env: bool = False, cwd: Optional[str] = None,
          stdin: Optional[str] = None, stdout: Optional[str] = "-", progress: bool = False) -> dict[str, Any]:
    """Trace ``argv`` into ``output``; returns the summary dict (see ``_core.trace_program``).
    ``progress`` draws instructions traced and the rate on stderr (a bar with an ETA when
    ``count`` is given). SIGINT/SIGTERM stop the tracing within a moment (the program is
    killed, no file is written) and raise ``KeyboardInterrupt``."""
    # An interruption's KeyboardInterrupt carries ``signal`` (set by the glue).
    return _core.trace_program(list(argv), str(output), skip=skip, count=count, env=env,
                               clear_env=clear_env, cwd=cwd, stdin=stdin, stdout=stdout, progress=progress)


def _per(n: float, d: float) -> float:
    return n / d if d else 0.0


def format_summary(s: dict[str, Any], native_seconds: Optional[float] = None) -> str:
    n = s["instructions"]
    lines = [
        f"secmem trace: {s['path']}",
        f"  instructions        {n:>16,}" + (f"   ({s['executed']:,} executed, window ended by --count)" if s["count_reached"] else ""),
        f"  static instructions {s['static_instructions']:>16,}",
        f"  external bytes      {s['external_bytes']:>16,}   ({s['syscall_bytes']:,} from system calls, "
        f"{s['supplied_bytes']:,} supplied for consistency)",
        *([f"  pages before window {s['skipped_pages']:>16,}   (touched during --skip: set up before the window)"] if s.get("skipped_pages") else []),
        f"  raw record stream   {s['raw_bytes']:>16,} B ({_per(s['raw_bytes'], n):.2f} B/instr)",
        f"  file (zstd)         {s['compressed_bytes']:>16,} B ({_per(s['compressed_bytes'], n):.2f} B/instr)",
        f"  traced in           {s['wall_seconds']:>16.2f} s ({_per(n, s['wall_seconds']) / 1e6:.1f} M instr/s)",
    ]
    if native_seconds:
        lines.append(f"  slowdown            {s['wall_seconds'] / native_seconds:>16.1f} x native ({native_seconds:.2f} s)")
    if s.get("exec"):
        lines.append("  note: the program called exec; the trace ends there (the new program was not traced)")
    if s["exit_code"]:
        lines.append(f"  note: the program exited with status {s['exit_code']}")
    return "\n".join(lines)


def cmd_trace(a: argparse.Namespace) -> int:
    argv = _program(a.program)
    # A directory or a missing one is bad input (exit 2), found before the program runs; the
    # check's own temporary file is removed at once (the tracer writes the trace itself).
    with Output(a.output, "--output"):
        pass
    s = trace(
        argv,
        a.output,
        skip=a.skip,
        count=a.count,
        env=_env(a.env),
        clear_env=a.env_clear,
        stdin=a.stdin,
        stdout=None if a.quiet_program else "-",
        progress=True,
    )
    # The program's own output goes to stdout: the summary always goes to stderr.
    print(format_summary(s), file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- benchmark

def make_text(path: str, size: int, seed: int = 1) -> None:
    """A deterministic text file of ``size`` bytes: words drawn with a Zipf-like skew, so it
    compresses like prose (random bytes would not exercise a compressor's match finder)."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("etaoinshrdlucmfwypvbgkqjxz") for _ in range(rng.randint(2, 10))) for _ in range(5000)]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    with open(path, "w") as f:
        written = 0
        while written < size:
            words = rng.choices(vocab, weights, k=2000)
            chunk = " ".join(words) + ".\n"
            f.write(chunk)
            written += len(chunk)
        f.truncate(size)


def _native_seconds(argv: Sequence[str], stdin: Optional[str] = None) -> float:
    t = time.perf_counter()
    with open(stdin or os.devnull, "rb") as i:
        subprocess.run(argv, stdin=i, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def bench_programs(work: str, size: int) -> list[tuple[str, list[str], Optional[str]]]:
    """(name, argv, stdin) of the benchmark programs available here, on a generated input."""
    text = os.path.join(work, "input.txt")
    make_text(text, size)
    progs: list[tuple[str, list[str], Optional[str]]] = []
    if shutil.which("gzip"):
        progs.append(("gzip", ["gzip", "-9", "-c", text], None))
    if shutil.which("bzip2"):
        progs.append(("bzip2", ["bzip2", "-9", "-c", text], None))
    if shutil.which("sha256sum"):
        progs.append(("sha256sum", ["sha256sum", text], None))
    if shutil.which("sqlite3"):
        sql = os.path.join(work, "q.sql")
        with open(sql, "w") as f:
            f.write("create table t(k integer primary key, v text);\n")
            f.write("with recursive c(x) as (select 1 union all select x+1 from c where x < 200000) "
                    "insert into t select x, hex(randomblob(16)) from c;\n")
            f.write("select count(*), sum(length(v)) from t where v like '%AB%';\n")
            f.write("create index i on t(v);\nselect count(*) from t where v > '8';\n")
        progs.append(("sqlite3", ["sqlite3", ":memory:"], sql))
    return progs


def _fastest(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return min(runs, key=lambda r: r[key])


def bench_tracer(size: int = 20 << 20, sim_instructions: int = 20_000_000, programs: Optional[Sequence[str]] = None,
                 preset: str = "suh2003", repeat: int = 1, out: TextIO = sys.stdout) -> list[dict[str, Any]]:
    """Run the tracer benchmark; returns one dict per program (and prints a table to ``out``).

    Each program runs natively, under Valgrind with the tool alone (its stream thrown away),
    with the stream decoded and dropped, and traced to a file; ``repeat`` times each,
    interleaved, keeping the fastest (a busy machine only slows runs down). Per instruction:
    the tool alone (wall), decoding into records (CPU of the decoding thread: what `secmem
    run -- PROGRAM` feeds the simulator), the file run's transcoder (decoding, supplying the
    loads the tool marked new, and encoding in one pass) and zstd (CPU of each thread; ``encode`` is their sum), and the file
    run (wall).
    """
    reason = _core.tracer_unavailable()
    if reason:
        raise _core.TracerError(reason)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="secmem-bench-tracer-") as work:
        progs = bench_programs(work, size)
        if programs:
            progs = [p for p in progs if p[0] in programs]
        for name, argv, stdin in progs:
            natives: list[float] = []
            tools: list[dict[str, Any]] = []
            decodes: list[dict[str, Any]] = []
            files: list[dict[str, Any]] = []
            smt = os.path.join(work, name + ".smt")
            for _ in range(max(repeat, 1)):
                natives.append(_native_seconds(argv, stdin))
                tools.append(_core.trace_stage(list(argv), "tool", stdin))
                decodes.append(_core.trace_stage(list(argv), "decode", stdin))
                files.append(trace(argv, smt, stdin=stdin, stdout=None))
                os.unlink(smt)
            native = min(natives)
            tool, dec, s = _fastest(tools, "wall_seconds"), _fastest(decodes, "decode_cpu_seconds"), _fastest(files, "wall_seconds")
            n = s["instructions"]

            def ns(sec: float) -> float:
                return sec / n * 1e9 if n else 0.0

            row = {
                "program": name,
                "instructions": n,
                "native_seconds": native,
                "tool_seconds": tool["wall_seconds"],
                "trace_seconds": s["wall_seconds"],
                "slowdown": s["wall_seconds"] / native if native else 0.0,
                "tool_slowdown": tool["wall_seconds"] / native if native else 0.0,
                "trace_minstr_s": n / s["wall_seconds"] / 1e6 if s["wall_seconds"] else 0.0,
                "tool_ns_per_instr": ns(tool["wall_seconds"]),
                "tool_cpu_ns_per_instr": ns(tool["tool_cpu_seconds"]),
                # Valgrind's CPU in the file run: the tool alone plus handing the stream to the pipe.
                "trace_tool_cpu_ns_per_instr": ns(s["tool_cpu_seconds"]),
                "decode_ns_per_instr": ns(dec["decode_cpu_seconds"]),
                # The file run decodes, supplies and encodes in one pass (its transcoder), so
                # encoding is that thread and zstd's, not a difference from the decoder alone.
                "encode_ns_per_instr": ns(s["transcode_cpu_seconds"] + s["compress_cpu_seconds"]),
                "transcode_ns_per_instr": ns(s["transcode_cpu_seconds"]),
                "compress_ns_per_instr": ns(s["compress_cpu_seconds"]),
                "total_ns_per_instr": ns(s["wall_seconds"]),
                "raw_bytes_per_instr": _per(s["raw_bytes"], n),
                "compressed_bytes_per_instr": _per(s["compressed_bytes"], n),
                "pipe_bytes_per_instr": _per(s["pipe_bytes"], n),
                "external_bytes": s["external_bytes"],
            }
            for integ, enc in BENCH_SCHEMES:
                m = min(sim_instructions, max(n - 1, 1))
                t = time.perf_counter()
                r = _core.run(_core.RunSpec(preset=preset, integrity=integ, encryption=enc, program=list(argv), stdin=stdin,
                                            instructions=m, warmup=0))
                stats, err = r.stats, r.error
                wall = time.perf_counter() - t
                if err:
                    raise RuntimeError(f"{name} under {integ}+{enc}: {err}")
                if stats.get("trace.value_mismatches"):
                    raise RuntimeError(f"{name} under {integ}+{enc}: {stats['trace.value_mismatches']} value mismatches")
                row[f"sim_{integ}+{enc}_minstr_s"] = stats["instructions"] / wall / 1e6
                row[f"sim_{integ}+{enc}_ipc"] = stats["ipc"]
            rows.append(row)
            print(_bench_line(row), file=out, flush=True)
    return rows


_COLUMNS: list[tuple[str, int, Callable[[dict[str, Any]], str]]] = [
    # (header, width, format of a row)
    ("program", 9, lambda r: r["program"]),
    ("instr", 7, lambda r: f"{r['instructions'] / 1e6:.0f}M"),
    ("native s", 8, lambda r: f"{r['native_seconds']:.2f}"),
    ("tool s", 7, lambda r: f"{r['tool_seconds']:.1f}"),
    ("traced s", 8, lambda r: f"{r['trace_seconds']:.1f}"),
    ("slowdown", 8, lambda r: f"{r['slowdown']:.0f}x"),
    ("M instr/s", 9, lambda r: f"{r['trace_minstr_s']:.1f}"),
    ("tool ns/i", 9, lambda r: f"{r['tool_ns_per_instr']:.1f}"),
    ("decode", 6, lambda r: f"{r['decode_ns_per_instr']:.1f}"),
    ("transcode", 9, lambda r: f"{r['transcode_ns_per_instr']:.1f}"),
    ("zstd", 5, lambda r: f"{r['compress_ns_per_instr']:.1f}"),
    ("total", 6, lambda r: f"{r['total_ns_per_instr']:.1f}"),
    ("raw B/i", 7, lambda r: f"{r['raw_bytes_per_instr']:.2f}"),
    ("zstd B/i", 8, lambda r: f"{r['compressed_bytes_per_instr']:.3f}"),
]


def _bench_header() -> str:
    cols = [f"{h:>{w}}" for h, w, _ in _COLUMNS] + [f"{'sim ' + i + '+' + e + ' Mi/s':>20}" for i, e in BENCH_SCHEMES]
    return "  ".join(cols)


def _bench_line(r: dict[str, Any]) -> str:
    vals = [f"{f(r):>{w}}" for _, w, f in _COLUMNS]
    for i, e in BENCH_SCHEMES:
        v = r.get(f"sim_{i}+{e}_minstr_s")
        vals.append(f"{'-' if v is None else f'{v:.2f}':>20}")
    return "  ".join(vals)


def add_bench_tracer_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "bench-tracer",
        help="tracer slowdown, trace size and simulation speed through the pipe on real programs",
    )
    p.add_argument("--size", type=sizes("--size"), default="20M", help="generated input size for the file programs (default %(default)s bytes)")
    p.add_argument("--sim-instructions", type=counts("--sim-instructions"), default="20M", help="instructions simulated per scheme (default %(default)s)")
    p.add_argument("--programs", help="comma-separated subset of gzip,bzip2,sha256sum,sqlite3")
    p.add_argument("--preset", default="suh2003")
    p.add_argument("--repeat", type=int, default=3,
                   help="runs of each stage, interleaved; the fastest is reported (default %(default)s)")
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    p.set_defaults(func=cmd_bench_tracer)
    return p


def cmd_bench_tracer(a: argparse.Namespace) -> int:
    import json

    if a.repeat < 1:
        raise _core.ConfigError(f"--repeat: {a.repeat} (at least one run)")
    out = Output(a.json, "--json") if a.json else None
    print("secmem bench-tracer — per instruction: the tool alone (wall); decoding to records, the file run's "
          f"transcoder and zstd (CPU of their threads); traced to a file (wall); fastest of {a.repeat}", file=sys.stderr)
    print(_bench_header(), flush=True)
    rows = bench_tracer(
        size=a.size,
        sim_instructions=a.sim_instructions,
        programs=a.programs.split(",") if a.programs else None,
        preset=a.preset,
        repeat=a.repeat,
    )
    if out:
        out.write(json.dumps(rows, indent=2) + "\n")
    return 0

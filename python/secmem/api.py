"""The Python API: thin wrappers over the Rust core in ``secmem._core``."""

from __future__ import annotations

import math
import operator
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Union

from . import _core
from ._args import count, size_text

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_PRESET = "suh2003"
DEFAULT_WORKLOAD = "mix"
# The pairs `secmem.compare` and `secmem compare` run by default (here, not in comparison.py, so
# that the CLI can name them without importing pandas).
DEFAULT_SCHEMES = (("none", "none"), ("chash", "none"), ("none", "otp"), ("chash", "otp"))

Size = Union[int, str]
# A count: an int, or text such as "10M" (secmem._args.count).
Count = Union[int, str]

# What a run measures and warms up when not told. A trace file is different: it runs to its
# end, and its warm-up is at most a tenth of it (`_fit_counts`).
DEFAULT_INSTRUCTIONS = 10_000_000
DEFAULT_WARMUP = 1_000_000
# "To the input's end", as the core counts (its progress then shows no ETA).
TO_END = 2**64 - 1
# A trace file is counted before its run when it is this short: longer ones take the default
# warm-up (at most a tenth of them anyway) and run to their end uncounted.
_COUNT_LIMIT = 10 * DEFAULT_WARMUP
# What `export` writes of a workload or program when not told.
DEFAULT_EXPORT = 1_000_000


@dataclass
class _Counts:
    instructions: int
    warmup: int
    to_end: bool  # measure up to the input's end: its ending is not an error


def _fit_counts(inp: "_Input", trace_format: Optional[str], skip: int, instructions: Optional[Count], warmup: Optional[Count]) -> _Counts:
    """The counts of a run, fitted to its input when not given: a trace file runs to its
    end, with a warm-up of at most a tenth of it (never all of it); anything else measures
    ``DEFAULT_INSTRUCTIONS`` after ``DEFAULT_WARMUP``. A short regular trace file is counted
    first (one quick read) so that its run has an exact length."""
    n = None if instructions is None else count(instructions, "instructions")
    warm = None if warmup is None else count(warmup, "warmup")
    if inp.trace is None or (n is not None and warm is not None):
        return _Counts(DEFAULT_INSTRUCTIONS if n is None else n, DEFAULT_WARMUP if warm is None else warm, False)
    length = _core.trace_length(inp.trace, trace_format, skip, _COUNT_LIMIT) if os.path.isfile(inp.trace) else None
    if warm is None:
        warm = DEFAULT_WARMUP if length is None else min(DEFAULT_WARMUP, length // 10)
    if n is not None:
        return _Counts(n, warm, False)
    if length is None:
        return _Counts(TO_END - warm, warm, True)
    return _Counts(max(length - warm, 0), warm, True)


def _sets(params: Optional[Mapping[str, object]]) -> list[str]:
    """``params`` as ``key=value`` assignments (Python's True/False as true/false)."""
    if params is None:
        return []
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping of parameter to value, e.g. {{'l2.size': '256KiB'}}, not {type(params).__name__}")
    return [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in params.items()]


def _seed(v: object) -> int:
    """A seed: a whole number from 0 to 2^64-1."""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**64:
        raise _core.ConfigError(f"seed: {v!r} is not a whole number from 0 to 2^64-1")
    return v


def configuration(
    preset: str = DEFAULT_PRESET,
    integrity: Optional[str] = None,
    encryption: Optional[str] = None,
    params: Optional[Mapping[str, object]] = None,
    sets: Sequence[str] = (),
) -> dict[str, str]:
    """Every parameter of ``preset`` with the schemes and overrides applied, as text: what a
    run with these arguments would use. The registry refuses an unknown preset, scheme or
    parameter with :class:`secmem.ConfigError`."""
    return dict(_core.params(preset, integrity, encryption, list(sets) + _sets(params)))


def _address(v: object, name: str = "addr") -> int:
    """An address or length argument: an int (not a float or bool), ≥ 0."""
    if isinstance(v, bool):
        raise TypeError(f"{name} must be an int, not bool")
    try:
        i = operator.index(v)  # type: ignore[arg-type]  # a TypeError is the answer wanted
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(v).__name__}") from None
    if i < 0:
        raise ValueError(f"{name} must not be negative (got {i})")
    if i >= 2**64:
        # the engine's addresses and lengths are 64-bit: this one is outside any memory
        raise ValueError(f"{name} {i:#x} is outside the memory (addresses and lengths are below 2^64)")
    return i


def _bytes_like(data: object, name: str = "data") -> bytes:
    """Bytes of a bytes-like object; an int (bytes(5) would be five zeros) or str is refused."""
    if isinstance(data, bytes):
        return data
    try:
        return memoryview(data).tobytes()  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be bytes-like (bytes, bytearray, memoryview), not {type(data).__name__}") from None


class Interrupted(KeyboardInterrupt):
    """A run stopped by SIGINT or SIGTERM (``signal`` names it) inside a larger job."""

    def __init__(self, message: str, signal: str):
        super().__init__(message)
        self.signal = signal


@dataclass
class Result:
    """Statistics of one run (``stats``) and, if the run stopped early, why (``error``)."""

    stats: dict[str, Any]
    error: Optional[str] = None
    config: dict[str, str] = field(default_factory=dict)
    # What the run measured but a reader should doubt (a warm-up that did not fill the L2:
    # `cold_cache`), one sentence each with the fix.
    warnings: list[str] = field(default_factory=list)
    # Filled when saved (``run --json``) and by ``secmem.load_result``: see secmem.provenance.
    provenance: dict[str, Any] = field(default_factory=dict)
    workload_identity: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.stats[key]

    @property
    def interrupted(self) -> Optional[str]:
        """The signal that stopped the run ("SIGINT", "SIGTERM"), or None."""
        v = self.stats.get("interrupted")
        return None if v is None else str(v)

    def to_pandas(self) -> "pd.Series[Any]":
        """The statistics as a pandas Series indexed by statistic name."""
        import pandas as pd

        return pd.Series(self.stats, name=self.stats.get("workload", "run"))

    @property
    def frame(self) -> "pd.Series[Any]":
        return self.to_pandas()


@dataclass
class _Input:
    """Which instructions a run or export reads: a built-in workload, a trace file or a
    program (a suite workload becomes its program, under ``suite_name``)."""

    workload: Optional[str]
    trace: Optional[str]
    program: Optional[list[str]]
    env: Optional[list[tuple[str, str]]]
    cwd: Optional[str]
    stdin: Optional[str]
    clear_env: bool
    suite_name: Optional[str] = None


def _name(v: object, what: str) -> Optional[str]:
    """An optional name or path argument: None, a str or an os.PathLike."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, os.PathLike):
        return os.fspath(v)  # type: ignore[no-any-return]
    raise TypeError(f"{what} must be a str, not {type(v).__name__}")


def _input(
    workload: object,
    trace: object,
    program: Optional[Sequence[str]],
    env: Optional[Mapping[str, str]],
    cwd: object,
    stdin: object,
    trace_format: Optional[str],
) -> _Input:
    """Which instructions to read: a built-in workload, a suite workload (its real program,
    run under the tracer), a trace file or a program."""
    if isinstance(program, (str, bytes)):
        raise TypeError("program is an argv list, e.g. ['/usr/bin/gzip', '-c', 'file']")
    if env is not None and not isinstance(env, Mapping):
        raise TypeError(f"env must be a mapping of variable to value, not {type(env).__name__}")
    wl, tr, wd, si = _name(workload, "workload"), _name(trace, "trace"), _name(cwd, "cwd"), _name(stdin, "stdin")
    if trace_format not in (None, "auto") and tr is None:
        raise _core.ConfigError("--trace-format applies to --trace files only")
    if tr == "-":
        tr = "/dev/stdin"
    if tr is None and wl is None and program is None:
        wl = DEFAULT_WORKLOAD
    argv = [os.fspath(a) for a in program] if program is not None else None  # paths as arguments too
    pairs = sorted(env.items()) if env is not None else None
    if wl is None or wl in dict(_core.workloads()):
        return _Input(wl, tr, argv, pairs, wd, si, clear_env=env is not None)
    from . import suite  # only for a suite workload: most runs never load the suite's tables

    if not suite.known(wl):
        raise _core.ConfigError(
            f"unknown workload '{wl}': built-in are {', '.join(n for n, _ in _core.workloads())}; "
            f"suite workloads are {', '.join(suite.variants())}"
        )
    if program is not None or tr is not None:
        raise _core.ConfigError("give one of a workload, a trace file or a program, not several")
    cmd = suite.command(wl)
    return _Input(None, None, list(cmd.argv), sorted(cmd.env.items()), cmd.cwd, cmd.stdin, clear_env=True, suite_name=wl)


def run(
    workload: Optional[str] = None,
    *,
    trace: Optional[str] = None,
    integrity: Optional[str] = None,
    encryption: Optional[str] = None,
    preset: str = DEFAULT_PRESET,
    params: Optional[Mapping[str, object]] = None,
    sets: Sequence[str] = (),
    instructions: Optional[Count] = None,
    warmup: Optional[Count] = None,
    seed: int = 1,
    progress: bool = False,
    trace_format: Optional[str] = None,
    skip: Count = 0,
    program: Optional[Sequence[str]] = None,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    stdin: Optional[str] = None,
    sample: Union[None, bool, str] = None,
    workloads: Optional[Sequence[str]] = None,
    traces: Optional[Sequence[str]] = None,
    cores: Optional[int] = None,
    alone: bool = True,
    interval: Optional[Count] = None,
) -> Result:
    """Simulate ``instructions`` of a workload, a trace file or a live program.

    - ``workload``: a built-in workload (default ``mix``) or an installed suite workload
      (``secmem workloads``), which runs the real program under the tracer;
    - ``trace``: a trace file (``trace_format``: ``native``, ``champsim``, ``lackey``;
      default: detected);
    - ``program``: an argv run under secmem's Valgrind tracer and simulated through a pipe
      (``env``: its complete environment, default inherited; ``cwd``; ``stdin`` a file).

    Counts (``instructions``, ``warmup``, ``skip``) are ints or text as the command line
    takes them (``"10M"``, ``"500k"``). Not given, a run measures 10M instructions after a
    warm-up of 1M; a trace file runs to its end after a warm-up of 1M or a tenth of the trace,
    whichever is shorter.

    ``interval`` (``"1M"``) adds statistics of every that many measured instructions as
    series, one element per interval (the last may be shorter): ``interval.ipc``,
    ``interval.cycles``, ``interval.instructions``, ``interval.l2.misses``,
    ``interval.l2.miss_rate``, ``interval.mem.read_bytes``, ``interval.mem.write_bytes``
    (``secmem plot`` draws them over time). Not with ``sample`` or several cores.

    ``skip`` fast-forwards that many instructions before the warm-up (for programs, the
    tracer skips them natively fast); memory they wrote still reaches later loads.

    ``params`` (``{"l2.size": "256KiB"}``) and ``sets`` (``["l2.size=256KiB"]``) override
    preset parameters. Bad names or values raise :class:`secmem.ConfigError`.

    ``sample`` runs it sampled (SMARTS, docs/sampling.md): ``True`` for a plan chosen from
    ``instructions``, or ``"U:W:D"`` (every U instructions, W measured after D in detail;
    ``"U"`` and ``"U:W"`` take the default W and D). The warm-up and the instructions between
    windows are warmed functionally; ``stats`` are the windows' combined, with a 95%
    interval's half-width as ``ci95.<key>`` for IPC and every rate, and the plan as
    ``sampling.*``.

    Several cores (``cores=N``, the ``cores`` parameter, or a list: ``workloads=["mcf",
    "gcc"]``, ``traces=[...]``, ``workload="mcf,gcc"``) share the last level, the memory
    controller and the protection engine, each core running its own input (one input on N
    cores: rate mode). ``stats`` then has each core's statistics (``core0.ipc``, …), the
    mix's throughput (``ipc``), and, with ``alone`` (the default), each program's speedup
    against its IPC alone on one core — from the results store when it has that point, else
    measured by running it alone — summed (``mix.weighted_speedup``) and as a harmonic mean
    (``mix.harmonic_speedup``). See docs/multicore.md.

    A run that measured fewer instructions than asked (the input ended, a damaged trace, an
    integrity failure, SIGINT/SIGTERM) returns what it measured and says why in ``error``;
    ``interrupted`` names the signal if one stopped it.
    """
    skip_n = count(skip, "skip")
    every = 0 if interval is None else count(interval, "interval")
    spec_seed = _seed(seed)
    plan = _sample_plan(sample)
    all_sets = list(sets) + _sets(params)
    mix = _mix_inputs(workload, workloads, trace, traces)
    if cores is not None:
        if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
            raise _core.ConfigError(f"cores: {cores!r} is not a whole number of at least 1")
        all_sets.append(f"cores={cores}")
    if mix is not None or cores is not None or any(a.split("=", 1)[0].strip() == "cores" for a in all_sets):
        ncores = int(dict(_core.params(preset, integrity, encryption, all_sets))["cores"])
        if mix is not None and ncores == 1:
            all_sets.append(f"cores={len(mix)}")
            ncores = len(mix)
        if ncores > 1:
            if plan is not None:
                raise _core.ConfigError("--sample runs one core: it cannot sample a mix")
            if every:
                raise _core.ConfigError("--interval measures one core: it cannot be combined with a mix")
            # A mix measures what it is asked (cores replay their traces until all are done).
            n = DEFAULT_INSTRUCTIONS if instructions is None else count(instructions, "instructions")
            warm = DEFAULT_WARMUP if warmup is None else count(warmup, "warmup")
            spec = _core.RunSpec(
                preset=preset, integrity=integrity, encryption=encryption, sets=all_sets, instructions=n, warmup=warm,
                skip=skip_n, seed=spec_seed, progress=bool(progress),
            )
            given = mix if mix is not None else [(workload, trace)]
            inputs = [_input(w, t, program, env, cwd, stdin, trace_format) for w, t in given]
            return _run_mix(spec, inputs, trace_format, alone)
    inp = _input(workload, trace, program, env, cwd, stdin, trace_format)
    fit = _fit_counts(inp, trace_format, skip_n, instructions, warmup)
    n, warm = fit.instructions, fit.warmup
    if plan is not None and n >= TO_END - DEFAULT_WARMUP:
        raise _core.ConfigError("--sample of a trace longer than 10M instructions needs -n (the plan is chosen from it)")
    out = _core.run(
        _core.RunSpec(
            preset=preset,
            integrity=integrity,
            encryption=encryption,
            sets=all_sets,
            workload=inp.workload,
            trace=inp.trace,
            trace_format=trace_format,
            program=inp.program,
            program_env=inp.env,
            clear_env=inp.clear_env,
            cwd=inp.cwd,
            stdin=inp.stdin,
            instructions=n,
            warmup=warm,
            skip=skip_n,
            seed=spec_seed,
            sample=plan,
            progress=bool(progress),
            interval=every,
        )
    )
    stats, error = out.stats, out.error
    if inp.suite_name:
        stats["workload"] = inp.suite_name
    # A sampled run measured its windows of the instructions it went through.
    measured = stats.get("sampling.instructions", stats.get("instructions", 0))
    if error is None and measured < n and not fit.to_end:
        after = f", after skipping {skip_n:,}" if skip_n else ""
        error = f"the input ended after {measured:,} of the {n:,} instructions asked for{after}"
    cold = cold_cache(stats, out.config.get("l2.size"))
    return Result(stats=stats, error=error, config=dict(out.config), warnings=[cold] if cold else [])


# A cache the warm-up did not fill matters when the measurement moves at least this share of
# the cache's lines: a program that hardly misses has a cache as warm as it will get.
COLD_SHARE = 1 / 16


def cold_cache(stats: Mapping[str, Any], l2_size: Union[None, str, int] = None) -> Optional[str]:
    """A warning, with the numbers and the fix, when a run's warm-up brought fewer lines into
    the L2 than it holds (``l2.warmup_fills`` < ``l2.lines``) while the measured region kept
    filling it: the measurement then began in a cache the program had not filled (empty, or
    holding the memory image), not in the steady state. None otherwise: a warm-up of 0 (a cold
    start asked for), or a run without those statistics (a mix, a sampled run)."""
    lines, fills, n = stats.get("l2.lines"), stats.get("l2.warmup_fills"), stats.get("instructions")
    if not all(isinstance(v, int) for v in (lines, fills, n)) or not lines or not n:
        return None
    assert isinstance(lines, int) and isinstance(fills, int) and isinstance(n, int)
    measured = int(stats.get("l2.misses", 0) or 0) + int(stats.get("l2.meta_misses", 0) or 0)
    if fills >= lines or measured < lines * COLD_SHARE:
        return None
    warm = int(stats.get("warmup", 0))
    if warm == 0:
        return None  # no warm-up asked for: a cold start is what was asked
    # Lines per instruction, the warm-up's own if it brought any, else the measurement's.
    rate = fills / warm if fills else measured / n
    need = _round_up(lines / rate * 1.25)
    size = f" ({size_text(l2_size) if isinstance(l2_size, int) else l2_size})" if l2_size else ""
    return (
        f"the warm-up of {warm:,} instructions brought {fills:,} lines into the L2, which holds {lines:,}{size}: "
        f"the measurement began in a cache the program had not filled, not in its steady state; "
        f"give a longer warm-up, e.g. --warmup {_count_text(need)} (warmup={need})"
    )


def _round_up(x: float) -> int:
    """``x`` rounded up to its leading digit (1,234,567 → 2,000,000)."""
    v = max(int(math.ceil(x)), 1)
    unit = int(10 ** (len(str(v)) - 1))
    return -(-v // unit) * unit


def _count_text(v: int) -> str:
    """A count as the command line writes it: 2000000 → 2M, 300000 → 300k."""
    for div, suffix in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if v >= div and v % div == 0:
            return f"{v // div}{suffix}"
    return str(v)


def _mix_inputs(
    workload: object, workloads: Optional[Sequence[str]], trace: object, traces: Optional[Sequence[str]]
) -> Optional[list[tuple[Optional[str], Optional[str]]]]:
    """The (workload, trace) of each core of a mix given as a list (``workloads``, ``traces``,
    or ``workload="a,b"``), or None for one input."""
    if isinstance(workload, str) and "," in workload:
        if workloads is not None:
            raise TypeError("give workload or workloads, not both")
        workloads = [w.strip() for w in workload.split(",")]
        workload = None
    if isinstance(workloads, str) or isinstance(traces, str):
        raise TypeError("workloads and traces are lists, e.g. ['mcf', 'gcc']")
    if workloads is None and traces is None:
        return None
    if workload is not None or trace is not None:
        raise TypeError("give a list (workloads, traces) or one input (workload, trace), not both")
    out: list[tuple[Optional[str], Optional[str]]] = [(_name(w, "workloads"), None) for w in workloads or []]
    out += [(None, _name(t, "traces")) for t in traces or []]
    if not out or any(not (w or t) for w, t in out):
        raise _core.ConfigError(f"a mix names a workload or trace for every core: {[w or t for w, t in out]}")
    return out


def _run_mix(spec: _core.RunSpec, inputs: list[_Input], trace_format: Optional[str], alone: bool) -> Result:
    """One run of several cores (``run`` with ``cores`` > 1)."""
    specs = [
        _core.RunSpec(
            workload=i.workload, trace=i.trace, trace_format=trace_format, program=i.program, program_env=i.env,
            clear_env=i.clear_env, cwd=i.cwd, stdin=i.stdin, skip=spec.skip,
        )
        for i in inputs
    ]
    # A suite workload by its name (its input is its program); the others as the core names them.
    names = [i.suite_name or "" for i in inputs]
    ipc_alone = (lambda i: _alone_ipc(spec, specs[i], inputs[i])) if alone else None
    out = _core.run_mix(spec, specs, ipc_alone, names)
    return Result(stats=out.stats, error=out.error, config=dict(out.config))


def _alone_ipc(spec: _core.RunSpec, inp_spec: _core.RunSpec, inp: _Input) -> Optional[float]:
    """``inp``'s IPC alone on one core of ``spec``'s machine: from the results store if it
    holds that point (secmem.results.point_key), else measured now. None if that run fails
    (the mix then reports no speedups; its own error says more)."""
    sets = list(spec.sets) + ["cores=1"]
    one = _core.RunSpec(
        preset=spec.preset, integrity=spec.integrity, encryption=spec.encryption, sets=sets, workload=inp_spec.workload,
        trace=inp_spec.trace, trace_format=inp_spec.trace_format, program=inp_spec.program, program_env=inp_spec.program_env,
        clear_env=inp_spec.clear_env, cwd=inp_spec.cwd, stdin=inp_spec.stdin, instructions=spec.instructions,
        warmup=spec.warmup, skip=spec.skip, seed=spec.seed,
    )
    stored = _stored_ipc(one, inp)
    if stored is not None:
        return stored
    out = _core.run(one)
    ipc = out.stats.get("ipc")
    return float(ipc) if out.error is None and isinstance(ipc, (int, float)) and ipc > 0 else None


def _stored_ipc(one: _core.RunSpec, inp: _Input) -> Optional[float]:
    """The IPC of the run ``one`` in the default results store, if that point is there and ok."""
    from . import provenance, results

    path = results.default_path()
    if not os.path.isdir(path):
        return None
    try:
        config = dict(_core.params(one.preset, one.integrity, one.encryption, list(one.sets)))
        env = dict(inp.env) if inp.env is not None else None
        if inp.suite_name:
            ident = provenance.workload_identity(inp.suite_name, seed=one.seed)
        else:
            ident = provenance.workload_identity(inp.workload, trace=inp.trace, program=inp.program, seed=one.seed, env=env, cwd=inp.cwd, stdin=inp.stdin)
        key = results.point_key(config, ident, one.seed, one.instructions, one.warmup, one.skip)
        t = results.open_store(path, create=False).table(columns=["ipc"])
        if t.num_rows == 0 or "ipc" not in t.column_names:
            return None
        for k, status, ipc in zip(t.column("key").to_pylist(), t.column("status").to_pylist(), t.column("ipc").to_pylist()):
            if k == key and status == "ok" and isinstance(ipc, (int, float)) and ipc > 0:
                return float(ipc)
    except Exception:  # a store that cannot answer is a store without the point
        return None
    return None


def _sample_plan(sample: object) -> Optional[str]:
    """``run``'s ``sample`` as the core takes it: None (off), "" (defaults) or "U:W:D"."""
    if sample is None or sample is False:
        return None
    if sample is True:
        return ""
    if isinstance(sample, str):
        return sample
    raise TypeError(f"sample: expected True or a 'U:W:D' string, got {type(sample).__name__}")


def export(
    path: str,
    workload: Optional[str] = None,
    *,
    format: str = "native",
    records: Optional[Count] = None,
    trace: Optional[str] = None,
    trace_format: Optional[str] = None,
    program: Optional[Sequence[str]] = None,
    skip: Count = 0,
    seed: int = 1,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    stdin: Optional[str] = None,
    uncompressed: bool = False,
) -> dict[str, Any]:
    """Write ``records`` instructions (default: a trace file whole, 1M of anything else) of
    any input ``run`` takes (after ``skip``) to ``path``
    as a ``native`` or ``champsim`` trace (ChampSim's: raw, or ``.xz``/``.gz`` compressed by
    the name), so another simulator can run exactly these instructions. A native trace is
    stored ``uncompressed`` if asked: 4-9 times the bytes, read for 7-9% less CPU
    (docs/trace-formats.md). Returns what was
    written (``instructions``, ``external_records``: written to native traces, left out of
    ChampSim ones; ``branch_types``; registers and accesses beyond a ChampSim record's
    slots)."""
    inp = _input(workload, trace, program, env, cwd, stdin, trace_format)
    return _core.export(
        str(path),
        format,
        (TO_END if inp.trace is not None else DEFAULT_EXPORT) if records is None else count(records, "records"),
        inp.workload,
        inp.trace,
        trace_format,
        count(skip, "skip"),
        inp.program,
        inp.env,
        inp.clear_env,
        inp.cwd,
        inp.stdin,
        _seed(seed),
        uncompressed,
    )


def workloads() -> list[tuple[str, str]]:
    """Built-in workloads as (name, description)."""
    return list(_core.workloads())


def presets() -> list[str]:
    return list(_core.presets())


class Untrusted:
    """The adversary's view of the raw untrusted memory: data, tree chunks, time stamps."""

    def __init__(self, mem: "SecureMemory"):
        self._m = mem._m

    @property
    def size(self) -> int:
        return self._m.raw_size

    def peek(self, addr: int, n: int) -> bytes:
        return self._m.peek(_address(addr), _address(n, "n"))

    def poke(self, addr: int, data: bytes) -> None:
        self._m.poke(_address(addr), _bytes_like(data))

    def snapshot(self) -> _core.Snapshot:
        return self._m.snapshot()

    def restore(self, snapshot: _core.Snapshot) -> None:
        self._m.restore(snapshot)

    def touched_pages(self) -> list[int]:
        return self._m.touched_pages()


class SecureMemory:
    """The functional engine alone: protected memory of ``size`` bytes.

    Reads and writes go through the trusted cache; lines leave it encrypted and hashed into
    untrusted memory. A failed verification raises :class:`secmem.IntegrityError`.

    Keys: without ``seed`` (the default) they come from 128 bits of the OS's random source
    (each scheme key is AES of its purpose under them), so nobody can compute them offline;
    with ``seed=N`` they derive from the seed and are the same on every
    run (for reproducible experiments and tests, not for protecting anything). Simulations
    (``secmem.run``) always use their ``seed``, default 1, so results are repeatable.
    """

    def __init__(
        self,
        size: Size = "64MiB",
        integrity: str = "chash",
        encryption: str = "otp",
        preset: str = DEFAULT_PRESET,
        params: Optional[Mapping[str, object]] = None,
        seed: Optional[int] = None,
    ):
        self._m = _core.SecureMemory(str(size), integrity, encryption, preset, _sets(params), None if seed is None else _seed(seed))
        self.untrusted = Untrusted(self)

    @property
    def size(self) -> int:
        return self._m.size

    @property
    def integrity(self) -> str:
        return self._m.integrity

    @property
    def encryption(self) -> str:
        return self._m.encryption

    def write(self, addr: int, data: bytes) -> None:
        self._m.write(_address(addr), _bytes_like(data))

    def read(self, addr: int, n: int) -> bytes:
        return self._m.read(_address(addr), _address(n, "n"))

    def flush(self) -> None:
        """Write back and drop every cached line: the next read comes from untrusted memory."""
        self._m.flush()

    def check(self) -> int:
        """Verify every touched chunk; returns how many were checked."""
        return self._m.check()

    def set_key_id(self, addr: int, size: int, key_id: int) -> None:
        """Give the pages of ``[addr, addr + size)`` key ID ``key_id`` (encryption "xts": a key
        per key ID, as MKTME's KeyID in the page tables). Cached lines are written back first,
        under the key ID they were written with; the bytes stay, so a line written under another
        key ID reads as garbage (and fails integrity "tdx"). ValueError for an ID beyond
        ``xts.key_ids``, a range of partial pages, or a scheme without key IDs. The map can also
        be given up front: ``params={"xts.key_map": "0x100000+1MiB:2"}``."""
        self._m.set_key_id(_address(addr), _address(size, "size"), _address(key_id, "key_id"))

    def key_id(self, addr: int) -> int:
        """The key ID of the page holding ``addr`` (0 without a key table)."""
        return self._m.key_id(_address(addr))

    def stats(self) -> dict[str, Any]:
        return self._m.stats()

    def layout(self) -> list[tuple[str, int, int]]:
        """Regions of untrusted memory as (name, base, size)."""
        return self._m.layout()

    def metadata(self, addr: int) -> list[tuple[str, int]]:
        """(description, address) of each piece of metadata protecting ``addr``."""
        return self._m.metadata(_address(addr))
    def suspend(self) -> None:
        """Suspend (encryption "mecu", seed 002): caches are written back and the key device
        removed; ``untrusted`` is then what an offline adversary reads. Other schemes raise
        RuntimeError."""
        self._m.suspend()

    def resume(self) -> None:
        """Resume after :meth:`suspend`: the key is back and the state counter advances."""
        self._m.resume()

    def reboot(self) -> None:
        """Reboot: a new key and state; the old memory is unreadable garbage from now on."""
        self._m.reboot()

    @property
    def dma_region(self) -> tuple[int, int]:
        """(base, size) of the unprotected region devices write into (003 §4.6.1)."""
        return self._m.dma_region()

    def read_without_checking(self, addr: int, n: int) -> bytes:
        """Read the unprotected DMA region raw: no decryption, no verification. Any other
        address is refused, so checked and unchecked data cannot be confused."""
        return self._m.read_without_checking(_address(addr), _address(n, "n"))

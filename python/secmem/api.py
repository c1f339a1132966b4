"""The Python API: thin wrappers over the Rust core in ``secmem._core``."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence, Union

from . import _core

DEFAULT_PRESET = "suh2003"
DEFAULT_WORKLOAD = "mix"

Size = Union[int, str]


def _sets(params: Optional[dict]) -> list:
    # Python's True/False as the parameters' true/false.
    return [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in (params or {}).items()]


def _whole(v, name: str) -> int:
    """A non-negative whole number (an int, or a float such as 2e6 that is whole)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or isinstance(v, float) and not v.is_integer() or v < 0:
        raise _core.ConfigError(f"{name}: {v!r} is not a non-negative whole number")
    return int(v)


def _address(v, name: str = "addr") -> int:
    """An address or length argument: an int (not a float or bool), ≥ 0."""
    if isinstance(v, bool):
        raise TypeError(f"{name} must be an int, not bool")
    try:
        v = operator.index(v)
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(v).__name__}") from None
    if v < 0:
        raise ValueError(f"{name} must not be negative (got {v})")
    return v


def _bytes_like(data, name: str = "data") -> bytes:
    """Bytes of a bytes-like object; an int (bytes(5) would be five zeros) or str is refused."""
    if isinstance(data, bytes):
        return data
    try:
        return memoryview(data).tobytes()
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

    stats: dict
    error: Optional[str] = None
    config: dict = field(default_factory=dict)
    # Filled when saved (``run --json``) and by ``secmem.load_result``: see secmem.provenance.
    provenance: dict = field(default_factory=dict)
    workload_identity: dict = field(default_factory=dict)

    def __getitem__(self, key):
        return self.stats[key]

    @property
    def interrupted(self) -> Optional[str]:
        """The signal that stopped the run ("SIGINT", "SIGTERM"), or None."""
        return self.stats.get("interrupted")

    def to_pandas(self):
        """The statistics as a pandas Series indexed by statistic name."""
        import pandas as pd

        return pd.Series(self.stats, name=self.stats.get("workload", "run"))

    @property
    def frame(self):
        return self.to_pandas()


def _input(workload, trace, program, env, cwd, stdin, trace_format):
    """Which instructions to read: a built-in workload, a suite workload (its real program,
    run under the tracer), a trace file or a program. Returns (workload, trace, program, env,
    cwd, stdin, clear_env, suite_name)."""
    if isinstance(program, (str, bytes)):
        raise TypeError("program is an argv list, e.g. ['/usr/bin/gzip', '-c', 'file']")
    if trace_format not in (None, "auto") and trace is None:
        raise _core.ConfigError("--trace-format applies to --trace files only")
    if trace == "-":
        trace = "/dev/stdin"
    if trace is None and workload is None and program is None:
        workload = DEFAULT_WORKLOAD
    clear_env = env is not None
    suite_name = None
    if workload is not None and workload not in dict(_core.workloads()):
        from . import suite

        if not suite.known(workload):
            raise _core.ConfigError(
                f"unknown workload '{workload}': built-in are {', '.join(n for n, _ in _core.workloads())}; "
                f"suite workloads are {', '.join(suite.variants())}"
            )
        if program is not None or trace is not None:
            raise _core.ConfigError("give one of a workload, a trace file or a program, not several")
        cmd = suite.command(workload)
        program, env, cwd, stdin, clear_env = list(cmd.argv), dict(cmd.env), cmd.cwd, cmd.stdin, True
        suite_name, workload = workload, None
    return workload, trace, program, env, cwd, stdin, clear_env, suite_name


def run(
    workload: Optional[str] = None,
    *,
    trace: Optional[str] = None,
    integrity: Optional[str] = None,
    encryption: Optional[str] = None,
    preset: str = DEFAULT_PRESET,
    params: Optional[dict] = None,
    sets: Sequence[str] = (),
    instructions: int = 10_000_000,
    warmup: int = 1_000_000,
    seed: int = 1,
    progress: bool = False,
    trace_format: Optional[str] = None,
    skip: int = 0,
    program: Optional[Sequence[str]] = None,
    env: Optional[dict] = None,
    cwd: Optional[str] = None,
    stdin: Optional[str] = None,
    sample: Union[None, bool, str] = None,
) -> Result:
    """Simulate ``instructions`` of a workload, a trace file or a live program.

    - ``workload``: a built-in workload (default ``mix``) or an installed suite workload
      (``secmem workloads``), which runs the real program under the tracer;
    - ``trace``: a trace file (``trace_format``: ``native``, ``champsim``, ``lackey``;
      default: detected);
    - ``program``: an argv run under secmem's Valgrind tracer and simulated through a pipe
      (``env``: its complete environment, default inherited; ``cwd``; ``stdin`` a file).

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

    A run that measured fewer instructions than asked (the input ended, a damaged trace, an
    integrity failure, SIGINT/SIGTERM) returns what it measured and says why in ``error``;
    ``interrupted`` names the signal if one stopped it.
    """
    instructions, warmup, skip = _whole(instructions, "instructions"), _whole(warmup, "warmup"), _whole(skip, "skip")
    seed = _whole(seed, "seed")
    plan = _sample_plan(sample)
    all_sets = list(sets) + _sets(params)
    workload, trace, program, env, cwd, stdin, clear_env, suite_name = _input(workload, trace, program, env, cwd, stdin, trace_format)
    stats, error = _core.run(
        preset,
        integrity,
        encryption,
        all_sets,
        workload,
        trace,
        int(instructions),
        int(warmup),
        int(seed),
        bool(progress),
        trace_format,
        int(skip),
        list(program) if program is not None else None,
        sorted(env.items()) if env is not None else None,
        clear_env,
        cwd,
        stdin,
        None,
        plan,
    )
    if suite_name:
        stats["workload"] = suite_name
    # A sampled run measured its windows of the instructions it went through.
    measured = stats.get("sampling.instructions", stats.get("instructions", 0))
    if error is None and measured < instructions:
        after = f", after skipping {skip:,}" if skip else ""
        error = f"the input ended after {measured:,} of the {instructions:,} instructions asked for{after}"
    config = dict(_core.params(preset, integrity, encryption, all_sets))
    return Result(stats=stats, error=error, config=config)


def _sample_plan(sample) -> Optional[str]:
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
    records: int = 1_000_000,
    trace: Optional[str] = None,
    trace_format: Optional[str] = None,
    program: Optional[Sequence[str]] = None,
    skip: int = 0,
    seed: int = 1,
    env: Optional[dict] = None,
    cwd: Optional[str] = None,
    stdin: Optional[str] = None,
) -> dict:
    """Write ``records`` instructions of any input ``run`` takes (after ``skip``) to ``path``
    as a ``native`` or ``champsim`` trace (ChampSim's: raw, or ``.xz``/``.gz`` compressed by
    the name), so another simulator can run exactly these instructions. Returns what was
    written (``instructions``, ``external_records``: written to native traces, left out of
    ChampSim ones; ``branch_types``; registers and accesses beyond a ChampSim record's
    slots)."""
    workload, trace, program, env, cwd, stdin, clear_env, _ = _input(workload, trace, program, env, cwd, stdin, trace_format)
    return _core.export(
        str(path),
        format,
        int(records),
        workload,
        trace,
        trace_format,
        int(skip),
        list(program) if program is not None else None,
        sorted(env.items()) if env is not None else None,
        clear_env,
        cwd,
        stdin,
        int(seed),
    )


def compare(
    workload=None,
    schemes: Optional[Iterable[tuple]] = None,
    **kwargs,
):
    """Run one workload, or each of a list, under several (integrity, encryption) pairs; a
    DataFrame (printed whole) with IPC normalized to the unprotected baseline, L2 miss rate
    and memory traffic, and with several workloads a geometric-mean row per pair. ``schemes``
    defaults to none+none, chash+none, none+otp, chash+otp."""
    from .comparison import DEFAULT_SCHEMES, compare as _compare

    return _compare(workload, DEFAULT_SCHEMES if schemes is None else schemes, **kwargs)


def workloads() -> list:
    """Built-in workloads as (name, description)."""
    return list(_core.workloads())


def presets() -> list:
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

    def snapshot(self):
        return self._m.snapshot()

    def restore(self, snapshot) -> None:
        self._m.restore(snapshot)

    def touched_pages(self) -> list:
        return self._m.touched_pages()


class SecureMemory:
    """The functional engine alone: protected memory of ``size`` bytes.

    Reads and writes go through the trusted cache; lines leave it encrypted and hashed into
    untrusted memory. A failed verification raises :class:`secmem.IntegrityError`.
    """

    def __init__(
        self,
        size: Size = "64MiB",
        integrity: str = "chash",
        encryption: str = "otp",
        preset: str = DEFAULT_PRESET,
        params: Optional[dict] = None,
        seed: int = 1,
    ):
        self._m = _core.SecureMemory(str(size), integrity, encryption, preset, _sets(params), seed)
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

    def stats(self) -> dict:
        return self._m.stats()

    def layout(self) -> list:
        """Regions of untrusted memory as (name, base, size)."""
        return self._m.layout()

    def metadata(self, addr: int) -> list:
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
    def dma_region(self) -> tuple:
        """(base, size) of the unprotected region devices write into (003 §4.6.1)."""
        return self._m.dma_region()

    def read_without_checking(self, addr: int, n: int) -> bytes:
        """Read the unprotected DMA region raw: no decryption, no verification. Any other
        address is refused, so checked and unchecked data cannot be confused."""
        return self._m.read_without_checking(_address(addr), _address(n, "n"))

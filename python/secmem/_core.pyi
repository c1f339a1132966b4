# Types of secmem._core, the Rust engine (crates/python/src). Every name the module exports
# is here, and tests/test_core_stub.py checks the two against each other both ways.

from typing import Any, Callable, Iterator, Optional, final

__all__ = [
    "Access",
    "CODEAUTH_KEY_BYTES",
    "CodeAuthError",
    "Component",
    "ConfigError",
    "DEFAULT_PREWARM",
    "IntegrityError",
    "Param",
    "Record",
    "RunOutcome",
    "RunSpec",
    "SecureMemory",
    "Snapshot",
    "TRACE_READINGS",
    "TraceError",
    "TraceReader",
    "TracerError",
    "__version__",
    "attack",
    "attack_codeauth",
    "attack_encryption",
    "bench",
    "bench_schemes",
    "build_commit",
    "build_id",
    "checkpoint_windows",
    "codeauth_derive_keys",
    "codeauth_fingerprint",
    "codeauth_keys",
    "codeauth_sign",
    "codeauth_tagfile_info",
    "codeauth_verify",
    "codeauth_write",
    "components",
    "detect_trace_format",
    "encryption_schemes",
    "export",
    "export_workload",
    "integrity_schemes",
    "params",
    "parse_count",
    "parse_size",
    "presets",
    "progress_seconds",
    "run",
    "run_checkpointed",
    "run_mix",
    "sample_plan",
    "scheme_pairs",
    "set_trace_reading",
    "stat_declaration",
    "t95",
    "trace_formats",
    "trace_length",
    "trace_program",
    "trace_reading",
    "trace_stage",
    "tracer_unavailable",
    "workloads",
    "write_bench_trace",
]

__version__: str
# A hash of the engine's sources (build.rs): part of every results-store key.
build_id: str
# The git commit built (``+dirty`` with uncommitted changes), None outside a repository.
build_commit: Optional[str]
CODEAUTH_KEY_BYTES: int

class ConfigError(ValueError):
    """A bad preset, parameter, scheme or workload."""

class IntegrityError(Exception):
    """Untrusted memory did not behave like valid memory."""

    addr: int
    what: str

class TraceError(ValueError):
    path: Optional[str]
    offset: Optional[int]
    what: str

class TracerError(RuntimeError): ...
class CodeAuthError(ValueError): ...

# --- the typed boundary (spec.rs) --------------------------------------------------------

@final
class RunSpec:
    """One simulation: keyword-only, every field readable."""

    def __new__(
        cls,
        *,
        preset: str = ...,
        integrity: Optional[str] = None,
        encryption: Optional[str] = None,
        sets: list[str] = ...,
        workload: Optional[str] = None,
        trace: Optional[str] = None,
        trace_format: Optional[str] = None,
        program: Optional[list[str]] = None,
        program_env: Optional[list[tuple[str, str]]] = None,
        clear_env: bool = False,
        cwd: Optional[str] = None,
        stdin: Optional[str] = None,
        stdout: Optional[str] = None,
        instructions: int = 10_000_000,
        warmup: int = 1_000_000,
        skip: int = 0,
        seed: int = 1,
        sample: Optional[str] = None,
        progress: bool = False,
        interval: int = 0,
    ) -> "RunSpec": ...
    @property
    def preset(self) -> str: ...
    @property
    def integrity(self) -> Optional[str]: ...
    @property
    def encryption(self) -> Optional[str]: ...
    @property
    def sets(self) -> list[str]: ...
    @property
    def workload(self) -> Optional[str]: ...
    @property
    def trace(self) -> Optional[str]: ...
    @property
    def trace_format(self) -> Optional[str]: ...
    @property
    def program(self) -> Optional[list[str]]: ...
    @property
    def program_env(self) -> Optional[list[tuple[str, str]]]: ...
    @property
    def clear_env(self) -> bool: ...
    @property
    def cwd(self) -> Optional[str]: ...
    @property
    def stdin(self) -> Optional[str]: ...
    @property
    def stdout(self) -> Optional[str]: ...
    @property
    def instructions(self) -> int: ...
    @property
    def warmup(self) -> int: ...
    @property
    def skip(self) -> int: ...
    @property
    def seed(self) -> int: ...
    @property
    def sample(self) -> Optional[str]: ...
    @property
    def progress(self) -> bool: ...
    @property
    def interval(self) -> int: ...

@final
class RunOutcome:
    """A run's statistics, why it stopped early (None: it did not) and its configuration."""

    @property
    def stats(self) -> dict[str, Any]: ...
    @property
    def error(self) -> Optional[str]: ...
    @property
    def config(self) -> dict[str, str]: ...

@final
class Param:
    """A declared parameter; ``default`` is None when the preset must give it."""

    @property
    def key(self) -> str: ...
    @property
    def default(self) -> Optional[str]: ...
    @property
    def unit(self) -> str: ...
    @property
    def meaning(self) -> str: ...

@final
class Component:
    """A declared component: ``kind`` is integrity, encryption, codeauth or machine."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def params(self) -> list[Param]: ...
    @property
    def guarantees(self) -> list[tuple[str, str]]: ...
    @property
    def stats(self) -> list[tuple[str, str, str]]: ...
    @property
    def lays_out(self) -> list[str]: ...
    @property
    def protects(self) -> list[str]: ...

def run(spec: RunSpec) -> RunOutcome: ...
def run_mix(
    spec: RunSpec,
    inputs: list[RunSpec],
    alone: Optional[Callable[[int], Optional[float]]] = None,
    names: list[str] = ...,
) -> RunOutcome: ...
def components() -> list[Component]: ...
def parse_count(text: str) -> Optional[int]: ...
def parse_size(text: str) -> Optional[int]: ...
def stat_declaration(key: str) -> Optional[tuple[str, str, str, str]]: ...

# --- the registry and presets ------------------------------------------------------------

def workloads() -> list[tuple[str, str]]: ...
def progress_seconds() -> float: ...
def presets() -> list[str]: ...
def integrity_schemes() -> list[str]: ...
def encryption_schemes() -> list[str]: ...
def bench_schemes() -> list[tuple[str, str]]: ...
def scheme_pairs() -> list[tuple[str, str]]: ...
def params(
    preset: str, integrity: Optional[str] = None, encryption: Optional[str] = None, sets: list[str] = ...
) -> list[tuple[str, str]]: ...

# --- traces, export, attacks, bench ------------------------------------------------------

def trace_length(trace: str, trace_format: Optional[str] = None, skip: int = 0, limit: int = ...) -> Optional[int]: ...
def sample_plan(spec: str, instructions: int) -> tuple[int, int, int]: ...
def t95(df: int) -> float: ...
# How this process reads native trace files: "ahead" (a thread of their own, the default) or
# "inline" (in batches on the simulating thread); the statistics are the same either way.
def set_trace_reading(how: str) -> None: ...
def trace_reading() -> str: ...
TRACE_READINGS: list[str]
# Lines a checkpointed window loads before its warming (crates/trace/src/checkpoint.rs).
DEFAULT_PREWARM: int

def checkpoint_windows(
    directory: str,
    sample: str,
    instructions: int,
    warmup: int,
    warm: int,
    workload: Optional[str] = None,
    trace: Optional[str] = None,
    trace_format: Optional[str] = None,
    seed: int = 1,
    prewarm: int = ...,
    progress: bool = False,
) -> dict[str, Any]: ...
def run_checkpointed(spec: RunSpec, files: list[str], prewarm: list[int], warm: int, name: str, threads: int = 1) -> RunOutcome: ...
def export_workload(workload: str, path: str, records: int, seed: int) -> int: ...
def export(
    path: str,
    format: str = "native",
    records: int = 1_000_000,
    workload: Optional[str] = None,
    trace: Optional[str] = None,
    trace_format: Optional[str] = None,
    skip: int = 0,
    program: Optional[list[str]] = None,
    program_env: Optional[list[tuple[str, str]]] = None,
    clear_env: bool = False,
    cwd: Optional[str] = None,
    stdin: Optional[str] = None,
    seed: int = 1,
    uncompressed: bool = False,
) -> dict[str, Any]: ...
def attack(preset: str, integrities: list[str], encryption: str, sets: list[str] = ..., seed: int = 1) -> list[dict[str, Any]]: ...
def attack_encryption(preset: str, encryptions: list[str], sets: list[str] = ..., seed: int = 1) -> list[dict[str, Any]]: ...
def attack_codeauth(
    preset: str, combos: list[tuple[str, str, str]], sets: list[str] = ..., seed: int = 1
) -> list[dict[str, Any]]: ...
def bench(
    preset: str,
    workloads: list[str],
    schemes: list[tuple[str, str]],
    instructions: int,
    warmup: int,
    repeat: int = 1,
    sets: list[str] = ...,
) -> list[dict[str, Any]]: ...
def trace_formats() -> list[str]: ...
def detect_trace_format(path: str) -> str: ...
def write_bench_trace(
    dst: str,
    format: str,
    instructions: int,
    workload: Optional[str] = None,
    trace: Optional[str] = None,
    trace_format: Optional[str] = None,
) -> int: ...

@final
class Access:
    @property
    def addr(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def value(self) -> bytes: ...

@final
class Record:
    @property
    def pc(self) -> int: ...
    @property
    def length(self) -> int: ...
    @property
    def op(self) -> str: ...
    @property
    def taken(self) -> Optional[bool]: ...
    @property
    def external(self) -> bool: ...
    @property
    def thread(self) -> int: ...
    @property
    def regs_read(self) -> list[int]: ...
    @property
    def regs_written(self) -> list[int]: ...
    @property
    def accesses(self) -> list[Access]: ...

@final
class TraceReader:
    path: str
    format: str
    def __new__(cls, path: str, format: Optional[str] = None) -> "TraceReader": ...
    def __iter__(self) -> Iterator[Record]: ...
    def __next__(self) -> Record: ...
    @property
    def count(self) -> int: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> "TraceReader": ...
    def __exit__(self, *args: object) -> bool: ...

# --- the tracer ---------------------------------------------------------------------------

def trace_program(
    argv: list[str],
    output: str,
    skip: int = 0,
    count: Optional[int] = None,
    env: Optional[list[tuple[str, str]]] = None,
    clear_env: bool = False,
    cwd: Optional[str] = None,
    stdin: Optional[str] = None,
    stdout: Optional[str] = ...,
    progress: bool = False,
) -> dict[str, Any]: ...
def trace_stage(argv: list[str], stage: str, stdin: Optional[str] = None) -> dict[str, Any]: ...
def tracer_unavailable() -> Optional[str]: ...

# --- code authentication (seed 001) -------------------------------------------------------

def codeauth_keys(random: bytes) -> bytes: ...
def codeauth_derive_keys(seed: bytes) -> bytes: ...
def codeauth_fingerprint(keyfile: bytes) -> str: ...
def codeauth_sign(
    keyfile: bytes,
    elf: bytes,
    program_id: int,
    block: int = 64,
    width: int = 128,
    pad: str = "pr-trivium",
    tp: Optional[int] = None,
    base: int = 0,
) -> bytes: ...
def codeauth_verify(keyfile: bytes, elf: bytes, tagfile: bytes) -> int: ...
def codeauth_tagfile_info(tagfile: bytes) -> dict[str, Any]: ...
def codeauth_write(path: str, data: bytes, private: bool = False) -> None: ...

# --- the functional engine ----------------------------------------------------------------

@final
class Snapshot: ...

@final
class SecureMemory:
    """Keys from the OS's random source unless ``seed`` is given."""

    def __new__(
        cls,
        size: str,
        integrity: str = "chash",
        encryption: str = "otp",
        preset: str = "suh2003",
        sets: list[str] = ...,
        seed: Optional[int] = None,
    ) -> "SecureMemory": ...
    @property
    def size(self) -> int: ...
    @property
    def integrity(self) -> str: ...
    @property
    def encryption(self) -> str: ...
    @property
    def raw_size(self) -> int: ...
    def write(self, addr: int, data: bytes) -> None: ...
    def read(self, addr: int, n: int) -> bytes: ...
    def flush(self) -> None: ...
    def check(self) -> int: ...
    def set_key_id(self, addr: int, size: int, key_id: int) -> None: ...
    def key_id(self, addr: int) -> int: ...
    def stats(self) -> dict[str, Any]: ...
    def layout(self) -> list[tuple[str, int, int]]: ...
    def metadata(self, addr: int) -> list[tuple[str, int]]: ...
    def dma_region(self) -> tuple[int, int]: ...
    def read_without_checking(self, addr: int, n: int) -> bytes: ...
    def peek(self, addr: int, n: int) -> bytes: ...
    def poke(self, addr: int, data: bytes) -> None: ...
    def snapshot(self) -> Snapshot: ...
    def restore(self, s: Snapshot) -> None: ...
    def touched_pages(self) -> list[int]: ...
    def suspend(self) -> None: ...
    def resume(self) -> None: ...
    def reboot(self) -> None: ...

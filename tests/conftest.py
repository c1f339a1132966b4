"""Shared helpers for the secmem test suite.

Everything here is small and fast: simulations use a few hundred thousand instructions,
memories are created fresh per test (creating one costs microseconds: memory of gigabytes
costs only what is touched).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

# Off a terminal the engine and the sweeps print a progress line every SECMEM_PROGRESS_SECONDS
# (10 by default). On a loaded machine a short run can last that long, and the line would add
# to a stderr a test checks line by line; tests of progress set their own value.
os.environ["SECMEM_PROGRESS_SECONDS"] = "1e9"

import secmem  # noqa: E402  (after the setting: secmem.progress reads it when imported)
from secmem.api import DEFAULT_SCHEMES

# Small runs: long enough for every workload to miss in the L2 and write back, short enough
# for the whole suite to stay well under a minute on two cores.
N = 300_000
WARM = 50_000

# The pairs compared by default, from their one definition.
SCHEMES = list(DEFAULT_SCHEMES)
WORKLOADS = ["stream", "chase", "hot", "mix"]


@pytest.fixture(scope="session")
def run_cached():
    """``secmem.run`` memoized for the session: several tests look at the same run."""
    cache: dict = {}

    def _run(workload, integrity, encryption, instructions=N, warmup=WARM, params=None):
        key = (workload, integrity, encryption, instructions, warmup, tuple(sorted((params or {}).items())))
        if key not in cache:
            cache[key] = secmem.run(
                workload=workload,
                integrity=integrity,
                encryption=encryption,
                instructions=instructions,
                warmup=warmup,
                params=params,
            )
        return cache[key]

    return _run


def load_script(path) -> object:
    """A file of scripts/ (no .py suffix) imported as a module, to test its functions."""
    import importlib.machinery
    import importlib.util

    name = path.name.replace("-", "_")
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(name, loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def _env():
    env = dict(os.environ)
    # No progress bar (stderr is a pipe anyway) and no Rust backtrace noise in stderr checks.
    env.pop("RUST_BACKTRACE", None)
    env["PYTHONWARNINGS"] = "ignore"
    return env


def cli(*args, cwd=None, timeout=120) -> subprocess.CompletedProcess:
    """Run ``python -m secmem ARGS`` and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "secmem", *[str(a) for a in args]],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=_env(),
    )


def assert_clean_error(p: subprocess.CompletedProcess, *needles: str, code: int = 2) -> str:
    """Exit code ``code``, exactly one stderr line ``secmem: error: …`` containing every
    needle, and no Python traceback anywhere. Returns the error line."""
    out = p.stdout + p.stderr
    assert "Traceback" not in out, out
    assert "PanicException" not in out, out
    assert p.returncode == code, f"exit {p.returncode}, stderr: {p.stderr!r}"
    lines = p.stderr.splitlines()
    assert len(lines) == 1, f"expected one stderr line, got {lines!r}"
    line = lines[0]
    assert line.startswith("secmem: error:"), line
    for n in needles:
        assert n in line, f"{n!r} not in {line!r}"
    return line


def flip_bit(mem, addr: int, bit: int = 0) -> None:
    """The adversary flips one bit of raw untrusted memory."""
    b = mem.untrusted.peek(addr, 1)[0]
    mem.untrusted.poke(addr, bytes([b ^ (1 << bit)]))


@pytest.fixture(scope="session")
def scheduler():
    """The address of one local Dask cluster (two single-threaded worker processes) that the
    sweep and reproduce tests share: real Dask, started once."""
    from dask.distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, memory_limit=0, silence_logs=logging.ERROR,
        scheduler_kwargs={"dashboard_address": ":0"},  # not 8787: no warning when another Dask has it
    ) as c:
        yield c.scheduler_address

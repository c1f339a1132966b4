"""Where a result came from: the provenance block and the identity of a run's input.

Every stored or saved result (``run --json``, ``compare --json``, a sweep's results store)
carries the same provenance block — secmem's version, the git commit of the source it was
built from when that is known, the command line, the host, the date, the wall time — and the
identity of its workload: for a trace file or a program, a sha256 of the bytes that were
simulated; for a built-in workload, a sha256 of its first records as generated for the seed.

    >>> from secmem import provenance
    >>> provenance.block(wall_seconds=1.5)["secmem_version"]
    >>> provenance.workload_identity(workload="stream", seed=1)["digest"]
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping, Optional, Protocol, Sequence

from . import _core
from ._digest import sha256_file


class Result(Protocol):
    """What ``document`` reads of a run's result (``secmem.api.Result``; named by its fields
    so that the API, which keys stored points by workload identity, can import this module)."""

    stats: dict[str, Any]
    config: dict[str, str]
    error: Optional[str]

__all__ = ["sha256_file", "file_digest", "json_digest", "workload_identity", "git_commit", "command_line", "now", "block", "document"]

# Records of a built-in workload hashed to identify it (its initial memory image comes
# first, so this covers the data as well as the first instructions). The generators are
# part of secmem's code, whose version is in every key beside this digest.
BUILTIN_FINGERPRINT_RECORDS = 4096


@functools.lru_cache(maxsize=256)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    # (size, mtime) in the cache key: a file rewritten in place is hashed again.
    return sha256_file(path)


def file_digest(path: str) -> str:
    """sha256 of a file's content (cached per process while its size and mtime stay)."""
    st = os.stat(path)
    return _file_digest(os.path.realpath(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _builtin_digest(name: str, seed: int) -> str:
    with tempfile.TemporaryDirectory(prefix="secmem-fp-") as d:
        path = os.path.join(d, f"{name}.smt")
        _core.export_workload(name, path, BUILTIN_FINGERPRINT_RECORDS, int(seed))
        return sha256_file(path)


def json_digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _program_digest(argv: Sequence[str], env: Optional[Mapping[str, str]], cwd: Optional[str], stdin: Optional[str]) -> str:
    """The program's bytes, the content of every argument and stdin that names a file, and
    the exact argv/environment/directory."""
    exe = argv[0] if os.path.sep in argv[0] else (shutil.which(argv[0]) or argv[0])
    files: dict[str, str] = {}
    for p in [exe, *argv[1:], *([stdin] if stdin else [])]:
        full = p if os.path.isabs(p) or cwd is None else os.path.join(cwd, p)
        if os.path.isfile(full):
            files[p] = file_digest(full)
    return json_digest({"argv": list(argv), "env": sorted((env or {}).items()), "cwd": cwd, "files": files})


def workload_identity(
    workload: Optional[str] = None,
    *,
    trace: Optional[str] = None,
    program: Optional[Sequence[str]] = None,
    seed: int = 1,
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[str] = None,
    stdin: Optional[str] = None,
) -> dict[str, Any]:
    """``{"kind", "name", "digest"}`` of what a run simulates: ``builtin``, ``suite``,
    ``trace`` or ``program``. Raises ``ConfigError`` for an unknown workload and ``OSError``
    for a missing trace file."""
    if trace is not None:
        regular = trace not in ("-", "/dev/stdin") and os.path.isfile(trace)
        return {"kind": "trace", "name": trace, "digest": file_digest(trace) if regular else None}
    if program is not None:
        return {"kind": "program", "name": shlex.join(program), "digest": _program_digest(program, env, cwd, stdin)}
    if workload is not None and "," in workload:
        # A mix of several cores (docs/multicore.md): its programs' identities, in core order.
        parts = [workload_identity(w.strip(), seed=seed) for w in workload.split(",")]
        return {"kind": "mix", "name": workload, "digest": json_digest([p["digest"] for p in parts])}
    name = workload or "mix"
    if name in dict(_core.workloads()):
        return {"kind": "builtin", "name": name, "digest": _builtin_digest(name, int(seed))}
    from . import suite  # only for a suite workload (the suite imports nothing of ours back)

    if not suite.known(name):
        raise _core.ConfigError(f"unknown workload '{name}'")
    c = suite.command(name)  # SuiteError (a ValueError) when not installed
    digest = json_digest(
        {
            "suite": _program_digest(list(c.argv), c.env, c.cwd, c.stdin),
            "reads": {os.path.basename(f): file_digest(f) for f in c.reads},
        }
    )
    return {"kind": "suite", "name": name, "digest": digest}


@functools.lru_cache(maxsize=1)
def git_commit() -> Optional[str]:
    """The commit of the checkout secmem's Python sources come from (editable installs and
    source trees), with ``+dirty`` when they have uncommitted changes; else the commit the
    engine was built from (``pip install .`` of a checkout: build.rs asked git); None when
    neither is known (an sdist built without git)."""
    return _checkout_commit() or _core.build_commit


def _checkout_commit() -> Optional[str]:
    here = Path(__file__).resolve().parent
    try:
        top = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "--show-toplevel", "HEAD"],
            capture_output=True, text=True, timeout=10,
        )
        if top.returncode != 0:
            return None
        root, commit = top.stdout.split()
        if not (Path(root) / "crates" / "python").is_dir():  # some other repository around an install
            return None
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10,
        )
        return commit + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def command_line() -> str:
    """How this process was started, as a shell line (``secmem run …`` for the CLI)."""
    argv = list(sys.argv)
    if argv and os.path.basename(argv[0]) in ("secmem", "__main__.py"):
        argv[0] = "secmem"
    elif not argv or argv == [""] or argv[0] == "-c":
        return "python"
    return shlex.join(argv)


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def block(wall_seconds: Optional[float] = None, date: Optional[str] = None) -> dict[str, Any]:
    """The provenance block: the same keys in every saved result."""
    return {
        "secmem_version": _core.__version__,
        "build_id": _core.build_id,
        "git_commit": git_commit(),
        "command": command_line(),
        "host": platform.node(),
        "date": date or now(),
        "wall_seconds": wall_seconds,
        "python": platform.python_version(),
    }


def document(result: "Result", wall_seconds: Optional[float] = None, **identity: Any) -> dict[str, Any]:
    """What ``secmem run --json`` writes: ``{stats, config, error, provenance, workload}``
    (``identity``: the run's ``workload``/``trace``/``program``/``seed``)."""
    return {
        "stats": result.stats,
        "config": result.config,
        "error": result.error,
        "provenance": block(wall_seconds=wall_seconds),
        "workload": workload_identity(**identity),
    }

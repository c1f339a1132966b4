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
from typing import Optional, Union

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
    """
    return TraceReader(os.fspath(path), format)


def detect_format(path: PathLike) -> str:
    """The format ``open_trace(path)`` would read the file as (raises TraceError)."""
    return _core.detect_trace_format(os.fspath(path))


__all__ = ["Access", "FORMATS", "Record", "TraceError", "TraceReader", "detect_format", "open_trace"]

"""SIGINT and SIGTERM around long Python-side work (a sweep, an apt-get): by default SIGTERM
ends Python on the spot, leaving a sweep's Dask workers or an apt-get running behind it.
Inside :func:`sigterm_as_interrupt` both raise ``KeyboardInterrupt`` (with ``signal`` set to
``"SIGINT"`` or ``"SIGTERM"``, which the CLI turns into exit status 130 or 143), so cleanup
code runs; inside :func:`deferred` (work that must not be cut in half, such as starting a
cluster) the interrupt is raised when the block ends."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Iterator, Optional

_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}


class _State:
    defer = 0
    pending: Optional[str] = None


def _interrupt(name: str) -> KeyboardInterrupt:
    e = KeyboardInterrupt(f"interrupted by {name}")
    setattr(e, "signal", name)  # read by the CLI's exit status
    return e


def interruption(e: KeyboardInterrupt) -> str:
    """The one wording of an interruption, "interrupted by SIGINT[…]", whoever raised ``e``
    (Python's default handler raises a bare KeyboardInterrupt for Ctrl-C)."""
    text = str(e)
    return text if text.startswith("interrupted by ") else f"interrupted by {getattr(e, 'signal', 'SIGINT')}"


def _on_signal(signum: int, frame: Optional[FrameType]) -> None:
    if _State.defer:
        _State.pending = _NAMES[signal.Signals(signum)]
        return
    raise _interrupt(_NAMES[signal.Signals(signum)])


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise KeyboardInterrupt in the main thread
    (elsewhere the block runs unchanged: only the main thread may set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _on_signal) for s in _NAMES if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextmanager
def deferred() -> Iterator[None]:
    """Hold an interrupt arriving within the block until it ends (then raise it)."""
    _State.defer += 1
    try:
        yield
    finally:
        _State.defer -= 1
        if not _State.defer and _State.pending:
            name, _State.pending = _State.pending, None
            raise _interrupt(name)

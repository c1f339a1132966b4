"""SIGINT and SIGTERM before the command line is ready. Importing secmem takes a moment
(the extension, numpy, pandas on some paths); a signal then would print a Python traceback
(SIGINT) or kill the process without a word (SIGTERM). In the ``secmem`` command's own
process only (never a program that imports secmem as a library), a signal arriving that
early ends it with the one line every interruption gets and the conventional status
(130, 143): nothing has been opened or written yet, so there is nothing to clean up."""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType
from typing import Optional

_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}


def _is_cli() -> bool:
    argv = getattr(sys, "orig_argv", [])
    return argv[1:3] == ["-m", "secmem"] or os.path.basename(sys.argv[0] if sys.argv else "") == "secmem"


def _exit_now(signum: int, frame: Optional[FrameType]) -> None:
    os.write(2, f"secmem: error: interrupted by {_NAMES[signal.Signals(signum)]}\n".encode())
    os._exit(128 + signum)


def install() -> None:
    """Until :func:`release`, SIGINT and SIGTERM end the CLI's process at once (if this is
    the CLI's process and the signals are not ignored)."""
    if not _is_cli() or threading.current_thread() is not threading.main_thread():
        return
    for s in _NAMES:
        if signal.getsignal(s) is not signal.SIG_IGN:
            signal.signal(s, _exit_now)


def release() -> None:
    """Python's usual handling again (the CLI installs its own): SIGINT raises
    KeyboardInterrupt, SIGTERM has its default action."""
    for s, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(s) is _exit_now:
            signal.signal(s, default)

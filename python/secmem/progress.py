"""Progress of long work (compare, sweep, reproduce, bench): a bar with an ETA on a terminal
(rich), one line per finished item otherwise, so logs of batch jobs stay readable.

    with Progress(total=54, what="sweep") as bar:
        bar.running("stream chash+none")
        ...
        bar.done("stream chash+none", seconds=3.1)
"""

from __future__ import annotations

import sys
import time
from typing import Literal, Optional, TextIO

# Off a terminal, at most one line per this many seconds (and none for work shorter than
# that): logs of batch jobs stay short.
LINE_INTERVAL = 10.0


def _duration(s: float) -> str:
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """``total`` items of ``what``. ``enabled=False`` prints nothing at all; ``stream``
    defaults to stderr. On a terminal the bar names what is running and shows rich's ETA; off
    a terminal a line ``secmem: what [k/total] label (Ns) note, ETA …`` at most every
    LINE_INTERVAL seconds."""

    def __init__(self, total: int, what: str, enabled: bool = True, stream: Optional[TextIO] = None):
        self.total = max(int(total), 0)
        self.what = what
        self.stream = stream or sys.stderr
        self.enabled = enabled and self.total > 0
        self.count = 0
        self.start = time.monotonic()
        self._printed = self.start
        self._rich = None
        self._task = None
        self._running: list[str] = []
        if self.enabled and getattr(self.stream, "isatty", lambda: False)():
            try:
                from rich.console import Console
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    Progress as RichProgress,
                    TextColumn,
                    TimeElapsedColumn,
                    TimeRemainingColumn,
                )
            except ImportError:  # line mode then
                return
            self._rich = RichProgress(
                TextColumn("[bold]{task.fields[what]}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[label]}", style="dim"),
                console=Console(file=self.stream),
                transient=True,
            )
            self._task = self._rich.add_task(what, total=self.total, what=what, label="")

    def __enter__(self) -> "Progress":
        if self._rich is not None:
            self._rich.start()
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False

    def _label(self) -> str:
        shown = ", ".join(self._running[:2])
        more = len(self._running) - 2
        return shown + (f" +{more}" if more > 0 else "")

    def running(self, label: str) -> None:
        """Say that ``label`` has started (shown on the bar)."""
        self._running.append(label)
        if self._rich is not None and self._task is not None:
            self._rich.update(self._task, label=self._label())

    def eta(self) -> Optional[float]:
        if self.count == 0:
            return None
        rate = (time.monotonic() - self.start) / self.count
        return rate * (self.total - self.count)

    def done(self, label: str, seconds: Optional[float] = None, note: str = "") -> None:
        """One item finished."""
        self.count += 1
        if label in self._running:
            self._running.remove(label)
        if not self.enabled:
            return
        if self._rich is not None and self._task is not None:
            self._rich.update(self._task, advance=1, label=self._label())
            if note:
                self._rich.console.print(f"{label}: {note}")
            return
        now = time.monotonic()
        if now - self._printed < LINE_INTERVAL and self.count < self.total:
            return
        if self._printed == self.start and self.count == self.total:
            return  # short work: nothing to report
        self._printed = now
        took = f" ({seconds:.1f}s)" if seconds is not None else ""
        eta = self.eta()
        tail = f", ETA {_duration(eta)}" if eta is not None and self.count < self.total else ""
        extra = f" {note}" if note else ""
        print(f"secmem: {self.what} [{self.count}/{self.total}] {label}{took}{extra}{tail}", file=self.stream, flush=True)

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()
            self._rich = None

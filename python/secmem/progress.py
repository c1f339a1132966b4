"""Progress of long work (compare, sweep, reproduce, bench): a bar with the count and an ETA
on a terminal (rich), one line per finished item otherwise, so logs of batch jobs stay
readable; and a command's warnings, each said once.

    with Progress(total=54, what="sweep") as bar:
        bar.running("stream chash+none")
        ...
        bar.done("stream chash+none", seconds=3.1)
"""

from __future__ import annotations

import sys
import time
from typing import Literal, Optional, Sequence, TextIO

from . import _core

# Off a terminal, at most one line per this many seconds (and none for work shorter than
# that): logs of batch jobs stay short. The engine's setting (SECMEM_PROGRESS_SECONDS, 10 by
# default), so a run's lines and a sweep's come at the same pace.
LINE_INTERVAL = _core.progress_seconds()
# The bar's own width on a terminal: short, so that the count and ETA fit in 80 columns.
BAR_WIDTH = 20


def duration(s: float) -> str:
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """``total`` items of ``what``. ``enabled=False`` prints nothing at all; ``stream``
    defaults to stderr. On a terminal a bar that keeps the count and the ETA visible at 80
    columns (the names of what runs take the width left); off a terminal a line ``secmem:
    what [k/total] label (Ns) note, ETA …`` at most every LINE_INTERVAL seconds.

    The ETA is the items' own measured seconds (``done(..., seconds)``: the engine's time per
    point, not the time since the start, which holds a cluster's start-up) per item, times the
    items left, over the ``workers`` running them at once; before the first item finishes,
    ``estimate`` (seconds for all the work, e.g. from the store's past timings) if given."""

    def __init__(self, total: int, what: str, enabled: bool = True, stream: Optional[TextIO] = None,
                 workers: int = 1, estimate: Optional[float] = None):
        self.total = max(int(total), 0)
        self.what = what
        self.stream = stream or sys.stderr
        self.enabled = enabled and self.total > 0
        self.workers = max(int(workers), 1)
        self.estimate = estimate
        self.count = 0
        self.start = time.monotonic()
        self._printed = self.start
        self._rich = None
        self._task = None
        self._running: list[str] = []
        self._seconds: list[float] = []  # measured seconds of the finished items that said
        if self.enabled and getattr(self.stream, "isatty", lambda: False)():
            try:
                from rich.console import Console
                from rich.progress import BarColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn
                from rich.table import Column
            except ImportError:  # line mode then
                return
            self._rich = RichProgress(
                TextColumn("[bold]{task.fields[what]}"),
                BarColumn(bar_width=BAR_WIDTH),
                TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
                TextColumn("{task.fields[eta]}"),
                # What runs takes the width left, cut short: count and ETA stay visible.
                TextColumn("{task.fields[label]}", style="dim", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1)),
                console=Console(file=self.stream),
                transient=True,
                expand=True,
            )
            self._task = self._rich.add_task(what, total=self.total, what=what, label="", eta=self._eta_text())

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
        """Seconds left: see the class. None when nothing can tell yet."""
        left = self.total - self.count
        if self._seconds:
            per_item = sum(self._seconds) / len(self._seconds)
        elif self.count:
            per_item = (time.monotonic() - self.start) * self.workers / self.count
        elif self.estimate is not None:
            return self.estimate
        else:
            return None
        return per_item * left / min(self.workers, max(left, 1))

    def _eta_text(self) -> str:
        eta = self.eta()
        return f"ETA {duration(eta)}" if eta is not None and self.count < self.total else "ETA ?"

    def done(self, label: str, seconds: Optional[float] = None, note: str = "") -> None:
        """One item finished (``seconds``: its own measured time, if known)."""
        self.count += 1
        if seconds is not None and seconds == seconds:
            self._seconds.append(float(seconds))
        if label in self._running:
            self._running.remove(label)
        if not self.enabled:
            return
        if self._rich is not None and self._task is not None:
            self._rich.update(self._task, advance=1, label=self._label(), eta=self._eta_text())
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
        tail = f", ETA {duration(eta)}" if eta is not None and self.count < self.total else ""
        extra = f" {note}" if note else ""
        print(f"secmem: {self.what} [{self.count}/{self.total}] {label}{took}{extra}{tail}", file=self.stream, flush=True)

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()
            self._rich = None


def warn_once(warnings: Sequence[str], runs: int = 1) -> None:
    """The first of a command's warnings, once, on stderr (with how many of its ``runs`` had
    one): the same advice for every run of a compare or sweep is said once."""
    if not warnings:
        return
    more = f" ({len(warnings)} of {runs} runs)" if runs > 1 else ""
    print(f"secmem: warning{more}: {warnings[0]}", file=sys.stderr, flush=True)

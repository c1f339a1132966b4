"""Plot helpers shaped like the seeds' figures: grouped bars per benchmark, lines over a
swept parameter, series over time. secmem's values are filled; the paper's numbers, where it
gives them, are hollow black markers or dashed reference lines. A series keeps its colour in
every panel of a figure (``plot.color``); legends, reference labels included, sit outside the
data (``plot.legend_outside``)."""

from __future__ import annotations

import math
from typing import Optional, Sequence

from ..plotting import color, legend_outside

PAPER_STYLE = dict(color="black", linewidth=1.0)
# Reference lines of one panel told apart by their dashes (their labels are in the legend).
PAPER_DASHES = ("--", "-.", (0, (6, 2, 1, 2, 1, 2)), (0, (1, 1)))
MARK_STYLE = dict(color="grey", linestyle=":", linewidth=1.0)


def _ok(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def bars(ax, groups: Sequence[str], series: dict, ylabel: str = "", title: str = "", paper: Optional[dict] = None,
         refs: Sequence[tuple] = (), ylim: Optional[tuple] = None, log: bool = False) -> None:
    """Grouped bars: one group per entry of ``groups``, one bar per series (label -> values,
    None for a failed point, drawn as an x). ``paper``: label -> values drawn as hollow
    markers on the matching bars. ``refs``: (y, label) dashed horizontal lines."""
    n = max(len(series), 1)
    width = 0.8 / n
    for i, (label, values) in enumerate(series.items()):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        ax.bar([x for x, v in zip(xs, values) if _ok(v)], [v for v in values if _ok(v)], width * 0.95, label=label, color=color(label))
        miss = [x for x, v in zip(xs, values) if not _ok(v)]
        if miss:
            ax.plot(miss, [0] * len(miss), "rx")
        if paper and label in paper:
            pv = paper[label]
            px = [x for x, v in zip(xs, pv) if _ok(v)]
            ax.plot(px, [v for v in pv if _ok(v)], "o", mfc="none", mec="black", ms=6,
                    label="paper" if i == min(j for j, l in enumerate(series) if l in paper) else None)
    for i, (y, label) in enumerate(refs):
        ax.axhline(y, label=label, linestyle=PAPER_DASHES[i % len(PAPER_DASHES)], **PAPER_STYLE)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, fontsize=8)
    if log:
        ax.set_yscale("log")
    if ylim:
        ax.set_ylim(*ylim)
    _finish(ax, "", ylabel, title)


def lines(ax, x: Sequence, series: dict, xlabel: str = "", ylabel: str = "", title: str = "", logx: bool = False,
          refs: Sequence[tuple] = (), vrefs: Sequence[tuple] = (), xticklabels: Optional[Sequence[str]] = None,
          marks: Sequence[tuple] = ()) -> None:
    """Lines over a swept parameter: label -> y values (None skipped). ``refs``/``vrefs``:
    the paper's values as dashed lines; ``marks``: secmem's own reference levels (dotted)."""
    for label, ys in series.items():
        pts = [(a, b) for a, b in zip(x, ys) if _ok(b)]
        if pts:
            ax.plot([a for a, _ in pts], [b for _, b in pts], "o-", ms=3, label=label, color=color(label))
    for y, label in marks:
        ax.axhline(y, label=label, **MARK_STYLE)
    for i, (y, label) in enumerate(refs):
        ax.axhline(y, label=label, linestyle=PAPER_DASHES[i % len(PAPER_DASHES)], **PAPER_STYLE)
    for i, (xv, label) in enumerate(vrefs, len(refs)):
        ax.axvline(xv, label=label, linestyle=PAPER_DASHES[i % len(PAPER_DASHES)], **PAPER_STYLE)
    if logx:
        ax.set_xscale("log")
    if xticklabels is not None:
        ax.set_xticks(list(x))
        ax.set_xticklabels(xticklabels, fontsize=8)
    _finish(ax, xlabel, ylabel, title)


def _finish(ax, xlabel: str, ylabel: str, title: str) -> None:
    """Labels, title and legend in the report's small type."""
    if xlabel:
        ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    if title:
        ax.set_title(title, fontsize=9)
    ax.tick_params(labelsize=8)
    legend_outside(ax)

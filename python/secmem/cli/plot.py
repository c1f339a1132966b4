"""``secmem plot``: a figure of results (the store, a results CSV, a compare or run JSON)."""

from __future__ import annotations

import argparse
from typing import Any

from ..results import default_path


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "plot",
        help="a figure of results: the store, a results CSV, a compare --json or a run --json with --interval",
        description="Plot Y over X (lines over a number, grouped bars over names), a colour per HUE, a panel per FACET. "
        "Without options: a run's intervals over time; a comparison's normalized IPC per workload and scheme; "
        "a sweep's IPC over the first parameter it varies, per scheme and workload.",
    )
    p.add_argument("source", nargs="?", help=f"a results CSV or a JSON of run/compare (default: the store, {default_path()})")
    p.add_argument("-x", help="the column along x (parameters by name, e.g. l2.size)")
    p.add_argument("-y", help="the statistic along y (default ipc; normalized_ipc for a comparison)")
    p.add_argument("--hue", help="a line or bar colour per value of this column (default scheme, when it varies)")
    p.add_argument("--facet", help="a panel per value of this column (default workload, when it varies)")
    p.add_argument("--where", action="append", default=[], metavar="CONDITION", help="rows to plot, as `secmem results --where` (repeatable)")
    p.add_argument("--store", default=None, help="results store directory (when no SOURCE)")
    p.add_argument("--title", help="the figure's title (default: what it shows)")
    p.add_argument("--output", "-o", default="secmem-plot.png", help="the figure: .png, .svg or .pdf (default %(default)s)")
    p.set_defaults(func=cmd)


def cmd(a: argparse.Namespace) -> int:
    from ..plotting import FORMATS, PlotError, plot

    if not a.output.lower().endswith(tuple("." + f for f in FORMATS)):
        raise PlotError(f"-o {a.output}: the name ends in .png, .svg or .pdf")
    fig = plot(a.source, x=a.x, y=a.y, hue=a.hue, facet=a.facet, where=a.where, store=a.store, path=a.output, title=a.title)
    print(f"{a.output}: {fig.texts[0].get_text() if fig.texts else 'written'}")
    return 0

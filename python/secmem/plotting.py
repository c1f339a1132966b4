"""``secmem plot``: a figure of one's own results — a sweep in the store, a results CSV, a
``compare --json`` or a ``run --json`` with ``--interval`` — and the style every secmem figure
shares (the reproduce report's too): a series keeps one colour in every panel, legends sit
outside the data, titles say what is shown.

    secmem plot                                   # the store: IPC over what the sweep varied
    secmem plot -x l2.size -y ipc --hue scheme --facet workload --where preset=suh2003
    secmem plot run.json                          # a run with --interval: IPC over time
    secmem plot compare.json -y normalized_traffic

A default figure per source: a run's intervals over instructions; a comparison's normalized
IPC per workload and scheme; a sweep's IPC over the first parameter its points vary, a line
per scheme and a panel per workload. Numeric ``x`` gives lines, text gives grouped bars.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence, Union

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

# matplotlib's "tab10" then "Dark2": distinct colours, handed out in order of first use.
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d",
)
_colors: dict[str, str] = {}


def reset_colors() -> None:
    """Start a new figure: labels get colours afresh."""
    _colors.clear()


def color(label: str) -> str:
    """The colour of the series ``label`` in the current figure: the same label the same
    colour in every panel, different labels different colours (up to len(PALETTE))."""
    if label not in _colors:
        _colors[label] = PALETTE[len(_colors) % len(PALETTE)]
    return _colors[label]


def legend_outside(ax: Any) -> None:
    """The axes' legend, if it has labelled artists, to the right of the axes: never on the data."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


class PlotError(ValueError):
    """What to plot cannot be made out (an unknown column, a source of another kind); one line."""


# ---------------------------------------------------------------------------------------
# Sources


def load(source: Union[None, str, "os.PathLike[str]", "pd.DataFrame"] = None, store: Optional[str] = None,
         where: Iterable[str] = ()) -> tuple["pd.DataFrame", str]:
    """The rows to plot and their kind: ``run`` (one run's ``interval.*`` as rows), ``compare``,
    or ``table`` (the store's points, a sweep's or ``results --csv``'s CSV, a DataFrame).
    ``where`` filters as ``secmem results --where`` does."""
    import pandas as pd

    from .results import filter_frame, open_store, typed

    if isinstance(source, pd.DataFrame):
        df, kind = source, "table"
    elif source is None:
        df, kind = open_store(store, create=False).frame(), "table"
        # A store's rows come in key order, which changes with the engine's build: sorted
        # here, so a figure's panels and lines come in an order that does not.
        by = [c for c in ("workload", "preset", "integrity", "encryption") if c in df.columns]
        if by:
            df = df.sort_values(by, kind="stable")
    else:
        path = os.fspath(source)
        if path.endswith(".csv"):
            try:
                df = typed(pd.read_csv(path))
            except (OSError, ValueError) as e:
                raise PlotError(f"{path}: cannot read it as CSV ({e})") from None
            kind = "table"
        else:
            df, kind = _json(path)
    if kind == "table" and "status" in df.columns:
        df = df[df["status"] == "ok"]
    df = filter_frame(df, list(where))
    if df.empty:
        raise PlotError("nothing to plot: no rows" + (" match --where" if where else ""))
    return df.reset_index(drop=True), kind


def _json(path: str) -> tuple["pd.DataFrame", str]:
    import pandas as pd

    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise PlotError(f"{path}: cannot read it as JSON ({e})") from None
    if isinstance(doc, dict) and isinstance(doc.get("rows"), list):
        rows = [r for r in doc["rows"] if isinstance(r, dict) and r.get("workload") != "geomean"]
        for r in rows:
            r.setdefault("scheme", f"{r.get('integrity')}+{r.get('encryption')}")
        return pd.DataFrame(rows), "compare"
    if isinstance(doc, dict) and isinstance(doc.get("stats"), dict):
        s = doc["stats"]
        if not isinstance(s.get("interval.ipc"), list):
            raise PlotError(
                f"{path}: one run has one value per statistic; run it with --interval N for a series over time, "
                "or plot a sweep (the store), a results CSV or a compare --json"
            )
        series = {k[len("interval."):]: v for k, v in s.items() if k.startswith("interval.") and isinstance(v, list)}
        df = pd.DataFrame(series)
        # Each interval at the instruction count where it ends (the measured region's).
        df.insert(0, "instruction", df["instructions"].cumsum().astype("int64"))
        df["run"] = f"{s.get('workload')} {s.get('integrity')}+{s.get('encryption')}"
        df.attrs["period"] = s.get("interval.period")
        return df, "run"
    raise PlotError(f"{path}: not a secmem result (the JSON of run --json or compare --json)")


# ---------------------------------------------------------------------------------------
# What to plot


def _column(df: "pd.DataFrame", name: Optional[str], kind: str) -> Optional[str]:
    """``name`` as a column of ``df``: itself, ``config.NAME`` (a parameter) or, for a run,
    ``NAME`` without its ``interval.`` prefix; PlotError naming the choices if none."""
    if name is None:
        return None
    for c in (name, f"config.{name}", name[len("interval."):] if name.startswith("interval.") else None):
        if c is not None and c in df.columns:
            return c
    some = ", ".join(c for c in df.columns if not c.startswith("config."))[:300]
    raise PlotError(f"no column '{name}' to plot (parameters by name, e.g. l2.size; columns: {some}, …)")


def _varied(df: "pd.DataFrame") -> list[str]:
    """The parameters the points set and vary (from ``sets``), in the order first set."""
    names: list[str] = []
    for text in df.get("sets", []):
        try:
            for k in json.loads(text or "{}"):
                if k not in names:
                    names.append(k)
        except (TypeError, ValueError):
            continue
    return [k for k in names if f"config.{k}" in df.columns and df[f"config.{k}"].nunique() > 1]


def defaults(df: "pd.DataFrame", kind: str, x: Optional[str], y: Optional[str], hue: Optional[str],
             facet: Optional[str]) -> tuple[str, str, Optional[str], Optional[str]]:
    """The columns of a figure: those given, the source's defaults for the others."""
    if kind == "run":
        return (_column(df, x, kind) or "instruction", _column(df, y, kind) or "ipc", _column(df, hue, kind), _column(df, facet, kind))
    if kind == "compare":
        return (_column(df, x, kind) or "workload", _column(df, y, kind) or "normalized_ipc",
                _column(df, hue, kind) or "scheme", _column(df, facet, kind))
    xs = _column(df, x, kind)
    if xs is None:
        vary = _varied(df)
        xs = f"config.{vary[0]}" if vary else "workload"
    ys = _column(df, y, kind) or "ipc"
    if ys not in df.columns:
        raise PlotError(f"no column '{ys}' in these rows")
    hs = _column(df, hue, kind)
    if hue is None and "scheme" in df.columns and df["scheme"].nunique() > 1 and xs != "scheme":
        hs = "scheme"
    fs = _column(df, facet, kind)
    if facet is None and "workload" in df.columns and df["workload"].nunique() > 1 and "workload" not in (xs, hs):
        fs = "workload"
    return xs, ys, hs, fs


# ---------------------------------------------------------------------------------------
# Drawing


def _label(col: str) -> str:
    return col[len("config."):] if col.startswith("config.") else col


def _texts(df: "pd.DataFrame", col: str) -> dict[Any, str]:
    """A parameter's values as text for display: sizes as sizes (262144 as 256KiB), else as
    the points wrote them (``sets``)."""
    from ._args import param_unit, size_text

    if not col.startswith("config."):
        return {}
    key, out = col[len("config."):], {}
    if param_unit(key) == "B":
        return {v: size_text(int(v)) for v in df[col].dropna().unique() if float(v).is_integer()}
    if "sets" not in df.columns:
        return {}
    for v, text in zip(df[col], df["sets"]):
        try:
            given = json.loads(text or "{}").get(key)
        except (TypeError, ValueError, AttributeError):
            continue
        if given is not None:
            out[v] = str(given)
    return out


def _check_unique(df: "pd.DataFrame", keys: Sequence[str], y: str) -> None:
    """Each (facet, hue, x) one value: else the figure would hide a varying column."""
    if not keys:
        if len(df) > 1:
            raise PlotError(f"{len(df)} values of {y} with nothing to tell them apart: give -x, --hue or --facet")
        return
    dup = df[df.duplicated(list(keys), keep=False)]
    if dup.empty:
        return
    others = [c for c in dup.columns if c not in keys and (c.startswith("config.") or c in ("workload", "scheme", "preset", "seed", "requested_instructions", "warmup"))
              and dup[c].astype(str).nunique() > 1]
    hint = f" (they differ in {', '.join(_label(c) for c in others[:4])}: use it as --hue or --facet, or --where)" if others else ""
    raise PlotError(f"several rows have the same {', '.join(_label(k) for k in keys)}{hint}")


def draw(df: "pd.DataFrame", x: str, y: str, hue: Optional[str] = None, facet: Optional[str] = None,
         title: Optional[str] = None) -> "Figure":
    """A matplotlib figure of ``y`` over ``x``: a line per ``hue`` value over a numeric ``x``,
    grouped bars over a text one; a panel per ``facet`` value."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    _check_unique(df, [c for c in (facet, hue, x) if c], y)
    reset_colors()
    panels = list(dict.fromkeys(df[facet])) if facet else [None]
    ncols = min(len(panels), 3)
    nrows = -(-len(panels) // ncols)
    fig = plt.figure(figsize=(4.2 * ncols + 1.6, 3.3 * nrows + 0.5))
    numeric = pd.api.types.is_numeric_dtype(df[x]) and not pd.api.types.is_bool_dtype(df[x])
    xtext = _texts(df, x)
    for i, pv in enumerate(panels):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        sub = df if facet is None else df[df[facet] == pv]
        groups = list(dict.fromkeys(sub[hue])) if hue else [None]
        if numeric:
            for g in groups:
                part = (sub if hue is None else sub[sub[hue] == g]).sort_values(x)
                lab = str(g) if hue else _label(y)
                ax.plot(part[x], part[y], "o-", ms=3, label=lab, color=color(lab))
            vals = sorted(v for v in df[x].dropna().unique())
            if vals and vals[0] > 0 and vals[-1] / vals[0] >= 16 and x != "instruction":
                ax.set_xscale("log", base=2)
            if xtext and len(vals) <= 12:
                ax.set_xticks(vals)
                ax.set_xticklabels([xtext.get(v, f"{v:g}") for v in vals], fontsize=8)
                ax.minorticks_off()
        else:
            cats = list(dict.fromkeys(sub[x].astype(str)))
            width = 0.8 / max(len(groups), 1)
            for j, g in enumerate(groups):
                part = sub if hue is None else sub[sub[hue] == g]
                at = dict(zip(part[x].astype(str), part[y]))
                xs = [k + (j - (len(groups) - 1) / 2) * width for k in range(len(cats))]
                lab = str(g) if hue else _label(y)
                ax.bar(xs, [at.get(c, float("nan")) for c in cats], width * 0.95, label=lab, color=color(lab))
            ax.set_xticks(range(len(cats)))
            ax.set_xticklabels(cats, fontsize=8, rotation=30 if len(cats) > 6 else 0)
        ax.set_xlabel(_label(x), fontsize=8)
        ax.set_ylabel(_label(y), fontsize=8)
        ax.tick_params(labelsize=8)
        if facet:
            ax.set_title(f"{_label(facet)} {pv}", fontsize=9)
        if hue or len(groups) > 1:
            legend_outside(ax)
    shown = f"{_label(y)} over {_label(x)}" + (f" by {_label(hue)}" if hue else "") + (f", per {_label(facet)}" if facet else "")
    fig.suptitle(title or shown, fontsize=10)
    fig.tight_layout()
    return fig


def plot(source: Union[None, str, "os.PathLike[str]", "pd.DataFrame"] = None, *, x: Optional[str] = None, y: Optional[str] = None,
         hue: Optional[str] = None, facet: Optional[str] = None, where: Iterable[str] = (), store: Optional[str] = None,
         path: Optional[str] = None, title: Optional[str] = None) -> "Figure":
    """Plot results (see the module): ``source`` a DataFrame (a sweep's), a results CSV, a
    ``compare --json`` or ``run --json`` file, or None for the store (``store``, default
    ``$SECMEM_RESULTS``). Columns by name (``ipc``, ``l2.miss_rate``; parameters as ``l2.size``).
    Written to ``path`` (PNG, SVG or PDF by its extension) if given; returns the figure."""
    df, kind = load(source, store, where)
    xs, ys, hs, fs = defaults(df, kind, x, y, hue, facet)
    if not (pd_numeric(df[ys])):
        raise PlotError(f"'{_label(ys)}' is not a number in these rows")
    if title is None and kind == "run":
        title = f"{_label(ys)} of every {df.attrs.get('period') or 0:,} instructions — {df['run'].iloc[0]}"
    fig = draw(df, xs, ys, hs, fs, title)
    if path is not None:
        save(fig, path)
    return fig


def pd_numeric(col: "pd.Series[Any]") -> bool:
    import pandas as pd

    return bool(pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col))


FORMATS = ("png", "svg", "pdf")


def save(fig: "Figure", path: str) -> None:
    """``fig`` to ``path`` by the project's output rule, legends outside the axes included."""
    from ._files import open_output

    fmt = os.path.splitext(path)[1].lstrip(".").lower()
    if fmt not in FORMATS:
        raise PlotError(f"-o {path}: the name ends in .png, .svg or .pdf")
    with open_output(path, "-o") as f:
        fig.savefig(f, format=fmt, dpi=120, bbox_inches="tight")

"""``secmem.compare``: workloads under several scheme pairs, normalized to the unprotected
baseline of the same workload; the geometric mean per pair across workloads is a summary
apart from the data (``Comparison.geomean()``)."""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Iterable, Optional, Sequence, Union

import pandas as pd

from . import provenance, table
from ._args import scheme_pair
from .api import DEFAULT_SCHEMES, Interrupted, configuration, run
from .progress import Progress

GEOMEAN = "geomean"
# Columns averaged (geometrically) across workloads by `geomean`: ratios to a baseline.
NORMALIZED = ("normalized_ipc", "normalized_traffic")
# A statistic keeps its run's name (``ipc``, ``l2.miss_rate``, ``ci95.ipc``), as in ``run``,
# ``sweep`` and ``results``; what compare derives has a name of its own.
COLUMNS = (
    "workload", "scheme", "integrity", "encryption", "instructions", "ipc", "normalized_ipc", "l2.miss_rate",
    "mem_bytes_per_instr", "normalized_traffic", "hash_loads_per_miss",
)


class Comparison(pd.DataFrame):
    """A DataFrame that prints whole (every row and column, no "[4 rows x 9 columns]"): one
    row per (workload, pair), every column of one type. ``attrs["provenance"]`` says how it
    was made; :meth:`geomean` summarizes the pairs across workloads."""

    @property
    def _constructor(self) -> type:
        return Comparison

    def __repr__(self) -> str:
        return self.to_string()

    __str__ = __repr__

    def geomean(self) -> pd.DataFrame:
        """The geometric mean of the normalized columns per pair across the workloads: one
        row per pair (``scheme``, ``integrity``, ``encryption``, ``workloads``: how many were
        averaged, then the means), in the pairs' order."""
        out = []
        for (integ, enc), g in self.groupby(["integrity", "encryption"], sort=False):
            row: dict[str, Any] = {"scheme": f"{integ}+{enc}", "integrity": integ, "encryption": enc, "workloads": len(g)}
            row.update({c: geomean(g[c]) for c in NORMALIZED if c in g})
            out.append(row)
        return pd.DataFrame(out, columns=["scheme", "integrity", "encryption", "workloads", *[c for c in NORMALIZED if c in self]])


def _row(workload: str, s: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    traffic = s["mem.read_bytes"] + s["mem.write_bytes"]
    base_traffic = base["mem.read_bytes"] + base["mem.write_bytes"]
    row = {
        "workload": workload,
        "scheme": f"{s['integrity']}+{s['encryption']}",
        "integrity": s["integrity"],
        "encryption": s["encryption"],
        "instructions": int(s["instructions"]),
        "ipc": s["ipc"],
        "normalized_ipc": s["ipc"] / base["ipc"] if base["ipc"] else 0.0,
        "l2.miss_rate": s["l2.miss_rate"],
        "mem_bytes_per_instr": traffic / max(s["instructions"], 1),
        "normalized_traffic": traffic / base_traffic if base_traffic else 0.0,
        "hash_loads_per_miss": s.get(f"{s['integrity']}.hash_loads_per_miss", s.get("chash.hash_loads_per_miss", 0.0)),
    }
    return {**row, **_sampled(s, base)}


def _sampled(s: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """A sampled run's 95% half-widths (``ci95.*`` columns, named as the run names them; none
    for a full run). The normalized IPC's combines both runs' relative errors (independent
    estimates, first-order)."""
    if "ci95.ipc" not in s:
        return {}
    rel = math.hypot(s["ci95.ipc"] / s["ipc"] if s["ipc"] else 0.0, base["ci95.ipc"] / base["ipc"] if base["ipc"] else 0.0)
    return {
        "ci95.ipc": s["ci95.ipc"],
        "ci95.normalized_ipc": rel * (s["ipc"] / base["ipc"] if base["ipc"] else 0.0),
        "ci95.l2.miss_rate": s["ci95.l2.miss_rate"],
    }


def order(df: "Comparison") -> "Comparison":
    """Columns in the order ``compare`` makes them (JSON files keep them sorted by name)."""
    first = [c for c in COLUMNS if c in df.columns]
    out: Comparison = df[first + [c for c in df.columns if c not in first]]
    return out


def geomean(values: Iterable[float]) -> float:
    vals = [float(v) for v in values]
    if not vals or any(v <= 0 for v in vals):
        return float("nan")
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def compare(
    workloads: Union[None, str, Sequence[Optional[str]]] = None,
    schemes: Optional[Iterable[Union[str, Sequence[str]]]] = None,
    progress: bool = False,
    **kwargs: Any,
) -> Comparison:
    """Run one workload, or each of a list, under several (integrity, encryption) pairs (and
    the unprotected baseline, which every row is normalized to): a DataFrame (printed whole)
    with IPC normalized to the baseline, L2 miss rate and memory traffic, one row per
    (workload, pair); statistics keep their run's names (``ipc``, ``l2.miss_rate``,
    ``ci95.ipc``). The geometric mean per pair across workloads is ``df.geomean()``, apart
    from the data. Runs whose warm-up did not fill the L2 are named in
    ``df.attrs["warnings"]``. ``schemes``: pairs such as ``("chash", "otp")`` or ``"chash+otp"``,
    default none+none, chash+none, none+otp, chash+otp. Keyword arguments go to
    :func:`secmem.run` (``instructions``, ``warmup``, ``preset``, ``trace``, …). Every pair is
    checked by the registry before anything runs; a run that stops early raises RuntimeError
    naming it."""
    # run() names it `workload`: taken here, not passed on twice.
    if "workload" in kwargs:
        if workloads is not None:
            raise TypeError("compare: give workloads or workload, not both")
        workloads = kwargs.pop("workload")
    if schemes is not None and not isinstance(schemes, (str, Iterable)):
        raise TypeError(f"schemes must be pairs such as 'chash+otp' or ('chash', 'otp'), not {type(schemes).__name__}")
    if workloads is None or isinstance(workloads, str):
        wl: list[Optional[str]] = [workloads]
    elif isinstance(workloads, Sequence):
        wl = list(workloads) or [None]
    else:
        raise TypeError(f"workloads must be a name or a list of names, not {type(workloads).__name__}")
    if isinstance(schemes, str):
        schemes = schemes.split(",")
    pairs = [scheme_pair(p, "schemes") for p in (DEFAULT_SCHEMES if schemes is None else schemes)]
    has_base = ("none", "none") in pairs
    todo = pairs if has_base else pairs + [("none", "none")]
    # Unknown scheme names, preset or parameters fail here, before the first run.
    machine = {k: kwargs[k] for k in ("preset", "params", "sets") if k in kwargs}
    for integ, enc in todo:
        configuration(integrity=integ, encryption=enc, **machine)
    t0 = time.monotonic()
    rows: list[dict[str, Any]] = []
    warned: list[str] = []
    with Progress(len(wl) * len(todo), "compare", enabled=progress) as bar:
        for w in wl:
            results = {}
            for integ, enc in todo:
                name = f"{w or kwargs.get('trace') or 'workload'} {integ}+{enc}"
                bar.running(name)
                r = run(w, integrity=integ, encryption=enc, **kwargs)
                bar.done(name, r.stats.get("sim.wall_seconds"))
                if r.interrupted:
                    raise Interrupted(f"{integ}+{enc}: {r.error}", r.interrupted)
                if r.error:
                    raise RuntimeError(f"{integ}+{enc}: {r.error}")
                warned += [f"{name}: {w}" for w in r.warnings]
                results[(integ, enc)] = r.stats
            base = results[("none", "none")]
            rows += [_row(results[p]["workload"], results[p], base) for p in pairs]
    df = Comparison(rows)
    df.attrs["provenance"] = provenance.block(wall_seconds=time.monotonic() - t0)
    df.attrs["warnings"] = warned
    return df


def render(df: "Comparison") -> str:
    """The comparison as a text table, whole; the workload column and the geometric-mean
    rows (after a rule) only when there are several workloads."""
    several = df["workload"].nunique() > 1 if "workload" in df else False
    cols: list[table.Column] = [("workload", "workload", None)] if several else []
    cols += [
        ("integrity", "integrity", None),
        ("encryption", "encryption", None),
        ("IPC", "ipc", ".4f"),
        *_ci_column("ci95.ipc", df, ".4f"),
        ("norm. IPC", "normalized_ipc", ".3f"),
        *_ci_column("ci95.normalized_ipc", df, ".3f"),
        ("L2 miss", "l2.miss_rate", lambda v: f"{v * 100:.2f}%"),
        *_ci_column("ci95.l2.miss_rate", df, lambda v: f"{v * 100:.2f}%"),
        ("B/instr", "mem_bytes_per_instr", ".2f"),
        ("norm. traffic", "normalized_traffic", ".3f"),
        ("hash loads/miss", "hash_loads_per_miss", ".2f"),
    ]
    recs = records(df)
    if not several:
        return table.render(recs, cols)
    means = [{"workload": GEOMEAN, **r} for r in records(df.geomean())]
    return table.render(recs + means, cols, rule_before={len(recs)})


def _ci_column(key: str, df: pd.DataFrame, fmt: table.Format) -> list[table.Column]:
    """The '±95%' column after a value, when the runs were sampled."""
    return [("±95%", key, fmt)] if key in df else []


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows for JSON (numpy scalars as Python's; a NaN, a geometric mean of a non-positive
    value, as null)."""
    return [{str(k): (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in df.to_dict(orient="records")]

"""``secmem.compare``: workloads under several scheme pairs, normalized to the unprotected
baseline of the same workload, with a geometric-mean row per pair across workloads."""

from __future__ import annotations

import math
import time
from typing import Iterable, Optional, Sequence, Union

import pandas as pd

from . import provenance
from .progress import Progress

DEFAULT_SCHEMES = (("none", "none"), ("chash", "none"), ("none", "otp"), ("chash", "otp"))
GEOMEAN = "geomean"
# Columns averaged (geometrically) across workloads in the geomean rows: ratios to a baseline.
NORMALIZED = ("normalized_ipc", "normalized_traffic")
COLUMNS = (
    "workload", "integrity", "encryption", "instructions", "ipc", "normalized_ipc", "l2_miss_rate",
    "mem_bytes_per_instr", "normalized_traffic", "hash_loads_per_miss",
)


class Comparison(pd.DataFrame):
    """A DataFrame that prints whole (every row and column, no "[4 rows x 9 columns]").
    ``attrs["provenance"]`` says how it was made."""

    @property
    def _constructor(self):
        return Comparison

    def __repr__(self) -> str:
        return self.to_string()

    __str__ = __repr__


def _row(workload: str, s: dict, base: dict) -> dict:
    traffic = s["mem.read_bytes"] + s["mem.write_bytes"]
    base_traffic = base["mem.read_bytes"] + base["mem.write_bytes"]
    row = {
        "workload": workload,
        "integrity": s["integrity"],
        "encryption": s["encryption"],
        "instructions": s["instructions"],
        "ipc": s["ipc"],
        "normalized_ipc": s["ipc"] / base["ipc"] if base["ipc"] else 0.0,
        "l2_miss_rate": s["l2.miss_rate"],
        "mem_bytes_per_instr": traffic / max(s["instructions"], 1),
        "normalized_traffic": traffic / base_traffic if base_traffic else 0.0,
        "hash_loads_per_miss": s.get(f"{s['integrity']}.hash_loads_per_miss", s.get("chash.hash_loads_per_miss", 0.0)),
    }
    return {**row, **_sampled(s, base)}


def _sampled(s: dict, base: dict) -> dict:
    """A sampled run's 95% half-widths (``*_ci95`` columns; none for a full run). The
    normalized IPC's combines both runs' relative errors (independent estimates, first-order)."""
    if "ci95.ipc" not in s:
        return {}
    rel = math.hypot(s["ci95.ipc"] / s["ipc"] if s["ipc"] else 0.0, base["ci95.ipc"] / base["ipc"] if base["ipc"] else 0.0)
    return {
        "ipc_ci95": s["ci95.ipc"],
        "normalized_ipc_ci95": rel * (s["ipc"] / base["ipc"] if base["ipc"] else 0.0),
        "l2_miss_rate_ci95": s["ci95.l2.miss_rate"],
    }


def order(df: "Comparison") -> "Comparison":
    """Columns in the order ``compare`` makes them (JSON files keep them sorted by name)."""
    first = [c for c in COLUMNS if c in df.columns]
    return df[first + [c for c in df.columns if c not in first]]


def geomean(values: Iterable[float]) -> float:
    vals = [float(v) for v in values]
    if not vals or any(v <= 0 for v in vals):
        return float("nan")
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def compare(
    workloads: Union[None, str, Sequence[Optional[str]]] = None,
    schemes: Iterable[tuple] = DEFAULT_SCHEMES,
    progress: bool = False,
    **kwargs,
) -> Comparison:
    """Run each workload under each (integrity, encryption) pair (and the unprotected
    baseline, which every row is normalized to). With several workloads, one geometric-mean
    row per pair follows (``workload == "geomean"``, normalized columns only). Keyword
    arguments go to :func:`secmem.run` (``instructions``, ``warmup``, ``preset``, ``trace``, …).
    A run that stops early raises RuntimeError naming it."""
    from .api import run

    wl = [workloads] if workloads is None or isinstance(workloads, str) else list(workloads) or [None]
    schemes = list(schemes)
    has_base = ("none", "none") in schemes
    t0 = time.monotonic()
    rows = []
    per_workload = len(schemes) + (0 if has_base else 1)
    with Progress(len(wl) * per_workload, "compare", enabled=progress) as bar:
        for w in wl:
            results = {}
            todo = schemes if has_base else schemes + [("none", "none")]
            for integ, enc in todo:
                name = f"{w or kwargs.get('trace') or 'workload'} {integ}+{enc}"
                bar.running(name)
                r = run(w, integrity=integ, encryption=enc, **kwargs)
                bar.done(name, r.stats.get("sim.wall_seconds"))
                if r.interrupted:
                    from .api import Interrupted

                    raise Interrupted(f"{integ}+{enc}: {r.error}", r.interrupted)
                if r.error:
                    raise RuntimeError(f"{integ}+{enc}: {r.error}")
                results[(integ, enc)] = r.stats
            base = results[("none", "none")]
            rows += [_row(results[p]["workload"], results[p], base) for p in schemes]
    if len(wl) > 1:
        for integ, enc in schemes:
            mine = [r for r in rows if (r["integrity"], r["encryption"]) == (integ, enc)]
            g = {"workload": GEOMEAN, "integrity": integ, "encryption": enc}
            g.update({c: geomean(r[c] for r in mine) for c in NORMALIZED})
            rows.append(g)
    df = Comparison(rows)
    df.attrs["provenance"] = provenance.block(wall_seconds=time.monotonic() - t0)
    return df


def render(df: pd.DataFrame) -> str:
    """The comparison as a text table, whole; the workload column only when there are several."""
    from . import table

    several = df["workload"].nunique() > 1 if "workload" in df else False
    cols = [("workload", "workload", None)] if several else []
    cols += [
        ("integrity", "integrity", None),
        ("encryption", "encryption", None),
        ("IPC", "ipc", ".4f"),
        *_ci_column("ipc_ci95", df, ".4f"),
        ("norm. IPC", "normalized_ipc", ".3f"),
        *_ci_column("normalized_ipc_ci95", df, ".3f"),
        ("L2 miss", "l2_miss_rate", lambda v: f"{v * 100:.2f}%"),
        *_ci_column("l2_miss_rate_ci95", df, lambda v: f"{v * 100:.2f}%"),
        ("B/instr", "mem_bytes_per_instr", ".2f"),
        ("norm. traffic", "normalized_traffic", ".3f"),
        ("hash loads/miss", "hash_loads_per_miss", ".2f"),
    ]
    recs = df.to_dict(orient="records")
    first_mean = next((i for i, r in enumerate(recs) if r.get("workload") == GEOMEAN), None)
    return table.render(recs, cols, rule_before={first_mean} if first_mean is not None else None)


def _ci_column(key: str, df: pd.DataFrame, fmt) -> list:
    """The '±95%' column after a value, when the runs were sampled."""
    return [("±95%", key, fmt)] if key in df else []


def records(df: pd.DataFrame) -> list:
    """Rows for JSON: NaN (absent in geomean rows) as null."""
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in df.to_dict(orient="records")]

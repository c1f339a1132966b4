"""The pieces every reproducible figure is made of: the paper's transcribed values (one data
file per seed), the scale, the measured points, and rows with a verdict.

A figure is one :class:`Figure` entry in ``figures.py``: the points it simulates, the rows it
sets beside the paper's values (each value read from ``data/SEED.toml`` by key, so a value
cited is a value transcribed, with its source) and the plot shaped like the paper's.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

from ..sweep import Planned, Point

DATA = Path(__file__).with_name("data")

REPRODUCED = "reproduced"
TREND_ONLY = "trend only"
DIFFERS = "differs"
NOT_RUN = "not run"
VERDICTS = (REPRODUCED, TREND_ONLY, DIFFERS, NOT_RUN)


# ---------------------------------------------------------------------------------------
# The paper's values


@dataclass(frozen=True)
class Value:
    """One transcribed value: ``value`` (a number, a [low, high] range, or None for a claim
    with no number), ``text`` as the paper puts it, ``source`` (figure/table and quote)."""

    key: str
    value: object
    text: str
    source: str
    raw: dict


@dataclass(frozen=True)
class StandIn:
    benchmark: str
    workload: str
    why: str


@dataclass
class Paper:
    """One seed's data file."""

    seed: str
    title: str
    preset: str
    method: str
    stand_ins: dict
    causes: dict
    values: dict  # figure id -> {key: raw table}
    used: set = field(default_factory=set)

    def value(self, figure: str, key: str) -> Value:
        try:
            raw = self.values[figure][key]
        except KeyError:
            raise KeyError(f"data/{self.seed}.toml has no value {figure}.{key}") from None
        self.used.add((figure, key))
        if not isinstance(raw, dict):
            raw = {"value": raw}
        source = raw.get("source") or self.values[figure].get("source", "")
        return Value(key, raw.get("value"), str(raw.get("text", raw.get("value", ""))), source, raw)

    def table(self, figure: str) -> dict:
        """A figure's whole table (e.g. Table 2's columns)."""
        self.used.add((figure, None))
        return self.values[figure]

    def stand_in(self, benchmark: str) -> StandIn:
        return self.stand_ins[benchmark]

    def cause(self, key: str) -> str:
        c = self.causes[key]
        return c["text"] + (f" (issue {c['issue']})" if c.get("issue") else "")


def _toml(path: Path) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    with open(path, "rb") as f:
        return tomllib.load(f)


def load_paper(seed: str) -> Paper:
    doc = _toml(DATA / f"{seed}.toml")
    return Paper(
        seed=doc["seed"],
        title=doc["paper"],
        preset=doc["preset"],
        method=doc.get("method", ""),
        stand_ins={k: StandIn(k, v["workload"], v["why"]) for k, v in doc.get("stand_ins", {}).items()},
        causes=doc.get("causes", {}),
        values=doc.get("values", {}),
    )


# ---------------------------------------------------------------------------------------
# Scale


@dataclass(frozen=True)
class Scale:
    """How much to simulate: instructions per point (000, 003) and 002's resume periods in
    cycles (``period_short``: Figs. 4-6, 100 M in the paper; ``period_long``: Fig. 7 and
    Table 2, 1 G in the paper)."""

    name: str
    instructions: int
    warmup: int
    skip: int
    period_short: int
    period_long: int

    def describe(self) -> str:
        s = f"{self.instructions / 1e6:g} M instructions measured after {self.warmup / 1e6:g} M of warm-up"
        return s + (f", {self.skip / 1e9:g} G skipped first" if self.skip else "")


SCALES = {
    # minutes per figure on two cores
    "laptop": Scale("laptop", 2_000_000, 500_000, 0, 10_000_000, 20_000_000),
    # the papers' counts: 100 M instructions after skipping 1.5 G (000 §6.1, 003 §5.3); 002 §5.2
    "full": Scale("full", 100_000_000, 1_000_000, 1_500_000_000, 100_000_000, 1_000_000_000),
    # seconds for 000 and 003, to check the pipeline (tests), not to compare with the papers;
    # 002 as laptop: with resume periods much under 10 M cycles, re-encrypting 65,536-line
    # blocks fills whole resume cycles and the program barely advances (mecu.saturated_*)
    "smoke": Scale("smoke", 20_000, 5_000, 0, 10_000_000, 20_000_000),
}


# ---------------------------------------------------------------------------------------
# Measured points


def point_id(workload: str, scheme: str, sets: Optional[dict] = None, preset: Optional[str] = None) -> tuple:
    integ, enc = scheme.split("+")
    return (workload, integ, enc, preset, frozenset((sets or {}).items()))


class Data:
    """The rows of a figure's points, looked up by workload, scheme and parameter settings."""

    def __init__(self, planned: Sequence[Planned], frame, scale: "Scale"):
        self.planned = list(planned)
        self.frame = frame
        self.scale = scale
        self._by: dict = {}
        for pl, (_, r) in zip(self.planned, frame.iterrows()):
            p = pl.point
            for preset in (None, p.preset):
                self._by[(p.workload or p.trace, p.integrity, p.encryption, preset, frozenset(p.sets))] = r

    def row(self, workload: str, scheme: str, sets: Optional[dict] = None, preset: Optional[str] = None):
        try:
            return self._by[point_id(workload, scheme, {k: str(v) for k, v in (sets or {}).items()}, preset)]
        except KeyError:
            raise KeyError(f"figure has no point {workload} {scheme} {sets or ''}") from None

    def get(self, workload: str, scheme: str, stat: str = "ipc", sets: Optional[dict] = None, preset: Optional[str] = None):
        """A statistic of one point; None when the point failed."""
        r = self.row(workload, scheme, sets, preset)
        if r.get("status") != "ok":
            return None
        v = r.get(stat)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return None
        return v

    def norm(self, workload: str, scheme: str, stat: str = "ipc", sets: Optional[dict] = None, base: str = "none+none",
             base_sets: Optional[dict] = None):
        """``stat`` of a point over the same statistic of its baseline (same workload and
        settings unless ``base_sets``)."""
        v = self.get(workload, scheme, stat, sets)
        b = self.get(workload, base, stat, sets if base_sets is None else base_sets)
        if v is None or not b:
            return None
        return v / b

    def failures(self) -> list:
        f = self.frame
        if "status" not in f:
            return []
        bad = f[f["status"] != "ok"]
        return [(self.planned[i].point.label(), bad.loc[i, "error"]) for i in bad.index]


# ---------------------------------------------------------------------------------------
# Rows and verdicts

Number = Union[int, float]


def within_2x(paper, secmem) -> Optional[bool]:
    """Is secmem's number within a factor of two of the paper's (a number or a [low, high]
    range: within 2x of the range)? None when either is missing."""
    if paper is None or secmem is None:
        return None
    lo, hi = (paper if isinstance(paper, (list, tuple)) else (paper, paper))
    lo, hi = float(lo), float(hi)
    s = float(secmem)
    if lo == 0 and hi == 0:
        return abs(s) < 1e-12
    if (s > 0) != (hi > 0) and s != 0:
        return False
    return lo / 2 <= s <= hi * 2 if hi > 0 else hi * 2 <= s <= lo / 2


@dataclass
class Row:
    """One claim of the paper beside secmem's measurement.

    ``trend``: whether the qualitative claim holds in secmem (None: not measurable, a point
    failed). ``paper``/``secmem``: numbers to compare within 2x (either may be None).
    ``cause``: why secmem may differ, when known (shown unless the row is reproduced)."""

    claim: str
    value: Value
    secmem: Optional[Number] = None
    secmem_text: str = ""
    trend: Optional[bool] = None
    cause: Optional[str] = None
    paper: object = "from value"
    upper: bool = False  # the paper's number is a bound ("less than X"): only above 2X is off
    paper_text: str = ""  # the paper's value in words (default: the transcribed value's text)

    def __post_init__(self):
        if self.paper == "from value":
            self.paper = self.value.value if isinstance(self.value.value, (int, float, list, tuple)) else None
        self.paper_text = self.paper_text or self.value.text

    @property
    def verdict(self) -> str:
        """reproduced: the trend holds and the number (if any) is within 2x (for a bound, at
        most twice it); trend only: the trend holds, the number is not; differs: the trend does
        not hold; not run: a point it needs failed."""
        if self.trend is None:
            return NOT_RUN
        if not self.trend:
            return DIFFERS
        if self.upper and self.paper is not None and self.secmem is not None:
            close = float(self.secmem) <= 2 * float(self.paper)
        else:
            close = within_2x(self.paper, self.secmem) is not False
        return REPRODUCED if close else TREND_ONLY


@dataclass(frozen=True)
class Figure:
    """One reproducible table or figure.

    ``points(paper, scale)`` lists the simulations; ``rows(data, paper, scale)`` the claims
    with secmem's values; ``plot(data, paper, fig)`` draws secmem's figure (and the paper's
    numbers where it gives them) on a matplotlib Figure. ``ask`` says what was simulated
    in words, for the report."""

    id: str
    seed: str
    title: str
    source: str
    points: Callable
    rows: Callable
    plot: Callable
    ask: Callable = lambda paper, scale: ""
    size: tuple = (9.0, 4.0)
    # Work the points need done first, outside the sweep (making trace files): (paper, scale).
    prepare: Optional[Callable] = None
    # The suite programs (real programs, `secmem workloads install`) the figure runs: (paper).
    programs: Optional[Callable] = None
    # The figure as text for the console, beside the paper's values: (data, paper) -> str.
    text: Optional[Callable] = None

    @property
    def kind(self) -> str:
        return "table" if "table" in self.id or "space" in self.id else "figure"


def product_points(paper: Paper, scale: Scale, workloads: Sequence[str], schemes: Sequence[str],
                   configs: Sequence[dict] = ({},), preset: Optional[str] = None, **kw) -> list:
    """Points for every workload x scheme x configuration (a dict of parameters)."""
    out = []
    for w in workloads:
        for cfg in configs:
            for s in schemes:
                integ, enc = s.split("+")
                out.append(
                    Point(
                        workload=w, integrity=integ, encryption=enc, preset=preset or paper.preset,
                        sets=tuple((k, str(v)) for k, v in cfg.items()),
                        instructions=kw.get("instructions", scale.instructions),
                        warmup=kw.get("warmup", scale.warmup), skip=kw.get("skip", scale.skip),
                    )
                )
    return out

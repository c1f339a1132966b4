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
SAME_ORDER = "same order"
TREND_ONLY = "trend only"
DIFFERS = "differs"
NOT_MEASURED = "not measured"
NOT_RUN = "not run"
VERDICTS = (REPRODUCED, SAME_ORDER, TREND_ONLY, DIFFERS, NOT_MEASURED, NOT_RUN)

# A paper's number is read off its text or a bar chart to about a quarter of its value; a claim
# whose precision differs says so in its data file (`tolerance`, `tolerance_why`).
TOLERANCE = 0.25
# The bounds a claim can state (its data file's `bound`): "less than X", "more than X".
AT_MOST, AT_LEAST = "at most", "at least"


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

    @property
    def bound(self) -> Optional[str]:
        """``AT_MOST`` for "less than X", ``AT_LEAST`` for "more than X", None for a number
        (or a [low, high] range) the paper reports."""
        b = self.raw.get("bound")
        return None if b is None else str(b)

    @property
    def tolerance(self) -> float:
        """How far (relative) secmem's number may lie from a reported number and still
        reproduce it: the paper's precision (``TOLERANCE`` unless the data file says why)."""
        return float(self.raw.get("tolerance", TOLERANCE))

    @property
    def tolerance_why(self) -> str:
        return str(self.raw.get("tolerance_why", ""))


def check_value(figure: str, key: str, raw: dict) -> None:
    """A transcribed value states a bound and tolerance the verdict can use (ValueError)."""
    where = f"{figure}.{key}"
    b = raw.get("bound")
    if b not in (None, AT_MOST, AT_LEAST):
        raise ValueError(f"{where}: bound '{b}' is neither '{AT_MOST}' nor '{AT_LEAST}'")
    if b is not None and not isinstance(raw.get("value"), (int, float)):
        raise ValueError(f"{where}: a bound needs one number as its value")
    if "tolerance" in raw:
        t = raw["tolerance"]
        if not isinstance(t, (int, float)) or not 0 < t < 1:
            raise ValueError(f"{where}: tolerance {t!r} is not a fraction between 0 and 1")
        if not raw.get("tolerance_why"):
            raise ValueError(f"{where}: a tolerance other than {TOLERANCE:.0%} says why (tolerance_why)")


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
        """A known cause as the report says it: its text alone (the ``issue`` a data file
        records is for the project's maintainers; the report's readers cannot look it up)."""
        return str(self.causes[key]["text"])


def _toml(path: Path) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    with open(path, "rb") as f:
        return tomllib.load(f)


def load_paper(seed: str) -> Paper:
    doc = _toml(DATA / f"{seed}.toml")
    for fig, vals in doc.get("values", {}).items():
        for key, raw in vals.items():
            if isinstance(raw, dict):
                check_value(fig, key, raw)
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
    Table 2, 1 G in the paper, over ``cycles_long`` resume cycles, 5 in the paper)."""

    name: str
    instructions: int
    warmup: int
    skip: int
    period_short: int
    period_long: int
    cycles_long: int

    def describe(self) -> str:
        s = f"{self.instructions / 1e6:g} M instructions measured after {self.warmup / 1e6:g} M of warm-up"
        return s + (f", {self.skip / 1e9:g} G skipped first" if self.skip else "")


SCALES = {
    # minutes per figure on two cores. 002's quiescence runs (Fig. 7, Table 2) resume every
    # 100 M cycles, the period the paper itself uses for Figs. 4-6 (§5.2.1): long enough for
    # the bzip2 stand-in to quiesce (stream: 43 M cycles at 1 line per block), where 20 M was
    # not; 3 resume cycles, the first (seeding memory) discounted as §5.2.2 does, 2 measured.
    "laptop": Scale("laptop", 2_000_000, 500_000, 0, 10_000_000, 100_000_000, 3),
    # the papers' counts: 100 M instructions after skipping 1.5 G (000 §6.1, 003 §5.3); 002 §5.2
    "full": Scale("full", 100_000_000, 1_000_000, 1_500_000_000, 100_000_000, 1_000_000_000, 5),
    # seconds for 000 and 003, to check the pipeline (tests), not to compare with the papers;
    # 002 in minutes: with resume periods much under 10 M cycles, re-encrypting 65,536-line
    # blocks fills whole resume cycles and the program barely advances (mecu.saturated_*); at
    # 20 M the bzip2 stand-in never quiesces, so its times to quiescence are "not measured"
    "smoke": Scale("smoke", 20_000, 5_000, 0, 10_000_000, 20_000_000, 5),
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


def _span(paper) -> Optional[tuple]:
    if paper is None:
        return None
    lo, hi = (paper if isinstance(paper, (list, tuple)) else (paper, paper))
    return float(lo), float(hi)


def within(paper, secmem, tolerance: float) -> Optional[bool]:
    """Is secmem's number within ``tolerance`` (relative) of the paper's number or [low, high]
    range? None when either is missing."""
    span = _span(paper)
    if span is None or secmem is None:
        return None
    lo, hi = span
    s = float(secmem)
    if lo == 0 and hi == 0:
        return abs(s) < 1e-12
    return lo - tolerance * abs(lo) <= s <= hi + tolerance * abs(hi)


def within_2x(paper, secmem) -> Optional[bool]:
    """Is secmem's number within a factor of two of the paper's (a number or a [low, high]
    range: within 2x of the range)? None when either is missing."""
    span = _span(paper)
    if span is None or secmem is None:
        return None
    lo, hi = span
    s = float(secmem)
    if lo == 0 and hi == 0:
        return abs(s) < 1e-12
    if (s > 0) != (hi > 0) and s != 0:
        return False
    return lo / 2 <= s <= hi * 2 if hi > 0 else hi * 2 <= s <= lo / 2


def closeness(paper, secmem, bound: Optional[str], tolerance: float) -> Optional[str]:
    """How secmem's number stands to the paper's: REPRODUCED (within the bound, or within the
    tolerance of the number), SAME_ORDER (within 2x of it), TREND_ONLY (further), None when
    either is missing."""
    if paper is None or secmem is None:
        return None
    s = float(secmem)
    if bound is not None:
        p = float(paper)
        if bound == AT_MOST:
            return REPRODUCED if s <= p else SAME_ORDER if s <= 2 * p else TREND_ONLY
        return REPRODUCED if s >= p else SAME_ORDER if s >= p / 2 else TREND_ONLY
    if within(paper, s, tolerance):
        return REPRODUCED
    return SAME_ORDER if within_2x(paper, s) else TREND_ONLY


@dataclass
class Row:
    """One claim of the paper beside secmem's measurement.

    ``trend``: whether the qualitative claim holds in secmem (None: not measurable, a point
    failed). ``paper``/``secmem``: numbers to compare (either may be None); ``bound`` and
    ``tolerance`` come from the claim's data file unless given. ``pinned``: why secmem's number
    is not a measurement (it sits at a cap or limit of the run), which makes the row "not
    measured". ``cause``: why secmem may differ, when known (shown unless the row is
    reproduced)."""

    claim: str
    value: Value
    secmem: Optional[Number] = None
    secmem_text: str = ""
    trend: Optional[bool] = None
    cause: Optional[str] = None
    paper: object = "from value"
    paper_text: str = ""  # the paper's value in words (default: the transcribed value's text)
    bound: Optional[str] = "from value"
    tolerance: Optional[float] = None
    pinned: Optional[str] = None

    def __post_init__(self):
        if self.paper == "from value":
            self.paper = self.value.value if isinstance(self.value.value, (int, float, list, tuple)) else None
        if self.bound == "from value":
            self.bound = self.value.bound
        if self.tolerance is None:
            self.tolerance = self.value.tolerance
        self.paper_text = self.paper_text or self.value.text

    @property
    def rule(self) -> str:
        """What the number is held to, in words."""
        if self.paper is None:
            return "the trend"
        if self.bound is not None:
            return f"a bound: {self.bound} the paper's number"
        why = f" ({self.value.tolerance_why})" if self.tolerance == self.value.tolerance and self.value.tolerance_why else ""
        return f"within {self.tolerance:.0%} of the paper's number{why}"

    @property
    def verdict(self) -> str:
        """not measured: secmem's number sits at a limit of the run; not run: a point it needs
        failed; differs: the trend does not hold; otherwise by the number (a claim without one
        is reproduced by its trend): reproduced (within the bound, or within the tolerance),
        same order (within 2x), trend only (further)."""
        if self.pinned:
            return NOT_MEASURED
        if self.trend is None:
            return NOT_RUN
        if not self.trend:
            return DIFFERS
        return closeness(self.paper, self.secmem, self.bound, float(self.tolerance or TOLERANCE)) or REPRODUCED


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

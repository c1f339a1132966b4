"""Every reproducible table and figure of the seeds: one entry each.

An entry names the points it simulates, the rows it sets beside the paper's values (read from
``data/SEED.toml`` by key) and its plot. Adding a figure is one entry here and its values in
the seed's data file. The built-in workloads stand in for the papers' SPEC programs
(``stand_ins`` in each data file says which, and why).
"""

from __future__ import annotations

import math
from statistics import mean, median
from typing import Callable, Optional, Sequence

from ..sweep import Point
from . import plots
from .registry import Data, Figure, Paper, Row, Scale, Value, product_points

# ---------------------------------------------------------------------------------------
# Helpers


def _pct(v) -> str:
    return "-" if v is None else f"{v * 100:.1f}%"


def _all(xs) -> Optional[list]:
    """The values, or None if any point behind them failed."""
    xs = list(xs)
    return None if any(x is None for x in xs) else xs


def _trend(cond, *deps) -> Optional[bool]:
    """A trend is not measurable when a value it depends on is missing."""
    return None if any(d is None for d in deps) else bool(cond() if callable(cond) else cond)


def _names(paper: Paper, benchmarks: Sequence[str]) -> list:
    return [paper.stand_in(b).workload for b in benchmarks]


def _label(paper: Paper, workload: str) -> str:
    bs = [s.benchmark for s in paper.stand_ins.values() if s.workload == workload]
    return f"{workload} ({'/'.join(bs)})" if bs else workload


def _overheads(d: Data, workloads, scheme, configs) -> Optional[list]:
    return _all(None if (n := d.norm(w, scheme, sets=c)) is None else 1 - n for w in workloads for c in configs)


def _cells(workloads, configs) -> list:
    """(workload, configuration) pairs in the order _overheads lists them."""
    return [(w, c) for w in workloads for c in configs]


def _size_label(c: dict) -> str:
    return ", ".join(str(v) for v in c.values()) or "default"


# The papers' SPEC programs: which ones each figure runs stand-ins for.
SPEC = ("gzip", "mcf", "swim")


# ---------------------------------------------------------------------------------------
# 000: Suh et al., MICRO-36 2003 (suh2003)


def _space_points(paper, scale, rows):
    return [Point(workload="hot", integrity=i, encryption=e, preset=paper.preset, sets=tuple(s.items()),
                  instructions=20_000, warmup=0) for i, e, s in rows]


_SPACE_000 = [("chash", "none", {}), ("lhash", "none", {}), ("none", "otp", {}), ("none", "direct", {})]


def _space_rows_000(d: Data, paper: Paper, scale: Scale):
    out = []
    for key, scheme, stat, claim in (
        ("chtree", "chash+none", "integrity.space_overhead", "CHTree (4-ary, 128-bit hashes, 64-B chunks)"),
        ("lhash", "lhash+none", "integrity.space_overhead", "LHash (32-bit time stamps, 64-B chunks)"),
        ("encryption", "none+otp", "encryption.space_overhead", "OTP encryption (32-bit time stamps)"),
        ("encryption", "none+direct", "encryption.space_overhead", "direct encryption (32-bit random vectors)"),
    ):
        v = paper.value("000-space", key)
        got = d.get("hot", scheme, stat)
        out.append(Row(f"space overhead of {claim}, of the data it covers", v, got, _pct(got),
                       _trend(lambda: abs(got - v.value) <= 0.01 * v.value, got)))
    return out


def _space_plot_000(d, paper, fig):
    ax = fig.add_subplot(111)
    labels = ["CHTree", "LHash", "OTP", "direct"]
    stats = [("chash+none", "integrity.space_overhead"), ("lhash+none", "integrity.space_overhead"),
             ("none+otp", "encryption.space_overhead"), ("none+direct", "encryption.space_overhead")]
    keys = ["chtree", "lhash", "encryption", "encryption"]
    plots.bars(ax, labels, {"secmem": [d.get("hot", s, st) for s, st in stats]}, "extra memory / data",
               paper={"secmem": [paper.value("000-space", k).value for k in keys]})


_FIG9_CONFIGS = [{"l2.size": s, "l2.line": b} for s in ("256KiB", "4MiB") for b in ("64B", "128B")]


def _fig9_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, SPEC)
    ch = _overheads(d, ws, "chash+none", _FIG9_CONFIGS)
    lh = _overheads(d, ws, "lhash+none", _FIG9_CONFIGS)
    rows = []
    v = paper.value("000-fig9", "lhash_beats_chtree")
    wins = None if ch is None else sum(l <= c + 1e-12 for l, c in zip(lh, ch))
    rows.append(Row("LHash (checked at the end) beats CHTree in every workload and L2 configuration", v, None,
                    "-" if wins is None else f"{wins} of {len(ch)} cells" + "".join(
                        f"; loses on {c[0]}, {_size_label(c[1])}" for c, l, h in zip(_cells(ws, _FIG9_CONFIGS), lh, ch) if l > h + 1e-12),
                    _trend(lambda: wins == len(ch), ch, lh), cause="lhash_pages"))
    v = paper.value("000-fig9", "lhash_worst")
    got = None if lh is None else max(lh)
    rows.append(Row("LHash's worst-case overhead", v, got, _pct(got), _trend(lambda: got <= max(ch), lh, ch),
                    cause="lhash_pages"))
    v = paper.value("000-fig9", "lhash_typical")
    got = None if lh is None else median(lh)
    rows.append(Row("LHash's typical (median) overhead", v, got, _pct(got), _trend(lambda: got <= median(ch), lh, ch),
                    cause="lhash_pages"))
    v = paper.value("000-fig9", "chtree_worst")
    got = None if ch is None else max(ch)
    rows.append(Row("CHTree's worst-case overhead", v, got, _pct(got), _trend(lambda: got > max(lh), ch, lh), cause="footprint"))
    v = paper.value("000-fig9", "chtree_typical")
    got = None if ch is None else median(ch)
    rows.append(Row("CHTree's typical (median) overhead", v, got, _pct(got), _trend(lambda: got > median(lh), ch, lh),
                    cause="footprint"))
    v = paper.value("000-fig9", "overhead_falls")
    means = None if ch is None else {_size_label(c): mean(ch[i::len(_FIG9_CONFIGS)]) for i, c in enumerate(_FIG9_CONFIGS)}
    falls = None if means is None else (
        means["4MiB, 64B"] <= means["256KiB, 64B"] and means["4MiB, 128B"] <= means["256KiB, 128B"]
        and means["256KiB, 128B"] <= means["256KiB, 64B"] and means["4MiB, 128B"] <= means["4MiB, 64B"] + 0.005)
    rows.append(Row("CHTree's mean overhead falls from 256 KB to 4 MB and from 64-B to 128-B blocks", v, None,
                    "-" if means is None else ", ".join(f"{k}: {_pct(m)}" for k, m in means.items()),
                    _trend(falls, means), cause="footprint"))
    return rows


def _fig9_plot(d, paper, fig):
    ws = _names(paper, SPEC)
    for i, c in enumerate(_FIG9_CONFIGS):
        ax = fig.add_subplot(1, 4, i + 1)
        plots.bars(ax, ws, {s.split("+")[0]: [d.norm(w, s, sets=c) for w in ws] for s in ("chash+none", "lhash+none")},
                   "IPC / baseline" if i == 0 else "", _size_label(c), ylim=(0, 1.1),
                   refs=[(0.85, "paper: LHash worst 15%"), (0.5, "CHTree worst 50%")] if i == 0 else [])


def _table2_rows(d: Data, paper: Paper, scale: Scale):
    rows = []
    for b in SPEC:
        w = paper.stand_in(b).workload
        v = paper.value("000-table2", b)
        for size in ("256KiB", "4MiB"):
            base, ch, lh = (d.get(w, s, "l2.miss_rate", {"l2.size": size}) for s in ("none+none", "chash+none", "lhash+none"))
            pb, pc, pl = v.raw[size]
            paper_raises = pc >= 1.1 * pb
            trend = _trend(lambda: lh == base and (ch >= 1.1 * base) == paper_raises, base, ch, lh)
            text = "-" if base is None else f"{_pct(base)} / {_pct(ch)} / {_pct(lh)}"
            rows.append(Row(f"{b} ({w}), {size.replace('i', '')} L2: baseline / CHTree / LHash data miss rate; "
                            f"LHash leaves it unchanged, CHTree {'raises it by 10% or more' if paper_raises else 'barely changes it'}",
                            v, base, text, trend, cause="chase_ceiling" if w == "chase" else "footprint", paper=pb / 100,
                            paper_text=f"{pb:.2f}% / {pc:.2f}% / {pl:.2f}%"))
    return rows


def _table2_plot(d, paper, fig):
    ws = _names(paper, SPEC)
    t = {b: paper.value("000-table2", b).raw for b in SPEC}
    for i, size in enumerate(("256KiB", "4MiB")):
        ax = fig.add_subplot(1, 2, i + 1)
        series = {lab: [d.get(w, s, "l2.miss_rate", {"l2.size": size}) for w in ws]
                  for lab, s in (("baseline", "none+none"), ("CHTree", "chash+none"), ("LHash", "lhash+none"))}
        ref = {lab: [t[b][size][j] / 100 for b in SPEC] for j, lab in enumerate(("baseline", "CHTree", "LHash"))}
        plots.bars(ax, [_label(paper, w) for w in ws], series, "L2 data miss rate" if i == 0 else "",
                   f"{size.replace('i', '')} L2, 64-B blocks", paper=ref)


def _fig10_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, SPEC)
    lh = _all(_traffic(d, w, "lhash+none") for w in ws)
    ch = _all(_traffic(d, w, "chash+none") for w in ws)
    v = paper.value("000-fig10", "lhash_extra")
    extra = None if lh is None else [x - 1 for x in lh]
    rows = [Row("LHash's extra off-chip traffic over the baseline (1 MB L2, 64-B blocks), mean of the workloads", v,
                None if extra is None else mean(extra),
                "-" if extra is None else " / ".join(f"{w} {_pct(x)}" for w, x in zip(ws, extra)),
                _trend(lambda: all(x > 0 for x in extra), extra), cause="lhash_pages")]
    v = paper.value("000-fig10", "chtree_more")
    rows.append(Row("CHTree moves more data than LHash on every workload", v, None,
                    "-" if ch is None else " / ".join(f"{w} {c:.2f}x vs {l:.2f}x" for w, c, l in zip(ws, ch, lh)),
                    _trend(lambda: all(c > l for c, l in zip(ch, lh)), ch, lh)))
    return rows


def _traffic(d, w, s, sets=None):
    """Off-chip bytes moved over the baseline's (same workload and settings)."""
    a, b = d.get(w, s, "mem.read_bytes", sets), d.get(w, "none+none", "mem.read_bytes", sets)
    if a is None or b is None:
        return None
    return (a + d.get(w, s, "mem.write_bytes", sets)) / (b + d.get(w, "none+none", "mem.write_bytes", sets))


def _fig10_plot(d, paper, fig):
    ws = _names(paper, SPEC)
    ax = fig.add_subplot(111)
    plots.bars(ax, [_label(paper, w) for w in ws], {lab: [_traffic(d, w, s) for w in ws]
               for lab, s in (("CHTree", "chash+none"), ("LHash", "lhash+none"))}, "off-chip traffic / baseline",
               refs=[(1.085, "paper: LHash +8.5%"), (1.20, "paper: LHash +20%")])


_PERIODS = ["1k", "10k", "100k", "1M", "10M"]
_PERIOD_N = [1e3, 1e4, 1e5, 1e6, 1e7]
_FIG11 = ("swim", "twolf")


def _fig11_points(paper, scale):
    ws = _names(paper, _FIG11)
    pts = product_points(paper, scale, ws, ["none+none", "chash+none", "lhash+none"])
    pts += product_points(paper, scale, ws, ["lhash+none"], [{"lhash.check_period": p} for p in _PERIODS])
    return pts


def _crossover(periods, lh, chash) -> Optional[float]:
    """The check period where LHash's IPC reaches CHTree's, interpolated in log(period)."""
    if lh[0] >= chash:
        return periods[0]
    for (p0, a), (p1, b) in zip(zip(periods, lh), zip(periods[1:], lh[1:])):
        if a < chash <= b:
            f = (chash - a) / (b - a)
            return math.exp(math.log(p0) + f * (math.log(p1) - math.log(p0)))
    return None


def _fig11_rows(d: Data, paper: Paper, scale: Scale):
    rows = []
    for b in _FIG11:
        w = paper.stand_in(b).workload
        ch = d.norm(w, "chash+none")
        lh = _all(d.norm(w, "lhash+none", sets={"lhash.check_period": p}, base_sets={}) for p in _PERIODS)
        end = d.norm(w, "lhash+none")
        checks = _all(d.get(w, "lhash+none", "lhash.checks", {"lhash.check_period": p}) for p in _PERIODS)
        rows.append(Row(f"{b} ({w}): LHash checked every {_PERIODS[0]} accesses is slower than CHTree", paper.value("000-fig11", "frequent_infeasible"),
                        None, "-" if lh is None else f"{lh[0]:.2f} vs CHTree {ch:.2f} (IPC / baseline)",
                        _trend(lambda: lh[0] < ch, lh, ch)))
        mono = None if lh is None or end is None else all(b2 >= a2 - 0.01 for a2, b2 in zip(lh + [end], lh[1:] + [end]))
        rows.append(Row(f"{b} ({w}): LHash's IPC rises with the check period towards its run-time IPC (checked at the end)",
                        paper.value("000-fig11", "converges"), None,
                        "-" if lh is None else " → ".join(f"{x:.2f}" for x in lh + [end]) + f" (checks: {', '.join(map(str, checks))})",
                        _trend(mono, mono)))
        x = None if lh is None or ch is None else _crossover(_PERIOD_N, lh, ch)
        text = "-" if lh is None else ("beyond " + _PERIODS[-1] if x is None else f"{x:.3g} accesses")
        rows.append(Row(f"{b} ({w}): the check period where LHash catches up with CHTree", paper.value("000-fig11", "crossover"),
                        x, text, _trend(x is not None and lh[0] < ch, lh, ch), cause="footprint"))
    return rows


def _fig11_plot(d, paper, fig):
    for i, b in enumerate(_FIG11):
        w = paper.stand_in(b).workload
        ax = fig.add_subplot(1, 2, i + 1)
        ch, end = d.norm(w, "chash+none"), d.norm(w, "lhash+none")
        marks = [(y, lab) for y, lab in ((ch, "CHTree"), (end, "LHash run-time")) if y is not None]
        plots.lines(ax, _PERIOD_N, {"LHash": [d.norm(w, "lhash+none", sets={"lhash.check_period": p}, base_sets={}) for p in _PERIODS]},
                    "check period (off-chip accesses)", "IPC / baseline" if i == 0 else "", _label(paper, w), logx=True,
                    marks=marks, vrefs=[(1e6, "paper: crossover ~10^6")])


def _enc_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, SPEC)
    otp = _overheads(d, ws, "none+otp", [{}])
    dr = _overheads(d, ws, "none+direct", [{}])
    v = lambda k: paper.value("000-fig12", k)
    per = "-" if otp is None else " / ".join(f"{w} {_pct(o)} vs {_pct(x)}" for w, o, x in zip(ws, otp, dr))
    rows = [
        Row("OTP's worst-case overhead", v("otp_worst"), None if otp is None else max(otp), _pct(otp and max(otp)),
            _trend(lambda: max(otp) < max(dr), otp, dr), cause="write_priority"),
        Row("direct encryption's worst-case overhead", v("direct_worst"), None if dr is None else max(dr), _pct(dr and max(dr)),
            _trend(lambda: max(dr) > max(otp), otp, dr), cause="write_priority"),
        Row("OTP's mean overhead", v("otp_mean"), None if otp is None else mean(otp), _pct(otp and mean(otp)),
            _trend(lambda: mean(otp) < mean(dr), otp, dr), cause="write_priority"),
        Row("direct encryption's mean overhead", v("direct_mean"), None if dr is None else mean(dr), _pct(dr and mean(dr)),
            _trend(lambda: mean(dr) > mean(otp), otp, dr), cause="write_priority"),
    ]
    red = None if otp is None or mean(dr) <= 0 else 1 - mean(otp) / mean(dr)
    rows.append(Row("share of direct encryption's mean overhead that OTP removes", v("reduction"), red, _pct(red),
                    _trend(lambda: red > 0, red), cause="write_priority"))
    rows.append(Row("OTP beats direct encryption on every workload (OTP vs direct overhead)", v("otp_beats_direct"), None, per,
                    _trend(lambda: all(o <= x for o, x in zip(otp, dr)), otp, dr), cause="write_priority"))
    return rows


def _enc_plot(d, paper, fig):
    ws = _names(paper, SPEC)
    ax = fig.add_subplot(111)
    plots.bars(ax, [_label(paper, w) for w in ws], {lab: [d.norm(w, s) for w in ws]
               for lab, s in (("direct", "none+direct"), ("OTP", "none+otp"))}, "IPC / baseline", ylim=(0, 1.15),
               refs=[(0.82, "paper: OTP worst 18%"), (0.75, "direct worst 25%")])


def _ptr_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, SPEC)
    old = _overheads(d, ws, "chash+direct", [{}])
    new = _overheads(d, ws, "lhash+otp", [{}])
    v = lambda k: paper.value("000-fig13", k)
    return [
        Row("CHTree + direct: worst-case overhead", v("old_worst"), old and max(old), _pct(old and max(old)),
            _trend(lambda: max(old) > max(new), old, new), cause="footprint"),
        Row("CHTree + direct: typical (median) overhead", v("old_typical"), old and median(old), _pct(old and median(old)),
            _trend(lambda: median(old) > median(new), old, new), cause="footprint"),
        Row("LHash + OTP: worst-case overhead", v("new_worst"), new and max(new), _pct(new and max(new)),
            _trend(lambda: max(new) < max(old), old, new)),
        Row("LHash + OTP: typical (median) overhead", v("new_typical"), new and median(new), _pct(new and median(new)),
            _trend(lambda: median(new) < median(old), old, new)),
        Row("LHash + OTP beats CHTree + direct on every workload", v("new_beats_old"), None,
            "-" if old is None else " / ".join(f"{w} {_pct(n)} vs {_pct(o)}" for w, n, o in zip(ws, new, old)),
            _trend(lambda: all(n <= o for n, o in zip(new, old)), old, new)),
    ]


def _ptr_plot(d, paper, fig):
    ws = _names(paper, SPEC)
    ax = fig.add_subplot(111)
    plots.bars(ax, [_label(paper, w) for w in ws], {lab: [d.norm(w, s) for w in ws]
               for lab, s in (("CHTree + direct", "chash+direct"), ("LHash + OTP", "lhash+otp"))}, "IPC / baseline",
               ylim=(0, 1.1), refs=[(0.4, "paper: old worst 60%"), (0.77, "new worst 23%")])


def _spec_points(schemes, configs=({},)):
    return lambda paper, scale: product_points(paper, scale, _names(paper, SPEC), schemes, configs)


# Fig. 8: the baseline at the L2 sizes of Figs. 9 and Table 2, and at twice each (§6.1's "L2
# caches that are twice as large").
_FIG8_SIZES = [("256KiB", "512KiB"), ("4MiB", "8MiB")]
_FIG8_CONFIGS = [{"l2.size": s} for pair in _FIG8_SIZES for s in pair]


def _bandwidth(d: Data, w: str, sets: dict) -> Optional[float]:
    """Off-chip bytes per core cycle."""
    r, wr, c = (d.get(w, "none+none", k, sets) for k in ("mem.read_bytes", "mem.write_bytes", "cycles"))
    return None if r is None or wr is None or not c else (r + wr) / c


def _fig8_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, SPEC)
    gains = _all(None if (a := d.get(w, "none+none", "ipc", {"l2.size": s})) is None
                 or (b := d.get(w, "none+none", "ipc", {"l2.size": t})) is None else b / a - 1
                 for w in ws for s, t in _FIG8_SIZES)
    cells = [f"{w} {s.replace('i', '')}" for w in ws for s, _ in _FIG8_SIZES]
    got = None if gains is None else mean(gains)
    rows = [Row("a baseline with an L2 twice as large is faster by (mean over stand-ins and sizes)", paper.value("000-fig8", "twice_l2"),
                got, "-" if gains is None else f"{_pct(got)} ({', '.join(f'{c}: {_pct(g)}' for c, g in zip(cells, gains))})",
                _trend(lambda: got >= 0, got), cause="footprint")]
    big = {"l2.size": "4MiB"}
    miss = {w: d.get(w, "none+none", "l2.miss_rate", big) for w in ws}
    bw = {w: _bandwidth(d, w, big) for w in ws}
    sens = [paper.stand_in(b).workload for b in ("mcf", "swim")]
    cache = paper.stand_in("gzip").workload
    ok = _trend(lambda: all(miss[w] > miss[cache] and bw[w] > bw[cache] for w in sens), *miss.values(), *bw.values())
    rows.append(Row("mcf and swim miss in the L2 and use the bus heavily; gzip is cache-sensitive (4 MB L2: miss rate, B/cycle)",
                    paper.value("000-fig8", "bandwidth_sensitive"), None,
                    "-" if ok is None else " / ".join(f"{w} {_pct(miss[w])}, {bw[w]:.2f} B/cycle" for w in ws), ok))
    return rows


def _fig8_plot(d, paper, fig):
    ws = _names(paper, SPEC)
    sizes = [c["l2.size"] for c in _FIG8_CONFIGS]
    ax = fig.add_subplot(1, 2, 1)
    plots.bars(ax, [_label(paper, w) for w in ws], {s.replace("i", ""): [d.get(w, "none+none", "ipc", {"l2.size": s}) for w in ws]
               for s in sizes}, "baseline IPC", "IPC")
    ax = fig.add_subplot(1, 2, 2)
    plots.bars(ax, [_label(paper, w) for w in ws], {s.replace("i", ""): [_bandwidth(d, w, {"l2.size": s}) for w in ws]
               for s in sizes}, "off-chip bytes / cycle", "bandwidth")


def _wb_interval(d: Data, w: str) -> Optional[float]:
    """Core cycles per write-back under OTP (each write-back advances the time stamp)."""
    c, n = d.get(w, "none+otp", "cycles"), d.get(w, "none+otp", "otp.writes")
    return None if c is None or n is None else (c / n if n else math.inf)


def _reenc_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, SPEC)
    iv = _all(_wb_interval(d, w) for w in ws)
    none = [] if iv is None else [w for w, x in zip(ws, iv) if math.isinf(x)]
    pinned = (f"{', '.join(none)} wrote nothing back in the window: its interval is longer than the run, not measured"
              if none else None)
    got = None if iv is None or none else mean(iv)
    text = "-" if iv is None else ", ".join(f"{w}: " + ("none written" if math.isinf(x) else f"{x:,.0f} cycles") for w, x in zip(ws, iv))
    swim = paper.stand_in("swim").workload
    s = _wb_interval(d, swim)
    worst = None if iv is None else min(iv)
    return [
        Row("cycles between write-backs under OTP, mean of the stand-ins' intervals (1 MB L2)", paper.value("000-reenc", "mean_interval"),
            got, text, _trend(lambda: got > s, got, s), cause="footprint", pinned=pinned),
        Row(f"the same for swim ({swim}), the worst case", paper.value("000-reenc", "swim_interval"), s,
            "-" if s is None else f"{s:,.0f} cycles", _trend(lambda: s == worst, s, worst), cause="footprint"),
    ]


def _reenc_plot(d, paper, fig):
    ws = _names(paper, SPEC)
    ax = fig.add_subplot(111)
    iv = [_wb_interval(d, w) for w in ws]
    plots.bars(ax, [_label(paper, w) for w in ws], {"secmem": [None if x is None or math.isinf(x) else x for x in iv]},
               "cycles between write-backs", refs=[(4800, "paper: mean 4,800"), (131, "paper: swim 131")], log=True)


FIGURES_000 = [
    Figure("000-space", "000", "Memory space overhead of integrity checking and encryption", "§6.2.1, §6.3.1",
           lambda paper, scale: _space_points(paper, scale, _SPACE_000), _space_rows_000, _space_plot_000,
           lambda paper, scale: "one tiny run per scheme (space overhead is a property of the layout)", size=(5, 3)),
    Figure("000-fig8", "000", "Baseline IPC and off-chip bandwidth, 256 KB/4 MB L2 and twice each (64-B blocks)", "Figure 8, §6.1",
           _spec_points(["none+none"], _FIG8_CONFIGS), _fig8_rows, _fig8_plot, size=(10, 3.2)),
    Figure("000-fig9", "000", "Run-time overhead of CHTree and LHash (checked at the end), 256 KB/4 MB L2, 64/128-B blocks",
           "Figure 9, §6.2.2", _spec_points(["none+none", "chash+none", "lhash+none"], _FIG9_CONFIGS), _fig9_rows, _fig9_plot,
           size=(12, 3.2)),
    Figure("000-table2", "000", "L2 miss rates of program data: baseline, CHTree, LHash", "Table 2",
           _spec_points(["none+none", "chash+none", "lhash+none"], [{"l2.size": "256KiB"}, {"l2.size": "4MiB"}]),
           _table2_rows, _table2_plot, size=(10, 3.2)),
    Figure("000-fig10", "000", "Off-chip bandwidth of CHTree and LHash, normalized to the baseline (1 MB L2, 64-B blocks)",
           "Figure 10, §6.2.2", _spec_points(["none+none", "chash+none", "lhash+none"]), _fig10_rows, _fig10_plot, size=(6, 3.2)),
    Figure("000-fig11", "000", "LHash against CHTree as the integrity-check period grows", "Figure 11, §6.2.3",
           _fig11_points, _fig11_rows, _fig11_plot, size=(10, 3.4)),
    Figure("000-fig12", "000", "Direct (AES-CBC) and one-time-pad encryption, normalized IPC (64-B blocks)", "Figure 12, §6.3.2",
           _spec_points(["none+none", "none+otp", "none+direct"]), _enc_rows, _enc_plot, size=(6, 3.2)),
    Figure("000-reenc", "000", "Re-encryption period: cycles between write-backs under OTP", "§6.3.3",
           _spec_points(["none+otp"]), _reenc_rows, _reenc_plot, size=(6, 3.2)),
    Figure("000-fig13", "000", "PTR processing: CHTree + direct encryption against LHash + OTP", "Figure 13, §6.4",
           _spec_points(["none+none", "chash+direct", "lhash+otp"]), _ptr_rows, _ptr_plot, size=(6, 3.2)),
]


# ---------------------------------------------------------------------------------------
# 003: Gassend et al., HPCA-9 2003 (gassend2003)

_SPACE_003 = [("chash", "none", {}), ("chash", "none", {"l2.line": "128B"}), ("mhash", "none", {"mhash.blocks_per_chunk": "2"})]


def _space_rows_003(d: Data, paper: Paper, scale: Scale):
    rows = []
    for key, (i, e, sets), claim in zip(("chash_64", "chash_128", "mhash_2x64"), _SPACE_003,
                                        ("chash, one 128-bit hash per 64-B block", "chash with 128-B blocks",
                                         "mhash, one hash per two 64-B blocks")):
        v = paper.value("003-space", key)
        o = d.get("hot", f"{i}+{e}", "integrity.space_overhead", sets)
        share = None if o is None else o / (1 + o)
        rows.append(Row(f"share of memory holding hashes: {claim}", v, share, _pct(share),
                        _trend(lambda: abs(share - v.value) <= 0.01 * v.value, share)))
    return rows


def _space_plot_003(d, paper, fig):
    ax = fig.add_subplot(111)
    got = []
    for i, e, sets in _SPACE_003:
        o = d.get("hot", f"{i}+{e}", "integrity.space_overhead", sets)
        got.append(None if o is None else o / (1 + o))
    plots.bars(ax, ["chash 64B", "chash 128B", "mhash 2x64B"], {"secmem": got}, "share of memory used by hashes",
               paper={"secmem": [paper.value("003-space", k).value for k in ("chash_64", "chash_128", "mhash_2x64")]})


_FIG3_CONFIGS = [{"l2.size": s, "l2.line": b} for b in ("64B", "128B") for s in ("256KiB", "1MiB", "4MiB")]


def _fig3_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, SPEC)
    ch = _overheads(d, ws, "chash+none", _FIG3_CONFIGS)
    cells = _cells(ws, _FIG3_CONFIGS)
    slow = _all((d.get(w, "none+none", sets=c) / n if (n := d.get(w, "naive+none", sets=c)) else None) for w, c in cells)
    v = lambda k: paper.value("003-fig3", k)
    rows = []
    worst = None if ch is None else max(range(len(ch)), key=lambda i: ch[i])
    rows.append(Row("chash's worst-case IPC loss", v("chash_worst"), None if ch is None else ch[worst],
                    "-" if ch is None else f"{_pct(ch[worst])} ({cells[worst][0]}, {_size_label(cells[worst][1])})",
                    _trend(lambda: ch[worst] < 1 - 1 / slow[worst], ch, slow)))
    big = None if ch is None else [o for (w, c), o in zip(cells, ch) if c["l2.size"] == "4MiB"]
    big_cells = [cell for cell in cells if cell[1]["l2.size"] == "4MiB"]
    at = None if not big else big_cells[max(range(len(big)), key=lambda i: big[i])]
    rows.append(Row("chash's worst IPC loss with a 4 MB L2", v("chash_4mb"), big and max(big),
                    "-" if at is None else f"{_pct(max(big))} ({at[0]}, {_size_label(at[1])})",
                    _trend(lambda: max(big) <= max(ch), big, ch), cause="stream_bandwidth"))
    means = None if ch is None else {_size_label(c): mean(ch[i::len(_FIG3_CONFIGS)]) for i, c in enumerate(_FIG3_CONFIGS)}
    falls = None if means is None else all(
        means[f"{b}, {line}"] <= means[f"{a}, {line}"] + 0.005
        for line in ("64B", "128B") for a, b in (("256KiB", "1MiB"), ("1MiB", "4MiB"))) and all(
        means[f"{s}, 128B"] <= means[f"{s}, 64B"] + 0.005 for s in ("256KiB", "1MiB", "4MiB"))
    rows.append(Row("chash's mean IPC loss falls as the L2 grows and as its blocks grow", v("falls"), None,
                    "-" if means is None else ", ".join(f"{k}: {_pct(m)}" for k, m in means.items()), _trend(falls, means),
                    cause="footprint"))
    rows.append(Row("naive's worst slowdown (baseline IPC / naive IPC)", v("naive_slowdown"), slow and max(slow),
                    "-" if slow is None else f"{max(slow):.1f}x",
                    _trend(lambda: all(1 - 1 / s >= o for s, o in zip(slow, ch)), slow, ch)))
    w = paper.stand_in("swim").workload
    c4, c256 = {"l2.size": "4MiB", "l2.line": "64B"}, {"l2.size": "256KiB", "l2.line": "64B"}
    s4 = d.get(w, "none+none", sets=c4) / n4 if (n4 := d.get(w, "naive+none", sets=c4)) else None
    s256 = d.get(w, "none+none", sets=c256) / n2 if (n2 := d.get(w, "naive+none", sets=c256)) else None
    rows.append(Row(f"naive's slowdown of {w} (applu/swim) with a 64-B, 4 MB L2: no better than at 256 KB", v("naive_4mb"),
                    s4, "-" if s4 is None else f"{s4:.1f}x (256 KB: {s256:.1f}x)", _trend(lambda: s4 >= 0.5 * s256, s4, s256)))
    return rows


def _fig3_plot(d, paper, fig):
    ws = _names(paper, SPEC)
    for i, c in enumerate(_FIG3_CONFIGS):
        ax = fig.add_subplot(2, 3, i + 1)
        plots.bars(ax, ws, {lab: [d.get(w, s, sets=c) for w in ws] for lab, s in
                            (("base", "none+none"), ("chash", "chash+none"), ("naive", "naive+none"))},
                   "IPC" if i % 3 == 0 else "", _size_label(c))


def _fig4_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, SPEC)

    def rise(size):
        return _all((c / b - 1 if (b := d.get(w, "none+none", "l2.miss_rate", {"l2.size": size, "l2.line": "64B"})) and
                     (c := d.get(w, "chash+none", "l2.miss_rate", {"l2.size": size, "l2.line": "64B"})) is not None else None)
                    for w in ws)

    small, large = rise("256KiB"), rise("4MiB")
    txt = lambda r: "-" if r is None else " / ".join(f"{w} {x * 100:+.1f}%" for w, x in zip(ws, r))
    return [
        Row("256 KB L2: chash raises some program's data miss rate by 10% or more (relative)", paper.value("003-fig4", "small_pollutes"),
            None, txt(small), _trend(lambda: max(small) >= 0.10, small), cause="footprint"),
        Row("4 MB L2: no program's data miss rate rises by 10% or more", paper.value("003-fig4", "large_clean"), None, txt(large),
            _trend(lambda: max(large) < 0.10, large)),
    ]


def _fig4_plot(d, paper, fig):
    ws = _names(paper, SPEC)
    for i, size in enumerate(("256KiB", "4MiB")):
        ax = fig.add_subplot(1, 2, i + 1)
        c = {"l2.size": size, "l2.line": "64B"}
        plots.bars(ax, [_label(paper, w) for w in ws], {lab: [d.get(w, s, "l2.miss_rate", c) for w in ws] for lab, s in
                   (("base", "none+none"), ("chash", "chash+none"))}, "L2 data miss rate" if i == 0 else "",
                   f"{size.replace('i', '')} L2, 64-B blocks")


_1MB = {"l2.size": "1MiB", "l2.line": "64B"}


def _fig5_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, SPEC)
    nv = _all(d.get(w, "naive+none", "naive.hash_loads_per_miss", _1MB) for w in ws)
    ch = _all(d.get(w, "chash+none", "chash.hash_loads_per_miss", _1MB) for w in ws)
    tn = _all(_traffic(d, w, "naive+none", _1MB) for w in ws)
    tc = _all(_traffic(d, w, "chash+none", _1MB) for w in ws)
    per = lambda xs: " / ".join(f"{w} {x:.2f}" for w, x in zip(ws, xs))
    return [
        Row("naive: extra hash-chunk reads per L2 miss (mean of the workloads)", paper.value("003-fig5", "naive_loads"),
            nv and mean(nv), "-" if nv is None else per(nv), _trend(lambda: min(nv) >= 12, nv)),
        Row("chash: extra hash-chunk reads per L2 miss, worst workload", paper.value("003-fig5", "chash_loads"), ch and max(ch),
            "-" if ch is None else per(ch), _trend(lambda: max(ch) < 1, ch), cause="random_chase"),
        Row("off-chip traffic over the baseline: chash far below naive", paper.value("003-fig5", "bandwidth"), None,
            "-" if tn is None else " / ".join(f"{w} {c:.2f}x vs {n:.2f}x" for w, c, n in zip(ws, tc, tn)),
            _trend(lambda: all(c - 1 < 0.5 * (n - 1) for c, n in zip(tc, tn)), tc, tn)),
    ]


def _fig5_plot(d, paper, fig):
    ws = _names(paper, SPEC)
    ax = fig.add_subplot(1, 2, 1)
    plots.bars(ax, ws, {"chash": [d.get(w, "chash+none", "chash.hash_loads_per_miss", _1MB) for w in ws],
                        "naive": [d.get(w, "naive+none", "naive.hash_loads_per_miss", _1MB) for w in ws]},
               "hash loads per L2 miss", "(a)", refs=[(13, "paper: naive 13"), (1, "paper: chash < 1")])
    ax = fig.add_subplot(1, 2, 2)
    plots.bars(ax, ws, {lab: [_traffic(d, w, s, _1MB) for w in ws] for lab, s in
                        (("chash", "chash+none"), ("naive", "naive+none"))}, "traffic / baseline", "(b)")


_THROUGHPUT = ["6.4GB/s", "3.2GB/s", "1.6GB/s", "0.8GB/s"]
_GBPS = [6.4, 3.2, 1.6, 0.8]


def _fig6_points(paper, scale):
    ws = _names(paper, SPEC)
    return (product_points(paper, scale, ws, ["none+none"]) +
            product_points(paper, scale, ws, ["chash+none"], [{"hash.throughput": t} for t in _THROUGHPUT]))


def _fig6_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, SPEC)
    ipc = {w: _all(d.get(w, "chash+none", sets={"hash.throughput": t}) for t in _THROUGHPUT) for w in ws}
    ok = None if any(v is None for v in ipc.values()) else ipc
    rel = lambda w, i: ok[w][i] / ok[w][1]
    txt = lambda i: "-" if ok is None else " / ".join(f"{w} {rel(w, i):.3f}" for w in ws)
    drop = None if ok is None else [1 - rel(w, 3) for w in ws]
    return [
        Row("IPC at 6.4 GB/s over IPC at 3.2 GB/s: no gain above 1%", paper.value("003-fig6", "above"), None, txt(0),
            _trend(lambda: all(rel(w, 0) <= 1.01 for w in ws), ok)),
        Row("IPC at 1.6 GB/s (the bus bandwidth) over IPC at 3.2 GB/s: a minor loss (under 10%)", paper.value("003-fig6", "at_bus"),
            None, txt(2), _trend(lambda: all(rel(w, 2) >= 0.9 for w in ws), ok)),
        Row("worst IPC loss at 0.8 GB/s (half the bus bandwidth) against 3.2 GB/s; it is larger than at 1.6 GB/s",
            paper.value("003-fig6", "below"), drop and max(drop), "-" if drop is None else " / ".join(f"{w} {_pct(x)}" for w, x in zip(ws, drop)),
            _trend(lambda: max(drop) > max(1 - rel(w, 2) for w in ws), ok), cause="footprint"),
    ]


def _fig6_plot(d, paper, fig):
    ws = _names(paper, SPEC)
    ax = fig.add_subplot(111)
    plots.lines(ax, _GBPS, {w: [d.norm(w, "chash+none", sets={"hash.throughput": t}, base_sets={}) for t in _THROUGHPUT] for w in ws},
                "hash throughput (GB/s)", "IPC / baseline", logx=True, xticklabels=[str(g) for g in _GBPS],
                vrefs=[(1.6, "bus 1.6 GB/s")])


_BUFFERS = [1, 2, 4, 8, 16, 32]


def _fig7_points(paper, scale):
    ws = _names(paper, SPEC)
    return (product_points(paper, scale, ws, ["none+none"]) +
            product_points(paper, scale, ws, ["chash+none"], [{"hash.read_buffer": b, "hash.write_buffer": b} for b in _BUFFERS]))


def _buf(b):
    return {"hash.read_buffer": b, "hash.write_buffer": b}


def _fig7_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, SPEC)
    rows = []
    for lo in (_BUFFERS[0], 2):
        sizes = [b for b in _BUFFERS if b >= lo]
        spread = _all((max(v) - min(v)) / max(v) if (v := _all(d.get(w, "chash+none", sets=_buf(b)) for b in sizes)) else None
                      for w in ws)
        rows.append(Row(f"IPC spread across read/write buffers of {sizes[0]} to {sizes[-1]} entries: under 5% on every workload",
                        paper.value("003-fig7", "no_effect"), None,
                        "-" if spread is None else " / ".join(f"{w} {_pct(s)}" for w, s in zip(ws, spread)),
                        _trend(lambda: max(spread) < 0.05, spread)))
    return rows


def _fig7_plot(d, paper, fig):
    ws = _names(paper, SPEC)
    ax = fig.add_subplot(111)
    plots.lines(ax, _BUFFERS, {w: [d.norm(w, "chash+none", sets=_buf(b), base_sets={}) for b in _BUFFERS] for w in ws},
                "hash read/write buffer entries", "IPC / baseline", logx=True, xticklabels=[str(b) for b in _BUFFERS])


_FIG8 = [("chash-64B", "chash+none", {}), ("chash-128B", "chash+none", {"l2.line": "128B"}),
         ("mhash-64B", "mhash+none", {"mhash.blocks_per_chunk": "2"})]


def _fig8_points(paper, scale):
    ws = _names(paper, SPEC)
    pts = product_points(paper, scale, ws, ["none+none"], [{}, {"l2.line": "128B"}])
    for _, s, c in _FIG8:
        pts += product_points(paper, scale, ws, [s], [c])
    return pts


def _fig8_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, SPEC)
    ipc = {lab: _all(d.get(w, s, sets=c) for w in ws) for lab, s, c in _FIG8}
    ok = None if any(v is None for v in ipc.values()) else ipc
    vs128 = None if ok is None else [m / c for m, c in zip(ok["mhash-64B"], ok["chash-128B"])]
    vs64 = None if ok is None else [m / c for m, c in zip(ok["mhash-64B"], ok["chash-64B"])]
    txt = lambda r: "-" if r is None else " / ".join(f"{w} {x:.3f}" for w, x in zip(ws, r))
    heavy = [ws.index(paper.stand_in(b).workload) for b in ("swim", "mcf")]
    light = [ws.index(paper.stand_in("gzip").workload)]
    comp = paper.value("003-fig8", "comparable")
    return [
        Row("mhash-64B beats chash-128B on every workload (IPC ratio)", paper.value("003-fig8", "mhash_beats_128"), None,
            txt(vs128), _trend(lambda: all(r > 1 for r in vs128), vs128), cause="mhash_128"),
        Row("mhash-64B within 15% of chash-64B on every workload (IPC ratio)", comp, None, txt(vs64),
            _trend(lambda: all(abs(r - 1) <= 0.15 for r in vs64), vs64)),
        Row("mhash-64B below chash-64B on the bandwidth-heavy (stream, chase), not below it on the contention-sensitive (hot)",
            comp, None, txt(vs64), _trend(lambda: all(vs64[i] < 1 for i in heavy) and all(vs64[i] >= 0.999 for i in light), vs64),
            cause="footprint"),
    ]


def _fig8_plot(d, paper, fig):
    ws = _names(paper, SPEC)
    ax = fig.add_subplot(111)
    plots.bars(ax, [_label(paper, w) for w in ws], {lab: [d.get(w, s, sets=c) for w in ws] for lab, s, c in _FIG8}, "IPC",
               "1 MB L2")


FIGURES_003 = [
    Figure("003-space", "003", "Memory used by hashes: chash with 64-B and 128-B blocks, mhash with two 64-B blocks per chunk",
           "§4.1, §5.6, Conclusion", lambda paper, scale: _space_points(paper, scale, _SPACE_003), _space_rows_003, _space_plot_003,
           lambda paper, scale: "one tiny run per scheme (space overhead is a property of the layout)", size=(5, 3)),
    Figure("003-fig3", "003", "IPC of base, chash and naive for 256 KB/1 MB/4 MB L2s with 64-B and 128-B blocks",
           "Figure 3, §5.4", _spec_points(["none+none", "chash+none", "naive+none"], _FIG3_CONFIGS), _fig3_rows, _fig3_plot,
           size=(11, 5.5)),
    Figure("003-fig4", "003", "L2 miss rates of program data, base and chash, 256 KB and 4 MB L2 (64-B blocks)",
           "Figure 4, §5.4.1", _spec_points(["none+none", "chash+none"], [c for c in _FIG3_CONFIGS if c["l2.line"] == "64B" and c["l2.size"] != "1MiB"]),
           _fig4_rows, _fig4_plot, size=(9, 3.2)),
    Figure("003-fig5", "003", "Hash loads per L2 miss and normalized bandwidth, 1 MB L2, 64-B blocks", "Figure 5, §5.4.2",
           _spec_points(["none+none", "chash+none", "naive+none"], [_1MB]), _fig5_rows, _fig5_plot, size=(9, 3.2)),
    Figure("003-fig6", "003", "chash's IPC against hash throughput", "Figure 6, §5.5", _fig6_points, _fig6_rows, _fig6_plot,
           size=(6, 3.4)),
    Figure("003-fig7", "003", "chash's IPC against the hash read/write buffer size (1 MB L2, 64-B blocks)", "Figure 7, §5.5",
           _fig7_points, _fig7_rows, _fig7_plot, size=(6, 3.4)),
    Figure("003-fig8", "003", "chash-64B, chash-128B and mhash-64B (two blocks per chunk), 1 MB L2", "Figure 8, §5.6",
           _fig8_points, _fig8_rows, _fig8_plot, size=(6, 3.4)),
]


# ---------------------------------------------------------------------------------------
# 002: Enck et al., ACSAC 2008 (enck2008)

_LINES = [1, 16, 256, 4096, 65536]
# Baseline IPC of each built-in workload on enck2008 (measured, from a cold start): how many
# instructions cover the resume cycles a figure needs (with a margin; a run covering fewer is
# reported with the resume cycles it has). When enck2008's core became SimpleScalar's defaults
# (RUU 16, LSQ 8, TLB miss 30) these were scaled by the change measured over 20 M instructions
# (3 M for chase) from a cold start: stream 0.655 -> 0.281, hot 0.468 -> 0.493, chase 0.0274 -> 0.0496.
_IPC_ENCK = {"stream": 0.32, "hot": 0.84, "chase": 0.054}
_MARGIN = 1.2
_CYCLES_SHORT = 10  # Figs. 4-6: resume cycles simulated (Fig. 7, Table 2: the scale's cycles_long)


def _period_short(scale):
    """Figs. 4-6: a suspend/resume every 100 M cycles, 10 of them (laptop: every 10 M)."""
    return scale.period_short


def _period_long(scale):
    """Fig. 7, Table 2: every 1 G cycles, 5 resume cycles (laptop: every 100 M, 3 of them)."""
    return scale.period_long


def _mecu_sets(k, period):
    return {"mecu.lines_per_block": str(k), "mecu.resume_period": str(period)}


def _base_sets(period):
    """The baseline, without a MECU, its IPC sampled once per resume period."""
    return {"sample.ipc_period": str(period)}


def _mecu_points(paper, scale, workloads, lines, period, periods, base=False):
    out = []
    for w in workloads:
        n = int(period * periods * _IPC_ENCK[w] * _MARGIN)
        if base:
            out.append(Point(workload=w, integrity="none", encryption="none", preset=paper.preset,
                             sets=tuple(_base_sets(period).items()), instructions=n, warmup=0))
        for k in lines:
            out.append(Point(workload=w, integrity="none", encryption="mecu", preset=paper.preset, instructions=n, warmup=0,
                             sets=tuple(_mecu_sets(k, period).items())))
    return out


def _per_cycle(d, w, k, period, cycles):
    """IPC per resume cycle, the first ``cycles`` of them: with a MECU of k lines per block, or
    (k None) the baseline's IPC over the same windows of ``period`` cycles. None if failed."""
    if k is None:
        v = d.get(w, "none+none", "sample.ipc", _base_sets(period))
        return None if v is None else list(v)[:cycles]
    v = d.get(w, "none+mecu", "mecu.ipc_per_resume_cycle", _mecu_sets(k, period))
    if v is None:
        return None
    v = list(v)
    # at warm-up 0 the MECU closes an empty window at cycle 0 before the first real one
    if v and v[0] == 0:
        v = v[1:]
    return v[:cycles]


_Q_WORKLOADS = ("bzip2", "gcc", "twolf")


def _quiescence_points(benchmarks):
    return lambda paper, scale: _mecu_points(paper, scale, list(dict.fromkeys(_names(paper, benchmarks))), _LINES,
                                             _period_long(scale), scale.cycles_long)


def _q(d, w, k, scale, stat="mecu.time_to_quiescence_seconds"):
    return d.get(w, "none+mecu", stat, _mecu_sets(k, _period_long(scale)))


# A resume cycle whose last re-encryption ends this close to its end had not quiesced: its
# "time to quiescence" is the resume period, a limit of the run.
_Q_CAP = 0.95


def quiescence_limit(series, period: int) -> Optional[str]:
    """Why a point's cycles to quiescence per resume cycle (``mecu.quiescence_cycles_per_resume_cycle``)
    give no time to quiescence: the run closed no resume cycle after the first (which seeds
    memory and is discounted, 002 §5.2.2), or in one of them the MECU was still re-encrypting
    when the next suspend came (the time is then the resume period). None when it is measured."""
    v = list(series)[1:]
    if not v:
        return "no resume cycle after the first"
    if any(q >= _Q_CAP * period for q in v):
        return "still re-encrypting when a resume cycle ended"
    return None


def _q_pinned(d, ws_ks, scale) -> Optional[str]:
    """Why the times to quiescence of the points (workload, lines per block) are no
    measurement (see ``quiescence_limit``), naming the points. None when every one quiesced."""
    period = _period_long(scale)
    why: dict = {}
    for w, k in ws_ks:
        v = d.get(w, "none+mecu", "mecu.quiescence_cycles_per_resume_cycle", _mecu_sets(k, period))
        if v is not None and (r := quiescence_limit(v, period)) is not None:
            why.setdefault(r, []).append(f"{k:,}" if len({x for x, _ in ws_ks}) == 1 else f"{w} {k:,}")
    if not why:
        return None
    return "; ".join(f"{r} ({', '.join(ps)} lines per block)" for r, ps in why.items()) + (
        f": the {period / 1e6:g} M-cycle resume period of the run is too short for a time to quiescence")


def _t2_rows(d: Data, paper: Paper, scale: Scale):
    t = paper.table("002-table2")
    w = paper.stand_in("bzip2").workload
    formula = paper.value("002-table2", "storage_formula")
    rows = []
    for k, b, text in zip(t["lines"], t["storage_bytes"], t["storage_text"]):
        got = _q(d, w, k, scale, "mecu.state_storage_bytes")
        rows.append(Row(f"state storage, blocks of {k:,} lines (4 GB of memory, 16-bit states)", formula, got,
                        "-" if got is None else f"{got:,} B", _trend(lambda: got == b, got), paper=b,
                        paper_text=f"{text} ({b:,} B)"))
    qs = _all(_q(d, w, k, scale) for k in t["lines"])
    for i, (k, p) in enumerate(zip(t["lines"], t["quiescence_1000MHz"])):
        got = None if qs is None else qs[i]
        trend = _trend(lambda: i == 0 or qs[i] <= qs[i - 1] * 1.05, qs)
        rows.append(Row(f"time to quiescence at 1 GHz, blocks of {k:,} lines ({w} for bzip2); no longer than with smaller blocks",
                        Value("quiescence", p, f"{p} s", t["source"] + ", 1,000 MHz column", {}), got,
                        "-" if got is None else f"{got * 1e3:.2f} ms", trend, cause="sweep",
                        pinned=_q_pinned(d, [(w, k)], scale)))
    ratio_p = t["quiescence_1000MHz"][-1] / t["quiescence_1000MHz"][0]
    ratio = None if qs is None or not qs[0] else qs[-1] / qs[0]
    rows.append(Row("time to quiescence at 65,536 lines over that at 1 line",
                    Value("ratio", ratio_p, f"{ratio_p:.3f} (35.53 s / 79.50 s)", t["source"] + ": its last row over its first", {}),
                    ratio, "-" if ratio is None else f"{ratio:.3f}", _trend(lambda: ratio < 1, ratio), cause="sweep",
                    pinned=_q_pinned(d, [(w, t["lines"][0]), (w, t["lines"][-1])], scale)))
    return rows


def _t2_plot(d, paper, fig):
    t = paper.table("002-table2")
    w = paper.stand_in("bzip2").workload
    ax = fig.add_subplot(1, 2, 1)
    plots.bars(ax, [f"{k:,}" for k in t["lines"]], {"secmem": [_q(d, w, k, d.scale, "mecu.state_storage_bytes") for k in t["lines"]]},
               "state storage (bytes)", "in-MECU storage", paper={"secmem": t["storage_bytes"]}, log=True)
    ax = fig.add_subplot(1, 2, 2)
    qs = [_q(d, w, k, d.scale) for k in t["lines"]]
    q0, p0 = qs[0], t["quiescence_1000MHz"][0]
    plots.lines(ax, t["lines"], {f"secmem ({w})": [q / q0 if q is not None and q0 else None for q in qs],
                                 "paper (bzip2)": [p / p0 for p in t["quiescence_1000MHz"]]},
                "lines per block", "time to quiescence / at 1 line", "time to quiescence (relative)", logx=True)


def _short_points(benchmark, lines):
    return lambda paper, scale: _mecu_points(paper, scale, _names(paper, [benchmark]), lines, _period_short(scale),
                                             _CYCLES_SHORT, base=True)


def _fig4_002_rows(d: Data, paper: Paper, scale: Scale):
    w = paper.stand_in("bzip2").workload
    period = _period_short(scale)
    ipc = {k: _per_cycle(d, w, k, period, _CYCLES_SHORT) for k in (None, 256, 65536)}
    stall = {k: d.get(w, "none+mecu", "mecu.stall_cycles_per_resume_cycle", _mecu_sets(k, period)) for k in (256, 65536)}
    share = {k: None if v is None else mean(list(v)[1:_CYCLES_SHORT + 1] or [0]) / period for k, v in stall.items()}
    rel = {k: None if ipc[k] is None or ipc[None] is None else mean(ipc[k]) / mean(ipc[None]) for k in (256, 65536)}
    text = lambda k: "-" if rel[k] is None else f"IPC {rel[k]:.3f} of no MECU; stalled {_pct(share[k])} of each resume cycle"
    return [
        Row("256-line blocks: mean IPC over the resume cycles within 10% of no MECU", paper.value("002-fig4", "brief_256"), None,
            text(256), _trend(lambda: rel[256] >= 0.9, rel[256]), cause="laptop_scale"),
        Row("65,536-line blocks: a larger share of each resume cycle stalled than with 256-line blocks, and a lower IPC",
            paper.value("002-fig4", "long_65536"), None, text(65536),
            _trend(lambda: share[65536] > share[256] and rel[65536] < rel[256], rel[256], rel[65536], share[256], share[65536])),
    ]


def _fig4_002_plot(d, paper, fig):
    w = paper.stand_in("bzip2").workload
    period = _period_short(d.scale)
    ax = fig.add_subplot(1, 2, 1)
    cycles = list(range(1, _CYCLES_SHORT + 1))
    plots.lines(ax, cycles, {lab: _per_cycle(d, w, k, period, _CYCLES_SHORT) or [] for lab, k in
                             (("no MECU", None), ("256 lines/block", 256), ("65,536 lines/block", 65536))},
                f"resume cycle ({period / 1e6:g} M cycles each)", "IPC", f"{w} (bzip2)")
    ax = fig.add_subplot(1, 2, 2)
    series = {}
    for lab, k in (("256 lines/block", 256), ("65,536 lines/block", 65536)):
        v = d.get(w, "none+mecu", "mecu.stall_cycles_per_resume_cycle", _mecu_sets(k, period))
        series[lab] = [] if v is None else [x / period for x in list(v)[1:_CYCLES_SHORT + 1]]
    plots.lines(ax, cycles, series, "resume cycle", "share of the cycle stalled re-encrypting", "stalls")


def _per_cycle_decrease(d, w, k, scale):
    """1 - IPC per resume cycle with blocks of k lines / the baseline's IPC over the same cycles."""
    period = _period_short(scale)
    mecu, base = _per_cycle(d, w, k, period, _CYCLES_SHORT), _per_cycle(d, w, None, period, _CYCLES_SHORT)
    if mecu is None or base is None:
        return None
    return [1 - m / b if b else None for m, b in zip(mecu, base)]


def _decrease_rows(benchmark, keys):
    def rows(d: Data, paper: Paper, scale: Scale):
        w = paper.stand_in(benchmark).workload
        dec = {k: _per_cycle_decrease(d, w, k, scale) for k in _LINES}
        # the worst resume cycle after the first (which re-encrypts nothing): (decrease, cycle)
        worst = {k: None if v is None or not v[1:] else max((x, i + 1) for i, x in enumerate(v) if i > 0 and x is not None)
                 for k, v in dec.items()}
        out = []
        for key, ks in keys:
            got = None if any(worst[j] is None for j in ks) else max(worst[j] for j in ks)
            blocks = "256 lines or fewer" if len(ks) > 1 else f"{ks[0]:,} lines"
            out.append(Row(f"largest IPC decrease in a resume cycle, blocks of {blocks} ({w} for {benchmark})",
                           paper.value(f"002-{'fig5' if benchmark == 'bzip2' else 'fig6'}", key), got and got[0],
                           "-" if got is None else f"{_pct(got[0])} (resume cycle {got[1]})",
                           _trend(lambda: got[0] > 0, got), cause="laptop_scale"))
        ws = [None if worst[k] is None else worst[k][0] for k in _LINES]
        grows = None if any(x is None for x in ws) else all(b >= a - 0.01 for a, b in zip(ws, ws[1:]))
        out.append(Row(f"{w} ({benchmark}): the largest decrease grows with the block size", paper.value("002-fig5", "grows"), None,
                       "-" if grows is None else ", ".join(f"{k:,}: {_pct(x)}" for k, x in zip(_LINES, ws)), _trend(grows, grows)))
        return out

    return rows


def _decrease_plot(benchmark):
    def plot(d, paper, fig):
        w = paper.stand_in(benchmark).workload
        ax = fig.add_subplot(111)
        dec = {f"{k:,} lines": _per_cycle_decrease(d, w, k, d.scale) for k in _LINES}
        n = max((len(v) for v in dec.values() if v), default=0)
        plots.bars(ax, [str(i + 1) for i in range(n)],
                   {k: [(v[i] * 100 if v and i < len(v) and v[i] is not None else None) for i in range(n)] for k, v in dec.items()},
                   "% decrease in IPC", f"{w} ({benchmark}): per resume cycle")
        ax.set_xlabel("resume cycle", fontsize=8)

    return plot


def _fig7_002_rows(d: Data, paper: Paper, scale: Scale):
    rows = []
    for b in _Q_WORKLOADS:
        w = paper.stand_in(b).workload
        qs = _all(_q(d, w, k, scale, "mecu.time_to_quiescence_cycles") for k in _LINES)
        falls = None if qs is None else all(y <= x * 1.05 for x, y in zip(qs, qs[1:])) and qs[-1] < qs[0]
        rows.append(Row(f"{w} ({b}): time to quiescence falls as blocks grow (1 to 65,536 lines)", paper.value("002-fig7", "falls"),
                        None, "-" if qs is None else " → ".join(f"{q / 1e6:.2f}M" for q in qs) + " cycles", _trend(falls, falls),
                        cause="sweep" if b == "bzip2" else "big_blocks", pinned=_q_pinned(d, [(w, k) for k in _LINES], scale)))
    a = _q(d, paper.stand_in("bzip2").workload, 65536, scale, "mecu.time_to_quiescence_cycles")
    b = _q(d, paper.stand_in("parser").workload, 4096, scale, "mecu.time_to_quiescence_cycles")
    r = None if a is None or not b else a / b
    rows.append(Row(f"time to quiescence of bzip2's stand-in at 65,536 lines over parser's ({paper.stand_in('parser').workload}) at 4,096",
                    paper.value("002-fig7", "bzip2_vs_parser"), r, "-" if r is None else f"{r:.2f}", _trend(lambda: r > 1, r),
                    cause="footprint", pinned=_q_pinned(d, [(paper.stand_in("bzip2").workload, 65536),
                                                            (paper.stand_in("parser").workload, 4096)], scale)))
    return rows


def _fig7_002_plot(d, paper, fig):
    ws = _names(paper, _Q_WORKLOADS)
    ax = fig.add_subplot(111)
    plots.bars(ax, [_label(paper, w) for w in ws],
               {f"{k:,}": [None if (q := _q(d, w, k, d.scale, "mecu.time_to_quiescence_cycles")) is None else q / 1e6 for w in ws]
                for k in _LINES}, "time to quiescence (M cycles)", "lines per block")


def _short(scale):
    return f"a suspend/resume every {_period_short(scale) / 1e6:g} M cycles, {_CYCLES_SHORT} resume cycles"


def _long(scale):
    return f"a suspend/resume every {_period_long(scale) / 1e6:g} M cycles, {scale.cycles_long} resume cycles"


FIGURES_002 = [
    Figure("002-table2", "002", "System-level MECU impact: state storage and time to quiescence against the block size",
           "Table 2, §4.2, §5.2.3", _quiescence_points(["bzip2"]), _t2_rows, _t2_plot, lambda p, s: _long(s), size=(10, 3.4)),
    Figure("002-fig4", "002", "IPC over time with and without a MECU (bzip2), per resume cycle", "Figure 4, §5.2.1",
           _short_points("bzip2", [256, 65536]), _fig4_002_rows, _fig4_002_plot, lambda p, s: _short(s), size=(10, 3.4)),
    Figure("002-fig5", "002", "Percent decrease in IPC per resume cycle against the block size (bzip2)", "Figure 5, §5.2.1",
           _short_points("bzip2", _LINES), _decrease_rows("bzip2", [("max_256", (1, 16, 256))]), _decrease_plot("bzip2"),
           lambda p, s: _short(s), size=(9, 3.4)),
    Figure("002-fig6", "002", "Percent decrease in IPC per resume cycle against the block size (gcc)", "Figure 6, §5.2.1",
           _short_points("gcc", _LINES), _decrease_rows("gcc", [("max_4096", (4096,)), ("max_256", (256,))]), _decrease_plot("gcc"),
           lambda p, s: _short(s), size=(9, 3.4)),
    Figure("002-fig7", "002", "Average time to quiescence per program and block size", "Figure 7, §5.2.2",
           _quiescence_points(_Q_WORKLOADS + ("parser",)), _fig7_002_rows, _fig7_002_plot, lambda p, s: _long(s), size=(9, 3.4)),
]


# ---------------------------------------------------------------------------------------
# 001: Durahim et al., IET CDT 2009 (durahim2009)

_T3_PROGRAMS = ("AES_RIJNDAEL", "COMPRESS", "DIJKSTRA", "GO", "SHA")
_T3_SIZES = ["1KiB", "4KiB", "8KiB", "32KiB", "64KiB"]
_T3_BLOCKS = [16, 32, 64, 128, 256]
# (skip, warm-up, measured) per scale: the programs' first instructions are the dynamic
# loader's, so each trace starts some way in.
_T3_COUNTS = {"smoke": (0, 5_000, 20_000), "laptop": (5_000_000, 100_000, 300_000),
              "full": (100_000_000, 1_000_000, 10_000_000)}


def _t3_counts(scale: Scale) -> tuple:
    return _T3_COUNTS.get(scale.name, _T3_COUNTS["laptop"])


def _t3_trace(workload: str, scale: Scale) -> str:
    """Where the figure keeps a suite program's trace: beside its inputs."""
    from .. import suite

    skip, warm, n = _t3_counts(scale)
    return str(suite.data_dir(workload) / f"001-table3-skip{skip}-n{warm + n}.smt")


def _t3_prepare(paper: Paper, scale: Scale) -> None:
    """Trace each stand-in once (the suite programs under secmem's tracer); the 250 points
    then read the files instead of each tracing its program again."""
    import os

    from .. import suite, tracing

    skip, warm, n = _t3_counts(scale)
    for w in _names(paper, _T3_PROGRAMS):
        path = _t3_trace(w, scale)
        if os.path.exists(path):
            continue
        c = suite.command(w)  # refuses a workload that is not installed, naming the install command
        # The trace appears under its name only when complete (the output rule).
        tracing.trace(list(c.argv), path, skip=skip, count=warm + n, env=sorted(c.env.items()), clear_env=True,
                      cwd=c.cwd, stdin=c.stdin, stdout=None)


def _t3_sets(size: str, block: int, codeauth: str) -> dict:
    return {"l2.size": size, "l2.line": f"{block}B", "codeauth": codeauth}


def _t3_points(paper: Paper, scale: Scale) -> list:
    _, warm, n = _t3_counts(scale)
    out = []
    for w in _names(paper, _T3_PROGRAMS):
        for b in _T3_BLOCKS:
            for size in _T3_SIZES:
                for ca in ("none", "pr-trivium"):
                    out.append(Point(trace=_t3_trace(w, scale), integrity="none", encryption="none", preset=paper.preset,
                                     sets=tuple(_t3_sets(size, b, ca).items()), instructions=n, warmup=warm))
    return out


def _t3_overhead(d: Data, paper: Paper, size: str, block: int) -> Optional[float]:
    """CPI overhead of code authentication in %, averaged over the programs."""
    per = []
    for w in _names(paper, _T3_PROGRAMS):
        t = _t3_trace(w, d.scale)
        base = d.get(t, "none+none", "ipc", _t3_sets(size, block, "none"))
        auth = d.get(t, "none+none", "ipc", _t3_sets(size, block, "pr-trivium"))
        if not base or not auth:
            return None
        per.append((base / auth - 1) * 100)
    return mean(per)


def _t3_grid(d: Data, paper: Paper) -> dict:
    return {(b, s): _t3_overhead(d, paper, s, b) for b in _T3_BLOCKS for s in _T3_SIZES}


def _t3_rows(d: Data, paper: Paper, scale: Scale):
    g = _t3_grid(d, paper)
    rows = []
    for b in _T3_BLOCKS:
        v = paper.value("001-table3", f"b{b}")
        for j, s in enumerate(_T3_SIZES):
            mine, theirs = g[(b, s)], v.value[j]
            # The cell's trend: it lies on the right side of the next block size's cell.
            nb = b * 2 if b < 256 else b // 2
            other, their_other = g[(nb, s)], paper.value("001-table3", f"b{nb}").value[j]
            trend = _trend(lambda: (mine > other) == (theirs > their_other), mine, other)
            text = "-" if mine is None else f"{mine:.2f}% (paper {theirs:.2f}%, Δ {mine - theirs:+.2f})"
            rows.append(Row(f"{b}-B blocks, {s.replace('i', '')} cache: CPI overhead, "
                            f"{'above' if theirs > their_other else 'below'} the {nb}-B cell", v, mine, text, trend,
                            cause="code_footprint", paper=theirs, paper_text=f"{theirs:.2f}%"))
    falls = _trend(lambda: all(g[(16, s)] > g[(64, s)] > g[(256, s)] for s in _T3_SIZES), *g.values())
    rows.append(Row("at every cache size: 16-B blocks > 64-B > 256-B", paper.value("001-table3", "falls_with_block"),
                    None, "holds" if falls else "-" if falls is None else "does not hold", falls))
    cache = _trend(lambda: g[(16, "1KiB")] > g[(16, "64KiB")], g[(16, "1KiB")], g[(16, "64KiB")])
    rows.append(Row("16-B blocks: overhead at 64 KB below that at 1 KB", paper.value("001-table3", "falls_with_cache"),
                    g[(16, "64KiB")], "-" if cache is None else f"{g[(16, '1KiB')]:.2f}% → {g[(16, '64KiB')]:.2f}%",
                    cache, cause="machine", paper=13.74, paper_text="67.92% → 13.74%"))
    return rows


def _t3_plot(d, paper, fig):
    g = _t3_grid(d, paper)
    ax = fig.add_subplot(1, 2, 1)
    plots.lines(ax, _T3_BLOCKS, {s.replace("i", ""): [g[(b, s)] for b in _T3_BLOCKS] for s in _T3_SIZES},
                "block size (B)", "CPI overhead (%)", "secmem", logx=True, xticklabels=[str(b) for b in _T3_BLOCKS])
    ax = fig.add_subplot(1, 2, 2)
    plots.lines(ax, _T3_BLOCKS, {s.replace("i", ""): [paper.value("001-table3", f"b{b}").value[j] for b in _T3_BLOCKS]
                                 for j, s in enumerate(_T3_SIZES)},
                "block size (B)", "", "paper (Table 3)", logx=True, xticklabels=[str(b) for b in _T3_BLOCKS])


def _t3_text(d: Data, paper: Paper) -> str:
    """Table 3 as the paper prints it, each cell secmem / paper (difference)."""
    g = _t3_grid(d, paper)
    lines = ["001-table3: CPI overhead (%) of code authentication, 16-entry authentication cache "
             "(secmem / paper, difference)",
             "  block   " + "".join(f"{s.replace('i', ''):>24}" for s in _T3_SIZES)]
    for b in _T3_BLOCKS:
        pv = paper.value("001-table3", f"b{b}").value
        cells = []
        for j, s in enumerate(_T3_SIZES):
            m = g[(b, s)]
            cells.append("not run" if m is None else f"{m:6.2f} / {pv[j]:6.2f} ({m - pv[j]:+6.2f})")
        lines.append(f"  {b:>4} B " + "".join(f"{c:>24}" for c in cells))
    lines.append("  stand-ins: " + ", ".join(f"{b} → {paper.stand_in(b).workload}" for b in _T3_PROGRAMS))
    return "\n".join(lines)


def _t3_ask(paper, scale):
    skip, warm, n = _t3_counts(scale)
    return (f"each stand-in traced once ({n / 1e3:g} k instructions measured after {warm / 1e3:g} k of warm-up, "
            f"{skip / 1e6:g} M in), run without and with pr-trivium code authentication on every cache and block size")


FIGURES_001 = [
    Figure("001-table3", "001", "CPI overhead of code authentication against cache and block size (16-entry authentication cache)",
           "Table 3, §8.1", _t3_points, _t3_rows, _t3_plot, _t3_ask, size=(10, 3.6), prepare=_t3_prepare, text=_t3_text,
           programs=lambda paper: _names(paper, _T3_PROGRAMS)),
]


# ---------------------------------------------------------------------------------------
# 004: Shi & Lee, CF'07 (shi2007): frequent value ciphertext speculation

_SPEC_004 = ("mcf", "mgrid", "parser", "vpr")
# The machine of every 004 point, baseline and speculation alike, the same in every figure and
# laid out as 004 Fig. 2: the demand path on 4 replicated pipelines of the scheme's cipher (004
# §3.2: "pipelined and replicated", no count given; §4: "multiple pipelines"), the speculation
# on 4 pipelines of its own (Fig. 2's "Pipelined Encryption Engines", beside the decryption
# engine), posted with the fetch request (§3.2 ①-②; `speculation.at_fetch`, the default: tdes
# and otp follow it, ocb's AES speculation waits for the line's counter and bitmap); a
# MAC per cipher block (§3.3; sizes not given: 4 B per 64-bit chunk, 8 B per 128-bit block);
# data issued only once authenticated (§2.2).
_FIG2 = {"speculation.engines": 4, "speculation.use_before_verify": "false"}
# TDES (Figs. 5-7(a)(c), 10): 64-bit chunks.
_ENGINES = {"tdes.engines": 4, "tdes.chunk_mac_bytes": 4, **_FIG2}
# Counter mode (Fig. 8): otp, the pads and demand MACs on the AES pipelines, the speculated MACs
# on the speculation's.
_ENGINES_OTP = {"aes.engines": 4, "otp.chunk_mac_bytes": 4, **_FIG2}
# AES (OCB, 128-bit blocks; Figs. 7(b)(d), 9): the chunks re-ordered by a bitmap per line with
# the 8-KB bitmap cache and next-word prefetch (§3.2.2; ocb's defaults); an 8-B MAC per 128-bit
# block (§3.3, Fig. 7's "ciphertext and MAC speculation"), speculated with the ciphertexts,
# which verifies the line in place of OCB's tag.
_ENGINES_OCB = {"aes.engines": 4, "ocb.chunk_mac_bytes": 8, **_FIG2}
_FV_SIZES = (8, 16, 32)
_TDES, _OTP, _OCB = "none+tdes", "none+otp", "none+ocb"


def _fv(n: Optional[int] = None, scheme: str = _TDES, **extra) -> dict:
    """The settings of a 004 point: the engines, the FVT size (None: speculation off), extra."""
    engines = {_OTP: _ENGINES_OTP, _OCB: _ENGINES_OCB}.get(scheme, _ENGINES)
    return {**engines, **({"speculation.frequent_values": n} if n else {}), **extra}


def _fv_points(configs, scheme: str = _TDES):
    """Each configuration with speculation off and with 8 values (the paper's default, §6.2)."""
    def points(paper, scale):
        return product_points(paper, scale, _names(paper, _SPEC_004), [scheme],
                              [_fv(n, scheme, **c) for c in configs for n in (None, 8)])
    return points


def _speedup(d: Data, w: str, n: int = 8, scheme: str = _TDES, **extra) -> Optional[float]:
    """IPC with speculation over IPC without, same machine, minus one."""
    on, off = d.get(w, scheme, sets=_fv(n, scheme, **extra)), d.get(w, scheme, sets=_fv(None, scheme, **extra))
    return None if on is None or not off else on / off - 1


def _fig5_004_points(paper, scale):
    return product_points(paper, scale, _names(paper, _SPEC_004), ["none+tdes"], [_fv(n) for n in _FV_SIZES])


def _frac(d, w, n, stat="speculation.fv_frequent_fraction"):
    return d.get(w, "none+tdes", stat, _fv(n))


def _fig5_004_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, _SPEC_004)
    fr = {w: _all(_frac(d, w, n) for n in _FV_SIZES) for w in ws}
    best = None if any(v is None for v in fr.values()) else max(fr.values(), key=lambda v: v[0])
    over = None if best is None else sum(v[0] > 0.4 for v in fr.values())
    grows = None if best is None else all(b >= a - 0.01 for v in fr.values() for a, b in zip(v, v[1:]))
    return [
        Row("fetched 64-bit chunks that are frequent values (top 8), the highest stand-in", paper.value("004-fig5", "several_over_40"),
            None if best is None else best[0], "-" if best is None else f"{_pct(best[0])}; {over} of {len(ws)} over 40%",
            _trend(lambda: over >= 1, best), cause="values"),
        Row("the frequent share grows (or holds) from 8 to 16 to 32 values", paper.value("004-fig5", "grows"), None,
            "-" if best is None else "; ".join(f"{w}: " + "/".join(_pct(x) for x in fr[w]) for w in ws), _trend(grows, grows),
            cause="values"),
    ]


def _fig5_004_plot(d, paper, fig):
    ws = _names(paper, _SPEC_004)
    ax = fig.add_subplot(111)
    plots.bars(ax, [_label(paper, w) for w in ws], {f"top {n}": [_frac(d, w, n) for w in ws] for n in _FV_SIZES},
               "fetched chunks that are frequent", refs=[(0.4, "40%")])


def _fig6_004_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, _SPEC_004)
    re = _all(_frac(d, w, 8, "speculation.fv_reordered_fraction") for w in ws)
    un = _all(_frac(d, w, 8, "speculation.fv_paired_fraction") for w in ws)
    # a stand-in with no frequent chunk has no fraction to speak of (0/0)
    fr = _all(_frac(d, w, 8) for w in ws)
    some = None if re is None or fr is None else [x for x, f in zip(re, fr) if f > 0]
    got = None if not some else mean(some)
    return [
        Row("frequent chunks predictable by a 128-bit cipher after re-ordering (mean over stand-ins with any, top 8)", paper.value("004-fig6", "reordered"),
            got, _pct(got), _trend(lambda: got >= 0.9, got), cause="values"),
        Row("without re-ordering, fewer are (no stand-in more)", paper.value("004-fig6", "unordered_few"), None,
            "-" if un is None else ", ".join(f"{w}: {_pct(u)} vs {_pct(r)}" for w, u, r in zip(ws, un, re)),
            _trend(lambda: all(u <= r for u, r in zip(un, re)) and any(u < r for u, r in zip(un, re)), un, re), cause="values"),
    ]


def _fig6_004_plot(d, paper, fig):
    ws = _names(paper, _SPEC_004)
    ax = fig.add_subplot(111)
    plots.bars(ax, [_label(paper, w) for w in ws],
               {"in place": [_frac(d, w, 8, "speculation.fv_paired_fraction") for w in ws],
                "re-ordered": [_frac(d, w, 8, "speculation.fv_reordered_fraction") for w in ws]},
               "predictable / frequent chunks (128-bit)", refs=[(0.95, "paper: >95% re-ordered")])


_L2_004 = [{"l2.size": "256KiB", "l2.latency": 4}, {"l2.size": "1MiB", "l2.latency": 8}]


def _fig7_004_points(paper, scale):
    return _fv_points(_L2_004)(paper, scale) + _fv_points(_L2_004, _OCB)(paper, scale)


def _fig7_004_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, _SPEC_004)
    rows = []
    sp = {}
    for scheme, name, cause in ((_TDES, "TDES (64-bit)", "footprint"), (_OCB, "AES (128-bit, re-ordered)", "aes_pairs")):
        small = _all(_speedup(d, w, scheme=scheme, **_L2_004[0]) for w in ws)
        large = _all(_speedup(d, w, scheme=scheme, **_L2_004[1]) for w in ws)
        sp[scheme] = small
        best = None if small is None else max(small)
        rows += [
            Row(f"IPC speedup of ciphertext and MAC speculation, {name}, 256 KB L2 (best stand-in)", paper.value("004-fig7", "over_10_256k"), best,
                "-" if small is None else ", ".join(f"{w}: {_pct(x)}" for w, x in zip(ws, small)), _trend(lambda: best > 0, best),
                cause=cause),
            Row(f"{name}: the speedup is smaller with a 1 MB L2 (mean over stand-ins)", paper.value("004-fig7", "smaller_1m"), None,
                "-" if large is None or small is None else f"{_pct(mean(small))} at 256 KB, {_pct(mean(large))} at 1 MB",
                _trend(lambda: mean(large) <= mean(small), small, large), cause=cause),
        ]
    t, a = sp[_TDES], sp[_OCB]
    rows.append(Row("64-bit speculation (TDES) gains more than 128-bit (AES), 256 KB L2 (mean over stand-ins)",
                    paper.value("004-fig7", "chunks_64_beat_128"), None,
                    "-" if t is None or a is None else f"TDES {_pct(mean(t))}, AES {_pct(mean(a))}",
                    _trend(lambda: mean(t) >= mean(a), t, a), cause="aes_pairs"))
    return rows


def _fig7_004_plot(d, paper, fig):
    ws = _names(paper, _SPEC_004)
    ax = fig.add_subplot(111)
    plots.bars(ax, [_label(paper, w) for w in ws],
               {f"{cipher} {c['l2.size']}": [_speedup(d, w, scheme=scheme, **c) for w in ws]
                for cipher, scheme in (("TDES", _TDES), ("AES", _OCB)) for c in _L2_004},
               "IPC speedup", refs=[(0.10, "10%")])


def _fig8_004_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, _SPEC_004)
    small = _all(_speedup(d, w, scheme=_OTP, **_L2_004[0]) for w in ws)
    large = _all(_speedup(d, w, scheme=_OTP, **_L2_004[1]) for w in ws)
    best = None if small is None else max(small)
    # 181.mcf, 172.mgrid, 197.parser at 1 MB
    named = None if large is None else mean(large[:3])
    return [
        Row("IPC speedup of MAC speculation, counter mode, 256 KB L2 (best stand-in)", paper.value("004-fig8", "over_5_256k"), best,
            "-" if small is None else ", ".join(f"{w}: {_pct(x)}" for w, x in zip(ws, small)), _trend(lambda: best > 0, best),
            cause="footprint"),
        Row("with a 1 MB L2, mcf, mgrid and parser gain 15-20% (mean of their stand-ins)", paper.value("004-fig8", "named_1m"), named,
            "-" if large is None else ", ".join(f"{w}: {_pct(x)}" for w, x in zip(ws, large)), _trend(lambda: named > 0, named),
            cause="footprint"),
    ]


def _fig8_004_plot(d, paper, fig):
    ws = _names(paper, _SPEC_004)
    ax = fig.add_subplot(111)
    plots.bars(ax, [_label(paper, w) for w in ws],
               {c["l2.size"]: [_speedup(d, w, scheme=_OTP, **c) for w in ws] for c in _L2_004}, "IPC speedup (counter mode)",
               refs=[(0.05, "5%"), (0.10, "10%")])


_RATIOS = [{"memory.bus_clock": "250MHz"}, {"memory.bus_clock": "166.67MHz"}]


def _fig9_004_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, _SPEC_004)
    sp = [_all(_speedup(d, w, scheme=_OCB, **c) for w in ws) for c in _RATIOS]
    m = [None if v is None else mean(v) for v in sp]
    return [
        Row("average IPC speedup at CPU:memory 1:4 (AES)", paper.value("004-fig9", "ratio_1_4"), m[0], _pct(m[0]),
            _trend(lambda: m[0] > 0, m[0]), cause="aes_pairs"),
        Row("average IPC speedup at 1:6, slightly above 1:4's (AES)", paper.value("004-fig9", "ratio_1_6"), m[1], _pct(m[1]),
            _trend(lambda: m[1] >= m[0], m[0], m[1]), cause="aes_pairs"),
    ]


def _fig9_004_plot(d, paper, fig):
    ws = _names(paper, _SPEC_004)
    ax = fig.add_subplot(111)
    plots.bars(ax, [_label(paper, w) for w in ws],
               {r: [_speedup(d, w, scheme=_OCB, **c) for w in ws] for r, c in zip(("1:4", "1:6"), _RATIOS)}, "IPC speedup (AES, 256 KB)",
               refs=[(0.075, "paper 1:4 mean"), (0.09, "paper 1:6 mean")])


def _fig10_004_points(paper, scale):
    return product_points(paper, scale, _names(paper, _SPEC_004), ["none+tdes"], [_fv(n) for n in (None,) + _FV_SIZES])


def _fig10_004_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, _SPEC_004)
    sp = {w: _all(_speedup(d, w, n) for n in _FV_SIZES) for w in ws}
    ok = None if any(v is None for v in sp.values()) else sp
    gain = None if ok is None else max(v[2] - v[0] for v in ok.values())
    return [Row("32 values instead of 8 gain little (largest gain over the stand-ins)", paper.value("004-fig10", "little_gain"), None,
                "-" if ok is None else "; ".join(f"{w}: " + "/".join(_pct(x) for x in ok[w]) for w in ws) + f"; largest gain {_pct(gain)}",
                _trend(lambda: gain < 0.03, gain))]


def _fig10_004_plot(d, paper, fig):
    ws = _names(paper, _SPEC_004)
    ax = fig.add_subplot(111)
    plots.bars(ax, [_label(paper, w) for w in ws], {f"{n} values": [_speedup(d, w, n) for w in ws] for n in _FV_SIZES},
               "IPC speedup (TDES, 256 KB)")


FIGURES_004 = [
    Figure("004-fig5", "004", "Fetched 64-bit chunks that are frequent values, top 8/16/32", "Figure 5, §6.1",
           _fig5_004_points, _fig5_004_rows, _fig5_004_plot, size=(8, 3.4)),
    Figure("004-fig6", "004", "Frequent chunks predictable under a 128-bit cipher, in place and re-ordered", "Figure 6, §6.1, §3.2.2",
           lambda paper, scale: product_points(paper, scale, _names(paper, _SPEC_004), ["none+tdes"], [_fv(8)]),
           _fig6_004_rows, _fig6_004_plot, size=(8, 3.4)),
    Figure("004-fig7", "004", "IPC speedup of ciphertext and MAC speculation, TDES (64-bit) and AES (128-bit), 256 KB and 1 MB L2",
           "Figure 7, §6.2", _fig7_004_points, _fig7_004_rows, _fig7_004_plot, size=(9, 3.4)),
    Figure("004-fig8", "004", "IPC speedup of MAC speculation for counter-mode encryption (otp), 256 KB and 1 MB L2", "Figure 8(a)(b), §6.2",
           _fv_points(_L2_004, _OTP), _fig8_004_rows, _fig8_004_plot, size=(8, 3.4)),
    Figure("004-fig9", "004", "IPC speedup against the CPU:memory clock ratio (1:4, 1:6), AES, 256 KB L2", "Figure 9, §6.3",
           _fv_points(_RATIOS, _OCB), _fig9_004_rows, _fig9_004_plot, size=(8, 3.4)),
    Figure("004-fig10", "004", "IPC speedup against the FVT size (8, 16, 32 values), TDES, 256 KB L2", "Figure 10, §6.4",
           _fig10_004_points, _fig10_004_rows, _fig10_004_plot, size=(8, 3.4)),
]

# ---------------------------------------------------------------------------------------
# Counter-light (ISCA 2024): memory protection as processors ship it (issue 30), beside the
# published cost of counterless encryption on irregular workloads

_CL_PROGRAMS = ("bfs", "pr", "mcf", "chase")
# champsim's DDR4-3200 with engines that keep up with it (docs/shipped-protection.md: the
# seeds' 3.2 GB/s engines would throttle every scheme and measure the engine, not the scheme).
_CL_ENGINES = {"aes.engines": "16", "hash.throughput": "51.2GB/s"}
# label -> (integrity, encryption, settings beyond the engines'). split and sgx get the same
# 32 KiB of on-chip metadata cache (512 counter blocks of 64 B; sgx's default).
_CL_SCHEMES = {
    "none": ("none", "none", {}),
    "xts": ("none", "xts", {}),
    "xts-256": ("none", "xts", {"xts.key_bits": "256"}),
    "otp": ("none", "otp", {}),
    "split": ("none", "split", {"split.cache_blocks": "512"}),
    "sgx": ("none", "sgx", {}),
    "tdx+xts": ("tdx", "xts", {}),
    "tdx+xts wait": ("tdx", "xts", {"speculation.use_before_verify": "false"}),
}
# (warm-up, measured) per scale; the suite programs are traced from their steady phase (the
# skip their docs/workloads.md row measures: past set-up, inside the computation).
_CL_COUNTS = {"smoke": (5_000, 20_000), "laptop": (1_000_000, 2_000_000), "full": (30_000_000, 10_000_000)}
# The suite programs run from traces (built-in workloads run live). A size's steady phase is
# the suite's to state (suite.steady_skip: the spec sizes'); a default size states none, and
# mcf's starts where its docs/workloads.md row does.
_CL_TRACED = ("bfs.spec", "pr.spec", "mcf")
_CL_DEFAULT_SKIP = {"mcf": 1_500_000_000}


def _cl_skip(workload: str) -> int:
    from .. import suite

    return suite.steady_skip(workload) or _CL_DEFAULT_SKIP[workload]


def _cl_counts(scale: Scale) -> tuple:
    return _CL_COUNTS.get(scale.name, _CL_COUNTS["laptop"])


def _cl_input(workload: str, scale: Scale) -> str:
    """A suite program's trace (beside its inputs), or the built-in workload's name."""
    from .. import suite

    if workload not in _CL_TRACED:
        return workload
    warm, n = _cl_counts(scale)
    return str(suite.data_dir(workload) / f"counterlight-skip{_cl_skip(workload)}-n{warm + n}.smt")


def _cl_prepare(paper: Paper, scale: Scale) -> None:
    """Trace each suite program once; every scheme's point then reads the same file."""
    import os

    from .. import suite, tracing

    warm, n = _cl_counts(scale)
    for w in _names(paper, _CL_PROGRAMS):
        if w not in _CL_TRACED:
            continue
        path = _cl_input(w, scale)
        if os.path.exists(path):
            continue
        c = suite.command(w)  # refuses a workload that is not installed, naming the install command
        tracing.trace(list(c.argv), path, skip=_cl_skip(w), count=warm + n, env=sorted(c.env.items()), clear_env=True,
                      cwd=c.cwd, stdin=c.stdin, stdout=None)


def _cl_sets(label: str) -> dict:
    return {**_CL_ENGINES, **_CL_SCHEMES[label][2]}


def _cl_points(paper: Paper, scale: Scale) -> list:
    warm, n = _cl_counts(scale)
    out = []
    for w in _names(paper, _CL_PROGRAMS):
        src = _cl_input(w, scale)
        for label, (integ, enc, _) in _CL_SCHEMES.items():
            where = dict(trace=src) if w in _CL_TRACED else dict(workload=w)
            out.append(Point(integrity=integ, encryption=enc, preset=paper.preset, sets=tuple(_cl_sets(label).items()),
                             instructions=n, warmup=warm, **where))
    return out


def _cl_get(d: Data, w: str, label: str, stat: str = "ipc"):
    """A statistic of one point; ``traffic``: the bytes read and written (every point of a
    program measures the same instructions, so their ratio is per instruction too)."""
    integ, enc, _ = _CL_SCHEMES[label]
    src, scheme, sets = _cl_input(w, d.scale), f"{integ}+{enc}", _cl_sets(label)
    if stat != "traffic":
        return d.get(src, scheme, stat, sets)
    r, wr = d.get(src, scheme, "mem.read_bytes", sets), d.get(src, scheme, "mem.write_bytes", sets)
    return None if r is None or wr is None else r + wr


def _cl_norm(d: Data, w: str, label: str, stat: str = "ipc") -> Optional[float]:
    """A scheme's statistic over no protection's, on the same program and machine."""
    v, b = _cl_get(d, w, label, stat), _cl_get(d, w, "none", stat)
    return None if v is None or not b else v / b


def _cl_grid(d: Data, paper: Paper, stat: str = "ipc") -> dict:
    return {(w, label): _cl_norm(d, w, label, stat) for w in _names(paper, _CL_PROGRAMS) for label in _CL_SCHEMES}


def _cl_rows(d: Data, paper: Paper, scale: Scale):
    ws = _names(paper, _CL_PROGRAMS)
    g, t = _cl_grid(d, paper), _cl_grid(d, paper, "traffic")
    rows = []
    slow = _all(None if g[(w, "xts")] is None else 1 - g[(w, "xts")] for w in ws)
    avg = None if slow is None else mean(slow)
    rows.append(Row("counterless (xts) against no encryption: mean slowdown over the irregular programs",
                    paper.value("counterlight-xts", "irregular"), avg,
                    "-" if slow is None else f"{avg:.1%} (" + ", ".join(f"{w} {s:.1%}" for w, s in zip(ws, slow)) + ")",
                    _trend(lambda: all(s > 0 for s in slow), slow), cause="engine_latency"))
    for w in ws:
        x, o = g[(w, "xts")], g[(w, "otp")]
        rows.append(Row(f"{w}: counter mode's pad (otp) hides the cipher that xts waits for: otp ≥ xts",
                        paper.value("counterlight-xts", "sequential"), None,
                        "-" if x is None or o is None else f"otp {o:.3f}, xts {x:.3f}", _trend(lambda: o >= x, x, o),
                        cause="stamps"))
    for w in ws:
        x, sp, sg = t[(w, "xts")], t[(w, "split")], t[(w, "sgx")]
        rows.append(Row(f"{w}: counter mode with a 32 KiB metadata cache moves more bytes than xts (split, sgx)",
                        paper.value("counterlight-xts", "counter_traffic"), None,
                        "-" if None in (x, sp, sg) else f"traffic vs none: xts {x:.2f}, split {sp:.2f}, sgx {sg:.2f}",
                        _trend(lambda: sp > x and sg > x, x, sp, sg)))
    extra = _all(None if g[(w, "xts")] is None or g[(w, "xts-256")] is None else g[(w, "xts")] - g[(w, "xts-256")]
                 for w in ws)
    rows.append(Row("AES-XTS-256 costs more than -128 on every program (extra slowdown, mean)",
                    paper.value("counterlight-xts", "aes256"), None if extra is None else mean(extra),
                    "-" if extra is None else ", ".join(f"{w} +{e:.1%}" for w, e in zip(ws, extra)),
                    _trend(lambda: all(e > 0 for e in extra), extra)))
    tr = _all(t[(w, "tdx+xts")] for w in ws)
    xt = _all(t[(w, "xts")] for w in ws)
    rows.append(Row("TDX's MAC moves no extra bytes: tdx+xts traffic = xts traffic on every program",
                    paper.value("counterlight-xts", "tdx_traffic"), None,
                    "-" if tr is None or xt is None else ", ".join(f"{w} {a:.3f}/{b:.3f}" for w, a, b in zip(ws, tr, xt)),
                    _trend(lambda: all(abs(a - b) < 1e-9 for a, b in zip(tr, xt)), tr, xt)))
    return rows


def _cl_plot(d, paper, fig):
    ws = _names(paper, _CL_PROGRAMS)
    g = _cl_grid(d, paper)
    ax = fig.add_subplot(1, 1, 1)
    plots.bars(ax, ws, {label: [g[(w, label)] for w in ws] for label in _CL_SCHEMES if label != "none"},
               "IPC normalized to no protection", "champsim, engines scaled to DDR4",
               refs=[(1 - paper.value("counterlight-xts", "irregular").value, "paper: counterless −9% (mean)")])


def _cl_text(d: Data, paper: Paper) -> str:
    ws = _names(paper, _CL_PROGRAMS)
    g, t = _cl_grid(d, paper), _cl_grid(d, paper, "traffic")
    labels = [x for x in _CL_SCHEMES if x != "none"]
    lines = ["counterlight-xts: IPC normalized to no protection (memory traffic normalized in brackets), champsim",
             "  program    " + "".join(f"{x:>16}" for x in labels)]
    for w in ws:
        cells = ["not run" if g[(w, x)] is None or t[(w, x)] is None else f"{g[(w, x)]:.3f} ({t[(w, x)]:.2f})"
                 for x in labels]
        lines.append(f"  {w:<10} " + "".join(f"{c:>16}" for c in cells))
    lines.append("  Counter-light (ISCA 2024): counterless encryption slows irregular workloads by 9% on average")
    return "\n".join(lines)


def _cl_ask(paper, scale):
    warm, n = _cl_counts(scale)
    return (f"{n / 1e6:g} M instructions after {warm / 1e6:g} M of warm-up of each program (the suite programs traced "
            f"from their steady phase), on champsim with 16 AES pipelines and a 51.2 GB/s hash engine, under "
            + ", ".join(_CL_SCHEMES))


FIGURES_CL = [
    Figure("counterlight-xts", "counterlight", "Counterless (AES-XTS) against counter mode and no encryption on irregular programs; "
           "TDX's MAC; AES-XTS-256", "Counter-light (ISCA 2024), abstract", _cl_points, _cl_rows, _cl_plot, _cl_ask,
           size=(10, 4), prepare=_cl_prepare, text=_cl_text, programs=lambda paper: [w for w in _names(paper, _CL_PROGRAMS)
                                                                                       if w in _CL_TRACED]),
]


# ---------------------------------------------------------------------------------------
# morph: the counter-tree family (issue 29): counter organisations of one SGX-style tree

_ORGS = ("split64", "vault", "morphable", "mono")
_ORG_LABEL = {"split64": "SC-64", "vault": "VAULT", "morphable": "morphable", "mono": "SGX (mono-8)"}
_GIB16 = 16 << 30
_MIB = float(1 << 20)


def _org(c: str, **more) -> dict:
    return {"sgx.counters": c, **more}


def _morph_space_points(paper, scale):
    return [Point(workload="hot", integrity="none", encryption="sgx", preset=paper.preset,
                  sets=tuple(_org(c, **{"memory.size": "16GiB"}).items()), instructions=20_000, warmup=0) for c in _ORGS]


def _tree_mib(d: Data, c: str) -> Optional[float]:
    v = d.get("hot", "none+sgx", "sgx.tree_bytes", _org(c, **{"memory.size": "16GiB"}))
    return None if v is None else float(v) / _MIB


def _levels(d: Data, c: str):
    return d.get("hot", "none+sgx", "sgx.levels", _org(c, **{"memory.size": "16GiB"}))


def _morph_space_rows(d: Data, paper: Paper, scale: Scale):
    sc64, morph = _tree_mib(d, "split64"), _tree_mib(d, "morphable")
    def txt(c, mib):
        return "-" if mib is None else f"{mib:.3f} MiB, {_levels(d, c):.0f} levels with the counters"
    out = [
        Row("16 GB: the tree above SC-64 counters (64-ary)", paper.value("morph-space", "tree_sc64"), sc64, txt("split64", sc64),
            _trend(lambda: sc64 > 3.5, sc64)),
        Row("16 GB: the tree above morphable counters (128-ary)", paper.value("morph-space", "tree_morph"), morph, txt("morphable", morph),
            _trend(lambda: morph < sc64 / 2, sc64, morph)),
    ]
    smaller = None if sc64 is None or morph is None else 1 - morph / sc64
    out.append(Row("morphable's tree against SC-64's: how much smaller", paper.value("morph-space", "smaller"), smaller,
                   _pct(smaller), _trend(lambda: smaller > 0.5, smaller)))
    return out


def _morph_space_plot(d, paper, fig):
    ax = fig.add_subplot(111)
    plots.bars(ax, [_ORG_LABEL[c] for c in _ORGS], {"secmem": [_tree_mib(d, c) for c in _ORGS]}, "tree above the counters, MiB (16 GiB)",
               paper={"secmem": [paper.value("morph-space", "tree_sc64").value, paper.value("morph-space", "tree_morph").value, None, None]},
               log=True)


def _morph_space_text(d, paper):
    lines = ["  organisation   tree above counters   counters   levels   root registers"]
    for c in _ORGS:
        s = _org(c, **{"memory.size": "16GiB"})
        ctr = d.get("hot", "none+sgx", "sgx.counter_bytes", s)
        roots = d.get("hot", "none+sgx", "sgx.root_counters", s)
        tree = _tree_mib(d, c)
        lines.append(f"  {_ORG_LABEL[c]:<14} {'-' if tree is None else f'{tree:.3f} MiB':>19}   "
                     f"{'-' if ctr is None else f'{float(ctr) / _MIB:.0f} MiB':>8}   {'-' if _levels(d, c) is None else int(_levels(d, c)):>6}   "
                     f"{'-' if roots is None else int(roots):>14}")
    return "\n".join(lines)


# The authors' configuration: a 128 KB metadata cache, MACs in the ECC chips (run_MICRO_5Bn.sh).
_PERF_SETS = {"sgx.cache_bytes": "128KiB", "sgx.mac_place": "ecc"}
# The suite's memory-intensive programs at SPEC-like sizes: mcf.spec and the GAP kernels.
_PERF_PROGRAMS = ("mcf", "pr", "bc")


# (warm-up, measured) per scale, from the program's steady phase (its size's `skip`: mcf.spec's
# simplex, docs/workloads.md).
_PERF_COUNTS = {"smoke": (5_000, 20_000), "laptop": (1_000_000, 2_000_000), "full": (30_000_000, 10_000_000)}


def _perf_counts(scale: Scale) -> tuple:
    return _PERF_COUNTS.get(scale.name, _PERF_COUNTS["laptop"])


def _perf_trace(workload: str, scale: Scale) -> str:
    """Where the figure keeps a program's window: beside its inputs."""
    from .. import suite

    warm, n = _perf_counts(scale)
    return str(suite.data_dir(workload) / f"morph-perf-skip{suite.steady_skip(workload)}-n{warm + n}.smt")


def _perf_prepare(paper: Paper, scale: Scale) -> None:
    """Trace each program's window once (past its set-up); the points read the file."""
    import os

    from .. import suite, tracing

    warm, n = _perf_counts(scale)
    for w in _names(paper, _PERF_PROGRAMS):
        path = _perf_trace(w, scale)
        if os.path.exists(path):
            continue
        c = suite.command(w)  # refuses a workload that is not installed, naming the install command
        tracing.trace(list(c.argv), path, skip=suite.steady_skip(w), count=warm + n, env=sorted(c.env.items()), clear_env=True,
                      cwd=c.cwd, stdin=c.stdin, stdout=None)


def _morph_perf_points(paper, scale):
    warm, n = _perf_counts(scale)
    out = []
    for w in _names(paper, _PERF_PROGRAMS):
        for scheme, sets in [("none", {})] + [("sgx", _org(c, **_PERF_SETS)) for c in ("split64", "vault", "morphable")]:
            out.append(Point(trace=_perf_trace(w, scale), integrity="none", encryption=scheme, preset=paper.preset,
                             sets=tuple(sets.items()), instructions=n, warmup=warm))
    return out


def _speedups(d: Data, paper: Paper, over: str) -> Optional[list]:
    out = []
    for w in _names(paper, _PERF_PROGRAMS):
        t = _perf_trace(w, d.scale)
        m, o = d.get(t, "none+sgx", "ipc", _org("morphable", **_PERF_SETS)), d.get(t, "none+sgx", "ipc", _org(over, **_PERF_SETS))
        out.append(None if m is None or not o else m / o)
    return _all(out)


def _geomean(xs) -> float:
    return math.exp(mean(math.log(x) for x in xs))


def _morph_perf_rows(d: Data, paper: Paper, scale: Scale):
    out = []
    ws = _names(paper, _PERF_PROGRAMS)
    for key, over in (("over_sc64", "split64"), ("over_vault", "vault")):
        s = _speedups(d, paper, over)
        gm = None if s is None else _geomean(s) - 1
        text = "-" if s is None else f"{gm * 100:+.1f}% (" + ", ".join(f"{w} {(x - 1) * 100:+.1f}%" for w, x in zip(ws, s)) + ")"
        out.append(Row(f"morphable counters against {_ORG_LABEL[over]}: geomean speedup", paper.value("morph-perf", key), gm, text,
                       _trend(lambda: gm > 0, gm), cause="short_runs"))
    return out


def _morph_perf_plot(d, paper, fig):
    ws = _names(paper, _PERF_PROGRAMS)
    ax = fig.add_subplot(111)
    plots.bars(ax, [_label(paper, w) for w in ws],
               {_ORG_LABEL[c]: [d.norm(_perf_trace(w, d.scale), "none+sgx", sets=_org(c, **_PERF_SETS), base_sets={}) for w in ws]
                for c in ("split64", "vault", "morphable")}, "IPC / unprotected")


FIGURES_MORPH = [
    Figure("morph-space", "morph", "Tree size and height for 16 GiB per counter organisation (SC-64, VAULT, morphable, SGX)",
           "§1 (tree size for 16 GB)", _morph_space_points, _morph_space_rows, _morph_space_plot,
           lambda paper, scale: "one tiny run per organisation with 16 GiB of memory (tree size is a property of the layout)",
           size=(6, 3.4), text=_morph_space_text),
    Figure("morph-perf", "morph", "Morphable counters against SC-64 and VAULT: IPC on the suite's memory-intensive programs",
           "abstract (geomean speedups)", _morph_perf_points, _morph_perf_rows, _morph_perf_plot,
           lambda paper, scale: (f"a window of each program past its set-up ({_perf_counts(scale)[1] / 1e6:g} M instructions after "
                                 f"{_perf_counts(scale)[0] / 1e6:g} M of warm-up), traced once; sgx with a 128 KiB metadata cache "
                                 "and MACs in ECC bits under each organisation, and the unprotected machine"),
           size=(7, 3.4), prepare=_perf_prepare, programs=lambda paper: _names(paper, _PERF_PROGRAMS)),
]


# ---------------------------------------------------------------------------------------
# split and bonsai: the counter-tree family's two earlier published comparisons (issue 29),
# split against monolithic counters (Yan 2006) and a Bonsai Merkle tree against a tree over
# data (Rogers 2007), on morph-perf's program windows and the built-in chase.

_TREE_PROGRAMS = ("mcf", "pr", "bc", "chase")
# label -> (integrity, encryption, settings beyond the engines'). Both papers give a 32 KB
# counter cache: 512 counter blocks of 64 B. chash is the tree over data and counters (the
# seeds' Merkle tree, nodes cached in the L2 as both papers cache theirs).
_TREE_SCHEMES = {
    "none": ("none", "none", {}),
    "monolithic": ("chash", "split", {"split.arity": "8", "split.cache_blocks": "512"}),
    "split": ("chash", "split", {"split.arity": "64", "split.cache_blocks": "512"}),
    "bonsai": ("bonsai", "split", {"split.arity": "64", "split.cache_blocks": "512"}),
}
_TREE_LABEL = {"monolithic": "monolithic (8 a block) + tree over data", "split": "SC-64 + tree over data",
               "bonsai": "SC-64 + Bonsai tree"}


def _tree_sets(label: str) -> dict:
    # Engines that keep up with champsim's memory (as counterlight-xts): the seeds' 3.2 GB/s
    # hash engine would measure its own throughput, not the organisation.
    return {**_CL_ENGINES, **_TREE_SCHEMES[label][2]}


def _tree_input(workload: str, scale: Scale) -> str:
    """A suite program's window (morph-perf's trace), or the built-in workload's name."""
    from .. import suite

    return _perf_trace(workload, scale) if workload in suite.variants() else workload


def _tree_points(labels: Sequence[str]) -> Callable:
    def points(paper: Paper, scale: Scale) -> list:
        warm, n = _perf_counts(scale)
        out = []
        for w in _names(paper, _TREE_PROGRAMS):
            src = _tree_input(w, scale)
            where = dict(trace=src) if src != w else dict(workload=w)
            for label in ("none",) + tuple(labels):
                integ, enc, _ = _TREE_SCHEMES[label]
                out.append(Point(integrity=integ, encryption=enc, preset=paper.preset, sets=tuple(_tree_sets(label).items()),
                                 instructions=n, warmup=warm, **where))
        return out
    return points


def _tree_overheads(d: Data, paper: Paper, label: str) -> Optional[list]:
    """1 - IPC / unprotected IPC of `label` on each program."""
    integ, enc, _ = _TREE_SCHEMES[label]
    return _all(None if (n := d.norm(_tree_input(w, d.scale), f"{integ}+{enc}", sets=_tree_sets(label),
                                      base_sets=_tree_sets("none"))) is None else 1 - n
                for w in _names(paper, _TREE_PROGRAMS))


def _tree_rows(figure: str, before: str, after: str, claims: tuple) -> Callable:
    """Two rows: the mean overhead of `before` (the paper's prior scheme) and of `after`
    (its own), each beside the paper's number; `after` must cost less."""
    def rows(d: Data, paper: Paper, scale: Scale) -> list:
        ws = _names(paper, _TREE_PROGRAMS)
        ob, oa = _tree_overheads(d, paper, before), _tree_overheads(d, paper, after)
        mb, ma = (None if o is None else mean(o) for o in (ob, oa))

        def text(o, m):
            return "-" if o is None else f"{m * 100:.1f}% mean (" + ", ".join(f"{w} {x * 100:.1f}%" for w, x in zip(ws, o)) + ")"
        return [Row(claims[0], paper.value(figure, before), mb, text(ob, mb), _trend(lambda: mb > 0, mb), cause="setup"),
                Row(claims[1], paper.value(figure, after), ma, text(oa, ma), _trend(lambda: ma < mb, mb, ma), cause="setup")]
    return rows


def _tree_plot(labels: Sequence[str]) -> Callable:
    def plot(d, paper, fig):
        ws = _names(paper, _TREE_PROGRAMS)
        ax = fig.add_subplot(111)
        plots.bars(ax, [_label(paper, w) for w in ws],
                   {_TREE_LABEL[c]: [d.norm(_tree_input(w, d.scale), "+".join(_TREE_SCHEMES[c][:2]), sets=_tree_sets(c),
                                            base_sets=_tree_sets("none")) for w in ws] for c in labels}, "IPC / unprotected")
    return plot


def _tree_ask(what: str) -> Callable:
    return lambda paper, scale: (f"{what} on a window of each suite program past its set-up (morph-perf's traces) and on "
                                 f"chase: {_perf_counts(scale)[1] / 1e6:g} M instructions after {_perf_counts(scale)[0] / 1e6:g} M "
                                 "of warm-up, champsim with engines that keep up with its memory, a 32 KiB counter cache")


def _tree_programs(paper: Paper) -> list:
    from .. import suite

    return [w for w in _names(paper, _TREE_PROGRAMS) if w in suite.variants()]


FIGURES_TREES = [
    Figure("split-perf", "split", "Split against monolithic counters under a tree over data: IPC overhead",
           "abstract (5% against 20%)", _tree_points(("monolithic", "split")),
           _tree_rows("split-perf", "monolithic", "split",
                      ("monolithic counters (8 a counter block) under a hash tree over data: mean IPC overhead",
                       "split counters (SC-64) under the same tree: mean IPC overhead")),
           _tree_plot(("monolithic", "split")), _tree_ask("chash+split with split.arity 8 and 64"),
           size=(7, 3.4), prepare=_perf_prepare, programs=_tree_programs),
    Figure("bonsai-perf", "bonsai", "A Bonsai Merkle tree against a tree over data, under split counters: IPC overhead",
           "abstract (2% against 12%)", _tree_points(("split", "bonsai")),
           _tree_rows("bonsai-perf", "split", "bonsai",
                      ("counter mode (SC-64) under a Merkle tree over data and counters: mean IPC overhead",
                       "the same counters under a Bonsai Merkle tree (counters only, a MAC per line): mean IPC overhead")),
           _tree_plot(("split", "bonsai")), _tree_ask("chash+split and bonsai+split (SC-64)"),
           size=(7, 3.4), prepare=_perf_prepare, programs=_tree_programs),
]

FIGURES = FIGURES_000 + FIGURES_003 + FIGURES_002 + FIGURES_004 + FIGURES_001 + FIGURES_CL + FIGURES_MORPH + FIGURES_TREES

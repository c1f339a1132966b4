"""What ``secmem reproduce`` writes: per figure a CSV of its points, a CSV of its verdicts, a
plot (PNG and SVG), and one self-contained HTML report (plots inlined as SVG) with the paper's
values beside secmem's."""

from __future__ import annotations

import csv
import html
import io
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from .._files import open_output, write_file
from ..plotting import reset_colors
from ..results import for_csv
from .registry import REPRODUCED, VERDICTS, Data, Figure, Paper, Row, Scale

# Columns of a figure's points CSV before its statistics.
POINT_COLUMNS = ("workload", "integrity", "encryption", "preset", "sets", "requested_instructions", "warmup", "skip", "seed",
                 "status", "error")


@dataclass
class Outcome:
    """One figure's result: its rows, files and the simulation time its points took."""

    figure: Figure
    paper: Paper
    data: Data
    rows: list
    files: dict = field(default_factory=dict)
    svg: str = ""
    sim_seconds: float = 0.0

    def counts(self) -> dict:
        c = {v: 0 for v in VERDICTS}
        for r in self.rows:
            c[r.verdict] += 1
        return c


def _atomic_text(path: Path, text: str) -> None:
    write_file(path, text.encode("utf-8"), "reproduce")


def _fmt_paper(r: Row) -> str:
    return r.paper_text or "-"


def _why(o: "Outcome", r: Row) -> str:
    """Why a row is not reproduced: the run's limit its number sits at, or the known cause."""
    if r.pinned:
        return f"not a measurement: {r.pinned}"
    return o.paper.cause(r.cause) if r.cause and r.verdict != REPRODUCED else ""


def write_points_csv(o: Outcome, path: Path) -> None:
    df = o.data.frame
    stats = [c for c in df.columns if c not in POINT_COLUMNS and not c.startswith("config.")]
    cols = [c for c in POINT_COLUMNS if c in df.columns] + stats
    buf = io.StringIO()
    for_csv(df[cols]).to_csv(buf, index=False)
    _atomic_text(path, buf.getvalue())


def write_rows_csv(o: Outcome, path: Path) -> None:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["figure", "claim", "paper", "paper_number", "rule", "secmem", "secmem_number", "verdict", "known_cause", "source"])
    for r in o.rows:
        w.writerow([o.figure.id, r.claim, _fmt_paper(r), "" if r.paper is None else r.paper, r.rule, r.secmem_text,
                    "" if r.secmem is None else r.secmem, r.verdict, _why(o, r), r.value.source])
    _atomic_text(path, buf.getvalue())


def figure_title(o: Outcome) -> str:
    """What the figure shows, then where it comes from: "IPC of ... — secmem 003-fig5 (003 Fig. 5)"."""
    return f"{o.figure.title} — secmem {o.figure.id} ({o.figure.source})"


def write_plot(o: Outcome, png: Path, svg: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: a small, searchable SVG

    fig = plt.figure(figsize=o.figure.size)
    reset_colors()  # a series' colour is the same in every panel of this figure
    try:
        o.figure.plot(o.data, o.paper, fig)
        fig.suptitle(figure_title(o), fontsize=9)
        fig.tight_layout()
        for path, fmt in ((png, "png"), (svg, "svg")):
            with open_output(path, "reproduce") as f:
                # "tight": the legends outside the axes are part of the picture
                fig.savefig(f, format=fmt, dpi=120, bbox_inches="tight")
    finally:
        plt.close(fig)
    text = svg.read_text(encoding="utf-8")
    return text[text.index("<svg"):] if "<svg" in text else ""


# ---------------------------------------------------------------------------------------
# HTML

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2.2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .6em 0; width: 100%; }
th, td { border: 1px solid #ddd; padding: 4px 6px; vertical-align: top; text-align: left; font-size: 13px; }
th { background: #f4f4f4; }
.v { font-weight: 600; white-space: nowrap; }
.reproduced { color: #1a7f37; } .same-order { color: #4d7f1a; } .trend-only { color: #9a6700; } .differs { color: #cf222e; }
.not-measured { color: #8250df; } .not-run { color: #6e7781; }
.src { color: #555; font-size: 12px; } .small { font-size: 12px; color: #555; }
.plot svg { max-width: 100%; height: auto; }
code { background: #f4f4f4; padding: 0 3px; }
"""


def _cls(verdict: str) -> str:
    return verdict.replace(" ", "-")


def _e(x) -> str:
    return html.escape(str(x))


def _figure_html(o: Outcome, scale: Scale) -> str:
    f, p = o.figure, o.paper
    c = o.counts()
    parts = [f'<h2 id="{_e(f.id)}">{_e(f.id)}: {_e(f.title)}</h2>']
    parts.append(f'<p class="small">Paper: {_e(p.title)} — <b>{_e(f.source)}</b>. Paper method: {_e(p.method)}.</p>')
    ask = f.ask(p, scale) if f.ask else ""
    stand = {s.workload for s in p.stand_ins.values()} & {pl.point.workload for pl in o.data.planned}
    sis = "; ".join(f"<b>{_e(s.workload)}</b> for {_e(s.benchmark)} ({_e(s.why)})" for s in p.stand_ins.values() if s.workload in stand)
    parts.append(
        f'<p class="small">secmem: preset <code>{_e(p.preset)}</code>, {len(o.data.planned)} points'
        f"{', ' + _e(ask) if ask else ', ' + _e(scale.describe())}; {o.sim_seconds:.0f} s of simulation. "
        f"Stand-ins: {sis or '-'}.</p>"
    )
    parts.append("<p>" + " · ".join(f'<span class="v {_cls(v)}">{n} {v}</span>' for v, n in c.items() if n) + "</p>")
    if o.svg:
        parts.append(f'<div class="plot">{o.svg}</div>')
    parts.append("<table><tr><th>claim</th><th>paper</th><th>held to</th><th>secmem</th><th>verdict</th><th>known cause / source</th></tr>")
    for r in o.rows:
        cause = _why(o, r)
        parts.append(
            f"<tr><td>{_e(r.claim)}</td><td>{_e(_fmt_paper(r))}</td><td class='small'>{_e(r.rule)}</td><td>{_e(r.secmem_text or '-')}</td>"
            f'<td class="v {_cls(r.verdict)}">{_e(r.verdict)}</td>'
            f'<td>{_e(cause)}{"<br>" if cause else ""}<span class="src">{_e(r.value.source)}</span></td></tr>'
        )
    parts.append("</table>")
    fails = o.data.failures()
    if fails:
        parts.append("<p><b>Failed points:</b></p><ul>" + "".join(f"<li>{_e(l)}: {_e(err)}</li>" for l, err in fails) + "</ul>")
    files = " · ".join(f'<a href="{_e(os.path.basename(v))}">{_e(k)}</a>' for k, v in o.files.items())
    parts.append(f'<p class="small">Files: {files}</p>')
    return "\n".join(parts)


def write_html(outcomes: Sequence[Outcome], path: Path, scale: Scale, provenance: dict, wall_seconds: float,
               not_run: Sequence[tuple] = ()) -> None:
    totals = {v: 0 for v in VERDICTS}
    for o in outcomes:
        for v, n in o.counts().items():
            totals[v] += n
    title = "secmem reproduce: " + (outcomes[0].figure.id if len(outcomes) == 1 else "the seed papers' figures and tables")
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_e(title)}</title><style>{_CSS}</style></head><body>"]
    parts.append(f"<h1>{_e(title)}</h1>")
    parts.append(
        "<p>Each row sets one claim of a paper — a number from its text or tables, with the sentence it comes from — "
        "beside what secmem measures. A claim states what its number is held to: a bound (\"less than X\") is a bound; "
        "a reported number has a relative tolerance, the paper's precision (25% unless the claim says why otherwise). "
        "Verdicts: <span class='v reproduced'>reproduced</span> (the trend holds and the number is within the bound or the "
        "tolerance; a claim without a number, by its trend), <span class='v same-order'>same order</span> (the trend holds, "
        "the number is within 2× of the paper's), <span class='v trend-only'>trend only</span> (the trend holds, the number is "
        "further), <span class='v differs'>differs</span> (the trend does not hold), <span class='v not-measured'>not "
        "measured</span> (secmem's number sits at a cap or limit of the run, so it is no measurement), "
        "<span class='v not-run'>not run</span> (a point it needs failed). Known causes come from the seeds' data files.</p>"
    )
    prov = provenance
    parts.append(
        f"<p class='small'>secmem {_e(prov.get('secmem_version'))}, commit {_e(prov.get('git_commit') or 'unknown')}, "
        f"on {_e(prov.get('host'))}, {_e(prov.get('date'))}; scale <b>{_e(scale.name)}</b> ({_e(scale.describe())} "
        f"unless a figure says otherwise); {wall_seconds:.0f} s wall. Command: <code>{_e(prov.get('command'))}</code></p>"
    )
    parts.append("<table><tr><th>id</th><th>title</th>" + "".join(f"<th>{v}</th>" for v in VERDICTS) + "<th>simulation s</th></tr>")
    for o in outcomes:
        c = o.counts()
        parts.append(
            f"<tr><td><a href='#{_e(o.figure.id)}'>{_e(o.figure.id)}</a></td><td>{_e(o.figure.title)}</td>"
            + "".join(f"<td class='v {_cls(v)}'>{c[v] or ''}</td>" for v in VERDICTS)
            + f"<td>{o.sim_seconds:.0f}</td></tr>"
        )
    parts.append(
        "<tr><th colspan=2>total</th>" + "".join(f"<th class='v {_cls(v)}'>{totals[v]}</th>" for v in VERDICTS) + "<th></th></tr></table>"
    )
    if not_run:
        parts.append("<p><b>Not run</b> (their programs are not installed):</p><ul>"
                     + "".join(f"<li><span class='v not-run'>{_e(i)}</span> {_e(why)}</li>" for i, why in not_run) + "</ul>")
    for o in outcomes:
        parts.append(_figure_html(o, scale))
    parts.append("</body></html>")
    _atomic_text(path, "\n".join(parts))


# ---------------------------------------------------------------------------------------
# The docs' verdict table

DOCS_BEGIN = "<!-- secmem reproduce --docs: begin (generated from a run; do not edit by hand) -->"
DOCS_END = "<!-- secmem reproduce --docs: end -->"


def verdict_table(outcomes: Sequence[Outcome], scale: Scale, provenance: dict, wall_seconds: float,
                  not_run: Sequence[tuple] = ()) -> str:
    """The run's verdicts as a Markdown table, one line per figure, with what was run."""
    prov = provenance
    points: dict = {}
    for o in outcomes:
        for pl, (_, r) in zip(o.data.planned, o.data.frame.iterrows()):
            w = r.get("wall_seconds")
            points[pl.key] = float(w) if w is not None and w == w else 0.0
    lines = [f"{_GENERATED} `{prov.get('command') or 'secmem reproduce --docs'}` at scale `{scale.name}` "
             f"({scale.describe()} unless a figure says otherwise), secmem {prov.get('secmem_version')}, commit "
             f"{(prov.get('git_commit') or 'unknown')[:12]}, {prov.get('date')}: {len(points)} distinct simulations "
             f"taking {sum(points.values()):.0f} s of simulation (each point's own time, when it was run), this run "
             f"{wall_seconds:.0f} s of wall time (points already in the results store are read back, not run again).",
             "", _SUMMARY_HEAD, _SUMMARY_RULE]
    totals = {v: 0 for v in VERDICTS}
    for o in outcomes:
        c = o.counts()
        for v in VERDICTS:
            totals[v] += c[v]
        lines.append(f"| {o.figure.id} | {o.figure.source} | {len(o.data.planned)} | "
                     + " | ".join(str(c[v]) for v in VERDICTS) + f" | {o.sim_seconds:.0f} s |")
    lines.append(_total(totals))
    for i, why in not_run:
        lines.append(f"\n{i}: not run ({why}).")
    shown = [(o, r) for o in outcomes for r in o.rows if r.verdict not in (REPRODUCED,)]
    if shown:
        lines += _DETAIL_HEAD
        for o, r in shown:
            cell = lambda x: str(x).replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {o.figure.id} | {cell(r.claim)} | {cell(_fmt_paper(r))} | {cell(r.rule)} | "
                         f"{cell(r.secmem_text or '-')} | {r.verdict} | {cell(_why(o, r) or '-')} |")
    return "\n".join(lines) + "\n"


_GENERATED = "Generated by"
_SUMMARY_HEAD = "| id | source | points | " + " | ".join(VERDICTS) + " | simulation time (sum of its points) |"
_SUMMARY_RULE = "|---|---|---|" + "---|" * len(VERDICTS) + "---|"
_DETAIL_HEAD = ["", "Rows not reproduced, with what secmem measured and why it may differ:", "",
                "| id | claim | paper | held to | secmem | verdict | why |", "|---|---|---|---|---|---|---|"]


def _total(totals: dict) -> str:
    return "| total | | | " + " | ".join(f"**{totals[v]}**" for v in VERDICTS) + " | |"


def _parse_table(table: str) -> tuple:
    """A verdict table's parts: header paragraphs, summary line by id, not-run line by id, and
    (id, line) of the rows not reproduced, in order."""
    header: list = []
    summary: dict = {}
    not_run: dict = {}
    details: list = []
    part = "header"
    for ln in table.strip("\n").split("\n"):
        if part == "header":
            if ln == _SUMMARY_HEAD:
                part = "summary"
            elif ln:
                header.append(ln)
        elif part == "summary":
            m = re.match(r"(\S+): not run \(", ln)
            if ln.startswith("| ") and not ln.startswith("| total |"):
                summary[ln[2:].split(" | ", 1)[0]] = ln
            elif m:
                not_run[m.group(1)] = ln
            elif ln == _DETAIL_HEAD[1]:
                part = "details"
        elif ln.startswith("| ") and ln not in _DETAIL_HEAD:
            details.append((ln[2:].split(" | ", 1)[0], ln))
    return header, summary, not_run, details


def merge_tables(old: str, new: str, order: Sequence[str]) -> str:
    """``old``'s verdict table with the figures of ``new`` (a run of some of them) replaced or
    added, in ``order`` (every figure id), totals recounted; the header keeps ``old``'s
    provenance and adds ``new``'s for the ids it regenerated."""
    oh, osum, onr, odet = _parse_table(old)
    nh, nsum, nnr, ndet = _parse_table(new)
    ids = [i for i in order if i in nsum]
    header = oh + [f"Rows of {', '.join(ids)} regenerated by" + nh[0][len(_GENERATED):] if nh and nh[0].startswith(_GENERATED) else ""]
    summary = [nsum.get(i) or osum[i] for i in order if i in nsum or i in osum]
    totals = {v: 0 for v in VERDICTS}
    for ln in summary:
        cells = ln.strip("| ").split(" | ")
        for v, c in zip(VERDICTS, cells[3:3 + len(VERDICTS)]):
            totals[v] += int(c)
    lines = ["\n\n".join(h for h in header if h), "", _SUMMARY_HEAD, _SUMMARY_RULE, *summary, _total(totals)]
    for i in order:
        ln = nnr.get(i) if i in nsum or i in nnr else onr.get(i)
        if ln:
            lines.append("\n" + ln)
    details = [ln for i in order for j, ln in (ndet if i in nsum else odet) if j == i]
    if details:
        lines += _DETAIL_HEAD + details
    return "\n".join(lines) + "\n"


def update_docs(path: Path, table: str, order: Sequence[str] = ()) -> None:
    """Replace the generated block of ``path`` (between ``DOCS_BEGIN`` and ``DOCS_END``) with
    ``table``, atomically; a file without the markers is refused (OSError). With ``order``
    (every figure id: the run covered only some) the block keeps the other figures' rows
    (``merge_tables``)."""
    text = Path(path).read_text(encoding="utf-8")
    if DOCS_BEGIN not in text or DOCS_END not in text:
        raise OSError(f"--docs {path}: no generated block (the lines '{DOCS_BEGIN}' and '{DOCS_END}') to replace")
    head, rest = text.split(DOCS_BEGIN, 1)
    old, tail = rest.split(DOCS_END, 1)
    if order:
        table = merge_tables(old, table, order)
    _atomic_text(Path(path), f"{head}{DOCS_BEGIN}\n{table}{DOCS_END}{tail}")

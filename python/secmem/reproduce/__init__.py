"""``secmem reproduce``: the seeds' tables and figures, simulated and set beside the papers.

    >>> from secmem import reproduce
    >>> [f.id for f in reproduce.figures()][:3]
    ['000-space', '000-fig9', '000-table2']
    >>> outcomes = reproduce.run(["003-fig5"], out="secmem-reproduce")    # doctest: +SKIP

Every figure's points go through one sweep (a local Dask cluster, or ``scheduler``) into the
results store, so a figure already simulated is read back, and points figures share are run
once. Each figure then writes ``ID.csv`` (its points), ``ID-verdicts.csv``, ``ID.png`` and
``ID.svg`` into ``out``, and one HTML report covers them all (``ID.html`` for one figure,
``report.html`` for several).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from .. import _core, provenance
from .._files import write_file
from ..results import open_store
from ..sweep import execute, frame, plan
from .figures import FIGURES
from .registry import SCALES, Data, Figure, load_paper
from .report import DOCS_BEGIN, DOCS_END, Outcome, update_docs, verdict_table, write_html, write_plot, write_points_csv, write_rows_csv

__all__ = ["figures", "get", "prepare_available", "run", "SCALES"]


def figures() -> list:
    return list(FIGURES)


def get(figure_id: str) -> Figure:
    for f in FIGURES:
        if f.id == figure_id:
            return f
    raise _core.ConfigError(f"unknown reproduce id '{figure_id}' (`secmem reproduce` lists them: {', '.join(f.id for f in FIGURES)})")


def prepare_available(ids: Sequence[str], scale: str = "laptop", install: bool = False,
                      progress: Callable = print) -> tuple:
    """Prepare the figures ``ids`` (trace the suite programs a figure runs); return the ids
    that are ready and ``(id, reason)`` of those that cannot run, so that ``--all`` reports
    every figure it can instead of stopping. With ``install``, suite programs a figure needs
    and this machine lacks are installed first (``secmem workloads install``: Debian
    packages and generated inputs), so a fresh install reproduces every seed; a program that
    cannot be installed (no root, no apt-get) leaves its figure out with the reason."""
    from .. import suite

    ready, missing = [], []
    for i in ids:
        f = get(i)
        try:
            if install and f.programs:
                for w in f.programs(load_paper(f.seed)):
                    if suite.missing(w):
                        progress(f"{i}: installing suite program {w} (`secmem workloads install {w}`)")
                        suite.install(w, progress)
            if f.prepare:
                f.prepare(load_paper(f.seed), SCALES[scale])
            ready.append(i)
        except suite.SuiteError as e:
            missing.append((i, str(e)))
    return ready, missing


def check_output(out) -> Path:
    """The report directory ``out``, checked to be writable (an existing directory, or one
    that can be created under a writable one) without creating anything: an output that
    cannot be written fails in one line before anything is simulated (OSError)."""
    outdir = Path(out)
    if outdir.exists() and not outdir.is_dir():
        raise OSError(f"-o {out}: not a directory (reproduce writes a directory of CSVs, plots and a report)")
    existing = outdir
    while not existing.exists():
        if existing.is_symlink() or existing == existing.parent:
            raise OSError(f"-o {out}: cannot be created")
        existing = existing.parent
    if not existing.is_dir():
        raise OSError(f"-o {out}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OSError(f"-o {out}: {existing} is not writable")
    return outdir


def check_docs(docs) -> None:
    """The Markdown file ``--docs`` names exists and has a generated block to replace
    (OSError), checked before anything is simulated."""
    try:
        text = Path(docs).read_text(encoding="utf-8")
    except OSError as e:
        raise OSError(f"--docs {docs}: {e.strerror or e}") from None
    if DOCS_BEGIN not in text or DOCS_END not in text:
        raise OSError(f"--docs {docs}: no generated block (the lines '{DOCS_BEGIN}' and '{DOCS_END}') to replace")


def run(
    ids: Sequence[str],
    scale: str = "laptop",
    store: Optional[str] = None,
    out: str = "secmem-reproduce",
    scheduler: Optional[str] = None,
    workers: Optional[int] = None,
    progress: bool = False,
    recompute: bool = False,
    not_run: Sequence[tuple] = (),
    docs: Optional[str] = None,
    cluster: Optional[str] = None,
) -> list:
    """Simulate what the figures ``ids`` need (at ``scale``: ``laptop`` or ``full``), write
    their CSVs, plots and the HTML report into ``out``; return their :class:`Outcome`\\ s.
    ``not_run`` lists ``(id, reason)`` of figures left out, which the report names. With
    ``docs`` (a Markdown file such as docs/sweeps.md), its generated block becomes this run's
    verdict table, or, when the run covers only some figures, keeps the others' rows with theirs
    replaced (``verdicts.md`` in ``out`` has this run's table either way)."""
    if scale not in SCALES:
        raise _core.ConfigError(f"unknown scale '{scale}' (choose from {', '.join(SCALES)})")
    sc = SCALES[scale]
    figs = [get(i) for i in dict.fromkeys(ids)]
    t0 = time.monotonic()
    papers = {f.seed: load_paper(f.seed) for f in figs}
    for f in figs:
        if f.prepare:
            f.prepare(papers[f.seed], sc)
    planned = {f.id: plan(f.points(papers[f.seed], sc)) for f in figs}
    outdir = check_output(out)  # before any point is simulated
    if docs is not None:
        check_docs(docs)
    st = open_store(store)
    every = [pl for f in figs for pl in planned[f.id]]
    execute(every, st, scheduler=scheduler, workers=workers, progress=progress, recompute=recompute, what="reproduce", cluster=cluster)
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OSError(f"{out}: {e.strerror or e}") from None
    outcomes = []
    whole = st.frame()
    for f in figs:
        paper = papers[f.seed]
        df = frame(planned[f.id], st, whole)
        data = Data(planned[f.id], df, sc)
        o = Outcome(f, paper, data, f.rows(data, paper, sc))
        o.sim_seconds = float(df["wall_seconds"].fillna(0).sum()) if "wall_seconds" in df else 0.0
        files = {"points CSV": outdir / f"{f.id}.csv", "verdicts CSV": outdir / f"{f.id}-verdicts.csv",
                 "PNG": outdir / f"{f.id}.png", "SVG": outdir / f"{f.id}.svg"}
        write_points_csv(o, files["points CSV"])
        write_rows_csv(o, files["verdicts CSV"])
        o.svg = write_plot(o, files["PNG"], files["SVG"])
        o.files = {k: str(v) for k, v in files.items()}
        outcomes.append(o)
    report = outdir / (f"{figs[0].id}.html" if len(figs) == 1 else "report.html")
    prov, wall = provenance.block(), time.monotonic() - t0
    write_html(outcomes, report, sc, prov, wall, not_run)
    table = verdict_table(outcomes, sc, prov, wall, not_run)
    write_file(outdir / "verdicts.md", table.encode("utf-8"), "reproduce")
    if docs is not None:
        # A run of some figures updates their rows and keeps the others'.
        all_ids = [f.id for f in figures()]
        update_docs(Path(docs), table, () if {f.id for f in figs} >= set(all_ids) else all_ids)
    for o in outcomes:
        o.files["HTML report"] = str(report)
    return outcomes

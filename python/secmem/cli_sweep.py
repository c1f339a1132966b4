"""``secmem sweep``, ``secmem results`` and ``secmem reproduce``: the command-line side of
:mod:`secmem.sweep`, :mod:`secmem.results` and :mod:`secmem.reproduce`."""

from __future__ import annotations

import argparse
import os
import sys

from . import _core, table
from ._args import SetAction, param_unit, positive_int, size_text
from ._files import Output, write_file
from .progress import warn_once
from .results import StoreError, default_path, filter_frame, for_csv, open_store
from .sweep import AXES, JOBQUEUE, execute, frame, grid, load_grid_file, plan


def _csv(text):
    return [x.strip() for x in str(text).split(",") if x.strip()]


def _add_exec(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default=None, help=f"results store directory (default $SECMEM_RESULTS or {default_path()})")
    p.add_argument("--workers", type=int, help="Dask worker processes: local ones (default: every core), or --cluster's jobs")
    p.add_argument("--scheduler", metavar="ADDRESS", help="an existing Dask cluster, e.g. tcp://head:8786 (see docs/sweeps.md)")
    p.add_argument("--cluster", choices=sorted(JOBQUEUE), help="run the points as batch jobs through dask-jobqueue, "
                   "configured by its jobqueue.yaml; --workers: worker processes to ask for (default 1; docs/sweeps.md)")
    p.add_argument("--recompute", action="store_true", help="simulate every point again even if the store has it")


# ---------------------------------------------------------------------------------------
# secmem sweep


def add_sweep_parser(sub) -> None:
    s = sub.add_parser(
        "sweep",
        help="a grid of simulations on Dask, kept in a results store",
        description="Run every combination of the axes' values in parallel (a local Dask cluster, or --scheduler). "
        "Points already in the store are not simulated again. Axes: " + ", ".join(AXES) + " and any parameter.",
    )
    s.add_argument("file", nargs="?", help="a TOML sweep file: lists are axes, scalars fixed values (docs/sweeps.md)")
    s.add_argument("--workload", "-w", help="workloads, comma-separated")
    s.add_argument("--trace", action="append", default=[], help="a trace file (repeatable)")
    s.add_argument("--schemes", help="INTEGRITY+ENCRYPTION pairs, comma-separated")
    s.add_argument("--integrity", "-i", help="integrity schemes, comma-separated")
    s.add_argument("--encryption", "-e", help="encryption schemes, comma-separated")
    s.add_argument("--preset", "-p", help="presets, comma-separated")
    s.add_argument("--axis", "-a", action="append", default=[], metavar="KEY=V1,V2,...", help="an axis over any parameter (repeatable)")
    s.add_argument("--set", "-s", action=SetAction, default=[], metavar="KEY=VALUE", help="a fixed parameter (repeatable; each key once)")
    s.add_argument("--cores", type=positive_int("--cores"),
                   help="cores per point (docs/multicore.md): -w a,b,c,d with --cores 4 is one mix; otherwise each workload on every core")
    s.add_argument("--instructions", "-n", help="instructions to measure (default as `secmem run`: a --trace file to its end, else 10M)")
    s.add_argument("--warmup", help="warm-up instructions (default as `secmem run`: 1M, at most a tenth of a --trace file)")
    s.add_argument("--skip", help="instructions to fast-forward first (default 0)")
    s.add_argument("--seed", help="seeds, comma-separated (default 1)")
    s.add_argument("--sample", nargs="?", const="default", metavar="U:W:D", help="sampled runs (docs/sampling.md); alone: the default plan")
    s.add_argument("--checkpointed", metavar="B", help="with --sample: the windows run from checkpoints made in one pass per input and plan, "
                   "shared by every point, each window warmed over B instructions (docs/sampling.md); B values comma-separated")
    s.add_argument("--prewarm", metavar="N", help=f"with --checkpointed: prewarm lines before each window's warming (default {_core.DEFAULT_PREWARM})")
    s.add_argument("--interval", metavar="N", help="also statistics of every N measured instructions (series interval.*, kept in the store)")
    _add_exec(s)
    s.add_argument("--checkpoints", action=argparse.BooleanOptionalAction, default=None,
                   help="points with --skip read their window from a checkpoint in the store, made once per window "
                   "(default: with a local cluster; a --scheduler's workers must see the store's directory)")
    s.add_argument("--dry-run", action="store_true", help="list the points and which are in the store; run nothing")
    s.add_argument("--csv", metavar="PATH", help="write every point's row (config, provenance, statistics) as CSV")
    s.set_defaults(func=cmd_sweep)


def _axes_from_args(a) -> dict:
    axes = load_grid_file(a.file) if a.file else {}
    cli = {}
    if a.workload:
        cli["workload"] = _csv(a.workload)
    if a.cores is not None:
        cli["cores"] = str(a.cores)
        if a.cores > 1 and len(cli.get("workload", [])) == a.cores:
            cli["workload"] = [",".join(cli["workload"])]
    if a.trace:
        cli["trace"] = list(a.trace)
    if a.schemes:
        cli["scheme"] = _csv(a.schemes)
    for k in ("integrity", "encryption", "preset"):
        if getattr(a, k):
            cli[k] = _csv(getattr(a, k))
    if a.seed:
        cli["seed"] = _csv(a.seed)
    for k in ("instructions", "warmup", "skip", "sample", "interval", "prewarm"):
        if getattr(a, k):
            cli[k] = getattr(a, k)
    if a.checkpointed:
        cli["checkpointed"] = _csv(a.checkpointed)
    for item in a.axis:
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise _core.ConfigError(f"--axis '{item}': expected KEY=V1,V2,...")
        cli[k.strip()] = _csv(v)
    for item in a.set:
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise _core.ConfigError(f"--set '{item}': expected KEY=VALUE")
        cli[k.strip()] = v.strip()
    if ("workload" in cli or "trace" in cli) and a.file:
        axes.pop("workload", None)
        axes.pop("trace", None)
    if "scheme" in cli:
        axes.pop("integrity", None)
        axes.pop("encryption", None)
    axes.update(cli)
    return axes


def _varying(points) -> list:
    """Names of the point fields and parameters that differ between points."""
    fields = ["input", "integrity", "encryption", "preset", "seed", "instructions", "warmup", "skip", "checkpointed"]
    out = [f for f in fields if len({getattr(p, f) for p in points}) > 1]
    params = list(dict.fromkeys(k for p in points for k, _ in p.sets))
    out += [k for k in params if len({dict(p.sets).get(k) for p in points}) > 1]
    return out


def _shown_as(col: str):
    """How a column prints: a parameter declared in bytes as its text (262144 as 256KiB)."""
    key = col[len("config."):] if col.startswith("config.") else col
    if param_unit(key) == "B":
        return lambda v: size_text(int(v)) if isinstance(v, (int, float)) and v == v and float(v).is_integer() else str(v)
    return None


def _pct(v):
    return f"{v * 100:.2f}%"


def print_points(points, df, out=sys.stdout) -> None:
    vary = _varying(points) or ["input"]
    rows = []
    for p, (_, r) in zip(points, df.iterrows()):
        d = {k: (os.path.basename(p.input) if k == "input" else getattr(p, k, None) if hasattr(p, k) else dict(p.sets).get(k)) for k in vary}
        ok = r.get("status") == "ok"
        d.update(
            status=r.get("status"),
            ipc=r.get("ipc") if ok else None,
            ipc_ci=r.get("ci95.ipc") if ok else None,
            miss=r.get("l2.miss_rate") if ok else None,
            bpi=((r.get("mem.read_bytes") or 0) + (r.get("mem.write_bytes") or 0)) / max(r.get("instructions") or 1, 1) if ok else None,
            wall=r.get("wall_seconds"),
        )
        rows.append(d)
    cols = [("workload" if k == "input" else k, k, None) for k in vary]
    sampled = [("±95%", "ipc_ci", ".4f")] if any(isinstance(r["ipc_ci"], float) and r["ipc_ci"] == r["ipc_ci"] for r in rows) else []
    cols += [("status", "status", None), ("IPC", "ipc", ".4f"), *sampled, ("L2 miss", "miss", _pct), ("B/instr", "bpi", ".2f"), ("wall s", "wall", ".1f")]
    print(table.render(rows, cols), file=out)


def cmd_sweep(a) -> int:
    points = grid(_axes_from_args(a))
    store = open_store(a.store)
    planned = plan(points)
    if a.dry_run:
        have = store.status()
        n_ok = sum(have.get(pl.key) == "ok" for pl in planned)
        for pl in planned:
            print(f"  {'stored ' if have.get(pl.key) == 'ok' else 'to run  '} {pl.point.label()}")
        print(f"{len(planned)} points, {n_ok} in the store {store.path}, {len(planned) - n_ok} to simulate")
        return 0
    # The CSV's destination is checked before any point is simulated.
    csv_out = Output(a.csv, "--csv") if a.csv is not None else None
    s = execute(planned, store, scheduler=a.scheduler, workers=a.workers, progress=True, recompute=a.recompute, checkpoint=a.checkpoints, cluster=a.cluster)
    df = frame(planned, store)
    print_points(points, df)
    where = f"on {s.workers} Dask worker{'s' if s.workers != 1 else ''}" if s.computed else ""
    print(
        f"\n{s.points} points: {s.computed} simulated {where}, {s.stored} from the store, {s.failed} failed; "
        f"{s.wall_seconds:.1f} s; store {store.path}"
    )
    if csv_out is not None:
        with csv_out:
            csv_out.write(for_csv(df).to_csv(index=False))
    warn_once(cold_points(df), len(df))
    failed = df[df["status"] != "ok"] if "status" in df else df.iloc[0:0]
    if len(failed):
        first = failed.iloc[0]
        print(
            f"secmem: error: {len(failed)} of {len(df)} points failed (first: {points[failed.index[0]].label()}: {first['error']}); "
            "`secmem results --where status=failed` lists them",
            file=sys.stderr,
        )
        return 1
    return 0


def cold_points(df) -> list:
    """The cold-cache warning (api.cold_cache) of each ok point of ``df`` that has one."""
    from .api import cold_cache

    out = []
    for r in df.to_dict(orient="records"):
        if r.get("status") == "ok":
            stats = {k: (int(v) if isinstance(v, float) and v.is_integer() else v) for k, v in r.items()
                     if k in ("l2.lines", "l2.warmup_fills", "instructions", "l2.misses", "l2.meta_misses", "warmup")}
            w = cold_cache(stats, r.get("config.l2.size"))
            if w:
                out.append(w)
    return out


def _write_csv(df, path: str) -> None:
    write_file(path, for_csv(df).to_csv(index=False), "--csv")


# ---------------------------------------------------------------------------------------
# secmem results


def add_results_parser(sub) -> None:
    r = sub.add_parser("results", help="list, filter and export a results store")
    r.add_argument("--store", default=None, help=f"results store directory (default $SECMEM_RESULTS or {default_path()})")
    r.add_argument("--where", action="append", default=[], metavar="CONDITION",
                   help="keep rows where COLUMN=VALUE, COLUMN!=VALUE, COLUMN~TEXT (contains) or COLUMN<VALUE (<=, >, >=: "
                   "numbers, sizes in bytes); parameters by name, e.g. l2.size=256KiB, 'ipc>0.1' (repeatable: all must hold)")
    r.add_argument("--columns", "-c", help="columns to print, comma-separated (default: a summary)")
    r.add_argument("--csv", metavar="PATH", help="write the selected rows, every column, as CSV ('-' for stdout)")
    r.add_argument("--compact", action="store_true", help="merge the store's point files into one Parquet file")
    r.set_defaults(func=cmd_results)


def cmd_results(a) -> int:
    store = open_store(a.store, create=False)
    if a.compact:
        n = store.compact()
        print(f"{store.path}: {n} points in {len(store.files())} file(s)")
        return 0
    df = filter_frame(store.frame(), a.where)
    # Listed in a stable order: by what a point is, then when it was run.
    order = [c for c in ("workload", "scheme", "preset", "sets", "requested_instructions", "warmup", "seed", "date") if c in df.columns]
    if order:
        df = df.sort_values(order, kind="stable", na_position="last").reset_index(drop=True)
    if a.csv == "-":
        for_csv(df).to_csv(sys.stdout, index=False)
        return 0
    if a.csv is not None:
        _write_csv(df, a.csv)
    if a.columns:
        cols = _csv(a.columns)
        for c in cols:
            if c not in df.columns and f"config.{c}" not in df.columns:
                raise StoreError(f"--columns: no column '{c}' in the store")
        # A size is a number in the frame and its text on the screen.
        spec = [(c, c if c in df.columns else f"config.{c}", _shown_as(c)) for c in cols]
    else:
        spec = [("workload", "workload", None), ("scheme", "scheme", None), ("preset", "preset", None), ("sets", "sets", None),
                ("instructions", "requested_instructions", None), ("status", "status", None), ("IPC", "ipc", ".4f"),
                ("L2 miss", "l2.miss_rate", _pct), ("date", "date", None), ("commit", "git_commit", lambda v: str(v)[:12])]
    recs = df.to_dict(orient="records")
    for r in recs:
        if r.get("sets") == "{}":
            r["sets"] = ""
    print(table.render(recs, spec))
    print(f"\n{len(df)} of {len(store.status())} points in {store.path}" + (f"; wrote {a.csv}" if a.csv else ""))
    return 0


# ---------------------------------------------------------------------------------------
# secmem reproduce


def add_reproduce_parser(sub) -> None:
    r = sub.add_parser(
        "reproduce",
        help="the seed papers' tables and figures: simulate, plot, and report beside the published values",
        description="Without an id, list what can be reproduced. With ids (or --all), run the sweeps they need "
        "(points already in the store are read back), then write CSVs, plots and an HTML report into --out.",
    )
    r.add_argument("ids", nargs="*", metavar="ID", help="e.g. 003-fig3 000-table2 (see `secmem reproduce`)")
    r.add_argument("--all", action="store_true", help="every table and figure, in one report")
    r.add_argument("--scale", choices=["laptop", "full", "smoke"], default="laptop",
                   help="laptop: minutes per figure on two cores (default); full: the papers' instruction counts; "
                   "smoke: seconds, to check the pipeline (not comparable with the papers)")
    r.add_argument("--out", "-o", default="secmem-reproduce", help="directory for CSVs, plots and the report (default %(default)s)")
    r.add_argument("--docs", metavar="MARKDOWN",
                   help="also write the run's verdict table into this Markdown file's generated block "
                   "(docs/sweeps.md has one; the table is verdicts.md in --out either way)")
    r.add_argument("--no-install", action="store_true",
                   help="do not install the suite programs a figure needs (Debian packages and generated inputs); "
                   "such figures are then left out (--all) or refused (by id)")
    _add_exec(r)
    r.set_defaults(func=cmd_reproduce)


def cmd_reproduce(a) -> int:
    from . import reproduce
    from .reproduce.registry import VERDICTS

    if not a.ids and not a.all:
        scale = reproduce.SCALES[a.scale]
        rows = []
        for f in reproduce.figures():
            pts = f.points(reproduce.registry.load_paper(f.seed), scale)
            rows.append({"id": f.id, "source": f.source, "points": len(pts), "title": f.title})
        print(table.render(rows, [("id", "id", None), ("source", "source", None), ("points", "points", None), ("title", "title", None)]))
        print(f"\n{len(rows)} reproducible tables and figures (points at {a.scale} scale). "
              "`secmem reproduce ID` runs one, `secmem reproduce --all` all of them.")
        return 0
    ids = [f.id for f in reproduce.figures()] if a.all else a.ids
    for i in ids:
        reproduce.get(i)  # unknown ids fail before anything runs
    reproduce.check_output(a.out)  # so does an output that cannot be written
    if a.docs is not None:
        reproduce.check_docs(a.docs)
    # A fresh install has no suite programs: they are installed first unless --no-install;
    # --all then reports every figure it can and names the others, an id asked for by name
    # stops with the reason.
    ids, not_run = reproduce.prepare_available(ids, a.scale, install=not a.no_install,
                                               progress=lambda m: print(m, file=sys.stderr, flush=True))
    if not_run and not a.all:
        i, why = not_run[0]
        raise _core.ConfigError(f"{i}: {why}")
    outcomes = reproduce.run(ids, scale=a.scale, store=a.store, out=a.out, scheduler=a.scheduler, workers=a.workers, cluster=a.cluster,
                             progress=True, recompute=a.recompute, not_run=not_run, docs=a.docs)
    for o in outcomes:
        if o.figure.text:
            print(o.figure.text(o.data, o.paper) + "\n")
    rows = []
    for o in outcomes:
        c = o.counts()
        rows.append({"id": o.figure.id, **{v: c[v] or None for v in VERDICTS}, "sim": o.sim_seconds})
    print(table.render(rows, [("id", "id", None)] + [(v, v, None) for v in VERDICTS] + [("simulated s", "sim", ".0f")]))
    for i, why in not_run:
        print(f"not run: {i}: {why}")
    print(f"\nreport: {outcomes[0].files['HTML report']}")
    failed = [(o.figure.id, l, e) for o in outcomes for l, e in o.data.failures()]
    if failed:
        fid, label, err = failed[0]
        print(f"secmem: error: {len(failed)} point(s) failed (first: {fid}: {label}: {err}); their rows say 'not run'", file=sys.stderr)
        return 1
    return 0

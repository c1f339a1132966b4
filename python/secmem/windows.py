"""A sampled run split into parts run in parallel (issue 35): ``secmem run --sample
--parallel K``.

The measured instructions of a sampled run (docs/sampling.md) are periods of U instructions,
each ending in a detailed window. Cut into K parts of consecutive periods, each part is a
sampled run of its own — with the whole run's plan, so its windows are the same instructions
as the whole run's — that fast-forwards (``skip``: the memory image the skipped part built is
handed over) to ``part_warmup`` instructions before its first period and warms functionally
from there. The parts are independent Dask tasks (a local cluster by default, any scheduler as
sweeps take). The first part starts where the whole run does, so it is the whole run's own
first part; the others start from caches, trees and counters warmed over ``part_warmup``
instructions instead of everything before: the error from that finite warm-up is what
``reference=True`` measures (the whole run sampled in one piece, as one more task).

The parts combine as strata: IPC is Σ instructions / Σ cycles of every part's windows, and
its 95% interval combines the parts' standard errors (each from its own windows' spread),
weighted by their cycles (a separate-ratio estimator, Cochran §6.11). Only IPC and the counts
are combined: the parts' other rates are in ``parts``."""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

from . import _core, checkpoints

__all__ = ["parts", "combine", "run_parallel", "run_checkpointed"]


def parts(instructions: int, warmup: int, period: int, k: int, part_warmup: int) -> list[tuple[int, int, int]]:
    """(skip, warmup, instructions) of each of the ``k`` parts of a sampled run measuring
    ``instructions`` after ``warmup``, in periods of ``period``."""
    periods = instructions // period
    if k < 1:
        raise _core.ConfigError(f"--parallel: {k} (at least one part)")
    if periods < 2 * k:
        raise _core.ConfigError(f"--parallel: {k} parts of {periods} sampling periods (each part needs at least 2 windows)")
    bounds = [periods * j // k for j in range(k + 1)]
    out = []
    for j in range(k):
        start = warmup + bounds[j] * period  # the part's first period, in the whole run
        w = warmup if j == 0 else min(part_warmup, start)
        n = (bounds[j + 1] - bounds[j]) * period if j < k - 1 else instructions - bounds[j] * period
        out.append((start - w, w, n))
    return out


def combine(stats: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The parts' sampled statistics as one run's: counts summed, IPC over every window,
    its interval from the parts' standard errors (see the module)."""
    instr = sum(int(s["instructions"]) for s in stats)
    cycles = sum(int(s["cycles"]) for s in stats)
    n = sum(int(s["sampling.windows"]) for s in stats)
    var = 0.0
    for s in stats:
        # the part's standard error of its IPC, from its own interval and degrees of freedom
        se = float(s.get("ci95.ipc", 0.0)) / _core.t95(max(int(s["sampling.windows"]) - 1, 1))
        var += (int(s["cycles"]) * se) ** 2
    ipc = instr / cycles if cycles else 0.0
    half = _core.t95(max(n - len(stats), 1)) * math.sqrt(var) / cycles if cycles else 0.0
    return {"instructions": instr, "cycles": cycles, "ipc": ipc, "ci95.ipc": half, "sampling.windows": n}


def run_parallel(
    workload: Optional[str] = None,
    *,
    trace: Optional[str] = None,
    integrity: Optional[str] = None,
    encryption: Optional[str] = None,
    preset: str = "suh2003",
    sets: Sequence[str] = (),
    instructions: int,
    warmup: int = 0,
    seed: int = 1,
    sample: str = "",
    k: int = 2,
    part_warmup: Optional[int] = None,
    scheduler: Optional[str] = None,
    workers: Optional[int] = None,
    reference: bool = False,
) -> dict[str, Any]:
    """Run a sampled run as ``k`` parts on Dask (``scheduler``, or a local cluster of
    ``workers``); ``part_warmup`` (default: ``warmup``, at least one period) instructions
    are warmed functionally before each later part. Returns ``{"stats", "parts",
    "reference", "error"}``: the combined statistics (with ``parallel.*``: the parts, their
    warm-up, the wall time; with ``reference``: ``parallel.reference_ipc`` and
    ``parallel.warmup_error``, the combined IPC's relative difference from the whole run
    sampled in one piece), each part's own statistics, the reference run's."""
    import time

    from .sweep import dask_client, simulate

    period, window, warming = _core.sample_plan(sample, instructions)
    plan = f"{period}:{window}:{warming}"
    pw = max(warmup, period) if part_warmup is None else part_warmup
    cut = parts(instructions, warmup, period, k, pw)
    base = dict(workload=workload, trace=trace, integrity=integrity, encryption=encryption, preset=preset, sets=list(sets), seed=seed, sample=plan)
    t = time.perf_counter()
    with dask_client(scheduler, workers) as client:
        futures = [client.submit(simulate, dict(base, skip=s, warmup=w, instructions=n), key=f"secmem-part-{j}-{time.time_ns()}", pure=False) for j, (s, w, n) in enumerate(cut)]
        ref = client.submit(simulate, dict(base, skip=0, warmup=warmup, instructions=instructions), key=f"secmem-whole-{time.time_ns()}", pure=False) if reference else None
        done = [f.result() for f in futures]
        # the parts' wall time: the reference (one piece) may still be running
        wall = time.perf_counter() - t
        whole = ref.result() if ref is not None else None
    errors = [f"part {j + 1}: {d['error']}" for j, d in enumerate(done) if d["error"]]
    if errors:
        return {"stats": {}, "parts": done, "reference": whole, "error": "; ".join(errors)}
    stats = combine([d["stats"] for d in done])
    stats.update({
        "integrity": done[0]["stats"].get("integrity"),
        "encryption": done[0]["stats"].get("encryption"),
        "sampling.period": period, "sampling.window": window, "sampling.warming": warming,
        "parallel.parts": k, "parallel.part_warmup": pw,
        "parallel.part_ipc": [d["stats"]["ipc"] for d in done],
        "parallel.part_ci95_ipc": [d["stats"].get("ci95.ipc", 0.0) for d in done],
        "parallel.wall_seconds": wall,
        "parallel.part_seconds": [d["wall_seconds"] for d in done],
    })
    if whole is not None and not whole["error"]:
        r = float(whole["stats"]["ipc"])
        stats["parallel.reference_ipc"] = r
        stats["parallel.reference_ci95_ipc"] = whole["stats"].get("ci95.ipc", 0.0)
        stats["parallel.reference_seconds"] = whole["wall_seconds"]
        stats["parallel.warmup_error"] = (stats["ipc"] - r) / r if r else 0.0
    return {"stats": stats, "parts": done, "reference": whole, "error": whole["error"] if whole is not None and whole["error"] else None}


def run_checkpointed(
    workload: Optional[str] = None,
    *,
    trace: Optional[str] = None,
    integrity: Optional[str] = None,
    encryption: Optional[str] = None,
    preset: str = "suh2003",
    sets: Sequence[str] = (),
    instructions: int,
    warmup: int = 0,
    seed: int = 1,
    sample: str = "",
    warm: int = 100_000,
    prewarm: Optional[int] = None,
    store: Optional[str] = None,
    k: int = 1,
    scheduler: Optional[str] = None,
    workers: Optional[int] = None,
    reference: bool = False,
    progress: bool = False,
    threads: Optional[int] = None,
) -> dict[str, Any]:
    """A sampled run from per-window checkpoints (docs/sampling.md): the checkpoints of the
    plan's windows are made in one pass over the input (or found in the results ``store``,
    keyed like its points), then the windows run each on a machine of its own, warmed from
    cold over their B = ``warm`` instructions after a prewarm of ``prewarm`` lines the L2 saw
    last (and the last branches). ``k`` > 1 (or a ``scheduler``) runs them as ``k`` Dask tasks of consecutive windows,
    combined as strata (``combine``); one group combines every rate with its interval. One
    group runs its windows on ``threads`` threads of this process (default: every core;
    each of ``k`` > 1 Dask tasks, one unless given): the statistics are the same whatever
    their number.
    ``reference`` also runs the same plan with full functional warming (``--sample``) and
    reports ``checkpointed.reference_ipc`` and ``checkpointed.warmup_error``, the bounded
    warming's error. Returns ``{"stats", "parts", "reference", "error", "checkpoints"}``."""
    import time

    from . import provenance, results
    from .sweep import dask_client, local_cores

    if threads is not None and threads < 1:
        raise _core.ConfigError(f"--threads: {threads} (at least 1)")
    period, window, warming = _core.sample_plan(sample, instructions)
    plan = f"{period}:{window}:{warming}"
    identity = provenance.workload_identity(workload, trace=trace, seed=seed)
    pw = _core.DEFAULT_PREWARM if prewarm is None else prewarm
    made = checkpoints.make_windows(store or results.default_path(), identity, plan, instructions, warmup, warm, pw, seed, workload, trace, progress)
    files, warms = list(made["files"]), [int(x) for x in made["prewarm"]]
    if k < 1 or k > len(files):
        raise _core.ConfigError(f"--parallel: {k} groups of {len(files)} windows (at least one window each)")
    base = dict(workload=workload, trace=trace, integrity=integrity, encryption=encryption, preset=preset, sets=list(sets), seed=seed,
                sample=plan, instructions=instructions, warmup=warmup)
    name = identity["name"]
    bounds = [len(files) * j // k for j in range(k + 1)]
    groups = [(files[bounds[j]:bounds[j + 1]], warms[bounds[j]:bounds[j + 1]]) for j in range(k)]
    t = time.perf_counter()
    whole: Optional[dict[str, Any]] = None
    if k == 1 and scheduler is None:
        done = [checkpoints.run_windows_task(base, files, warms, warm, name, threads or local_cores())]
        wall = time.perf_counter() - t
        if reference:
            from .sweep import simulate

            whole = simulate(base)
    else:
        from .sweep import simulate

        with dask_client(scheduler, workers) as client:
            futures = [client.submit(checkpoints.run_windows_task, base, f, w, warm, name, threads or 1, key=f"secmem-windows-{j}-{time.time_ns()}", pure=False) for j, (f, w) in enumerate(groups)]
            ref = client.submit(simulate, base, key=f"secmem-sampled-{time.time_ns()}", pure=False) if reference else None
            done = [f.result() for f in futures]
            wall = time.perf_counter() - t
            whole = ref.result() if ref is not None else None
    errors = [f"windows {bounds[j] + 1}-{bounds[j + 1]}: {d['error']}" for j, d in enumerate(done) if d["error"]]
    info = {key: made[key] for key in ("image_bytes", "read", "seconds", "reused")}
    if errors:
        return {"stats": {}, "parts": done, "reference": whole, "error": "; ".join(errors), "checkpoints": info}
    stats = dict(done[0]["stats"]) if k == 1 else combine([d["stats"] for d in done])
    checkpoints.annotate(stats, done, (period, window, warming), warm, pw, made, wall)
    if whole is not None and not whole["error"]:
        r = float(whole["stats"]["ipc"])
        stats["checkpointed.reference_ipc"] = r
        stats["checkpointed.reference_ci95_ipc"] = whole["stats"].get("ci95.ipc", 0.0)
        stats["checkpointed.reference_seconds"] = whole["wall_seconds"]
        stats["checkpointed.warmup_error"] = (stats["ipc"] - r) / r if r else 0.0
    return {"stats": stats, "parts": done, "reference": whole, "error": whole["error"] if whole is not None and whole["error"] else None, "checkpoints": info}

"""Checkpoints of a window (issue 35): what a run that fast-forwards (``skip``) reads, saved
once and read back by every scheme and parameter point of a sweep over that window.

A run with ``skip = N`` reads the memory image the first N instructions built (external
records of its final contents, ``secmem_trace::Skip``), the records ``Consistent`` supplies
for memory the trace never showed, then the window's instructions. A checkpoint is those
records written to a native trace (``_core.export`` of the same input with the same skip):
a run of the checkpoint file with no skip reads the same records, so every statistic of
the simulated machine is the same, and the fast-forward — decoding or generating N
instructions — is paid once per window instead of once per point. The engine state at the
window (warmed caches, trees) is not saved: each point warms its own, as a skipping run
does.

Checkpoints live in the results store (``<store>/checkpoints/<key>.smt``), keyed like its
points by the input's identity, the skip, the seed and the engine's build identity
(``results.build_identity``): a rebuilt engine makes its own. A checkpoint holds at least
the instructions its points read; a longer one serves shorter points."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Optional

from . import _core, results

DIRECTORY = "checkpoints"


def key(identity: dict[str, Any], skip: int, seed: int) -> str:
    """The key of the window after ``skip`` instructions of the input ``identity``
    (``provenance.workload_identity``) generated with ``seed``, for this engine build."""
    doc = {
        "workload_digest": identity["digest"],
        "workload_kind": identity["kind"],
        "workload": identity["name"],
        "skip": skip,
        "seed": seed,
        "build_id": results.build_identity(),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def path(store: "os.PathLike[str] | str", k: str) -> Path:
    return Path(store) / DIRECTORY / f"{k}.smt"


def usable(identity: dict[str, Any], skip: int, instructions: Optional[int]) -> bool:
    """Whether a point can run from a checkpoint: a fast-forward of a built-in workload or a
    trace file (live programs skip in the tracer) over a known number of instructions."""
    return skip > 0 and identity["kind"] in ("builtin", "trace") and identity["digest"] is not None and instructions is not None


def instructions_held(p: Path) -> int:
    """Instructions a checkpoint file holds (its name's side file, written after it)."""
    try:
        return int(json.loads(p.with_suffix(".json").read_text())["instructions"])
    except (OSError, ValueError, KeyError, TypeError):
        return -1


def make(p: Path, records: int, workload: Optional[str], trace: Optional[str], skip: int, seed: int) -> str:
    """Write the checkpoint ``p`` holding ``records`` instructions after ``skip`` of the
    input (unless one holding at least as many is there); returns its path. A side file
    ``<key>.json`` says what it holds; it is written last, so a checkpoint whose writing was
    cut short is never used (the trace itself is renamed into place only when complete)."""
    if instructions_held(p) >= records and p.exists():
        return str(p)
    from ._files import write_file

    p.parent.mkdir(parents=True, exist_ok=True)
    done = _core.export(str(p), "native", records, workload, trace, None, skip, seed=seed)
    # A trace that ends inside the window holds fewer: it serves every point all the same
    # (each reads to the same end), so it counts as holding what was asked.
    held = records if int(done["instructions"]) < records else int(done["instructions"])
    write_file(str(p.with_suffix(".json")), json.dumps({"instructions": held, "skip": skip, "written": int(done["instructions"])}) + "\n", "checkpoint")
    return str(p)


# --- Per-window checkpoints of a sampled run (``secmem run --sample --checkpointed B``) ---
#
# One pass over the input writes each window of the plan as a trace of its own
# (``_core.checkpoint_windows``, crates/trace/src/checkpoint.rs): the memory image the
# window's records touch, the prewarm (the last branches and the lines the caches held before
# it, replayed), then its
# B + D + W instructions. They live in ``<store>/checkpoints/<key>/`` with a ``manifest.json``
# written last (a pass cut short is never used), keyed by the input's identity, the plan,
# the warm-up, B, the prewarm, the seed and the engine's build identity: every scheme and
# parameter point over the same input and plan reads the same files.


def windows_key(identity: dict[str, Any], plan: str, instructions: int, warmup: int, warm: int, prewarm: int, seed: int) -> str:
    """The key of the checkpoints of the sampled run ``plan`` (resolved ``U:W:D``) measuring
    ``instructions`` after ``warmup`` of the input ``identity``, with B = ``warm``."""
    doc = {
        "workload_digest": identity["digest"],
        "workload_kind": identity["kind"],
        "workload": identity["name"],
        "plan": plan,
        "instructions": instructions,
        "warmup": warmup,
        "warm": warm,
        "prewarm": prewarm,
        "seed": seed,
        "build_id": results.build_identity(),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def make_windows(
    store: "os.PathLike[str] | str",
    identity: dict[str, Any],
    plan: str,
    instructions: int,
    warmup: int,
    warm: int,
    prewarm: int,
    seed: int,
    workload: Optional[str],
    trace: Optional[str],
    progress: bool = False,
) -> dict[str, Any]:
    """The checkpoints of every window (made now unless the store holds them): the manifest
    ``{"files", "instructions", "prewarm", "image_bytes", "read", "seconds", "reused"}``."""
    from ._files import write_file

    if identity["kind"] not in ("builtin", "trace") or identity["digest"] is None:
        raise _core.ConfigError("--checkpointed: checkpoints are cut from a built-in workload or a trace file")
    d = Path(store) / DIRECTORY / windows_key(identity, plan, instructions, warmup, warm, prewarm, seed)
    manifest = d / "manifest.json"
    try:
        done: dict[str, Any] = json.loads(manifest.read_text())
        if all(Path(f).exists() for f in done["files"]):
            return dict(done, reused=True)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    made = _core.checkpoint_windows(str(d), plan, instructions, warmup, warm, workload, trace, seed=seed, prewarm=prewarm, progress=progress)
    write_file(str(manifest), json.dumps(made) + "\n", "checkpoint manifest")
    return dict(made, reused=False)


def run_windows_task(kwargs: dict[str, Any], files: list[str], prewarm: list[int], warm: int, name: str,
                     threads: int = 1) -> dict[str, Any]:
    """Run a group of windows from their checkpoints (in this process or on a Dask worker),
    on up to ``threads`` threads (the same statistics whatever their number): statistics and
    error, never an exception."""
    import platform
    import time

    t = time.perf_counter()
    try:
        spec = _core.RunSpec(**{key: kwargs[key] for key in ("preset", "integrity", "encryption", "sets", "instructions", "warmup", "seed", "sample")})
        r = _core.run_checkpointed(spec, files, prewarm, warm, name, threads)
        stats, error = r.stats, r.error
    except Exception as e:  # recorded with the group; the others go on
        stats, error = {}, f"{type(e).__name__}: {e}"
    return {"stats": stats, "error": error, "host": platform.node(), "wall_seconds": time.perf_counter() - t, "threads": threads}


def annotate(stats: dict[str, Any], done: list[dict[str, Any]], plan: tuple[int, int, int], warm: int, prewarm: int,
             made: dict[str, Any], wall: float) -> None:
    """Add to the windows' combined ``stats`` what the run was: the plan, B, the prewarm,
    the groups ``done`` and the pass ``made`` (``make_windows``'s manifest)."""
    period, window, warming = plan
    stats.update({
        "integrity": done[0]["stats"].get("integrity"),
        "encryption": done[0]["stats"].get("encryption"),
        "sampling.period": period, "sampling.window": window, "sampling.warming": warming,
        "sampling.checkpointed": warm, "checkpointed.prewarm_lines": prewarm,
        "checkpointed.groups": len(done),
        "checkpointed.threads": int(done[0].get("threads", 1)),
        "checkpointed.pass_seconds": float(made["seconds"]),
        "checkpointed.reused": bool(made["reused"]),
        "checkpointed.image_bytes": int(made["image_bytes"]),
        "checkpointed.wall_seconds": wall,
        "checkpointed.group_seconds": [d["wall_seconds"] for d in done],
    })


# A sweep's checkpointed points (``checkpointed`` axis): the pass is a task of its own, made
# once per windows key, and each point a task that reads its windows as one group.


def make_windows_task(store: str, identity: dict[str, Any], plan: str, instructions: int, warmup: int, warm: int,
                      prewarm: int, seed: int, workload: Optional[str], trace: Optional[str]) -> Optional[str]:
    """Make (or find) the windows' checkpoints in ``store`` (on a Dask worker): None, or
    the error that every point over them then reports without trying again."""
    try:
        make_windows(store, identity, plan, instructions, warmup, warm, prewarm, seed, workload, trace)
        return None
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def run_point(kwargs: dict[str, Any], identity: dict[str, Any], store: Optional[str], warm: int, prewarm: int,
              pass_error: Optional[str] = None) -> dict[str, Any]:
    """One checkpointed sampled point of a sweep (on a Dask worker): its windows' checkpoints
    from ``store`` (made now if it lacks them; None: a directory of the task's own, removed
    after), run as one group. Statistics and error, never an exception. ``pass_error``: the
    shared pass failed; the point reports that."""
    import contextlib
    import platform
    import tempfile
    import time

    t = time.perf_counter()
    if pass_error is not None:
        return {"stats": {}, "error": pass_error, "host": platform.node(), "wall_seconds": 0.0}
    try:
        period, window, warming = _core.sample_plan(kwargs["sample"], kwargs["instructions"])
        plan = f"{period}:{window}:{warming}"
        run = dict(kwargs, sample=plan)
        with tempfile.TemporaryDirectory(prefix="secmem-windows-") if store is None else contextlib.nullcontext(store) as where:
            made = make_windows(where, identity, plan, kwargs["instructions"], kwargs["warmup"], warm, prewarm, kwargs["seed"],
                                kwargs["workload"], kwargs["trace"])
            files, warms = list(made["files"]), [int(x) for x in made["prewarm"]]
            done = [run_windows_task(run, files, warms, warm, identity["name"])]
        stats = dict(done[0]["stats"])
        if done[0]["error"] is None:
            annotate(stats, done, (period, window, warming), warm, prewarm, made, done[0]["wall_seconds"])
        error = done[0]["error"]
    except Exception as e:  # recorded with the point; the sweep goes on
        stats, error = {}, f"{type(e).__name__}: {e}"
    return {"stats": stats, "error": error, "host": platform.node(), "wall_seconds": time.perf_counter() - t}


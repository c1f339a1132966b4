"""Sweeps: a grid of simulations run in parallel on Dask, every point kept in a results store.

A grid has axes — ``workload``, ``trace``, ``scheme`` (``INTEGRITY+ENCRYPTION``),
``integrity``, ``encryption``, ``preset``, ``seed``, ``instructions``, ``warmup``, ``skip``
and any machine parameter (``l2.size``, ``hash.latency``, …, see ``secmem presets``) — and
every combination of their values is one point. Points already in the store (same resolved
configuration, workload content, seed, instruction counts and secmem version) are read back
instead of simulated, so re-running a sweep, or running it again after it was killed,
computes only what is missing.

Points run on a Dask cluster: by default a local one with one single-threaded worker process
per core (``workers``), an existing cluster at ``scheduler`` (``tcp://host:8786``), or jobs
of a batch system (``cluster="slurm"``, pbs, sge: dask-jobqueue, docs/sweeps.md). Each point is written to the store as soon as
it finishes. A point that fails (a bad parameter value, an integrity failure, a trace that
ends early, a worker that died) is stored with its error; the others go on.

    >>> import secmem
    >>> df = secmem.sweep({"workload": ["stream", "chase"], "scheme": ["none+none", "chash+none"],
    ...                    "l2.size": ["256KiB", "1MiB"]}, instructions="1M", warmup="250k")
    >>> df[["workload", "scheme", "config.l2.size", "ipc"]]
"""

from __future__ import annotations

import difflib
import itertools
import json
import logging
import os
import platform
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Optional, Sequence, Union

from . import _core, checkpoints, provenance
from ._args import count as _count
from ._args import scheme_pair
from .api import DEFAULT_PRESET, DEFAULT_WARMUP
from ._signals import deferred, sigterm_as_interrupt
from .progress import LINE_INTERVAL, Progress, duration
from .results import Store, StoreError, open_store, point_key

if TYPE_CHECKING:
    import pandas as pd

# Axes that are not machine parameters.
INPUT_AXES = ("workload", "trace")
RUN_AXES = ("scheme", "integrity", "encryption", "preset", "seed", "instructions", "warmup", "skip", "sample", "interval", "checkpointed", "prewarm")
AXES = INPUT_AXES + RUN_AXES
_COUNTS = ("instructions", "warmup", "skip", "interval", "checkpointed", "prewarm")
_NOT_PARAMS = ("description", "inherit")


@dataclass(frozen=True)
class Point:
    """One simulation of a sweep."""

    workload: Optional[str] = None
    trace: Optional[str] = None
    integrity: Optional[str] = None
    encryption: Optional[str] = None
    preset: str = DEFAULT_PRESET
    sets: tuple[tuple[str, str], ...] = ()  # ((key, value), …) in axis order
    # None: as `secmem run` would (a trace file to its end after at most a tenth of it as
    # warm-up; anything else 10M after 1M: api._fit_counts); `plan` resolves them for the key.
    instructions: Optional[int] = None
    warmup: Optional[int] = None
    skip: int = 0
    seed: int = 1
    sample: Optional[str] = None  # a sampled run's plan ("" for the defaults, "U:W:D"); None: in full
    interval: int = 0  # statistics of every this many instructions (`interval.*`); 0: none
    # a sampled point's windows run from checkpoints made once per input and plan (B: each
    # window's warming; docs/sampling.md), with this many prewarm lines (None: the default)
    checkpointed: Optional[int] = None
    prewarm: Optional[int] = None

    @property
    def input(self) -> str:
        return self.trace if self.trace is not None else (self.workload or "mix")

    def label(self) -> str:
        scheme = f"{self.integrity or 'preset'}+{self.encryption or 'preset'}" if self.integrity or self.encryption else ""
        sets = " ".join(f"{k}={v}" for k, v in self.sets)
        cp = f"checkpointed {self.checkpointed}" if self.checkpointed is not None else ""
        return " ".join(x for x in (os.path.basename(self.input), scheme, self.preset if self.preset != DEFAULT_PRESET else "", sets, cp) if x)

    def run_kwargs(self) -> dict[str, Any]:
        return dict(
            workload=self.workload,
            trace=self.trace,
            integrity=self.integrity,
            encryption=self.encryption,
            preset=self.preset,
            sets=[f"{k}={v}" for k, v in self.sets],
            instructions=self.instructions,
            warmup=self.warmup,
            skip=self.skip,
            seed=self.seed,
            sample=self.sample,
            interval=self.interval or None,
        )


@dataclass(frozen=True)
class Planned:
    """A point with what the store needs: its resolved configuration, workload identity,
    instruction counts (as the run will fit them) and key."""

    point: Point
    config: dict[str, str]
    identity: dict[str, Any]
    key: str
    instructions: int = 0
    warmup: int = 0
    prewarm: int = 0  # a checkpointed point's prewarm lines, resolved


@dataclass
class Summary:
    points: int = 0
    stored: int = 0  # found in the store
    computed: int = 0
    failed: int = 0
    wall_seconds: float = 0.0
    workers: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)


# ---------------------------------------------------------------------------------------
# The grid


def _split(v: object) -> list[object]:
    if isinstance(v, (list, tuple)):
        return list(v)
    return [v]


def parameter_names(preset: str = DEFAULT_PRESET) -> list[str]:
    return [k for k, _ in _core.params(preset) if k not in _NOT_PARAMS]


def _check_axis(key: str, known: Sequence[str]) -> None:
    if key in AXES or key in known:
        return
    near = difflib.get_close_matches(key, list(AXES) + list(known), n=1)
    hint = f" (did you mean '{near[0]}'?)" if near else ""
    raise _core.ConfigError(
        f"sweep axis '{key}': not a parameter (see `secmem presets`) nor one of {', '.join(AXES)}{hint}"
    )


def grid(axes: Optional[Mapping[str, object]] = None, **fixed: Any) -> list[Point]:
    """Every point of a grid: ``axes`` maps an axis name to its values (a scalar is a fixed
    value); ``fixed`` gives single values (``instructions``, ``warmup``, ``preset``, …) and
    ``params``/``sets`` fixed machine parameters. Points come in axis order, the last axis
    varying fastest. Unknown axis names raise ``ConfigError`` naming them."""
    axis_map = _mapping(axes, "axes")
    merged: dict[str, list[object]] = {}
    params = dict(_mapping(fixed.pop("params", None), "params"))
    for s in fixed.pop("sets", None) or ():
        key, _, text = str(s).partition("=")
        params[key.strip()] = text.strip()
    for k, fixed_value in fixed.items():
        if fixed_value is not None:
            merged[k] = [fixed_value]
    for k, param in params.items():
        merged[k] = [param]
    for k, values in axis_map.items():
        merged[k] = _split(values)
    presets = [str(p) for p in merged.get("preset", [DEFAULT_PRESET])]
    known = parameter_names(presets[0])
    for k, vals in merged.items():
        _check_axis(k, known)
        if not vals:
            raise _core.ConfigError(f"sweep axis '{k}' has no values")
    # workloads and traces are one input axis
    inputs: list[tuple[str, Optional[str]]] = [("workload", str(w)) for w in merged.pop("workload", [])]
    inputs += [("trace", str(t)) for t in merged.pop("trace", [])]
    if not inputs:
        inputs = [("workload", None)]
    names = list(merged)
    points: list[Point] = []
    for inp in inputs:
        for combo in itertools.product(*(merged[n] for n in names)):
            kw: dict[str, Any] = {inp[0]: inp[1]}
            sets: list[tuple[str, str]] = []
            for n, v in zip(names, combo):
                if n == "scheme":
                    # the names are the registry's to judge, when the point is planned
                    kw["integrity"], kw["encryption"] = scheme_pair(v, "sweep axis 'scheme'")
                elif n in _COUNTS:
                    kw[n] = _count(v, f"--{n}")
                elif n == "seed":
                    kw[n] = int(v) if isinstance(v, (int, float)) else int(str(v))
                elif n == "sample":
                    kw[n] = _sample(v)
                elif n in RUN_AXES:
                    kw[n] = str(v)
                else:
                    sets.append((n, str(v).lower() if isinstance(v, bool) else str(v)))
            points.append(Point(sets=tuple(sets), **kw))
    return points


def _mapping(v: object, what: str) -> Mapping[str, object]:
    """``axes`` or ``params``: None or a mapping (a TypeError naming it, not an AttributeError)."""
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise TypeError(f"{what} must be a mapping of name to values (or a sweep file's path), not {type(v).__name__}")
    return v


def _sample(v: object) -> Optional[str]:
    """A ``sample`` axis value: true/"default" for the default plan, false/"off" for a full
    run, else a "U:W:D" plan (checked when the point runs)."""
    text = str(v).strip().lower()
    if v is True or text in ("true", "default", "on"):
        return ""
    if v is False or text in ("false", "off", "none"):
        return None
    return str(v).strip()


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in table.items():
        if isinstance(v, Mapping):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def load_grid_file(path: str) -> dict[str, Any]:
    """A sweep file (TOML): every key is an axis or a fixed value; lists are axes, scalars
    fixed; tables nest parameter names as in preset files (``[l2] size = [...]``)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as e:
        raise OSError(f"{path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise _core.ConfigError(f"{path}: not valid TOML ({e})") from None
    return _flatten(doc)


# ---------------------------------------------------------------------------------------
# Planning: configuration, workload identity, key


def plan(points: Iterable[Point]) -> list[Planned]:
    """Resolve each point's configuration and workload identity and compute its key.
    A bad preset, scheme or parameter name raises ``ConfigError`` naming the point."""
    out = []
    idents: dict[tuple[Optional[str], Optional[str], Optional[int]], dict[str, Any]] = {}
    configs: dict[tuple[str, Optional[str], Optional[str], tuple[tuple[str, str], ...]], dict[str, str]] = {}
    fits: dict[tuple[Optional[str], Optional[str], int, Optional[int], Optional[int]], tuple[int, int]] = {}
    for p in points:
        ck = (p.preset, p.integrity, p.encryption, p.sets)
        if ck not in configs:
            try:
                configs[ck] = dict(_core.params(p.preset, p.integrity, p.encryption, [f"{k}={v}" for k, v in p.sets]))
            except _core.ConfigError as e:
                raise _core.ConfigError(f"{p.label()}: {e}") from None
        ik = (p.workload, p.trace, p.seed if p.trace is None else None)
        if ik not in idents:
            idents[ik] = provenance.workload_identity(workload=p.workload, trace=p.trace, seed=p.seed)
        cfg, ident = configs[ck], idents[ik]
        fk = (p.workload, p.trace, p.skip, p.instructions, p.warmup)
        if fk not in fits:
            fits[fk] = _fit(p)
        n, warm = fits[fk]
        pw = _checkpointed(p, ident, n)
        key = point_key(cfg, ident, p.seed, n, warm, p.skip, p.sample, interval=p.interval,
                        checkpointed=None if p.checkpointed is None else (p.checkpointed, pw))
        out.append(Planned(p, cfg, ident, key, n, warm, pw))
    return out


def _checkpointed(p: Point, ident: dict[str, Any], n: int) -> int:
    """A checkpointed point's prewarm lines (0 for any other point); what cannot be cut into
    checkpointed windows raises ``ConfigError`` naming the point, as ``secmem run`` refuses it."""
    if p.checkpointed is None:
        if p.prewarm is not None:
            raise _core.ConfigError(f"{p.label()}: prewarm goes with checkpointed")
        return 0
    why = ("checkpointed runs a sampled run's windows: give sample too" if p.sample is None else
           "checkpointed windows are cut from the input's start (no skip)" if p.skip else
           "checkpointed windows are cut from a built-in workload or a trace file" if ident["kind"] not in ("builtin", "trace") or ident["digest"] is None else
           "checkpointed windows are cut from a count of instructions: give instructions" if n >= 2**63 else
           "checkpointed windows run on one core" if int(dict(p.sets).get("cores", "1")) != 1 or "," in (p.workload or "") else None)
    if why:
        raise _core.ConfigError(f"{p.label()}: {why}")
    try:
        period, window, warming = _core.sample_plan(p.sample or "", n)
    except _core.ConfigError as e:
        raise _core.ConfigError(f"{p.label()}: {e}") from None
    if p.checkpointed > period - window - warming:
        raise _core.ConfigError(f"{p.label()}: checkpointed: B = {p.checkpointed} is more than U - W - D = {period - window - warming} "
                                "(the windows' checkpoints would overlap)")
    return int(_core.DEFAULT_PREWARM if p.prewarm is None else p.prewarm)


def _fit(p: Point) -> tuple[int, int]:
    """The counts ``secmem run`` would take for ``p`` (the one rule: api._fit_counts)."""
    from . import api

    inp = api._Input(p.workload, p.trace, None, None, None, None, clear_env=False)
    try:
        fit = api._fit_counts(inp, None, p.skip, p.instructions, p.warmup)
    except (_core.TraceError, OSError, ValueError) as e:
        raise _core.ConfigError(f"{p.label()}: {e}") from None
    return fit.instructions, fit.warmup


# ---------------------------------------------------------------------------------------
# Running


def simulate(kwargs: dict[str, Any], checkpoint: Optional[str] = None) -> dict[str, Any]:
    """Run one point (on a Dask worker): its statistics and error, never an exception.
    ``checkpoint``: the point's window saved (``checkpoints``), read instead of fast-forwarding."""
    from . import api

    # A sweep gives every core a simulation: a native trace is read on the simulating thread,
    # where a thread of its own would only compete for a core (docs/speed.md, sixth pass).
    was = _core.trace_reading()
    _core.set_trace_reading("inline")
    t = time.perf_counter()
    try:
        r = api.run(**(kwargs if checkpoint is None else dict(kwargs, workload=None, trace=checkpoint, skip=0)))
        if checkpoint is not None and r.error is not None:
            # Run again as asked, so that the error reads as it does for the point alone
            # (the statistics are the same; the message names the fast-forward).
            r = api.run(**kwargs)
        stats, error = r.stats, r.error
    except Exception as e:  # recorded with the point; the sweep goes on
        stats, error = {}, f"{type(e).__name__}: {e}"
    finally:
        _core.set_trace_reading(was)
    return {"stats": stats, "error": error, "host": platform.node(), "wall_seconds": time.perf_counter() - t}


def simulate_checkpointed(kwargs: dict[str, Any], identity: dict[str, Any], store: Optional[str], warm: int, prewarm: int,
                          pass_error: Optional[str] = None) -> dict[str, Any]:
    """Run one checkpointed point (on a Dask worker) with what ``checkpoints.run_point`` needs
    of its ``Point.run_kwargs``: the counts as planned."""
    keep = ("workload", "trace", "integrity", "encryption", "preset", "sets", "instructions", "warmup", "seed", "sample")
    return checkpoints.run_point({k: kwargs[k] for k in keep}, identity, store, warm, prewarm, pass_error)


def make_checkpoint(path: str, records: int, workload: Optional[str], trace: Optional[str], skip: int, seed: int) -> Optional[str]:
    """Save a window for the points over it (on a Dask worker); None if it cannot be made:
    its points then fast-forward themselves and report what is wrong."""
    try:
        return checkpoints.make(Path(path), records, workload, trace, skip, seed)
    except Exception:
        return None


def _windows(todo: Sequence[Planned], store: Store) -> dict[str, tuple[str, int, Point]]:
    """The checkpoints ``todo`` can share: key -> (path, instructions to hold, a point). A
    warm-up left to the run is counted at its default, the longest it can be (a checkpoint
    holding more serves a shorter window)."""
    out: dict[str, tuple[str, int, Point]] = {}
    for pl in todo:
        p = pl.point
        if checkpoints.usable(pl.identity, p.skip, p.instructions):
            k = checkpoints.key(pl.identity, p.skip, p.seed)
            held = out[k][1] if k in out else 0
            out[k] = (os.path.abspath(checkpoints.path(store.path, k)), max(held, (DEFAULT_WARMUP if p.warmup is None else p.warmup) + (p.instructions or 0)), p)
    return out


def _plan_text(pl: Planned) -> str:
    """A sampled point's plan resolved ("U:W:D"), as its windows' key takes it."""
    return ":".join(str(x) for x in _core.sample_plan(pl.point.sample or "", pl.instructions))


def _windows_key(pl: Planned) -> str:
    p = pl.point
    return checkpoints.windows_key(pl.identity, _plan_text(pl), pl.instructions, pl.warmup, p.checkpointed or 0, pl.prewarm, p.seed)


def row(pl: Planned, result: dict[str, Any], command: Optional[str] = None) -> dict[str, Any]:
    """The store row of a finished point."""
    p, cfg = pl.point, pl.config
    r = dict(result.get("stats") or {})
    prov = provenance.block(wall_seconds=result.get("wall_seconds"))
    prov["host"] = result.get("host") or prov["host"]
    if command is not None:
        prov["command"] = command
    r.update(prov)
    r.update({"config." + k: v for k, v in cfg.items()})
    r.update(
        {
            "key": pl.key,
            "status": "failed" if result.get("error") else "ok",
            "error": result.get("error"),
            "workload": pl.identity["name"],
            "workload_kind": pl.identity["kind"],
            "workload_digest": pl.identity["digest"],
            "preset": p.preset,
            "integrity": cfg.get("integrity"),
            "encryption": cfg.get("encryption"),
            "scheme": f"{cfg.get('integrity')}+{cfg.get('encryption')}",
            "seed": p.seed,
            # None: to the input's end (a trace too long to count first; its key says so)
            "requested_instructions": pl.instructions if pl.instructions < 2**63 else None,
            "warmup": pl.warmup,
            "skip": p.skip,
            "sample": p.sample,
            "interval": p.interval or None,
            "checkpointed": p.checkpointed,
            "prewarm": pl.prewarm if p.checkpointed is not None else None,
            "sets": json.dumps(dict(p.sets), sort_keys=True),
            "config_digest": provenance.json_digest(cfg),
        }
    )
    return r


def _versions_match(client: Any) -> None:
    """Every worker runs this engine build: its points are stored under this build's keys."""
    mine = f"{_core.__version__} (build {_core.build_id})"

    def theirs() -> str:
        # Imports the package on the worker: that is what is checked. Only its core is named,
        # so sweep (which the package imports) does not import the package back.
        from secmem import _core

        return f"{_core.__version__} (build {getattr(_core, 'build_id', 'unknown')})"

    try:
        got = client.run(theirs)
    except Exception as e:
        raise RuntimeError(f"the Dask workers cannot import secmem ({type(e).__name__}: {e})") from None
    bad = {w: v for w, v in got.items() if v != mine}
    if bad:
        w, v = next(iter(bad.items()))
        raise RuntimeError(f"Dask worker {w} runs secmem {v}, this is secmem {mine}: install the same build on every worker")


def _reachable(address: str, seconds: float = 5.0) -> None:
    """A TCP scheduler's port answers, or OSError at once: Dask's own connect retries a
    refused or unroutable address for its whole timeout (30 s) before saying so."""
    import socket
    from urllib.parse import urlsplit

    if "://" in address and not address.startswith(("tcp://", "tls://")):
        return  # another transport (inproc, ucx): Dask's connect judges it
    u = urlsplit(address if "://" in address else "tcp://" + address)
    try:
        host, port = u.hostname, u.port
    except ValueError as e:
        raise OSError(f"bad address ({e})") from None
    if not host or not port:
        raise OSError("expected tcp://HOST:PORT")
    with socket.create_connection((host, port), timeout=seconds):
        pass


# `--cluster NAME`: dask-jobqueue's cluster class for each batch system.
JOBQUEUE = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "sge": "SGECluster", "lsf": "LSFCluster", "htcondor": "HTCondorCluster"}


@contextmanager
def _jobqueue_client(kind: str, workers: Optional[int]) -> Iterator[Any]:
    """A client of a new dask-jobqueue cluster of ``kind`` (``JOBQUEUE``), configured as
    dask-jobqueue configures itself (``jobqueue.<kind>`` in ~/.config/dask/jobqueue.yaml or
    DASK_JOBQUEUE__* variables: queue, cores, memory, walltime, …), asked for ``workers``
    worker processes (default 1); its jobs are cancelled when the sweep ends."""
    from dask.distributed import Client

    if kind not in JOBQUEUE:
        raise _core.ConfigError(f"--cluster {kind}: expected one of {', '.join(JOBQUEUE)}")
    try:
        import dask_jobqueue
    except ImportError as e:
        raise RuntimeError(f"--cluster needs dask-jobqueue ({e}): pip install dask-jobqueue") from None
    try:
        cluster = getattr(dask_jobqueue, JOBQUEUE[kind])()
    except ValueError as e:  # a setting jobqueue.yaml must give (cores, memory) is missing
        raise _core.ConfigError(
            f"--cluster {kind}: {str(e).splitlines()[0]} (set it under jobqueue: {kind}: in ~/.config/dask/jobqueue.yaml; see docs/sweeps.md)"
        ) from None
    try:
        cluster.scale(n=workers or 1)
        client = Client(cluster)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


def local_cores() -> int:
    """This machine's cores: a local cluster's workers, an in-process run's threads."""
    return os.cpu_count() or 1


@contextmanager
def dask_client(scheduler: Optional[str] = None, workers: Optional[int] = None, cluster: Optional[str] = None) -> Iterator[Any]:
    """A Dask client: on the cluster at ``scheduler``; on a batch system's cluster started by
    dask-jobqueue (``cluster``: slurm, pbs, sge, …, ``workers`` processes as jobs); or on a
    new local cluster of ``workers`` single-threaded processes (default: every core)."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as e:  # pragma: no cover
        raise RuntimeError(f"sweeps need dask[distributed] ({e}): pip install 'dask[distributed]'") from None
    if workers is not None and workers < 1:
        raise _core.ConfigError(f"--workers: {workers} (at least one)")
    if scheduler and cluster:
        raise _core.ConfigError("give --scheduler or --cluster, not both")
    if scheduler and workers is not None:
        raise _core.ConfigError("--workers counts the processes of a local cluster or of --cluster's jobs: an existing --scheduler has its own")
    if cluster:
        with _jobqueue_client(cluster, workers) as jq:
            yield jq
        return
    if scheduler:
        try:
            _reachable(scheduler)
            client = Client(scheduler, timeout="30s")
        except (OSError, TimeoutError) as e:
            raise OSError(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
        try:
            _versions_match(client)
            yield client
        finally:
            client.close()
        return
    n = workers or local_cores()
    local_cluster: Any = None
    local: Any = None
    try:
        # An interrupt while the cluster starts is raised once it can be closed cleanly (cut
        # in half, Dask's exit handler fails on it with a traceback).
        with deferred():
            try:
                local_cluster = LocalCluster(
                    n_workers=n,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    # No dashboard, and the scheduler's HTTP server on a free port: its
                    # default, 8787, warns "Port 8787 is already in use" when another Dask runs.
                    scheduler_kwargs={"dashboard_address": ":0"},
                    memory_limit=0,
                    silence_logs=logging.CRITICAL,
                )
            except RuntimeError as e:
                raise RuntimeError(f"could not start {n} local Dask worker processes ({e}); {_spawn_advice()}") from None
            local = Client(local_cluster)
        yield local
    except BaseException:
        _stop_local_workers()  # Ctrl-C/SIGTERM: their simulations stop now, not when done
        raise
    finally:
        if local is not None:
            local.close()
        if local_cluster is not None:
            local_cluster.close()


def _spawn_advice() -> str:
    """Why local workers most often fail to start, for the script at hand: each worker is a
    new Python process that imports the main script again, from its file."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is not None and (path is None or path == "<stdin>" or not os.path.exists(path)):
        return ("a script read from standard input (python - or a heredoc) cannot start them: each worker imports the "
                "main script again from its file, and this one has none. Save it to a file and run that, or give "
                "scheduler= (an existing Dask cluster)")
    return 'in a script, call secmem.sweep under `if __name__ == "__main__":` (each worker imports the script again)'


def _stop_local_workers() -> None:
    """Send SIGTERM to this process's Dask worker processes (children started by
    multiprocessing's spawn): a simulation running there stops within a moment, keeping what
    it measured, and the cluster then closes quickly."""
    import signal

    me = str(os.getpid())
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                ppid = f.read().rsplit(")", 1)[1].split()[1]
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read()
        except (OSError, IndexError):
            continue
        if ppid == me and b"spawn_main" in cmd:
            try:
                os.kill(int(p), signal.SIGTERM)
            except OSError:
                pass


def _nworkers(client: Any) -> int:
    try:
        return len(client.scheduler_info()["workers"])
    except Exception:
        return 0


def execute(
    planned: Sequence[Planned],
    store: Store,
    scheduler: Optional[str] = None,
    workers: Optional[int] = None,
    progress: bool = False,
    recompute: bool = False,
    what: str = "sweep",
    checkpoint: Optional[bool] = None,
    cluster: Optional[str] = None,
) -> Summary:
    """Simulate every planned point not already in the store (ok), each written to the
    store as it finishes. Failed points are run again. ``checkpoint``: points that skip
    (fast-forward) read their window from a checkpoint in the store, made once per window
    (``secmem.checkpoints``); None: when the cluster is local (a given scheduler's workers
    may not see the store's directory)."""
    t0 = time.monotonic()
    uniq = list({pl.key: pl for pl in planned}.values())
    have = {} if recompute else store.status()
    # In key order, which is a pseudo-random order: long and short points mix, so the ETA
    # (time so far per point finished) is fair from the start.
    todo = sorted((pl for pl in uniq if have.get(pl.key) != "ok"), key=lambda pl: pl.key)
    s = Summary(points=len(uniq), stored=len(uniq) - len(todo))
    if not todo:
        s.wall_seconds = time.monotonic() - t0
        return s
    store._ensure()
    store.clean_temporaries()
    command = provenance.command_line()
    guess = _estimate(store, todo) if progress else None
    # SIGTERM, like Ctrl-C, leaves through the cleanup below: the local cluster's workers end.
    with sigterm_as_interrupt(), dask_client(scheduler, workers, cluster) as client:
        from dask.distributed import as_completed

        s.workers = _nworkers(client)
        if s.workers == 0 and progress:
            # A cluster whose workers have not joined yet (a batch job queued): said, not silent.
            print(f"secmem: waiting for Dask workers to join the scheduler at {scheduler or cluster}; {len(todo)} point{'s' if len(todo) != 1 else ''} queued", file=sys.stderr, flush=True)
        parallel = max(s.workers, 1)
        # The estimate before the work: on a terminal, or in a log when the work is long.
        long = guess is not None and guess[0] / parallel >= LINE_INTERVAL
        if progress and (long or getattr(sys.stderr, "isatty", lambda: False)()):
            on = plural(s.workers, "worker") if s.workers else "the workers as they join"
            print(f"secmem: {what}: {plural(len(todo), 'point')} to simulate on {on}{_estimate_text(guess, len(todo), parallel)}",
                  file=sys.stderr, flush=True)
        with Progress(len(todo), what, enabled=progress, workers=parallel,
                      estimate=guess[0] / parallel if guess and guess[1] == len(todo) else None) as bar:
            futures = {}
            saved: dict[str, Any] = {}
            shared = checkpoint if checkpoint is not None else scheduler is None and cluster is None
            if shared:
                for k, (path, records, p) in _windows(todo, store).items():
                    saved[k] = client.submit(make_checkpoint, path, records, p.workload, p.trace, p.skip, p.seed, key=f"secmem-checkpoint-{k}", pure=False)
            passes: dict[str, Any] = {}
            for pl in todo:
                p = pl.point
                if p.checkpointed is not None:
                    kw = dict(p.run_kwargs(), instructions=pl.instructions, warmup=pl.warmup)
                    # Shared: one pass per windows key, in the store, ahead of every point that
                    # reads it. Otherwise (workers that may not see the store) each point's own.
                    where = os.path.abspath(store.path) if shared else None
                    wk = _windows_key(pl)
                    if where is not None and wk not in passes:
                        passes[wk] = client.submit(checkpoints.make_windows_task, where, pl.identity, _plan_text(pl), pl.instructions, pl.warmup,
                                                   p.checkpointed, pl.prewarm, p.seed, p.workload, p.trace, key=f"secmem-windows-{wk}", pure=False)
                    f = client.submit(simulate_checkpointed, kw, pl.identity, where, p.checkpointed, pl.prewarm, passes.get(wk), key=f"secmem-{pl.key}", pure=False)
                else:
                    ck = saved.get(checkpoints.key(pl.identity, p.skip, p.seed)) if checkpoints.usable(pl.identity, p.skip, p.instructions) else None
                    f = client.submit(simulate, p.run_kwargs(), ck, key=f"secmem-{pl.key}", pure=False)
                futures[f] = pl
                if len(futures) <= max(s.workers, 1):
                    bar.running(pl.point.label())
            started = max(s.workers, 1)
            for f in as_completed(list(futures)):
                pl = futures[f]
                try:
                    result = f.result()
                except Exception as e:  # the worker died (KilledWorker), was cancelled, …
                    result = {"stats": {}, "error": f"{type(e).__name__}: {e}", "wall_seconds": None}
                store.write(row(pl, result, command))
                s.computed += 1
                if result.get("error"):
                    s.failed += 1
                    s.failures.append((pl.point.label(), result["error"]))
                if started < len(todo):
                    bar.running(todo[started].point.label())
                    started += 1
                bar.done(pl.point.label(), result.get("wall_seconds"), "failed: " + result["error"] if result.get("error") else "")
    s.wall_seconds = time.monotonic() - t0
    return s


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'s' if n != 1 else ''}"


def _estimate(store: Store, todo: Sequence[Planned]) -> Optional[tuple[float, int, int]]:
    """The store's guess of the host seconds ``todo`` takes (results.estimate), or None."""
    from .results import estimate

    pts = [(pl.point.preset, f"{pl.config.get('integrity')}+{pl.config.get('encryption')}", pl.instructions + pl.warmup) for pl in todo]
    try:
        got: Optional[tuple[float, int, int]] = estimate(store, pts)
        return got
    except Exception:  # an estimate is a courtesy: a store that cannot give one gives none
        return None


def _estimate_text(guess: Optional[tuple[float, int, int]], n: int, workers: int) -> str:
    """", about 6m (from 1,234 stored timings)" — or what is unknown."""
    if guess is None:
        return " (no estimate: the store has no timings of earlier points)"
    seconds, counted, timings = guess
    some = "" if counted == n else f" for the {counted:,} of known length"
    return f"; about {duration(seconds / workers)}{some} (from {plural(timings, 'stored timing')})"


def frame(planned: Sequence[Planned], store: Store, whole: Optional["pd.DataFrame"] = None) -> "pd.DataFrame":
    """The store's rows of ``planned``, in plan order (one row per point). ``whole``: the
    store's frame already read (callers taking several slices read it once)."""
    import pandas as pd

    keys = [pl.key for pl in planned]
    df = store.frame() if whole is None else whole
    if df.empty:
        return pd.DataFrame({"key": keys})
    df = df.set_index("key", drop=False)
    missing = [k for k in keys if k not in df.index]
    if missing:
        raise StoreError(f"results store {store.path}: {len(missing)} point(s) of the sweep are missing")
    return df.loc[keys].reset_index(drop=True)


def sweep(
    axes: Union[None, Mapping[str, object], str, "os.PathLike[str]"] = None,
    *,
    store: Optional[str] = None,
    scheduler: Optional[str] = None,
    workers: Optional[int] = None,
    cluster: Optional[str] = None,
    progress: bool = False,
    recompute: bool = False,
    checkpoint: Optional[bool] = None,
    **fixed: Any,
) -> "pd.DataFrame":
    """Run a grid (``axes``: a mapping of axis → values, or the path of a TOML sweep file)
    and return a pandas DataFrame with one row per point: its configuration (``config.*``),
    workload identity, provenance and statistics (see :mod:`secmem.results`). Points already
    in ``store`` (default ``$SECMEM_RESULTS`` or ``./secmem-results``) are not run again.
    ``fixed`` gives single values: ``instructions``, ``warmup``, ``skip``, ``seed``, ``sample``, ``checkpointed``, ``prewarm``,
    ``preset``, ``workload``, ``params`` (a dict of parameters), ``interval``. Counts not
    given are what ``secmem.run`` takes: a trace file to its end, anything else 10M after a
    warm-up of 1M. ``cluster`` (``"slurm"``, ``"pbs"``, ``"sge"``): the points run as jobs of
    a batch system, through dask-jobqueue and its own configuration (docs/sweeps.md). ``checkpoint``: points that skip read their window from a checkpoint made once
    (see ``execute``).

    The local cluster's workers are new Python processes that import the calling script: in
    a script, call ``sweep`` under ``if __name__ == "__main__":``."""
    grid_axes = load_grid_file(os.fspath(axes)) if isinstance(axes, (str, os.PathLike)) else axes
    points = grid(grid_axes, **fixed)  # bad axes fail before the store is opened (or created)
    st = open_store(store)
    planned = plan(points)
    summary = execute(planned, st, scheduler=scheduler, workers=workers, progress=progress, recompute=recompute, checkpoint=checkpoint, cluster=cluster)
    df = frame(planned, st)
    df.attrs["summary"] = summary
    return df

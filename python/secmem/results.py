"""The results store: every simulated point of every sweep, with its provenance, as Parquet.

A store is a directory::

    STORE/secmem-store.json          marks the directory as a store (format version)
    STORE/points/KEY.parquet         one finished point (one row), written as it finishes
    STORE/data-DIGEST.parquet        points compacted together (``Store.compact``)

A point's KEY is a sha256 of its full resolved configuration (every parameter of the
machine, after preset, schemes and ``--set``), the identity of its workload or trace (a
content digest), its seed, its instruction counts, secmem's version and the engine's build identity
(``_core.build_id``, a hash of the Rust sources compiled: a changed engine computes its points
again instead of reading back the old engine's) (``point_key``).
Each point file is written to a temporary name, flushed to disk and renamed, so a sweep
killed at any moment (even by SIGKILL) leaves only whole points behind; the points it
finished are not run again. Compaction writes the merged file the same way before it
removes the files it merged; a key found twice is read once.

Damage never goes unnoticed: every row carries ``checksum``, a SHA-256 of its content (every
other field, canonically encoded), checked on every read, and the files are written
with Parquet's page checksums, verified on read. A point whose checksum does not match, or a
file that cannot be decoded at all, is reported on stderr (once per file) and left out: the
sweep that needs the point computes it again, and its new file replaces a damaged point file
(a damaged compacted file is left where it is, for inspection, and no longer read).

Each row holds: ``key``, ``checksum``, ``status`` (``ok`` or ``failed``), ``error``; the point's
``workload``/``workload_kind``/``workload_digest``, ``preset``, ``integrity``,
``encryption``, ``seed``, ``requested_instructions``, ``warmup``, ``skip``, ``sets`` (the
point's overrides as JSON), ``config_digest`` and the whole configuration as ``config.*``
columns (text, as ``secmem presets`` prints it); the provenance (``secmem_version``,
``build_id``, ``git_commit``, ``command``, ``host``, ``date``, ``wall_seconds``, ``python``); and every
statistic of the run under its own name (``ipc``, ``l2.miss_rate``, ``chash.…``; series
such as ``mecu.ipc_per_resume_cycle`` as lists).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Iterable, Optional

from . import _core
from ._files import open_output, write_file

MARKER = "secmem-store.json"
FORMAT = 1
POINTS = "points"
_TMP = ".tmp-"


class StoreError(ValueError):
    """The store cannot be used as asked: not a store, unwritable, or a damaged file.
    The message is one line naming the path."""


def build_identity() -> str:
    """The engine build the store's keys belong to (one place, so a test can change it)."""
    return _core.build_id


def point_key(config: dict, identity: dict, seed: int, instructions: int, warmup: int, skip: int, sample: Optional[str] = None,
              interval: int = 0, checkpointed: Optional[tuple[int, int]] = None) -> str:
    """The store key of one simulated point (see the module docstring). A sampled point's
    plan, an ``--interval`` and a checkpointed point's (B, prewarm lines) are part of it
    (other runs keep the keys they had)."""
    doc = {
        "config": dict(sorted(config.items())),
        "workload_digest": identity["digest"],
        "workload_kind": identity["kind"],
        "seed": int(seed),
        "instructions": int(instructions),
        "warmup": int(warmup),
        "skip": int(skip),
        "secmem_version": _core.__version__,
        "build_id": build_identity(),
    }
    if sample is not None:
        doc["sample"] = sample
    if interval:
        doc["interval"] = int(interval)
    if checkpointed is not None:
        doc["checkpointed"], doc["prewarm"] = int(checkpointed[0]), int(checkpointed[1])
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


CHECKSUM = "checksum"


def row_checksum(row: dict) -> str:
    """SHA-256 of a row's content: every field but the checksum (nulls too: a renamed empty
    column is damage), in a canonical JSON encoding. Rows are checked file by file, before
    files meet (compaction writes its merged rows with new checksums)."""
    doc = {k: v for k, v in row.items() if k != CHECKSUM}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def with_checksums(table):
    """``table`` with each row's ``checksum`` (computed from the values as Arrow holds them,
    i.e. as they read back)."""
    import pyarrow as pa

    if CHECKSUM in table.column_names:
        table = table.drop_columns([CHECKSUM])
    sums = [row_checksum(r) for r in table.to_pylist()]
    return table.append_column(CHECKSUM, pa.array(sums, pa.string()))


def _write_table(table, path: Path) -> None:
    """``table`` (with checksums) to ``path`` atomically, with Parquet page checksums."""
    import pyarrow.parquet as pq

    with open_output(path, "results store") as f:
        pq.write_table(with_checksums(table), f, compression="zstd", write_page_checksum=True)


def _column(values: list):
    """One Arrow column from Python values of one statistic or field (None for absent)."""
    import pyarrow as pa

    kinds = {type(v) for v in values if v is not None}
    if not kinds:
        return pa.nulls(len(values))
    if kinds <= {list, tuple}:
        return pa.array([None if v is None else [float(x) for x in v] for v in values], pa.list_(pa.float64()))
    if kinds == {bool}:
        return pa.array(values, pa.bool_())
    if kinds <= {int}:
        return pa.array(values, pa.int64())
    if kinds <= {int, float}:
        return pa.array([None if v is None else float(v) for v in values], pa.float64())
    return pa.array([None if v is None else (v if isinstance(v, str) else json.dumps(v)) for v in values], pa.string())


def rows_to_table(rows: list):
    import pyarrow as pa

    names = list(dict.fromkeys(k for r in rows for k in r))
    return pa.table({n: _column([r.get(n) for r in rows]) for n in names})


def _unify(tables: list):
    """Concatenate tables whose columns may differ: absent columns are null, integers meet
    floats as floats, anything else that disagrees is kept as text."""
    import pyarrow as pa

    if not tables:
        return pa.table({})
    types: dict = {}
    for t in tables:
        for f in t.schema:
            types.setdefault(f.name, set()).add(f.type)
    text = {n for n, ts in types.items() if len(ts - {pa.null()}) > 1 and not all(pa.types.is_integer(t) or pa.types.is_floating(t) or t == pa.null() for t in ts)}
    if text:
        fixed = []
        for t in tables:
            for n in text & set(t.column_names):
                i = t.column_names.index(n)
                t = t.set_column(i, n, t.column(n).cast(pa.string()))
            fixed.append(t)
        tables = fixed
    return pa.concat_tables(tables, promote_options="permissive")


class Store:
    """A results store at ``path`` (created on first write when ``create``)."""

    def __init__(self, path, create: bool = True):
        self.path = Path(path)
        self.points = self.path / POINTS
        marker = self.path / MARKER
        if marker.exists():
            try:
                fmt = json.loads(marker.read_text()).get("format")
            except (OSError, ValueError) as e:
                raise StoreError(f"results store {self.path}: unreadable {MARKER} ({e})") from None
            if fmt != FORMAT:
                raise StoreError(f"results store {self.path}: format {fmt!r}, this secmem reads format {FORMAT}")
        elif self.path.exists() and (not self.path.is_dir() or any(self.path.iterdir())):
            raise StoreError(
                f"{self.path} is not a secmem results store (no {MARKER}): give a new or empty directory"
            )
        elif not create:
            raise StoreError(f"no results store at {self.path}")
        self._create = create
        #: Damaged files seen (path → what is wrong), each reported once.
        self.damaged: dict = {}

    def _ensure(self) -> None:
        """Create the store if needed and prove it writable (one clear error if not)."""
        try:
            self.points.mkdir(parents=True, exist_ok=True)
            marker = self.path / MARKER
            if not marker.exists():
                write_file(marker, json.dumps({"format": FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}) + "\n", "results store")
            probe = self.points / f"{_TMP}{os.getpid()}-probe"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as e:
            raise StoreError(f"results store {self.path} is not writable: {e.strerror or e}") from None

    def files(self) -> list:
        """Every data file of the store (compacted parts first), temporary files left out."""
        if not self.path.exists():
            return []
        parts = sorted(p for p in self.path.glob("data-*.parquet"))
        pts = sorted(p for p in self.points.glob("*.parquet") if not p.name.startswith((_TMP, "."))) if self.points.exists() else []
        return parts + pts

    def _read(self, path: Path, columns=None):
        """``path``'s rows whose checksum holds (``columns`` of them, with key and status);
        damage is reported once per file and the damaged rows (or the whole file, if it
        cannot be decoded) are left out, to be computed again. None if the file is gone."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            # Whole rows: a checksum covers every column of its row.
            t = pq.ParquetFile(path, page_checksum_verification=True).read()
        except FileNotFoundError:
            return None  # compacted away meanwhile by another process
        except Exception as e:  # pyarrow raises ArrowInvalid, OSError, …
            self._damaged(path, f"cannot be read: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
            return None
        if "key" not in t.column_names or "status" not in t.column_names:
            self._damaged(path, "not a secmem results file: no key/status columns")
            return None
        sums = t.column(CHECKSUM).to_pylist() if CHECKSUM in t.column_names else [None] * t.num_rows
        good = [i for i, (r, c) in enumerate(zip(t.to_pylist(), sums)) if c is not None and row_checksum(r) == c]
        if len(good) < t.num_rows:
            self._damaged(path, f"{t.num_rows - len(good)} of {t.num_rows} points fail their checksum")
            t = t.take(pa.array(good, pa.int64()))
        if columns is not None:
            t = t.select([c for c in t.column_names if c in columns])
        return t

    def _damaged(self, path: Path, what: str) -> None:
        if path in self.damaged:
            return
        self.damaged[path] = what
        print(
            f"secmem: warning: results store {self.path}: {path.name} is damaged ({what}); its points are left out "
            "and computed again when needed",
            file=sys.stderr,
        )

    def table(self, columns=None):
        """All rows as one Arrow table, each key once (an ok row wins over a failed one, then
        the latest)."""
        import pyarrow as pa

        cols = None if columns is None else list(dict.fromkeys(["key", "status", "date", *columns]))
        tables = []
        for f in self.files():
            t = self._read(f, cols)
            if t is not None:
                tables.append(t)
        t = _unify(tables)
        if t.num_rows == 0:
            return t
        # one row per key: ok before failed, then newest
        keys = t.column("key").to_pylist()
        status = t.column("status").to_pylist()
        dates = t.column("date").to_pylist() if "date" in t.column_names else [""] * len(keys)
        best: dict = {}
        for i, (k, s, d) in enumerate(zip(keys, status, dates)):
            rank = (s == "ok", d or "", i)
            if k not in best or rank > best[k][0]:
                best[k] = (rank, i)
        if len(best) == t.num_rows:
            return t
        return t.take(pa.array(sorted(i for _, i in best.values())))

    def frame(self, columns=None):
        """All rows as a pandas DataFrame (see :meth:`table`), configuration columns typed
        (:func:`typed`)."""
        return typed(self.table(columns).to_pandas())

    def status(self) -> dict:
        """key → status of every point in the store."""
        t = self.table(columns=["status"])
        if t.num_rows == 0:
            return {}
        return dict(zip(t.column("key").to_pylist(), t.column("status").to_pylist()))

    def write(self, row: dict) -> Path:
        """Store one finished point durably (temporary file, fsync, rename)."""
        self._ensure()
        path = self.points / f"{row['key']}.parquet"
        try:
            _write_table(rows_to_table([row]), path)
        except OSError as e:
            raise StoreError(f"results store {self.path}: cannot write {path.name}: {e.strerror or e}") from None
        return path

    def compact(self) -> int:
        """Merge every file into one ``data-*.parquet`` (written atomically before the files it
        replaces are removed). Returns the number of rows."""
        files = self.files()
        if len(files) <= 1:
            return self.table().num_rows
        t = self.table()
        digest = hashlib.sha256("\n".join(sorted(t.column("key").to_pylist())).encode()).hexdigest()[:16]
        dest = self.path / f"data-{digest}.parquet"
        self._ensure()
        try:
            _write_table(t, dest)
        except OSError as e:
            raise StoreError(f"results store {self.path}: cannot write {dest.name}: {e.strerror or e}") from None
        for f in files:
            # A damaged file stays for inspection (its good rows are in dest now).
            if f != dest and f not in self.damaged:
                f.unlink(missing_ok=True)
        return t.num_rows

    def clean_temporaries(self, older_than: float = 3600.0) -> None:
        """Remove temporary files a killed writer left (only old ones: a live sweep may be
        writing into the same store)."""
        now = time.time()
        for d in (self.path, self.points):
            if d.exists():
                for p in [*d.glob(f"{_TMP}*"), *d.glob(".*.part")]:
                    try:
                        if now - p.stat().st_mtime > older_than:
                            p.unlink()
                    except OSError:
                        pass


def _config_value(text):
    """One configuration value as pandas holds it: an int (a size such as "256KiB" in bytes),
    a float, a bool, or None when it is text of another kind ("lru", "3.2GB/s")."""
    t = str(text).strip()
    if t in ("true", "false"):
        return t == "true"
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        pass
    return _core.parse_size(t)


def typed(df):
    """``df`` with each ``config.*`` column (stored as text, as ``secmem presets`` prints it)
    as numbers when every value is one: sizes in bytes, counts and latencies as ints, flags
    as bools; other columns of text stay text. The point's own overrides, as given, are in
    ``sets`` (for display)."""
    import pandas as pd

    for c in [c for c in df.columns if c.startswith("config.") and (df[c].dtype == object or pd.api.types.is_string_dtype(df[c]))]:
        # Python values, not a Series: pandas would turn a None among ints into a float NaN.
        cells = [None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else v for v in df[c]]
        vals = [None if v is None else _config_value(v) for v in cells]
        given = [v for v, cell in zip(vals, cells) if cell is not None]
        if not given or any(v is None for v in given):
            continue  # no values, or some are text of another kind: the column stays text
        kinds = {type(v) for v in given}
        whole = len(given) == len(cells)
        if kinds == {bool}:
            df[c] = pd.array(vals, dtype="bool" if whole else "boolean")
        elif kinds <= {int}:
            df[c] = pd.array(vals, dtype="int64" if whole else "Int64")
        elif kinds <= {int, float}:
            df[c] = pd.array([float("nan") if v is None else float(v) for v in vals], dtype="float64")
    return df


def estimate(store: "Store", points: Iterable[tuple[str, str, int]]):
    """Host seconds the ``points`` — (preset, scheme, instructions simulated: warm-up
    included) each — would take, from the store's past timings: each point at the median
    seconds per instruction of the stored ok points of its preset and scheme, else of all of
    them. Returns (seconds, points estimated, timings used), or None when the store has no
    timings. A point of unknown length (a trace to its end) is not estimated."""
    t = store.table(columns=["preset", "scheme", "requested_instructions", "warmup", "wall_seconds"])
    if t.num_rows == 0 or "wall_seconds" not in t.column_names or "requested_instructions" not in t.column_names:
        return None
    rows = t.to_pylist()
    per: dict = {}
    for r in rows:
        n = (r.get("requested_instructions") or 0) + (r.get("warmup") or 0)
        sec = r.get("wall_seconds")
        if r.get("status") == "ok" and isinstance(sec, (int, float)) and sec > 0 and 0 < n < 2**62:
            per.setdefault((r.get("preset"), r.get("scheme")), []).append(sec / n)
    if not per:
        return None
    every = sorted(x for v in per.values() for x in v)

    def median(v):
        v = sorted(v)
        return v[len(v) // 2]

    total, counted = 0.0, 0
    for preset, scheme, n in points:
        if not 0 < n < 2**62:
            continue
        total += n * median(per.get((preset, scheme), every))
        counted += 1
    return (total, counted, len(every)) if counted else None


def for_csv(df):
    """A copy whose series statistics (lists, arrays) are JSON lists: CSV would otherwise get
    numpy's shortened repr ("[0.1 0.2 ... 0.9]")."""
    out = df.copy()
    for c in out.columns:
        if out[c].dtype == object and out[c].map(lambda v: hasattr(v, "__len__") and not isinstance(v, (str, bytes))).any():
            out[c] = out[c].map(lambda v: json.dumps([float(x) for x in v]) if hasattr(v, "__len__") and not isinstance(v, (str, bytes)) else v)
    return out


# `--where` operators, longest first where one starts another.
_OPS = ("<=", ">=", "!=", "<", ">", "=", "~")


def _number(v) -> Optional[float]:
    """A cell or a `--where` value as a number: numbers as they are, text as a number, a count
    ("10M") or a size ("256KiB", in bytes); None when it is none of them."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return None if v != v else float(v)
    text = str(v).strip()
    try:
        return float(text)
    except ValueError:
        pass
    for parse in (_core.parse_size, _core.parse_count):
        n = parse(text)
        if n is not None:
            return float(n)
    return None


def filter_frame(df, where: Iterable[str]):
    """Rows of ``df`` matching every condition: ``COLUMN=VALUE`` and ``COLUMN!=VALUE``
    (compared as text), ``COLUMN~TEXT`` (contains), ``COLUMN<VALUE`` (also ``<=``, ``>``,
    ``>=``: compared as numbers, sizes such as 256KiB in bytes; rows without a number are
    left out). Unknown columns raise StoreError."""
    import pandas as pd

    for cond in where:
        at = [(cond.find(o), -len(o), o) for o in _OPS if o in cond]
        op = min(at)[2] if at else None
        col, _, val = cond.partition(op) if op else (cond, "", "")
        col = col.strip()
        if not col or op is None:
            raise StoreError(f"--where '{cond}': expected COLUMN=VALUE, COLUMN!=VALUE, COLUMN~TEXT or COLUMN<VALUE (<=, >, >=)")
        if col not in df.columns:
            cfg = f"config.{col}"
            if cfg in df.columns:
                col = cfg
            else:
                raise StoreError(f"--where '{cond}': no column '{col}' in the store")
        if op in ("<", "<=", ">", ">="):
            x = _number(val)
            if x is None:
                raise StoreError(f"--where '{cond}': '{val.strip()}' is not a number (nor a count or size such as 10M or 256KiB)")
            nums = df[col].map(_number).astype("float64")
            keep = {"<": nums < x, "<=": nums <= x, ">": nums > x, ">=": nums >= x}[op]
            df = df[keep]
            continue
        x = _number(val)
        if op != "~" and x is not None and pd.api.types.is_numeric_dtype(df[col]) and not pd.api.types.is_bool_dtype(df[col]):
            # a number (a size such as 256KiB in bytes) against a numeric column: as numbers
            same = df[col].astype("float64") == x
            df = df[same.fillna(False)] if op == "=" else df[~same.fillna(False)]
            continue
        text = df[col].map(lambda v: "" if v is None or v is pd.NA else (f"{v:g}" if isinstance(v, float) else str(v).lower() if isinstance(v, bool) else str(v)))
        df = df[text.str.contains(val, regex=False)] if op == "~" else df[text == val] if op == "=" else df[text != val]
    return df


def default_path() -> str:
    """``$SECMEM_RESULTS`` or ``./secmem-results``."""
    return os.environ.get("SECMEM_RESULTS", "secmem-results")


def open_store(path: Optional[str] = None, create: bool = True) -> Store:
    return Store(path or default_path(), create=create)

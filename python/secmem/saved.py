"""Reading back what ``secmem run --json`` and ``secmem compare --json`` saved: above both
the API's Result and the comparison's frame, which it rebuilds."""

from __future__ import annotations

import json
from typing import Union

from .api import Result
from .comparison import GEOMEAN, Comparison, order


def load_result(path: str) -> Union[Result, Comparison]:
    """Read back a result saved by ``secmem run --json`` (a :class:`secmem.Result` with
    ``.provenance`` and ``.workload_identity``) or ``secmem compare --json`` (a DataFrame
    whose ``attrs`` hold ``provenance`` and ``workloads``). Raises ValueError naming the file
    when it is neither."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if isinstance(doc, dict) and isinstance(doc.get("stats"), dict):
        return Result(
            stats=doc["stats"],
            error=doc.get("error"),
            config=doc.get("config") or {},
            provenance=doc.get("provenance") or {},
            workload_identity=doc.get("workload") or {},
        )
    if isinstance(doc, dict) and isinstance(doc.get("rows"), list):
        # Files of older versions held the geometric means among the rows.
        rows = [r for r in doc["rows"] if not (isinstance(r, dict) and r.get("workload") == GEOMEAN)]
        df = order(Comparison(rows))
        df.attrs["provenance"] = doc.get("provenance") or {}
        df.attrs["workloads"] = doc.get("workloads") or []
        return df
    raise ValueError(f"{path}: not a secmem result (expected the JSON of `secmem run --json` or `secmem compare --json`)")

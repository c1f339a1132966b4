"""Command-line value parsing shared by the `secmem` subcommands."""

from __future__ import annotations

import math

from . import _core


def count(text, what: str) -> int:
    """A non-negative count with an optional k/M/G suffix ('10M', '500k', '2_000_000')."""
    t = str(text).replace("_", "").strip()
    mult = {"k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9}.get(t[-1:], 1)
    try:
        v = float(t[:-1]) * mult if mult != 1 else float(t)
    except ValueError:
        v = float("nan")
    if not math.isfinite(v) or v < 0 or v >= 2**63:
        raise _core.ConfigError(f"--{what}: '{text}' is not a count (e.g. 10M, 500k, 2000000)")
    return int(v)

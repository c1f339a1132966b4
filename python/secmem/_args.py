"""Command-line value parsing shared by the `secmem` subcommands."""

from __future__ import annotations

import argparse
from decimal import Decimal, InvalidOperation

from . import _core


def count(text, what: str) -> int:
    """A non-negative whole count with an optional k/M/G suffix ('10M', '1.5k', '2_000_000');
    '1.5' is refused rather than rounded."""
    t = str(text).replace("_", "").strip()
    mult = {"k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9}.get(t[-1:], 1)
    try:
        v = Decimal(t[:-1] if mult != 1 else t) * mult
    except InvalidOperation:
        v = Decimal("NaN")
    if not v.is_finite() or v < 0 or v != v.to_integral_value() or v >= 2**63:
        raise _core.ConfigError(f"--{what}: '{text}' is not a whole count (e.g. 10M, 500k, 2000000)")
    return int(v)


def seed(text) -> int:
    """argparse type of --seed: a whole number from 0 to 2^64-1."""
    try:
        v = int(str(text), 0)
    except ValueError:
        v = -1
    if not 0 <= v < 2**64:
        raise argparse.ArgumentTypeError(f"'{text}' is not a seed (a whole number from 0 to 2^64-1)")
    return v

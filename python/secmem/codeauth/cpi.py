"""The analytic CPI model of seed 001 §7.

Base processor (five-stage RISC pipeline, load-use stall of one cycle, assume-not-taken branch
prediction resolved in ID):

    CPI = 1 + f_L·f_D·(1 − f_R) + f_B·f_MP + (MR_I + MR_D)·(c_AR + c_T)

With code authentication, CPI_Auth = CPI + C_Auth where

    C_Auth   = 1·MR_I + MR_I·MP_I·factor            (one cycle to finish the tag; tag misses)
    factor   = factor_SE + factor_B + factor_J
    factor_SE = (1 − f_B·f_Taken − f_J) / (n_I·n_T)   (sequential code leaving a tag window)
    factor_B = Σ_{b=1}^{15} f_B·f_Taken·min(2^b, n_I·n_T)/(n_I·n_T)·f_b(b)
    factor_J = f_J

n_I instructions (4 bytes each, MIPS) and n_T tags per block; MP_I = c_AR + c_T. MR_I and MR_D
are misses per instruction (the model multiplies them by a penalty to get cycles per
instruction); f_b(b) is the share of taken branches whose offset needs b bits.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from typing import Dict, Optional

#: Bytes per instruction (MIPS32, the paper's ISA).
INSTRUCTION_BYTES = 4


@dataclass
class Inputs:
    """The model's inputs; ``sources`` says, per input, where its value came from."""

    block: int = 64
    tag_slot: int = 16
    f_L: float = 0.0
    f_D: float = 0.0
    f_R: float = 0.0
    f_B: float = 0.0
    f_J: float = 0.0
    f_Taken: float = 0.0
    f_MP: float = 0.0
    MR_I: float = 0.0
    MR_D: float = 0.0
    c_AR: float = 0.0
    c_T: float = 0.0
    #: b -> share of taken branches with a b-bit offset; empty: every taken branch leaves the window.
    f_b: Dict[int, float] = field(default_factory=dict)
    sources: Dict[str, str] = field(default_factory=dict)

    @property
    def n_I(self) -> int:
        return self.block // INSTRUCTION_BYTES

    @property
    def n_T(self) -> int:
        return self.block // self.tag_slot


@dataclass
class Result:
    CPI: float
    C_L: float
    C_B: float
    C_miss: float
    factor_SE: float
    factor_B: float
    factor_J: float
    C_Auth: float
    CPI_Auth: float

    @property
    def factor(self) -> float:
        return self.factor_SE + self.factor_B + self.factor_J

    @property
    def overhead_percent(self) -> float:
        return 100.0 * self.C_Auth / self.CPI


def model(x: Inputs) -> Result:
    """Evaluate §7's formulas."""
    for name in ("f_L", "f_D", "f_R", "f_B", "f_J", "f_Taken", "f_MP"):
        v = getattr(x, name)
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{name} = {v} is not a fraction in [0, 1]")
    for name in ("MR_I", "MR_D", "c_AR", "c_T"):
        if getattr(x, name) < 0:
            raise ValueError(f"{name} = {getattr(x, name)} is negative")
    if x.f_B * x.f_Taken + x.f_J > 1:
        raise ValueError("f_B·f_Taken + f_J exceeds 1")
    window = x.n_I * x.n_T
    if window < 1:
        raise ValueError(f"a {x.block}-B block with {x.tag_slot}-B tags has no tag window")
    C_L = x.f_L * x.f_D * (1 - x.f_R)
    C_B = x.f_B * x.f_MP
    MP = x.c_AR + x.c_T
    C_miss = (x.MR_I + x.MR_D) * MP
    factor_SE = (1 - x.f_B * x.f_Taken - x.f_J) / window
    if x.f_b:
        total = sum(x.f_b.values())
        if not math.isclose(total, 1.0, abs_tol=1e-6):
            raise ValueError(f"the branch-offset shares f_b(b) add up to {total}, not 1")
        factor_B = sum(x.f_B * x.f_Taken * min(2**b, window) / window * share for b, share in x.f_b.items())
    else:
        factor_B = x.f_B * x.f_Taken  # every taken branch leaves its window: the upper bound
    factor_J = x.f_J
    C_Auth = x.MR_I + x.MR_I * MP * (factor_SE + factor_B + factor_J)
    CPI = 1 + C_L + C_B + C_miss
    return Result(CPI, C_L, C_B, C_miss, factor_SE, factor_B, factor_J, C_Auth, CPI + C_Auth)


# Assumed values and where they come from.
PAPER = "seed 001 §7 (from Hennessy & Patterson, SPECint2000)"
DEFAULTS = {
    "f_B": (0.12, PAPER),
    "f_J": (0.01, PAPER),
    "f_Taken": (0.66, PAPER),
    "f_D": (0.5, "assumed, no published value at hand (affects only the base CPI, not C_Auth)"),
    "f_R": (0.5, "assumed, no published value at hand (affects only the base CPI, not C_Auth)"),
    "f_L": (0.25, "assumed, no published value at hand (affects only the base CPI, not C_Auth)"),
    "c_AR": (18.0, "seed 001 Table 5: SimpleScalar's latency is 18 + B/2 cycles for B-byte blocks"),
}


def parse_offsets(text: str) -> Dict[int, float]:
    """``"3:0.2,7:0.5,12:0.3"`` → {3: 0.2, 7: 0.5, 12: 0.3}."""
    out: Dict[int, float] = {}
    for item in text.split(","):
        b, _, share = item.strip().partition(":")
        try:
            bits, frac = int(b), float(share)
        except ValueError:
            raise ValueError(f"--branch-offsets: {item!r} is not BITS:SHARE (e.g. 7:0.4)") from None
        if not (math.isfinite(frac) and 0.0 <= frac <= 1.0):
            raise ValueError(f"--branch-offsets: share {share!r} is outside 0..1")
        if not 1 <= bits <= 15:
            raise ValueError(f"--branch-offsets: {bits} bits is outside 1..15 (§7 sums b = 1..15)")
        out[bits] = out.get(bits, 0.0) + frac
    return out


def from_run_json(path: str) -> Dict[str, tuple]:
    """Inputs measured by a ``secmem run --json`` file: {name: (value, source)}."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a secmem run --json file ({e})") from None
    s = doc.get("stats") if isinstance(doc, dict) else None
    if not isinstance(s, dict) or "instructions" not in s:
        raise ValueError(f"{path}: no 'stats' with 'instructions' (write it with secmem run --json)")
    n = max(int(s["instructions"]), 1)
    src = f"measured ({path})"
    out: Dict[str, tuple] = {}

    def misses(cache: str) -> Optional[float]:
        if f"{cache}.miss_rate" in s and f"{cache}.accesses" in s:
            return s[f"{cache}.miss_rate"] * s[f"{cache}.accesses"] / n
        return None

    for name, value in (
        ("MR_I", misses("l1i")),
        ("MR_D", misses("l1d")),
        ("f_L", s["core.loads"] / n if "core.loads" in s else None),
        ("f_B", s["core.branches"] / n if "core.branches" in s else None),
        ("f_MP", s.get("core.branch_mispredict_rate")),
    ):
        if value is not None:
            out[name] = (float(value), src)
    if s.get("ipc"):
        out["measured_CPI"] = (1.0 / s["ipc"], src)
    line = (doc.get("config") or {}).get("l1i.line")
    if isinstance(line, str) and line.upper().endswith("B") and line[:-1].isdigit():
        out["block"] = (int(line[:-1]), f"the run's l1i.line ({path})")
    return out


#: Largest cost in cycles the model takes (a memory access far beyond any machine's).
MAX_CYCLES = 1e6


def _check_input(name: str, value, source: str) -> None:
    """A model input must be a finite number in its range: shares and miss rates (per
    instruction) in [0, 1], cycle counts in [0, MAX_CYCLES]; NaN and infinities would print as
    a CPI. ValueError (one line) otherwise."""
    hi = MAX_CYCLES if name.startswith("c_") else 1.0
    flag = "--" + name.lower().replace("_", "-")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{flag}: {value!r} is not a number ({source})") from None
    if not (math.isfinite(v) and 0.0 <= v <= hi):
        raise ValueError(f"{flag}: {value!r} is outside 0..{hi:g} ({source})")


def inputs(
    block: int = 64,
    tag_slot: int = 16,
    given: Optional[Dict[str, float]] = None,
    measured: Optional[Dict[str, tuple]] = None,
    offsets: Optional[Dict[int, float]] = None,
) -> Inputs:
    """Inputs from what was given (wins), then what was measured, then the defaults; every
    value's source is recorded. MR_I and MR_D have no default."""
    given = {k: v for k, v in (given or {}).items() if v is not None}
    measured = dict(measured or {})
    x = Inputs(block=block, tag_slot=tag_slot)
    names = [f.name for f in fields(Inputs) if f.name not in ("block", "tag_slot", "f_b", "sources")]
    for name in names:
        if name in given:
            value, source = given[name], "given"
        elif name in measured:
            value, source = measured[name]
        elif name in DEFAULTS:
            value, source = DEFAULTS[name]
        elif name == "c_T":
            value, source = block / 2, "seed 001 Table 5 (B/2 cycles: a 4-B bus at 2 cycles a beat)"
        elif name == "f_MP":
            value, source = None, "assume-not-taken (§7): every taken branch mispredicts, f_MP = f_Taken"
        else:
            raise ValueError(f"no value for {name}: give --{name.lower().replace('_', '-')} or --json RUN.json")
        if value is not None:
            _check_input(name, value, source)
        setattr(x, name, value)
        x.sources[name] = source
    if x.f_MP is None:
        x.f_MP = x.f_Taken
    if offsets:
        x.f_b = offsets
        x.sources["f_b"] = "given"
    else:
        x.sources["f_b"] = "none given: every taken branch assumed to leave its tag window (upper bound)"
    return x

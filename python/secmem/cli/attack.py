"""``secmem attack``: every attack against every scheme, as detection matrices."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import _core
from .common import DEFAULT_PRESET, add_sets, check_pairs, output, seed, write_json

Row = dict[str, Any]


def add_parser(sub: Any) -> None:
    at = sub.add_parser("attack", help="run every attack against every integrity scheme: a detection matrix")
    at.add_argument("--integrity", "-i", help="comma-separated schemes (default: all)")
    at.add_argument("--encryption", "-e", default="none", help="encryption under the integrity schemes (default %(default)s)")
    at.add_argument("--encryptions", help="encryption schemes attacked for privacy, comma-separated (default: all)")
    at.add_argument("--preset", "-p", default=DEFAULT_PRESET)
    add_sets(at)
    at.add_argument("--seed", type=seed, default=1)
    at.add_argument("--json", metavar="PATH", help="write every cell as JSON")
    at.set_defaults(func=cmd)


def _matrix(rows: list[Row], column: str, columns: list[str], yes: str, no: str, surprises: list[Row]) -> None:
    attacks = list(dict.fromkeys(r["attack"] for r in rows))
    cell = {(r["attack"], r[column]): r for r in rows}
    w = max(len(x) for x in attacks) + 2
    cw = max(10, max(len(c) for c in columns) + 2)
    print("  " + "attack".ljust(w) + "".join(c.rjust(cw) for c in columns))
    for at in attacks:
        line = "  " + at.ljust(w)
        for c in columns:
            r = cell[(at, c)]
            text = "n/a" if not r["applicable"] else (yes if r["detected"] else no)
            if not r["ok"]:
                text += "!"
                surprises.append(r)
            line += text.rjust(cw)
        print(line)


def cmd(a: argparse.Namespace) -> int:
    integs = a.integrity.split(",") if a.integrity else _core.integrity_schemes()
    encs = a.encryptions.split(",") if a.encryptions else _core.encryption_schemes()
    # By default, the integrity schemes that pair with the encryption chosen (a tree over an
    # encryption scheme's counters needs one that keeps them); named ones are checked below.
    unpaired: list[str] = []
    if not a.integrity:
        pairs = set(_core.scheme_pairs())
        unpaired = [i for i in integs if (i, a.encryption) not in pairs]
        integs = [i for i in integs if (i, a.encryption) in pairs]
    # The registry judges the names, before the first attack runs.
    check_pairs(a.preset, [(i, a.encryption) for i in integs] + [("none", e) for e in encs], a.set)
    surprises: list[Row] = []
    out = output(a.json)
    rows = _core.attack(a.preset, integs, a.encryption, a.set, a.seed)
    print(f"secmem attack — integrity schemes (encryption={a.encryption}), preset {a.preset}")
    print("  detected: the processor noticed (on the read, or at the latest at a full check);")
    print("  what each cell should show comes from the schemes' declared guarantees (secmem schemes NAME)\n")
    _matrix(rows, "integrity", integs, "detected", "missed", surprises)
    for i in unpaired:
        with_ = ", ".join(e for j, e in _core.scheme_pairs() if j == i)
        print(f"\n  {i} is not shown: it does not pair with encryption {a.encryption} (try -i {i} -e {with_.split(', ')[0]}; it pairs with {with_})")
    print("\n  mac cannot see replay (a stale block with its stale MAC is still one the processor")
    print("  wrote), nor can tdx (Intel TDX's MACs, as Intel documents); the DMA region is unprotected by")
    print("  design, so tampering there is not flagged. Key-ID rows apply to an encryption with key IDs (xts).")
    erows = _core.attack_encryption(a.preset, encs, a.set, a.seed)
    print("\nencryption schemes (no integrity, except where noted)")
    print("  yes: the adversary succeeds, or for the last row the processor notices\n")
    _matrix(erows, "encryption", encs, "yes", "no", surprises)
    print("\n  counter modes (otp, mecu) are malleable without integrity; the MECU reuses a block's pad")
    print("  within one resume cycle by design (002 §4).")
    combos = [("pr-trivium", "none", "none"), ("pr-aes", "none", "none"), ("pr-trivium", "chash", "otp")]
    crows = _core.attack_codeauth(a.preset, combos, a.set, a.seed)
    for r in crows:
        r["scheme"] = r["codeauth"] if r["integrity"] == "none" else f"{r['codeauth']}+{r['integrity']}+{r['encryption']}"
    print("\ncode authentication (seed 001): every instruction block fetched is checked against its tag")
    print("  refused: the fetch failed with an IntegrityError (the first row must run)\n")
    _matrix(crows, "scheme", list(dict.fromkeys(r["scheme"] for r in crows)), "refused", "runs", surprises)
    rows = rows + erows + crows
    if a.json:
        write_json(a.json, rows, out)
    if surprises:
        print(f"\n  {len(surprises)} result(s) differ from what the schemes declare (marked !):", file=sys.stderr)
        for r in surprises:
            late = f" (noticed {r['when']}, declared {r['declared']})" if r.get("when") and r["detected"] == r["expected"] else ""
            print(f"    {r['integrity']}+{r['encryption']}: {r['attack']}{late}: {r['detail']}", file=sys.stderr)
        return 1
    print("\n  every result matches what the schemes declare")
    return 0

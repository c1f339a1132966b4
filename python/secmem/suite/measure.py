"""Measure the suite: native time, run-to-run output determinism, callgrind instruction
counts (and their run-to-run equality).

    python -m secmem.suite.measure [NAME ...] [--no-callgrind] [--json PATH]

Installs what is missing first. Callgrind runs ~50x slower than native: with two cores
shared, measure a few workloads at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from . import command, install, names


def native(c, runs: int = 2):
    times, digests, codes = [], [], []
    for _ in range(runs):
        t = time.perf_counter()
        p = c.run()
        times.append(time.perf_counter() - t)
        codes.append(p.returncode)
        digests.append(c.output_digest(p) if p.returncode == 0 else p.stderr.decode(errors="replace")[-300:])
    return min(times), codes, digests


def callgrind_ir(c) -> int:
    with tempfile.TemporaryDirectory() as td:
        out = os.path.join(td, "cg.out")
        argv = ["/usr/bin/valgrind", "--tool=callgrind", "--run-libc-freeres=no", "--run-cxx-freeres=no",
                f"--callgrind-out-file={out}", *c.argv]
        with c.stdin_file() as f:
            p = subprocess.run(argv, env=c.env, cwd=c.cwd, stdin=f, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"callgrind exited {p.returncode}: {p.stderr.strip().splitlines()[-1:]}")
        text = open(out).read()
        m = re.search(r"^(?:summary|totals):\s*(\d+)", text, re.M)
        if not m:
            raise RuntimeError("no Ir total in callgrind output")
        return int(m.group(1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m secmem.suite.measure")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    rows = []
    for n in a.names or names():
        install(n, progress=lambda s: print("  " + s, file=sys.stderr))
        c = command(n)
        secs, codes, digests = native(c)
        row = {"name": n, "seconds": round(secs, 3), "exit": codes, "same_output": digests[0] == digests[1],
               "digest": digests[0][:16]}
        if not a.no_callgrind:
            irs = [callgrind_ir(c), callgrind_ir(c)]
            row["ir"] = irs
            row["same_ir"] = irs[0] == irs[1]
        rows.append(row)
        print(json.dumps(row), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

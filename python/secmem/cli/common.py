"""What several commands share: argparse value types, the run options, where JSON goes and
the exit status of a stopped run."""

from __future__ import annotations

import argparse
import json
from typing import Any, Callable, Optional, Sequence

from .. import _core
from .._args import BadArgument, SetAction, counts, positive_int, scheme_list, seed
from .._files import Output
from ..progress import warn_once
from ..api import DEFAULT_PRESET, DEFAULT_WORKLOAD, configuration
from ..api import DEFAULT_SCHEMES as DEFAULT_PAIRS

# `--schemes`'s default, made from the one list the Python API compares by default.
DEFAULT_SCHEMES = ",".join(f"{i}+{e}" for i, e in DEFAULT_PAIRS)

# Exit status of a run stopped by a signal (128 + the signal's number, as a shell reports).
SIGNAL_EXIT = {"SIGINT": 130, "SIGTERM": 143}

__all__ = ["warn_once", "BadArgument", "DEFAULT_PRESET", "DEFAULT_SCHEMES", "DEFAULT_WORKLOAD", "SIGNAL_EXIT", "counts", "scheme_list", "seed"]


def check_pairs(preset: str, pairs: Sequence[tuple[str, str]], sets: Sequence[str] = ()) -> None:
    """Every pair through the registry before any work: an unknown scheme, preset or
    parameter is refused (ConfigError, the registry's one line) before the first run."""
    for integ, enc in pairs:
        configuration(preset, integ, enc, sets=sets)


def add_common(p: argparse.ArgumentParser, schemes: bool = True, interval: bool = False) -> None:
    """The options of a simulation (run, compare): input, machine, counts, output."""
    src = p.add_mutually_exclusive_group()
    src.add_argument("--workload", "-w", help=f"built-in workload (default {DEFAULT_WORKLOAD}; see `secmem workloads`)")
    src.add_argument("--trace", help="a trace file: native (.smt), ChampSim (raw/.xz/.gz) or Valgrind lackey text")
    p.add_argument(
        "--trace-format",
        choices=["auto", "native", "champsim", "lackey"],
        default="auto",
        help="format of --trace (default: detected from its magic, name or content)",
    )
    if schemes:
        p.add_argument("--integrity", "-i", help="integrity scheme: " + ", ".join(_core.integrity_schemes()))
        p.add_argument("--encryption", "-e", help="encryption scheme: " + ", ".join(_core.encryption_schemes()))
    p.add_argument("--codeauth", metavar="SCHEME", help="code authentication of instruction fetches (seed 001): none, pr-trivium, pr-aes")
    p.add_argument("--preset", "-p", default=DEFAULT_PRESET, help="machine preset or a .toml file (default %(default)s)")
    add_sets(p, help="override a parameter, e.g. l2.size=256KiB (repeatable)")
    p.add_argument("--skip", type=counts("--skip"), default="0", help="fast-forward this many instructions first (default %(default)s)")
    p.add_argument("--instructions", "-n", type=counts("--instructions"), help="instructions to measure (default: a --trace file to its end, else 10M)")
    p.add_argument(
        "--warmup", type=counts("--warmup"), help="instructions simulated before measuring (default 1M, at most a tenth of a --trace file)"
    )
    p.add_argument("--seed", type=seed, default=1, help="keys and workload data (default %(default)s)")
    p.add_argument(
        "--sample",
        nargs="?",
        const="",
        metavar="U:W:D",
        help="sampled simulation (docs/sampling.md): every U instructions, W measured in detail after D of detailed "
        "warm-up, functional warming between; IPC and rates with 95%% intervals. Alone: a plan chosen from -n",
    )
    p.add_argument(
        "--cores",
        type=positive_int("--cores"),
        help="cores sharing the last level, the memory controller and the engine, each with its own input "
        "(-w a,b,c,d: one per core; one workload: a copy per core, rate mode; docs/multicore.md)",
    )
    if interval:
        p.add_argument(
            "--interval", type=counts("--interval"), metavar="N",
            help="also statistics of every N measured instructions (IPC, cycles, L2 misses, bytes) as series "
            "interval.*: in --json and the store; `secmem plot` draws them over time",
        )
    p.add_argument("--json", metavar="PATH", help="write statistics as JSON ('-' for stdout)")


def add_sets(p: argparse.ArgumentParser, help: Optional[str] = None) -> None:
    p.add_argument("--set", "-s", action=SetAction, default=[], metavar="KEY=VALUE", help=help)


def program(rest: Optional[Sequence[str]]) -> Optional[list[str]]:
    """The program after ``--`` (argparse keeps the ``--``), or None."""
    argv = list(rest or [])
    if argv and argv[0] == "--":
        argv = argv[1:]
    if argv and argv[0].startswith("-"):
        raise ValueError(f"unrecognized argument {argv[0]!r} (a program to trace goes after --)")
    return argv or None


def output(path: Optional[str], flag: str = "--json") -> Optional[Output]:
    """Where a command's JSON goes, checked before the command's work: None for stdout ('-')
    or no file asked for."""
    return None if path is None or path == "-" else Output(path, flag)


def write_json(path: Optional[str], obj: Any, out: Optional[Output] = None) -> None:
    text = json.dumps(obj, indent=2, sort_keys=True)
    if path == "-":
        print(text)
    elif path is not None:
        (out or Output(path, "--json")).write(text + "\n")


def codeauth_sets(a: argparse.Namespace) -> list[str]:
    """``--codeauth X`` is ``--set codeauth=X`` (checked with the other parameters)."""
    return ([f"codeauth={a.codeauth}"] if a.codeauth else []) + list(a.set)
